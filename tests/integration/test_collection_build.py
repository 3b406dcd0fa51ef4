"""The collection builds into a tarball that installs offline and exposes its playbooks."""
import pathlib

import pytest

from conftest import REPO, require, run, tool


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    require(tool("ansible-galaxy"), "ansible-galaxy (run `make venv`)")
    out = tmp_path_factory.mktemp("build")
    run([tool("ansible-galaxy"), "collection", "build", "--force", "--output-path", str(out), str(REPO)])
    tarballs = list(out.glob("sparkfleet-vllm-*.tar.gz"))
    assert len(tarballs) == 1, tarballs
    dest = tmp_path_factory.mktemp("collections")
    # --offline: no Galaxy server is reachable; the dependencies ship in the `ansible` package.
    run([tool("ansible-galaxy"), "collection", "install", "--offline", "--no-deps", "-p", str(dest), str(tarballs[0])])
    return tarballs[0], dest / "ansible_collections/sparkfleet/vllm"


def test_tarball_leaves_out_tests_and_caches(installed):
    import tarfile

    tarball, _ = installed
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
    for unwanted in ("tests/", ".venv", "molecule/", "__pycache__", ".collections"):
        assert not any(unwanted in name for name in names), "tarball carries %s" % unwanted
    assert "MANIFEST.json" in names and any(name.startswith("plugins/") for name in names)


def test_installed_collection_has_site_playbook(installed):
    _, path = installed
    assert (path / "playbooks/site.yml").exists() or (path / "playbooks").is_dir()
    assert pathlib.Path(path / "meta/runtime.yml").exists()
