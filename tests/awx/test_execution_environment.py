"""execution-environment.yml's own shape, and the requirement files it names, checked without a tarball.

What needs the collection tarball (the build context `ansible-builder create` writes offline: the tarball at
galaxy.yml's version, the collection's own Python and system requirement files copied verbatim, a Containerfile
whose base image is a build arg, nothing stray) is checked in tests/integration/test_collection_build.py, on the
suite's one build of the tarball. Building the image needs a registry and is not part of CI."""
import yaml

from conftest import REPO, require, run, tool

EE_FILE = REPO / "execution-environment.yml"


def test_definition_is_v3_with_base_image_variable():
    definition = yaml.safe_load(EE_FILE.read_text())
    assert definition["version"] == 3
    assert definition["images"]["base_image"]["name"]


def test_python_requirements_install_offline_shape():
    """Every line of the collection's Python requirements is a requirement pip can parse."""
    from packaging.requirements import Requirement

    lines = [line.split("#", 1)[0].strip() for line in (REPO / "requirements/ee-python.txt").read_text().splitlines()]
    for line in filter(None, lines):
        Requirement(line)


def test_bindep_parses():
    require(tool("bindep"), "bindep")
    proc = run([tool("bindep"), "--file", str(REPO / "bindep.txt"), "--brief"], check=False)
    # bindep exits 1 when a package is missing on this machine; 0 or 1 both mean the file parsed.
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr and "error" not in proc.stderr.lower(), proc.stderr
