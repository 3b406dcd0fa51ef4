"""The doc fragments: the HTTP modules' shared options live once, in sparkfleet.vllm.http_api.

ansible-doc renders each module with the fragment merged in; the modules' own DOCUMENTATION no longer repeats
the shared options; the fragment's action group is meta/runtime.yml's; and wait_healthy, documentation only
now (its action plugin validates against module_utils/health.py), documents exactly that argument spec.
The standard attribute descriptions (sparkfleet.vllm.attributes) are likewise written once.
"""
import ast
import json
import os

import pytest
import yaml

from ansible_collections.sparkfleet.vllm.plugins.doc_fragments import attributes, http_api
from ansible_collections.sparkfleet.vllm.plugins.module_utils import health
from ansible_collections.sparkfleet.vllm.plugins.module_utils import openai_client as oc
from ansible_collections.sparkfleet.vllm.plugins.modules import smoke, throughput, wait_healthy
from conftest import REPO, require, run, tool

MODULES = {"smoke": smoke, "throughput": throughput, "wait_healthy": wait_healthy}
FRAGMENT = yaml.safe_load(http_api.ModuleDocFragment.DOCUMENTATION)
SHARED = sorted(FRAGMENT["options"])
GROUP = "sparkfleet.vllm.api"
ALL_MODULES = sorted(p.stem for p in (REPO / "plugins/modules").glob("*.py"))
ATTRIBUTES = yaml.safe_load(attributes.ModuleDocFragment.DOCUMENTATION)["attributes"]


def _ansible_doc(modules, *args):
    require(tool("ansible-doc"), "ansible-doc")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), ANSIBLE_NOCOLOR="1")
    return run([tool("ansible-doc"), "-t", "module"] + list(args) + ["sparkfleet.vllm.%s" % m for m in modules],
               env=env, timeout=120)


@pytest.fixture(scope="module")
def rendered():
    """ansible-doc --json for every module of the collection, in one call."""
    return json.loads(_ansible_doc(ALL_MODULES, "--json").stdout)


def test_fragment_holds_url_model_api_key_and_tls():
    assert SHARED == ["api_key", "ca_path", "model", "url", "validate_certs"]
    assert FRAGMENT["attributes"]["action_group"]["membership"] == [GROUP]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_shared_options_come_from_the_fragment(rendered, name):
    own = yaml.safe_load(MODULES[name].DOCUMENTATION)
    assert "sparkfleet.vllm.http_api" in own["extends_documentation_fragment"]
    assert not set(SHARED) & set(own["options"]), "%s repeats the fragment's options" % name
    doc = rendered["sparkfleet.vllm.%s" % name]["doc"]
    for option in SHARED:
        merged = doc["options"][option]
        expected = FRAGMENT["options"][option]
        assert merged["type"] == expected["type"] and merged.get("required", False) == expected.get("required", False)
        assert merged.get("default") == expected.get("default"), option
        description = expected["description"]
        assert merged["description"] == (description if isinstance(description, list) else [description])
    assert doc["attributes"]["action_group"]["membership"] == [GROUP]
    assert any("group/sparkfleet.vllm.api" in note for note in doc["notes"]), doc["notes"]


def test_every_http_module_takes_the_tls_options_as_the_client_defines_them():
    """One spec (openai_client.api_argument_spec) heads wait_healthy's action plugin's, smoke's and throughput's,
    and the fragment documents exactly it."""
    shared = oc.api_argument_spec()
    assert sorted(shared) == SHARED
    specs = {"wait_healthy": health.ARGUMENT_SPEC, "throughput": throughput.ARGUMENT_SPEC, "smoke": smoke.ARGUMENT_SPEC}
    for name, spec in specs.items():
        assert list(spec)[:len(shared)] == list(shared) and all(spec[k] == v for k, v in shared.items()), name
    for option, expected in shared.items():
        assert FRAGMENT["options"][option]["type"] == expected["type"], option
        assert FRAGMENT["options"][option].get("default") == expected.get("default"), option
        assert FRAGMENT["options"][option].get("required", False) == expected.get("required", False), option


def test_ansible_doc_renders_each_module_as_text():
    text = _ansible_doc(sorted(MODULES)).stdout
    for name in MODULES:
        assert "> MODULE sparkfleet.vllm.%s " % name in text, text[:2000]
    # Once per module: the fragment's first api_key line and the group note.
    assert text.count("API key, sent as a bearer token.") == len(MODULES)
    assert text.count("group/sparkfleet.vllm.api' in `module_defaults'") == len(MODULES)


def test_the_action_group_is_the_modules_that_take_the_shared_options():
    runtime = yaml.safe_load((REPO / "meta/runtime.yml").read_text(encoding="utf-8"))
    users = sorted(p.stem for p in (REPO / "plugins/modules").glob("*.py")
                   if "sparkfleet.vllm.http_api" in (yaml.safe_load(_docs(p)).get("extends_documentation_fragment") or []))
    assert runtime["action_groups"][GROUP.rsplit(".", 1)[-1]] == users == sorted(MODULES)


def _docs(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "DOCUMENTATION" for t in node.targets):
            return node.value.value
    raise AssertionError("%s has no DOCUMENTATION" % path)


def test_wait_healthy_module_is_documentation_only():
    """What ansible-test's validate-modules accepts as docs only (it then skips the argument-spec check, so the
    next test does it): docstrings, __future__ imports and assignments, no main()."""
    tree = ast.parse((REPO / "plugins/modules/wait_healthy.py").read_text(encoding="utf-8"))
    for node in tree.body:
        assert isinstance(node, (ast.Assign, ast.ImportFrom)) or (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)), ast.dump(node)[:200]
        if isinstance(node, ast.ImportFrom):
            assert node.module == "__future__"


def test_wait_healthy_documents_the_action_plugins_argument_spec(rendered):
    options = rendered["sparkfleet.vllm.wait_healthy"]["doc"]["options"]
    assert sorted(options) == sorted(health.ARGUMENT_SPEC)
    for name, spec in health.ARGUMENT_SPEC.items():
        documented = options[name]
        assert documented["type"] == spec["type"], name
        assert documented.get("required", False) == spec.get("required", False), name
        assert documented.get("default") == spec.get("default"), name
        assert documented.get("elements") == spec.get("elements"), name
    # A documented mutual exclusion: only one way to find the server process.
    assert health.MUTUALLY_EXCLUSIVE == [["service", "pidfile", "container"]]
    assert any("Only one of O(service), O(pidfile) and O(container)" in note
               for note in rendered["sparkfleet.vllm.wait_healthy"]["doc"]["notes"])


@pytest.mark.parametrize("name", ALL_MODULES)
def test_standard_attribute_descriptions_come_from_the_fragment(rendered, name):
    own = yaml.safe_load(_docs(REPO / "plugins/modules" / ("%s.py" % name)))
    doc = rendered["sparkfleet.vllm.%s" % name]["doc"]
    for attribute in doc["attributes"].values():
        assert attribute.get("description") and attribute.get("support"), (name, attribute)
    if "sparkfleet.vllm.attributes" not in (own.get("extends_documentation_fragment") or []):
        # plan alone takes ansible.builtin.action_common_attributes, for the action plugin's attributes.
        assert name == "plan", "%s does not use the sparkfleet.vllm.attributes fragment" % name
        return
    for key, standard in ATTRIBUTES.items():
        assert "description" not in own["attributes"][key], "%s repeats the %s description" % (name, key)
        assert doc["attributes"][key]["description"] == standard["description"], (name, key)
