"""execution-environment.yml: `ansible-builder create` writes a complete build
context offline (no registry, no Galaxy): the collection tarball, the
collection's own Python and system requirement files (the same files, not
copies kept elsewhere) and a Containerfile whose base image is a build arg.
Building the image needs a registry and is not part of CI."""
import pathlib
import tarfile

import pytest
import yaml

from conftest import REPO, require, run, tool

EE_FILE = REPO / "execution-environment.yml"
META_EE = REPO / "meta/execution-environment.yml"


def galaxy():
    return yaml.safe_load((REPO / "galaxy.yml").read_text())


@pytest.fixture(scope="module")
def definition():
    return yaml.safe_load(EE_FILE.read_text())


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    """Build the collection tarball where the definition expects it (build/, as
    `make build` does), then `ansible-builder create` into a temporary context."""
    require(tool("ansible-galaxy"), "ansible-galaxy (run `make venv`)")
    require(tool("ansible-builder"), "ansible-builder (run `make venv`)")
    meta = galaxy()
    tarball = REPO / "build" / ("%s-%s-%s.tar.gz" % (meta["namespace"], meta["name"], meta["version"]))
    run([tool("ansible-galaxy"), "collection", "build", "--force", "--output-path", str(REPO / "build"), str(REPO)])
    assert tarball.exists(), tarball
    out = tmp_path_factory.mktemp("ee") / "context"
    # No network: ansible-builder create only writes files.
    proc = run([tool("ansible-builder"), "create", "-f", str(EE_FILE), "-c", str(out),
                "--output-filename", "Containerfile", "-v", "2"], timeout=300)
    assert "No matches" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return out, tarball


def test_definition_is_v3_with_base_image_variable(definition):
    assert definition["version"] == 3
    assert definition["images"]["base_image"]["name"]


def test_containerfile_takes_base_image_as_build_arg(context, definition):
    out, _tarball = context
    containerfile = (out / "Containerfile").read_text()
    assert 'ARG EE_BASE_IMAGE="%s"' % definition["images"]["base_image"]["name"] in containerfile
    assert "FROM $EE_BASE_IMAGE AS base" in containerfile
    # The collection (and, through its MANIFEST, galaxy.yml's dependencies) is installed from the context.
    assert "ansible-galaxy collection install" in containerfile and "-r requirements.yml" in containerfile
    assert "introspect" in containerfile


def test_collection_tarball_is_in_context_and_matches_galaxy_version(context, definition):
    out, tarball = context
    copied = out / "_build/collections" / tarball.name
    assert copied.exists(), sorted(p.name for p in (out / "_build").rglob("*"))
    entries = definition["dependencies"]["galaxy"]["collections"]
    assert [e["name"] for e in entries] == ["collections/%s" % tarball.name], (
        "execution-environment.yml names %s; galaxy.yml's version gives %s" % ([e["name"] for e in entries], tarball.name))
    galaxy_requirements = yaml.safe_load((out / "_build/requirements.yml").read_text())
    assert galaxy_requirements["collections"][0]["type"] == "file"


def test_dependencies_travel_in_the_tarball(context):
    """Installing the tarball pulls galaxy.yml's dependencies: they are in its MANIFEST.json."""
    import json

    _out, tarball = context
    with tarfile.open(tarball) as archive:
        manifest = json.load(archive.extractfile("MANIFEST.json"))
        names = archive.getnames()
    assert manifest["collection_info"]["dependencies"] == galaxy()["dependencies"]
    # ansible-builder's introspection reads these from the installed collection.
    meta = yaml.safe_load(META_EE.read_text())
    for key in ("python", "system"):
        assert meta["dependencies"][key] in names, "%s not shipped in the tarball" % meta["dependencies"][key]
    assert "meta/execution-environment.yml" in names


def test_python_and_system_requirements_are_the_collection_files(context, definition):
    out, _tarball = context
    meta = yaml.safe_load(META_EE.read_text())
    for key, context_name in (("python", "requirements.txt"), ("system", "bindep.txt")):
        # One file referenced from both definitions, and copied verbatim into the context.
        assert definition["dependencies"][key] == meta["dependencies"][key]
        source = REPO / meta["dependencies"][key]
        assert (out / "_build" / context_name).read_text() == source.read_text()


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


def test_context_has_no_stray_inputs(context):
    out, _tarball = context
    built = sorted(str(p.relative_to(out)) for p in pathlib.Path(out).rglob("*") if p.is_file())
    assert all(p.startswith("_build/") or p == "Containerfile" for p in built), built
