"""The collection builds into a tarball that installs offline and exposes its playbooks, and from which
`ansible-builder create` writes a complete execution-environment build context.

The suite builds the tarball here and only here, once (`built`): the installed-collection checks and the
execution-environment checks (execution-environment.yml: the collection tarball, the collection's own Python and
system requirement files, the same files and not copies kept elsewhere, and a Containerfile whose base image is a
build arg) read the same file. `ansible-builder create` writes files only: no registry, no Galaxy. Building the
image needs a registry and is not part of CI. The definition's own checks that need no tarball stay in
tests/awx/test_execution_environment.py.
"""
import json
import os
import pathlib
import shutil
import tarfile

import pytest
import yaml

from conftest import REPO, require, run, tool

EE_FILE = REPO / "execution-environment.yml"
META_EE = REPO / "meta/execution-environment.yml"


def galaxy():
    return yaml.safe_load((REPO / "galaxy.yml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The suite's one `ansible-galaxy collection build`, into an empty directory (it writes exactly one tarball,
    named for galaxy.yml's namespace, name and version), then placed in build/ where execution-environment.yml
    reads it, as `make build` leaves it."""
    require(tool("ansible-galaxy"), "ansible-galaxy (run `make venv`)")
    out = tmp_path_factory.mktemp("build")
    run([tool("ansible-galaxy"), "collection", "build", "--force", "--output-path", str(out), str(REPO)])
    tarballs = list(out.glob("sparkfleet-vllm-*.tar.gz"))
    assert len(tarballs) == 1, tarballs
    meta = galaxy()
    assert tarballs[0].name == "%s-%s-%s.tar.gz" % (meta["namespace"], meta["name"], meta["version"]), tarballs[0]
    (REPO / "build").mkdir(exist_ok=True)
    return pathlib.Path(shutil.copy2(tarballs[0], REPO / "build" / tarballs[0].name))


@pytest.fixture(scope="module")
def installed(built, tmp_path_factory):
    dest = tmp_path_factory.mktemp("collections")
    # --offline: no Galaxy server is reachable; the dependencies ship in the `ansible` package.
    run([tool("ansible-galaxy"), "collection", "install", "--offline", "--no-deps", "--force", "-p", str(dest), str(built)])
    return built, dest / "ansible_collections/sparkfleet/vllm"


@pytest.fixture(scope="module")
def definition():
    return yaml.safe_load(EE_FILE.read_text())


@pytest.fixture(scope="module")
def context(built, tmp_path_factory):
    """`ansible-builder create` into a temporary context, from the tarball in build/."""
    require(tool("ansible-builder"), "ansible-builder (run `make venv`)")
    out = tmp_path_factory.mktemp("ee") / "context"
    # No network: ansible-builder create only writes files.
    proc = run([tool("ansible-builder"), "create", "-f", str(EE_FILE), "-c", str(out),
                "--output-filename", "Containerfile", "-v", "2"], timeout=300)
    assert "No matches" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return out, built


def test_tarball_carries_installed_content_only(installed):
    """No checkout-only file (ansible.cfg, requirements/dev.txt, tests, the sim4 and local inventories, the AWX
    admin playbook, caches) ships, and what Galaxy and an installed run need does (tests/tarball_contents.py)."""
    from tarball_contents import manifest_version, member_files, problems

    tarball, _path = installed
    names = member_files(tarball)
    version = str(galaxy()["version"])
    assert not problems(names, version, manifest_version(tarball)), problems(names, version, manifest_version(tarball))
    assert any(name.startswith("plugins/") for name in names)


def test_tarball_declares_galaxy_ymls_dependencies_only_those_installed_content_uses(built):
    """Installing the tarball pulls galaxy.yml's dependencies (its MANIFEST.json carries them, ranges and all), and
    those are only what installed content uses."""
    with tarfile.open(built) as archive:
        manifest = json.load(archive.extractfile("MANIFEST.json"))
    assert manifest["collection_info"]["dependencies"] == galaxy()["dependencies"]
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
    # VLLM_API_KEY: the operator's controller holds a key (a plan without one is refused).
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH="%s:%s" % (collections_root, site_packages),
               ANSIBLE_CONFIG=str(collections_root / "empty.cfg"), VLLM_API_KEY="sk-installed-0123456789")
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
    version = str(galaxy()["version"])
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


# The execution-environment build context, from the same tarball.

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


def test_requirement_files_travel_in_the_tarball(built):
    """ansible-builder's introspection reads the collection's requirement files from the installed collection."""
    with tarfile.open(built) as archive:
        names = archive.getnames()
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


def test_context_has_no_stray_inputs(context):
    out, _tarball = context
    built = sorted(str(p.relative_to(out)) for p in pathlib.Path(out).rglob("*") if p.is_file())
    assert all(p.startswith("_build/") or p == "Containerfile" for p in built), built
