"""module_defaults for group/sparkfleet.vllm.api reach the three HTTP modules' action plugins.

One real ansible-playbook run on localhost against a port nothing listens on; every value the assertions
look for is set only through the group's module_defaults: wait_healthy's timeout shows in its timeout
message, smoke's model in the request it sent, and throughput (check mode) gets its required url from the group.
"""
import json
import os
import socket
import sys

import yaml

from conftest import REPO, require, run, tool


def _closed_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _play(url, out):
    return [{
        "name": "Group defaults reach the HTTP modules",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "module_defaults": {"group/sparkfleet.vllm.api": {"url": url, "model": "from-the-group", "timeout": 1}},
        "tasks": [
            {"name": "Wait for a server that is not there", "sparkfleet.vllm.wait_healthy": {"interval": 0.2},
             "register": "waited", "ignore_errors": True},
            {"name": "Smoke it", "sparkfleet.vllm.smoke": {"checks": ["chat"], "fail_on_failure": False},
             "register": "smoked"},
            {"name": "Measure in check mode", "sparkfleet.vllm.throughput": {"model": "from-the-task"},
             "check_mode": True, "register": "measured"},
            {"name": "Keep the results", "ansible.builtin.copy": {
                "content": "{{ {'waited': waited, 'smoked': smoked, 'measured': measured} | to_json }}",
                "dest": str(out)}},
        ],
    }]


def test_group_module_defaults_reach_the_action_plugins(tmp_path):
    require(tool("ansible-playbook"), "ansible-playbook")
    url = "http://127.0.0.1:%d" % _closed_port()
    out = tmp_path / "results.json"
    playbook = tmp_path / "defaults.yml"
    playbook.write_text(yaml.safe_dump(_play(url, out), sort_keys=False), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("VLLM_API_KEY", "ANSIBLE_CONFIG")}
    env["ANSIBLE_COLLECTIONS_PATH"] = str(REPO / ".collections")
    run([tool("ansible-playbook"), "-i", "localhost,", "-e", "ansible_python_interpreter=%s" % sys.executable,
         str(playbook)], env=env, timeout=300)
    results = json.loads(out.read_text(encoding="utf-8"))
    waited = results["waited"]
    assert waited["failed"] and waited["msg"].startswith("not ready after 1 s (timeout)"), waited["msg"]
    assert waited["phase"] == "starting"
    chat = results["smoked"]["checks"][0]
    assert chat["name"] == "chat" and chat["status"] == "failed" and "no HTTP response" in chat["reason"], chat
    assert "'model': 'from-the-group'" in chat["details"][0]["request"]
    measured = results["measured"]
    assert not measured.get("failed") and measured["msg"] == "check mode: no requests sent", measured
