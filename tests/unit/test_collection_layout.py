"""The collection's own wiring: galaxy.yml, runtime, role surfaces.

These keep the promises of STYLE.md checkable: every collection called by FQCN
is a declared dependency, and every role's defaults and argument specs agree.
"""
import json
import re

import pytest
import yaml

from conftest import REPO

ROLES = sorted(p for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir()) if (REPO / "roles").exists() else []
YAML_SOURCES = [
    p for p in REPO.rglob("*.yml")
    if not any(part in {".venv", ".venv-vllm", ".collections", ".cache", "build", "output"} or part.startswith(".venv")
               for part in p.relative_to(REPO).parts)
]
FQCN = re.compile(r"^\s*-?\s*([a-z_]+\.[a-z_]+)\.[a-z_0-9]+:\s*(?:$|[^\s])", re.M)
BUILTIN_NAMESPACES = {"ansible.builtin", "ansible.legacy", "sparkfleet.vllm"}


def load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_galaxy_metadata():
    galaxy = load(REPO / "galaxy.yml")
    assert (galaxy["namespace"], galaxy["name"]) == ("sparkfleet", "vllm")
    major = int(str(galaxy["version"]).split(".", maxsplit=1)[0])
    assert major >= 1, "version must be 1.0.0 or later, got %s" % galaxy["version"]
    assert galaxy["license"] and galaxy["tags"] and len(galaxy["description"]) > 40
    for ignored in ("tests", ".venv", "molecule"):
        assert ignored in galaxy["build_ignore"], "build_ignore lacks %s" % ignored


LICENCE = "GPL-3.0-or-later"


def test_one_licence_everywhere():
    """galaxy.yml, LICENSE, every role's metadata and every plugin header state the same licence: the plugins
    import ansible-core (GPL-3.0-or-later), so the collection cannot be offered under a more permissive one."""
    assert load(REPO / "galaxy.yml")["license"] == [LICENCE]
    assert "GNU GENERAL PUBLIC LICENSE" in (REPO / "LICENSE").read_text(encoding="utf-8")[:200]
    for role in ROLES:
        assert load(role / "meta/main.yml")["galaxy_info"]["license"] == LICENCE, role.name
    sources = sorted((REPO / "plugins").rglob("*.py")) + sorted((REPO / "roles").glob("*/files/*.py"))
    unlicensed = [str(p.relative_to(REPO)) for p in sources
                  if "SPDX-License-Identifier: %s" % LICENCE not in p.read_text(encoding="utf-8")[:600]]
    assert not unlicensed, "files without the licence header: %s" % unlicensed


def _version(text):
    return tuple(int(part) for part in str(text).split("."))


def test_version_is_the_next_release_and_pinned_everywhere():
    """galaxy.yml names the release the changelog fragments will become: newer than every release in
    changelogs/changelog.yaml (Galaxy refuses a second, different copy of a version), or equal to the newest one
    once `make release` has consumed the fragments. The execution environment and AWX pin that version."""
    version = str(load(REPO / "galaxy.yml")["version"])
    released = sorted(_version(v) for v in load(REPO / "changelogs/changelog.yaml")["releases"])
    pending = list((REPO / "changelogs/fragments").glob("*.y*ml"))
    if pending:
        assert _version(version) > released[-1], "fragments pending but galaxy.yml's %s is already released" % version
    else:
        assert _version(version) == released[-1], "galaxy.yml's %s is not the newest release" % version
    ee = load(REPO / "execution-environment.yml")
    assert "sparkfleet-vllm-%s.tar.gz" % version in (REPO / "execution-environment.yml").read_text(encoding="utf-8")
    assert [tag.rsplit(":", 1)[-1] for tag in ee["options"]["tags"]] == [version], (
        "execution-environment.yml tags the image %s, not the version it bakes in" % ee["options"]["tags"])
    awx = load(REPO / "awx/vars/main.yml")
    assert awx["awx_ee_image"].endswith(":" + version)
    assert awx["awx_project_scm_branch"] == "v" + version, "the AWX project must sync the tag make release creates"


VERSION_ADDED = re.compile(r"^\s*version_added:\s*[\"']?([0-9][0-9.]*)[\"']?\s*$", re.M)


def test_version_added_names_a_release():
    """Every plugin's and option's version_added is a release of changelogs/changelog.yaml or the pending one in
    galaxy.yml: antsibull-changelog lists a plugin under the release its version_added names ("New Modules",
    "New Plugins"), so a version that was never released (0.1.0) hides it from every release's notes."""
    releases = {str(v) for v in load(REPO / "changelogs/changelog.yaml")["releases"]}
    releases.add(str(load(REPO / "galaxy.yml")["version"]))
    sources = sorted((REPO / "plugins").rglob("*.py")) + sorted((REPO / "plugins").rglob("*.yml"))
    stray = ["%s: %s" % (p.relative_to(REPO), v) for p in sources
             for v in VERSION_ADDED.findall(p.read_text(encoding="utf-8")) if v not in releases]
    assert not stray, "version_added names no release of %s: %s" % (sorted(releases), stray)


def test_requires_ansible_is_a_range():
    runtime = load(REPO / "meta/runtime.yml")
    spec = runtime["requires_ansible"]
    assert ">=" in spec and "<" in spec.replace("<=", ""), "requires_ansible must be a full range, got %r" % spec


def test_requires_ansible_is_what_ci_tests():
    """meta/runtime.yml claims the ansible-core range requirements/dev.txt installs, and no role claims less."""
    spec = load(REPO / "meta/runtime.yml")["requires_ansible"]
    pin = re.search(r"^ansible-core>=([0-9.]+),<([0-9.]+)$", (REPO / "requirements/dev.txt").read_text(encoding="utf-8"), re.M)
    assert pin, "requirements/dev.txt pins no ansible-core range"
    low, high = (_version(v) for v in pin.groups())
    claimed = re.fullmatch(r">=([0-9.]+),<([0-9.]+)", spec.replace(" ", ""))
    assert claimed, spec
    assert _version(claimed.group(1))[:2] == low[:2] and _version(claimed.group(2))[:2] == high[:2], (
        "requires_ansible %s is not the tested ansible-core %s" % (spec, pin.group(0)))
    for role in ROLES:
        minimum = str(load(role / "meta/main.yml")["galaxy_info"]["min_ansible_version"])
        assert _version(minimum)[:2] == low[:2], "%s: min_ansible_version %s, requires_ansible %s" % (role.name, minimum, spec)


def _fqcn_collections(paths):
    used = {}
    for path in paths:
        for match in FQCN.finditer(path.read_text(encoding="utf-8")):
            name = match.group(1)
            if name not in BUILTIN_NAMESPACES and not name.startswith(("vllm_", "hostvars")):
                used.setdefault(name, str(path.relative_to(REPO)))
    return used


def _is_checkout_only(path):
    parts = path.relative_to(REPO).parts
    return parts[0] in {"tests", "awx", "molecule"} or "molecule" in parts


def test_every_fqcn_collection_is_a_dependency():
    """What the collection calls is in galaxy.yml; what only the AWX admin playbook calls is in
    awx/requirements.yml, so an install (and the execution environment) does not carry it."""
    declared = set(load(REPO / "galaxy.yml").get("dependencies", {}))
    awx_only = {entry["name"] for entry in load(REPO / "awx/requirements.yml")["collections"]}
    awx_sources = [p for p in YAML_SOURCES if p.relative_to(REPO).parts[0] == "awx"]
    used = _fqcn_collections([p for p in YAML_SOURCES if p not in awx_sources])
    missing = {name: where for name, where in used.items() if name not in declared}
    assert not missing, "collections used by FQCN but not in galaxy.yml dependencies: %s" % missing
    missing = {name: where for name, where in _fqcn_collections(awx_sources).items() if name not in declared | awx_only}
    assert not missing, "collections awx/ uses by FQCN but not in awx/requirements.yml: %s" % missing


def test_every_dependency_is_used_by_installed_content():
    declared = set(load(REPO / "galaxy.yml").get("dependencies", {}))
    used = _fqcn_collections([p for p in YAML_SOURCES if not _is_checkout_only(p)])
    assert declared <= set(used), "galaxy.yml depends on collections no role or playbook calls: %s" % sorted(
        declared - set(used))


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_role_defaults_match_argument_specs(role):
    defaults_file = role / "defaults/main.yml"
    specs_file = role / "meta/argument_specs.yml"
    defaults = (load(defaults_file) or {}) if defaults_file.exists() else {}
    assert specs_file.exists(), "%s has no meta/argument_specs.yml" % role.name
    options = load(specs_file)["argument_specs"]["main"].get("options", {}) or {}
    assert set(defaults) <= set(options), "defaults not declared in argument_specs: %s" % sorted(set(defaults) - set(options))
    for name, spec in options.items():
        assert spec.get("description"), "%s: option %s has no description" % (role.name, name)
        if spec.get("no_log"):
            # A secret's default is a lookup; declared in the spec it would be templated into the
            # argument-validation event (and so into job logs). defaults/main.yml holds it alone.
            assert "{{" not in str(spec.get("default", "")), (
                "%s: secret option %s must not carry a templated default in argument_specs" % (role.name, name))
            assert name in defaults, "%s: secret option %s needs its default in defaults/main.yml" % (role.name, name)
        if name in defaults and not (spec.get("no_log") and "default" not in spec):
            assert spec.get("default") == defaults[name], "%s: %s default %r differs from defaults/main.yml %r" % (
                role.name, name, spec.get("default"), defaults[name])
    for name in defaults:
        assert name.startswith(role.name + "_") or name.startswith("vllm_"), (
            "%s: public variable %s is not prefixed with the role name" % (role.name, name))


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_role_defaults_are_commented(role):
    defaults_file = role / "defaults/main.yml"
    if not defaults_file.exists():
        return
    lines = defaults_file.read_text(encoding="utf-8").splitlines()
    for index, line in enumerate(lines):
        if re.match(r"^[a-z_0-9]+:", line):
            previous = lines[index - 1].strip() if index else ""
            assert previous.startswith("#") or "#" in line, "%s: %s has no one-line comment" % (
                defaults_file.relative_to(REPO), line.split(":")[0])


def test_checkout_symlink_points_at_root():
    link = REPO / ".collections/ansible_collections/sparkfleet/vllm"
    assert link.is_symlink() and link.resolve() == REPO


# Every role that touches the Hugging Face cache, and its variable for the path.
HF_CACHE_VARIABLES = {
    "preflight": "preflight_hf_cache_path", "weights": "weights_hf_home", "vllm_native": "vllm_native_hf_home",
    "vllm_compose": "vllm_compose_hf_cache_dir", "vllm_cluster": "vllm_cluster_hf_home",
}


@pytest.mark.parametrize("hf_home", [None, "/srv/models/hf"])
def test_hf_cache_path_is_one_variable(hf_home):
    """Preflight measures the disk the weights land on, and every runtime mounts or reads that same cache."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    values = {}
    loader = DataLoader()
    for role, name in HF_CACHE_VARIABLES.items():
        defaults = loader.load_from_file(str(REPO / "roles" / role / "defaults/main.yml"), trusted_as_template=True)
        variables = dict(defaults)
        if hf_home:
            variables["vllm_hf_home"] = hf_home
        values[name] = Templar(loader=loader, variables=variables).template(defaults[name])
    assert set(values.values()) == {hf_home or "/var/lib/vllm/.cache/huggingface"}, values


def _shown(value):
    """A default as a role README's table shows it."""
    if value == "":
        return '""'
    return value if isinstance(value, str) else json.dumps(value)


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_role_readme_matches_argument_specs(role):
    """Every role has a README (Galaxy shows it), its example calls the role by FQCN, and each variable in its
    table exists in meta/argument_specs.yml with the default shown."""
    readme = role / "README.md"
    assert readme.exists(), "%s has no README.md" % role.name
    text = readme.read_text(encoding="utf-8")
    assert "role: sparkfleet.vllm.%s" % role.name in text and "meta/argument_specs.yml" in text
    options = load(role / "meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    rows = re.findall(r"^\| `([a-z0-9_]+)` \| `(.*?)` \| ", text, re.M)
    assert rows, "%s/README.md lists no variables" % role.name
    for name, default in rows:
        assert name in options, "%s/README.md: %s is not in argument_specs" % (role.name, name)
        assert default.replace("\\|", "|") == _shown(options[name].get("default")), (
            "%s/README.md: %s default %s, argument_specs %r" % (role.name, name, default, options[name].get("default")))


README_SECTIONS = ("Requirements", "Installation", "Usage", "Contributing", "Support", "Release notes", "License")


def test_readme_works_on_galaxy():
    """Galaxy renders README.md outside the repository: every link is absolute (or an anchor on the page), the
    sections an installer looks for are there, and the usage runs playbooks by FQCN."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert [s for s in README_SECTIONS if s not in headings] == [], headings
    relative = [link for link in re.findall(r"\]\(([^)]+)\)", text) if not link.startswith(("https://", "#"))]
    assert not relative, "relative links break on Galaxy: %s" % relative
    assert "ansible-galaxy collection install sparkfleet.vllm" in text
    assert "ansible-playbook sparkfleet.vllm.site -i" in text
    for command in ("make demo", "make test"):
        assert "\n%s " % command in text, "README lost the contributor command %s" % command
    for role in ROLES:
        readme = (role / "README.md").read_text(encoding="utf-8")
        relative = [link for link in re.findall(r"\]\(([^)]+)\)", readme) if not link.startswith(("https://", "#"))]
        assert not relative, "%s/README.md: relative links %s" % (role.name, relative)


REPOSITORY_LINK = re.compile(r"\]\((https://github\.com/sparkfleet/vllm/(?:blob|tree)/main/([^)#]+))(?:#([^)]+))?\)")


def _anchors(markdown):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.+)$", markdown, re.M)}


def test_readme_links_name_files_of_the_repository():
    """The absolute links Galaxy renders (README.md, each role's README) name files and headings that exist on the
    repository's main branch, which this checkout becomes: a renamed page or heading breaks them silently."""
    repository = load(REPO / "galaxy.yml")["repository"]
    assert repository == "https://github.com/sparkfleet/vllm", "the links below assume %s" % repository
    broken = []
    for readme in [REPO / "README.md"] + [role / "README.md" for role in ROLES]:
        for url, path, anchor in REPOSITORY_LINK.findall(readme.read_text(encoding="utf-8")):
            target = REPO / path
            if not target.exists():
                broken.append("%s: %s" % (readme.relative_to(REPO), url))
            elif anchor and anchor not in _anchors(target.read_text(encoding="utf-8")):
                broken.append("%s: %s#%s (no such heading)" % (readme.relative_to(REPO), url, anchor))
    assert not broken, broken
