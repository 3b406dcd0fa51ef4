"""The native runtime end to end, with stand-ins: vLLM's CPU build serving the
tiny random Llama-shaped model (sparkfleet/tiny-random-llama as `tiny`) in
place of Gemma 4 on a GPU, started by playbooks/serve.yml (weights +
vllm_native) under start-stop-daemon or systemd, whichever is PID 1 here.
"""
import json
import os
import pathlib
import stat
import subprocess
import urllib.request

import pytest

from conftest import DECOY_HF_TOKEN, FAKE_HF_TOKEN, ansible_env, ansible_playbook, http_get, native_vars, require, stand_in_plan, tool


def post_json(url, body, timeout=120):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - local test server
        return response.status, json.loads(response.read().decode())


def starts_logged(server):
    return server.log_file.read_text(errors="replace").count("=== ") if server.log_file.exists() else 0


def test_first_run_starts_the_server(vllm_server):
    assert vllm_server.first_run.recap["failed"] == 0
    os.kill(vllm_server.pid(), 0)  # the pid file names a live process
    cmdline = pathlib.Path("/proc/%d/cmdline" % vllm_server.pid()).read_bytes().split(b"\0")
    assert b"vllm.entrypoints.openai.api_server" in cmdline
    # The plan's argv follows the entry point unchanged, checkpoint first.
    argv = [part.decode() for part in cmdline[cmdline.index(b"--model") + 1:] if part]
    assert argv == vllm_server.extra_vars["vllm_plan"]["argv"]


def test_health_answers(vllm_server):
    status, _body = http_get(vllm_server.base_url + "/health")
    assert status == 200


def test_models_lists_the_served_name(vllm_server):
    status, body = http_get(vllm_server.base_url + "/v1/models")
    assert status == 200
    ids = [entry["id"] for entry in json.loads(body)["data"]]
    assert vllm_server.served_name in ids, ids


def test_chat_completion_returns_text(vllm_server):
    status, body = post_json(vllm_server.base_url + "/v1/chat/completions", {
        "model": vllm_server.served_name, "max_tokens": 8, "temperature": 0,
        "messages": [{"role": "user", "content": "Say hello."}]})
    assert status == 200
    choice = body["choices"][0]
    # Random weights: the text is noise, but it is text, produced through the chat template.
    assert isinstance(choice["message"]["content"], str) and choice["message"]["content"], body
    assert body["usage"]["completion_tokens"] > 0, body


def test_second_run_changes_nothing_and_keeps_the_server(vllm_server):
    pid = vllm_server.pid()
    again = ansible_playbook("playbooks/serve.yml", vllm_server.extra_vars, env=vllm_server.env)
    assert again.recap["changed"] == 0, "changed on a second run: %s" % again.changed_tasks()
    assert again.recap["failed"] == 0
    assert vllm_server.pid() == pid


def test_check_mode_reports_no_change(vllm_server):
    checked = ansible_playbook("playbooks/serve.yml", vllm_server.extra_vars, env=vllm_server.env, args=["--check"])
    assert checked.recap["failed"] == 0
    assert checked.recap["changed"] == 0, checked.changed_tasks()


def test_secret_env_file_is_root_only(vllm_server):
    secret = vllm_server.config_dir / "secret.env"
    mode = stat.S_IMODE(secret.stat().st_mode)
    assert mode == 0o600, oct(mode)
    assert secret.stat().st_uid == 0
    # The variable's value (the secrets contract), not the decoy in the controller's environment.
    assert 'HF_TOKEN="%s"' % FAKE_HF_TOKEN in secret.read_text() and DECOY_HF_TOKEN not in secret.read_text()


@pytest.mark.parametrize("token", [FAKE_HF_TOKEN, DECOY_HF_TOKEN], ids=["variable", "decoy"])
def test_secret_is_nowhere_but_the_secret_file(vllm_server, token):
    ps = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True, check=True).stdout
    assert token not in ps
    cmdline = pathlib.Path("/proc/%d/cmdline" % vllm_server.pid()).read_bytes().decode(errors="replace")
    assert token not in cmdline
    assert "sparkfleet/tiny-random-llama" in cmdline  # the plan's argv, checkpoint first
    for name in ("launch", "serve.env", "applied.sha256"):
        assert token not in (vllm_server.config_dir / name).read_text(), name
    assert token not in vllm_server.log_file.read_text(errors="replace")
    assert token not in vllm_server.first_run.stdout


def test_server_environment_is_clean(vllm_server):
    """The launcher starts from `env -i`: the controller's environment does not leak into the server."""
    environ = pathlib.Path("/proc/%d/environ" % vllm_server.pid()).read_bytes().split(b"\0")
    names = {item.split(b"=", 1)[0].decode() for item in environ if item}
    assert "HF_HUB_OFFLINE" in names and "HF_HOME" in names
    assert "HF_TOKEN" in names  # from the 0600 file, the only place it is written
    assert not {"ANSIBLE_CONFIG", "PYTEST_CURRENT_TEST"} & names, names


def test_status_playbook_reports_running_and_healthy(vllm_server):
    status = ansible_playbook("playbooks/status.yml", vllm_server.extra_vars, env=vllm_server.env)
    assert status.recap["changed"] == 0 and status.recap["failed"] == 0
    assert "health: healthy" in status.stdout, status.stdout[-3000:]
    assert "process: running (pid %d, " % vllm_server.pid() in status.stdout, status.stdout[-3000:]
    assert "configuration current" in status.stdout
    assert "models: tiny'" in status.stdout, status.stdout[-3000:]


def test_changed_plan_restarts_exactly_once(vllm_server):
    """max-num-seqs (the planner's default) -> 32 restarts the server once; the same plan again does not.

    The last test on the shared server (vllm_server is this module's): the fixture's playbooks/stop.yml stops it
    by its service name whatever plan it serves, so the original plan is not served again (a restart and a wait
    for health that nothing after this test reads, about 60 s)."""
    before_pid, before_starts = vllm_server.pid(), starts_logged(vllm_server)
    changed_vars = native_vars(stand_in_plan(max_num_seqs=32))
    first = ansible_playbook("playbooks/serve.yml", changed_vars, env=vllm_server.env)
    assert first.recap["failed"] == 0
    assert "sparkfleet.vllm.vllm_native : Start the server" in first.changed_tasks(), first.changed_tasks()
    restarted_pid = vllm_server.pid()
    assert restarted_pid != before_pid
    vllm_server.wait_healthy()
    second = ansible_playbook("playbooks/serve.yml", changed_vars, env=vllm_server.env)
    assert second.recap["changed"] == 0, second.changed_tasks()
    assert vllm_server.pid() == restarted_pid
    assert starts_logged(vllm_server) == before_starts + 1
    cmdline = pathlib.Path("/proc/%d/cmdline" % restarted_pid).read_bytes().split(b"\0")
    assert cmdline[cmdline.index(b"--max-num-seqs") + 1] == b"32"


def test_systemd_unit_renders_with_restart_policy_and_no_secrets(tmp_path):
    """Where systemd is PID 1 the role writes a unit; render it here into a scratch directory."""
    (tmp_path / "units").mkdir()  # /etc/systemd/system exists on a systemd host
    extra = native_vars(stand_in_plan(), vllm_native_service_manager="systemd",
                        vllm_native_service_name="vllm-serve-unit-test",
                        vllm_native_config_dir=str(tmp_path / "etc"), vllm_native_unit_dir=str(tmp_path / "units"),
                        vllm_native_log_file=str(tmp_path / "log/serve.log"))
    ansible_playbook("playbooks/serve.yml", extra, env=ansible_env(HF_TOKEN=DECOY_HF_TOKEN),
                     args=["--tags", "vllm_native_configure"])
    unit = (tmp_path / "units/vllm-serve-unit-test.service").read_text()
    assert "ExecStart=%s" % (tmp_path / "etc/launch") in unit
    assert "Restart=on-failure" in unit
    assert "StartLimitBurst=3" in unit and "StartLimitIntervalSec=600" in unit
    assert "Environment=" not in unit and FAKE_HF_TOKEN not in unit and DECOY_HF_TOKEN not in unit
    launcher = (tmp_path / "etc/launch").read_text()
    assert "tee -a" in launcher  # journal and file both get the log under systemd
    assert FAKE_HF_TOKEN in (tmp_path / "etc/secret.env").read_text()
    assert DECOY_HF_TOKEN not in (tmp_path / "etc/secret.env").read_text()
    assert not (tmp_path / "etc/control").exists()
    analyze = tool("systemd-analyze")
    require(analyze, "systemd-analyze (Debian's systemd package) to verify the rendered unit")
    proc = subprocess.run([analyze, "verify", "--man=no", str(tmp_path / "units/vllm-serve-unit-test.service")],
                          capture_output=True, text=True, check=False)
    problems = [line for line in (proc.stdout + proc.stderr).splitlines()
                if "vllm-serve-unit-test.service" in line and "Command" not in line
                and "executable" not in line.lower() and "not found" not in line.lower()]
    assert not problems, proc.stdout + proc.stderr


def test_role_refuses_a_plan_without_argv():
    plan = stand_in_plan()
    plan["argv"] = []
    failed = ansible_playbook("playbooks/serve.yml", native_vars(plan), check=False, args=["--tags", "vllm_native_run"])
    assert failed.returncode != 0
    assert "argv is a non-empty list" in failed.stdout
