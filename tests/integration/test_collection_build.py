"""The collection builds into a tarball that installs offline and exposes its playbooks."""
import os
import pathlib

import pytest
import yaml

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
    run([tool("ansible-galaxy"), "collection", "install", "--offline", "--no-deps", "--force", "-p", str(dest), str(tarballs[0])])
    return tarballs[0], dest / "ansible_collections/sparkfleet/vllm"


def test_tarball_carries_installed_content_only(installed):
    """No checkout-only file (ansible.cfg, requirements/dev.txt, tests, the sim4 and local inventories, the AWX
    admin playbook, caches) ships, and what Galaxy and an installed run need does (tests/tarball_contents.py)."""
    from tarball_contents import manifest_version, member_files, problems

    tarball, _path = installed
    names = member_files(tarball)
    version = str(yaml.safe_load((REPO / "galaxy.yml").read_text(encoding="utf-8"))["version"])
    assert not problems(names, version, manifest_version(tarball)), problems(names, version, manifest_version(tarball))
    assert any(name.startswith("plugins/") for name in names)


def test_tarball_declares_only_the_dependencies_installed_content_uses(installed):
    import json
    import tarfile

    tarball, _path = installed
    with tarfile.open(tarball) as archive:
        manifest = json.load(archive.extractfile("MANIFEST.json"))
    assert set(manifest["collection_info"]["dependencies"]) == {"community.docker"}


def test_installed_collection_resolves_site_and_runs_its_planner(installed):
    """`sparkfleet.vllm.site` resolves from the installed tarball (syntax check: roles, plugins and imports all
    found), and `sparkfleet.vllm.plan` runs from it against its own catalog. A full deploy from the tarball is
    not run here (the integration tier's deploys run from the checkout)."""
    _tarball, path = installed
    for shipped in ("playbooks/site.yml", "meta/runtime.yml", "data/catalog.yml", "plugins/action/plan.py"):
        assert (path / shipped).exists(), "installed collection lacks %s" % shipped
    collections_root = path.parents[2]
    site_packages = pathlib.Path(tool("ansible")).parents[1] / "lib/python3.11/site-packages"
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH="%s:%s" % (collections_root, site_packages),
               ANSIBLE_CONFIG=str(collections_root / "empty.cfg"))
    (collections_root / "empty.cfg").write_text("[defaults]\n")
    run([tool("ansible-playbook"), "sparkfleet.vllm.site", "--syntax-check", "-i", str(REPO / "inventories/spark4")],
        env=env, cwd=collections_root)
    # The installed planner reads its own catalog: plan a cluster without the checkout.
    plan_dir = collections_root / "plans"
    run([tool("ansible-playbook"), "sparkfleet.vllm.plan", "-i", str(REPO / "inventories/spark2"),
         "-e", "plan_dir=%s" % plan_dir], env=env, cwd=collections_root)
    assert sorted(p.name for p in plan_dir.glob("*.json")) == ["spark-01.json", "spark-02.json"]


def test_release_dry_run_builds_checks_and_tags_nothing():
    """`make release DRY_RUN=1` runs the changelog release, the build and the tarball checks in a scratch copy:
    the checkout and its tags are as before. With no fragments left there is nothing to release, and it says so."""
    require(tool("antsibull-changelog"), "antsibull-changelog (run `make venv`)")
    status = run(["git", "status", "--porcelain"]).stdout
    tags = run(["git", "tag", "--list"]).stdout
    version = str(yaml.safe_load((REPO / "galaxy.yml").read_text(encoding="utf-8"))["version"])
    env = dict(os.environ, DRY_RUN="1", VENV=str(pathlib.Path(tool("antsibull-changelog")).parents[1].relative_to(REPO)))
    proc = run(["bash", str(REPO / "tests/harness/release.sh")], env=env, check=False, timeout=900)
    if not list((REPO / "changelogs/fragments").glob("*.y*ml")):
        assert proc.returncode == 1 and "no fragments" in proc.stderr, proc.stderr
    else:
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
        assert "sparkfleet-vllm-%s.tar.gz: " % version in proc.stdout
        assert "tag v%s (not done)" % version in proc.stdout
    assert run(["git", "status", "--porcelain"]).stdout == status
    assert run(["git", "tag", "--list"]).stdout == tags
