"""sparkfleet.vllm.dev_mode_on is the planner's rule, and the runtime roles' last-line checks use it (one rule)."""
import json
import os
import re

import pytest

from ansible_collections.sparkfleet.vllm.plugins.filter import dev_mode
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import planner
from conftest import REPO, run, tool

CASES = [None, {}, {"VLLM_SERVER_DEV_MODE": "1"}, {"VLLM_SERVER_DEV_MODE": " On "}, {"VLLM_SERVER_DEV_MODE": "0"},
         {"VLLM_SERVER_DEV_MODE": "False"}, {"VLLM_SERVER_DEV_MODE": " off "}, {"VLLM_SERVER_DEV_MODE": ""},
         {"VLLM_SERVER_DEV_MODE": 1}, {"VLLM_SERVER_DEV_MODE": True}, {"OTHER": "1"}]


@pytest.mark.parametrize("env", CASES, ids=[json.dumps(c) for c in CASES])
def test_filter_is_the_planners_rule(env):
    assert dev_mode.dev_mode_on(env) is planner.dev_mode_on(env)


def test_filter_runs_in_ansible():
    """Through a real ansible call: ' On ' (which the former Jinja copies, without strip, read as off) is on."""
    proc = run([tool("ansible"), "localhost", "-c", "local", "-m", "ansible.builtin.debug", "-a",
                "msg={{ [{'VLLM_SERVER_DEV_MODE': ' On '} | sparkfleet.vllm.dev_mode_on,"
                " {'VLLM_SERVER_DEV_MODE': 'off'} | sparkfleet.vllm.dev_mode_on] }}"],
               env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg")), timeout=120)
    assert re.search(r"msg:\s*- true\s*- false", proc.stdout), proc.stdout


def test_runtime_roles_use_the_filter_not_a_copy():
    checks = {p.relative_to(REPO).parts[1]: p.read_text() for p in REPO.glob("roles/*/tasks/preflight.yml")
              if "VLLM_SERVER_DEV_MODE" in p.read_text()}
    assert set(checks) == {"vllm_native", "vllm_compose", "vllm_cluster"}, sorted(checks)
    for role, text in checks.items():
        assert "sparkfleet.vllm.dev_mode_on" in text, role
        assert ".get('VLLM_SERVER_DEV_MODE'" not in text and "'off']" not in text, "%s keeps its own copy" % role
