"""Compose v1 is refused where the compose runtime needs v2, before anything is written.

Two guards, each run here by ansible-playbook itself (-c local, read-only tasks only):

* the docker role's preflight (playbooks/host.yml sets docker_compose_v2_required for a single node's compose
  runtime) refuses `docker_install_source: distribution` on a release whose own packages carry only the Python
  Compose v1 — Debian 12, this machine's release — before it installs anything;
* the vllm_compose role's preflight reads `docker compose version --short` and refuses anything older than 2.18
  (community.docker.docker_compose_v2's minimum), or a Docker without the plugin.

Stand-in, named as such: the `docker` the compose preflight runs is a script on PATH that answers as each Docker
would (exit 1 with Docker's own "'compose' is not a docker command." where only Compose v1 is installed).
"""
import json
import os
import pathlib
import sys

import pytest

from conftest import REPO, require, run, tool

PLAN = {"image": "vllm/vllm-openai:v0.30.0", "argv": ["google/gemma-4-31B-it", "--port", "8000"], "env": {},
        "secret_env": [], "port": 8000, "runtime": "compose"}


def os_release():
    fields = {}
    for line in pathlib.Path("/etc/os-release").read_text().splitlines():
        key, _sep, value = line.partition("=")
        fields[key] = value.strip('"')
    return fields


def preflight(tmp_path, role, extra, env=None):
    playbook = tmp_path / "preflight.yml"
    playbook.write_text(
        "- name: Run the %s role's preflight\n  hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - name: Preflight\n      ansible.builtin.include_role:\n        name: sparkfleet.vllm.%s\n"
        "        tasks_from: preflight\n" % (role, role))
    if tool("ansible-playbook") is None:
        pytest.fail("ansible-playbook is missing from the controller toolchain")
    extra = dict(extra, ansible_python_interpreter=sys.executable)  # the controller's own, as on inventories/local
    return run([tool("ansible-playbook"), "-c", "local", "-i", "localhost,", str(playbook), "-e", json.dumps(extra)],
               check=False, timeout=300, env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
                                                  ANSIBLE_NOCOLOR="1", **(env or {})))


@pytest.mark.parametrize("source,required,refused", [
    ("distribution", True, True), ("upstream", True, False), ("distribution", False, False)])
def test_docker_role_refuses_compose_v1_from_debian_12(tmp_path, source, required, refused):
    require(os_release().get("VERSION_CODENAME") == "bookworm", "a Debian 12 (bookworm) host, this machine kind")
    proc = preflight(tmp_path, "docker", {"docker_install_source": source, "docker_compose_v2_required": required})
    text = " ".join((proc.stdout + proc.stderr).split())
    if refused:
        assert proc.returncode != 0, text[-3000:]
        for fragment in ("docker_install_source is 'distribution'", "Debian bookworm packages only Compose v1",
                         "Set docker_install_source: upstream", "vllm_runtime: native"):
            assert fragment in text, (fragment, text[-3000:])
    else:
        assert proc.returncode == 0, text[-3000:]
    assert "changed=0" in text, text[-2000:]


def fake_docker(tmp_path, script):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text("#!/bin/sh\n" + script)
    docker.chmod(0o755)
    return {"PATH": "%s:%s" % (bin_dir, os.environ.get("PATH", ""))}


@pytest.mark.parametrize("script,accepted,shown", [
    ("echo \"docker: 'compose' is not a docker command.\" >&2; exit 1\n", False,
     "gave exit 1 (docker: 'compose' is not a docker command.)"),
    ("echo 2.17.3\n", False, "gave 2.17.3"),
    ("echo v2.18.0\n", True, None),
    ("echo 2.29.7\n", True, None),
], ids=["compose-v1-only", "v2-too-old", "v2-minimum", "v2-current"])
def test_compose_runtime_refuses_a_compose_older_than_2_18(tmp_path, script, accepted, shown):
    proc = preflight(tmp_path, "vllm_compose", {"vllm_plan": PLAN}, env=fake_docker(tmp_path, script))
    text = " ".join((proc.stdout + proc.stderr).split())
    if accepted:
        assert proc.returncode == 0, text[-3000:]
    else:
        assert proc.returncode != 0, text[-3000:]
        for fragment in ("Docker Compose v2 CLI plugin, 2.18.0 or newer", shown, "docker_install_source: upstream"):
            assert fragment in text, (fragment, text[-3000:])
    assert "changed=0" in text, text[-2000:]
