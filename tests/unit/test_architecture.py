"""docs/architecture.md is the newcomer's map: it must name only paths that exist and every role, playbook and
plugin there is, so a file added or moved without the map fails here. The model short-name lists people read
(module docs, the plan role's argument spec and defaults, the README) must name every model the catalog has."""
import re

import pytest
import yaml

from conftest import REPO

PAGE = REPO / "docs/architecture.md"
TOP = ("roles/", "plugins/", "playbooks/", "data/", "tests/", "docs/", "inventories/", "awx/")
PLUGIN_DIRS = ("modules", "action", "module_utils", "lookup", "filter")


def page():
    return PAGE.read_text(encoding="utf-8")


def code_spans(text):
    return set(re.findall(r"`([^`\s]+)`", text))


def test_every_path_on_the_map_exists():
    spans = code_spans(page())
    paths = sorted(s for s in spans if s.startswith(TOP) or s == "site.yml")
    assert len(paths) > 40, paths
    missing = [p for p in paths if not (REPO / p).exists()]
    assert not missing, "docs/architecture.md names paths that do not exist: %s" % missing
    bare = sorted(s for s in spans if re.fullmatch(r"[a-z_]+\.py", s))
    unknown = [b for b in bare if not (REPO / "plugins/module_utils" / b).exists()]
    assert not unknown, "docs/architecture.md names module_utils files that do not exist: %s" % unknown


def test_every_role_playbook_and_plugin_is_on_the_map():
    text = page()
    spans = code_spans(text)
    roles = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "meta/argument_specs.yml").exists())
    missing = [r for r in roles if "`%s`" % r not in text and "roles/%s/" % r not in text]
    playbooks = sorted("playbooks/" + p.name for p in (REPO / "playbooks").glob("*.yml"))
    missing += [p for p in playbooks if p not in spans]
    for kind in PLUGIN_DIRS:
        # module_utils' subpackages (plan/) too: a file there is named by its path, a top-level one may be by its name.
        for path in sorted((REPO / "plugins" / kind).glob("**/*.py" if kind == "module_utils" else "*.py")):
            if path.name == "__init__.py":
                continue
            rel = path.relative_to(REPO).as_posix()
            top_level = path.parent.name == kind
            if rel not in spans and not (kind == "module_utils" and top_level and path.name in spans):
                missing.append(rel)
    assert not missing, "not on docs/architecture.md's map: %s" % missing


def catalog_models():
    models = yaml.safe_load((REPO / "data/catalog.yml").read_text())["models"]
    return {name for name, row in models.items() if not row.get("stand_in")}, {
        name for name, row in models.items() if row.get("stand_in")}


def plan_module_model_doc():
    text = (REPO / "plugins/modules/plan.py").read_text()
    documentation = yaml.safe_load(text.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
    return " ".join(documentation["options"]["model"]["description"])


def plan_role_spec_doc():
    specs = yaml.safe_load((REPO / "roles/plan/meta/argument_specs.yml").read_text())
    return specs["argument_specs"]["main"]["options"]["plan_model"]["description"]


def plan_role_defaults():
    return (REPO / "roles/plan/defaults/main.yml").read_text()


def readme_model_row():
    return next(line for line in (REPO / "README.md").read_text().splitlines() if line.startswith("| `vllm_model` |"))


SOURCES = {
    "plugins/modules/plan.py (model)": (plan_module_model_doc, True),
    "roles/plan/meta/argument_specs.yml (plan_model)": (plan_role_spec_doc, True),
    "roles/plan/defaults/main.yml": (plan_role_defaults, True),
    "README.md (vllm_model row)": (readme_model_row, False),
}


def unnamed(source, names):
    """The catalog names a prose list leaves out: `source` is (reader, with the stand-ins), `names` (real, stand-ins)."""
    read, with_stand_ins = source
    real, stand_ins = names
    text = read()
    wanted = real | (stand_ins if with_stand_ins else set())
    return sorted(name for name in wanted if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(name), text))


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_model_lists_name_every_catalog_model(source):
    missing = unnamed(SOURCES[source], catalog_models())
    assert not missing, "%s does not list the catalog model(s) %s" % (source, missing)


# The profile names are listed in prose in these places (a GPU profile touches each; the map in
# docs/architecture.md counts them): every catalog profile must be named, the stand-in `cpu` where marked.
def line_with(path, marker):
    return next(line for line in (REPO / path).read_text().splitlines() if marker in line)


PROFILE_SOURCES = {
    "plugins/modules/plan.py (profile)": (lambda: line_with("plugins/modules/plan.py", "Hardware profile ("), True),
    "plugins/modules/gpu_facts.py (built-in table)": (
        lambda: line_with("plugins/modules/gpu_facts.py", "minimal built-in table"), False),
    "roles/plan/defaults/main.yml": (lambda: line_with("roles/plan/defaults/main.yml", "# Hardware profile"), True),
    "roles/plan/meta/argument_specs.yml": (
        lambda: line_with("roles/plan/meta/argument_specs.yml", "Hardware profile"), True),
    "roles/preflight/defaults/main.yml": (
        lambda: line_with("roles/preflight/defaults/main.yml", "# Hardware profile"), True),
    "roles/preflight/meta/argument_specs.yml": (
        lambda: line_with("roles/preflight/meta/argument_specs.yml", "Hardware profile"), True),
    "roles/preflight/README.md": (lambda: line_with("roles/preflight/README.md", "| `preflight_profile` |"), True),
    "README.md (vllm_profile row)": (lambda: line_with("README.md", "| `vllm_profile` |"), True),
    "docs/planner.md (vllm_profile row)": (lambda: line_with("docs/planner.md", "| `vllm_profile` |"), True),
}


def catalog_profiles():
    profiles = yaml.safe_load((REPO / "data/catalog.yml").read_text())["profiles"]
    return {name for name, row in profiles.items() if name != "cpu"}, {"cpu"} & set(profiles)


@pytest.mark.parametrize("source", sorted(PROFILE_SOURCES))
def test_profile_lists_name_every_catalog_profile(source):
    missing = unnamed(PROFILE_SOURCES[source], catalog_profiles())
    assert not missing, "%s does not list the catalog profile(s) %s" % (source, missing)


def test_the_map_counts_the_places_a_gpu_profile_touches():
    # docs/architecture.md's "A GPU profile" row names every prose list above, the catalog, gpu.py and an inventory.
    row = line_with("docs/architecture.md", "| A GPU profile")
    named = [source.split(" (")[0] for source in PROFILE_SOURCES] + [
        "data/catalog.yml", "plugins/module_utils/gpu.py", "inventories/"]
    missing = [path for path in named if "`%s" % path not in row]
    assert not missing, "the map's GPU-profile row omits %s" % missing
