"""Secrets canary and the native runtime end to end, on one deployment: plant recognisable HF_TOKEN and
VLLM_API_KEY values, deploy, grep everything, then run the operator's later plays against the same server.

Runs the real deploy, `ansible-playbook site.yml -i inventories/local -vvv`, once, with
ANSIBLE_DISPLAY_ARGS_TO_STDOUT=True (the strict setting: every task's arguments
are printed) and the jsonfile fact cache on. The key and the token are given the
way operators give them (the secrets contract, docs/security.md): only as the
variables vllm_api_key and vllm_hf_token in an Ansible Vault-encrypted vars file
(-e @canary-secrets.yml --vault-password-file; tests/canary.py), while the controller's environment holds
*different* values (decoys) for VLLM_API_KEY and HF_TOKEN. The key carries every
printable character the planner accepts in a key ($ quotes backslash # backquote;
the planner refuses whitespace), so it must survive the env-file round trip.
Then neither the real values nor the decoys may appear anywhere but the real
ones in the 0600 secret env file (and the server's own environment): not in the
playbook output, the plan JSON files, the results, the other rendered files, the
unit (and `systemctl show` where systemd runs the host), the server log, any
process's command line (`ps -eo args`) or the fact cache. The server must
enforce the vault's key: 401 without a key and with the decoy, 200 with it.

The same server is the native runtime's end-to-end proof (vllm_native under start-stop-daemon or systemd,
whichever is PID 1 here): the deploy started the plan's argv, the API answers, and the operator's later runs
with the same inventory, vault and decoys (playbooks/serve.yml again and in --check, playbooks/status.yml)
change nothing and keep the process; a changed plan restarts it exactly once, and playbooks/stop.yml stops it.
Those later runs' output is checked for the planted values too, and none of them writes where the canary
greps (the deploy's output, plan files and fact cache stay the deploy's). The restart is the module's last
test: it replaces the rendered files and the process that the earlier tests read.
The native role's rendering without a server (the systemd unit) stays in test_native_serve.py.

Stand-ins, named as such: profile `cpu` (vLLM's CPU build) and the local default's model `tiny-26b-a4b`
(a generated 2-layer random Gemma 4 MoE, served as `gemma-4-26b-a4b`; never downloaded, so HF_TOKEN is
planted but no download uses it and the plan's only secret is VLLM_API_KEY); port 18300 and service
vllm-serve-canary are this test's own.
The throughput gate runs with a short output and the inventory's own floor against
the stand-in's calibration (measured on this server in the same run), so it can fail.
"""
import hashlib
import json
import os
import pathlib
import shlex
import stat
import subprocess
import urllib.request

import pytest

from canary import Canary, command_lines, http_status, run_sampled
from conftest import HEALTH_TIMEOUT_S, REPO, PlaybookRun, ansible_env, require, run, tool, wait_for_health

PORT = 18300
BASE_URL = "http://127.0.0.1:%d" % PORT
CMDLINE_SAMPLE_S = 0.5
SERVICE = "vllm-serve-canary"
CONFIG_DIR = pathlib.Path("/etc/sparkfleet/%s" % SERVICE)
LOG_FILE = pathlib.Path("/var/log/sparkfleet/%s.log" % SERVICE)
PID_FILE = pathlib.Path("/run/%s.pid" % SERVICE)
UNIT_FILE = pathlib.Path("/etc/systemd/system/%s.service" % SERVICE)
# The planted values and their marks (tests/canary.py, shared with the compose and cluster canaries).
CANARY = Canary("native")
HF_MARK, KEY_MARK, HF_CANARY, KEY_CANARY = CANARY.hf_mark, CANARY.key_mark, CANARY.hf, CANARY.key
HF_DECOY, KEY_DECOY = CANARY.hf_decoy, CANARY.key_decoy
leaks = CANARY.leaks


@pytest.fixture(scope="module")
def canary_deploy(vllm_cpu_venv, tmp_path_factory):
    """The deploy, once for the module; playbooks/stop.yml stops its server after the module's last test."""
    require(tool("ansible-playbook"), "ansible-playbook (run `make venv`)")
    work = tmp_path_factory.mktemp("canary")
    extra = {
        "vllm_port": PORT, "vllm_native_service_name": SERVICE, "vllm_native_pid_file": str(PID_FILE),
        "plan_dir": str(work / "plans"), "vllm_results_dir": str(work / "results"),
        "vllm_bench_output_tokens": 128,
        # The documented bypass: this test is about where the secrets go, on this machine's own vLLM port. The gateway
        # a key turns on by default is proven by test_gateway_routes.py (nginx in a systemd container; this machine
        # runs no systemd, and the other lane's tests share its ports).
        "vllm_gateway": False,
        # The API then binds every address, which turns the firewall on by default: not on this machine, the CI
        # runner, whose own firewall is not this test's to change (the plan warns "FIREWALL OFF"). The firewall's
        # default is proven on the operator host and the simulated cluster.
        "vllm_firewall": False,
    }
    vault = CANARY.vault(work, tool("ansible-vault"))
    # The later runs' environment: the same decoys and strict argument display, without the deploy's fact cache.
    later_env = ansible_env(**CANARY.decoy_env(), ANSIBLE_DISPLAY_ARGS_TO_STDOUT="True")
    env = dict(later_env, ANSIBLE_CACHE_PLUGIN="ansible.builtin.jsonfile",
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(work / "facts"), ANSIBLE_GATHERING="smart")
    cmd = [tool("ansible-playbook"), str(REPO / "site.yml"), "-i", str(REPO / "inventories/local"), "-vvv",
           *vault, "-e", json.dumps(extra)]
    # While the deploy runs, every process's command line twice a second, straight from /proc (what ps shows).
    try:
        rc, stdout, stderr, ps_samples = run_sampled(cmd, work, command_lines, CMDLINE_SAMPLE_S, cwd=REPO, env=env)
        yield {"rc": rc, "stdout": stdout, "stderr": stderr, "work": work, "ps": ps_samples,
               "run": PlaybookRun(rc, stdout, stderr), "extra": extra, "vault": vault, "later_env": later_env}
    finally:
        pid = server_pid() if PID_FILE.exists() else None
        stop_extra = {"vllm_native_service_name": SERVICE}
        stopped = run([tool("ansible-playbook"), str(REPO / "playbooks/stop.yml"), "-i", str(REPO / "inventories/local"),
                       "-e", json.dumps(stop_extra)], env=ansible_env(), check=False, timeout=300)
        assert stopped.returncode == 0, stopped.stdout[-4000:]
        assert not PID_FILE.exists() and (pid is None or not pathlib.Path("/proc", str(pid)).exists()), \
            "playbooks/stop.yml left the server running"


def run_again(deploy, playbook, *args, **overrides):
    """``playbook`` as an operator runs it after the deploy: the same inventory, vault, variables (``overrides`` on top)
    and decoys in the environment. Its output may not carry a planted value either."""
    cmd = [tool("ansible-playbook"), str(REPO / playbook), "-i", str(REPO / "inventories/local"), *deploy["vault"],
           "-e", json.dumps(dict(deploy["extra"], **overrides)), *args]
    proc = run(cmd, env=deploy["later_env"], check=False, timeout=900)
    assert not leaks(proc.stdout + proc.stderr), "a planted value in the output of %s %s" % (playbook, " ".join(args))
    return PlaybookRun(proc.returncode, proc.stdout, proc.stderr)


def deployed_plan(deploy):
    return json.loads((deploy["work"] / "plans/localhost.json").read_text())


def server_pid():
    return int(PID_FILE.read_text().strip())


def server_cmdline(pid=None):
    return pathlib.Path("/proc/%d/cmdline" % (pid or server_pid())).read_bytes().split(b"\0")


def starts_logged():
    return LOG_FILE.read_text(errors="replace").count("=== ") if LOG_FILE.exists() else 0


def api(path, body=None, timeout=120):
    """The server's JSON answer to GET ``path`` (POST ``body`` when given), with the vault's key."""
    request = urllib.request.Request(BASE_URL + path, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + KEY_CANARY, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - local test server
        return response.status, json.loads(response.read().decode())


def files_under(*roots):
    for root in roots:
        root = pathlib.Path(root)
        if root.is_file():
            yield root
        elif root.is_dir():
            yield from (p for p in root.rglob("*") if p.is_file())


def test_deploy_succeeds(canary_deploy):
    assert canary_deploy["rc"] == 0, canary_deploy["stdout"][-6000:] + canary_deploy["stderr"][-3000:]
    assert canary_deploy["run"].recap["failed"] == 0


def test_deploy_started_the_plans_server(canary_deploy):
    os.kill(server_pid(), 0)  # the pid file names a live process
    cmdline = server_cmdline()
    assert b"vllm.entrypoints.openai.api_server" in cmdline
    # The plan's argv follows the entry point unchanged, checkpoint first.
    argv = [part.decode() for part in cmdline[cmdline.index(b"--model") + 1:] if part]
    assert argv == deployed_plan(canary_deploy)["argv"]


def test_verify_proved_the_key_is_enforced(canary_deploy):
    """verify.yml's smoke module ran its auth check with the resolved key: 401 without it and with a wrong one."""
    assert "smoke: auth passed" in canary_deploy["stdout"], canary_deploy["stdout"][-4000:]


def test_playbook_output_has_no_secret(canary_deploy):
    assert "TASK [" in canary_deploy["stdout"] and "ESTABLISH LOCAL CONNECTION" in canary_deploy["stdout"], \
        "not the -vvv output expected"
    assert not leaks(canary_deploy["stdout"]), "secret in stdout"
    assert not leaks(canary_deploy["stderr"]), "secret in stderr"
    # Nor a checksum of the 0600 secret file (stat's sha1 default, or the sha256 the native role's restart check
    # reads), from which a short key could be recovered by trying candidates.
    secret = (CONFIG_DIR / "secret.env").read_bytes()
    for digest in (hashlib.sha1(secret).hexdigest(), hashlib.sha256(secret).hexdigest()):  # noqa: S324 - stat's own
        assert digest not in canary_deploy["stdout"] + canary_deploy["stderr"], "the secret file's checksum is in the output"


def test_plans_and_results_have_no_secret(canary_deploy):
    work = canary_deploy["work"]
    searched = list(files_under(work / "plans", work / "results", REPO / "plans", REPO / "results"))
    assert any(p.parent == work / "plans" for p in searched), "no plan file was written"
    assert any(p.parent == work / "results" for p in searched), "verify wrote no results"
    found = {str(p): leaks(p.read_text(errors="replace")) for p in searched}
    assert not {k: v for k, v in found.items() if v}, found


def test_fact_cache_has_no_secret(canary_deploy):
    """Gathered facts include ansible_env, which on a local connection is the controller's own environment."""
    cached = list(files_under(canary_deploy["work"] / "facts"))
    assert cached, "the fact cache stayed empty"
    found = {}
    for path in cached:
        text = path.read_text(errors="replace")
        names = leaks(text)
        if names:
            where = [key for key in ("ansible_env", "ansible_facts") if key in text]
            found[str(path)] = "%s (the file holds %s)" % (names, where)
    assert not found, "secrets in the fact cache: %s; gather facts with gather_subset ['all', '!env'] " \
                      "(host.yml) and ['!all', 'min', 'hardware', '!env'] (preflight)" % found


def test_rendered_files_and_log_have_no_secret_outside_the_0600_file(canary_deploy):
    secret_file = CONFIG_DIR / "secret.env"
    others = [p for p in files_under(CONFIG_DIR, UNIT_FILE, LOG_FILE) if p != secret_file]
    assert {LOG_FILE, CONFIG_DIR / "serve.env", CONFIG_DIR / "launch", CONFIG_DIR / "applied.sha256"} <= set(others), others
    found = {str(p): leaks(p.read_text(errors="replace")) for p in others}
    assert not {k: v for k, v in found.items() if v}, found
    # The process definition: a systemd unit where systemd runs the host, else the launcher above under
    # start-stop-daemon. Either way it is checked; a unit written on a host without systemd is a defect too.
    if pathlib.Path("/run/systemd/system").is_dir():
        assert UNIT_FILE.exists(), "systemd runs this host but no unit %s was written" % UNIT_FILE
        assert not leaks(UNIT_FILE.read_text()), "secret in %s" % UNIT_FILE
        shown = subprocess.run(["systemctl", "show", SERVICE], capture_output=True, text=True, check=True).stdout
        assert not leaks(shown), "secret in systemctl show %s" % SERVICE
    else:
        assert not UNIT_FILE.exists(), "%s written on a host that systemd does not run" % UNIT_FILE
        # The launcher runs under start-stop-daemon: the role's control script finds the server running from the pid
        # file (status exits 0, 3 when not), and that pid is the launcher's exec of the server (its argv).
        control = CONFIG_DIR / "control"
        assert control.exists(), "no start-stop-daemon control script %s on a host that systemd does not run" % control
        status = subprocess.run([str(control), "status"], capture_output=True, text=True, check=False)
        assert status.returncode == 0, "%s status: exit %s, the server is not running under start-stop-daemon" % (
            control, status.returncode)
        argv = pathlib.Path("/proc/%s/cmdline" % PID_FILE.read_text().strip()).read_bytes().split(b"\0")
        assert b"--served-model-name" in argv, "%s names pid %s, not the server: %s" % (PID_FILE, PID_FILE.read_text(), argv)


def test_secret_file_is_0600_and_owned_by_root(canary_deploy):
    info = (CONFIG_DIR / "secret.env").stat()
    assert stat.S_IMODE(info.st_mode) == 0o600, oct(info.st_mode)
    assert info.st_uid == 0, info.st_uid
    text = (CONFIG_DIR / "secret.env").read_text()
    assert KEY_MARK in text, "the vault's API key is not in the secret env file"
    assert KEY_DECOY not in text and HF_DECOY not in text, "the environment's decoy won over the vault"
    # Read back exactly as the launcher reads it (bash, set -a; .): the value survives unchanged.
    script = "set -a; . %s; printf %%s \"$VLLM_API_KEY\"" % shlex.quote(str(CONFIG_DIR / "secret.env"))
    read_back = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"})
    assert read_back.stdout == KEY_CANARY


def test_no_command_line_carries_a_secret(canary_deploy):
    now = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True, check=False).stdout
    samples = canary_deploy["ps"] + [now]
    # The deploy lasts minutes: hundreds of samples, and the server's own argv is among them.
    assert len(samples) >= 20, len(samples)
    assert any("--served-model-name" in sample for sample in samples), "no sample saw the vLLM server's argv"
    bad = [line for sample in samples for line in sample.splitlines() if leaks(line)]
    assert not bad, bad


def test_server_enforces_the_api_key(canary_deploy):
    base = "http://127.0.0.1:%d" % PORT
    wait_for_health(base, PID_FILE, LOG_FILE, 120)
    assert http_status(base + "/v1/models") == 401
    assert http_status(base + "/v1/models", KEY_DECOY) == 401, "the server took the environment's decoy"
    assert http_status(base + "/v1/models", KEY_CANARY) == 200, "the vault's key did not survive the round trip"
    # vLLM's key guards /v1 only (docs/security.md): /health answers without it.
    assert http_status(base + "/health") == 200


def test_models_lists_the_served_name(canary_deploy):
    status, body = api("/v1/models")
    assert status == 200
    ids = [entry["id"] for entry in body["data"]]
    assert deployed_plan(canary_deploy)["served_name"] in ids, ids


def test_chat_completion_returns_text(canary_deploy):
    status, body = api("/v1/chat/completions", {
        "model": deployed_plan(canary_deploy)["served_name"], "max_tokens": 8, "temperature": 0,
        "messages": [{"role": "user", "content": "Say hello."}]})
    assert status == 200
    choice = body["choices"][0]
    # Random weights: the text is noise, but it is text, produced through the chat template.
    assert isinstance(choice["message"]["content"], str) and choice["message"]["content"], body
    assert body["usage"]["completion_tokens"] > 0, body


def test_server_environment_is_clean(canary_deploy):
    """The launcher starts from `env -i`: the controller's environment (its decoys included) does not leak into the
    server, whose one secret comes from the 0600 file."""
    environ = dict(item.split(b"=", 1) for item in pathlib.Path("/proc/%d/environ" % server_pid()).read_bytes().split(b"\0")
                   if b"=" in item)
    names = {name.decode() for name in environ}
    assert "HF_HUB_OFFLINE" in names and "HF_HOME" in names
    assert environ[b"VLLM_API_KEY"].decode() == KEY_CANARY  # from the 0600 file, the only place it is written
    assert "HF_TOKEN" not in names  # not in the plan (no download): the environment's decoy stays out
    assert not {"ANSIBLE_CONFIG", "PYTEST_CURRENT_TEST"} & names, names


def test_second_run_changes_nothing_and_keeps_the_server(canary_deploy):
    pid = server_pid()
    again = run_again(canary_deploy, "playbooks/serve.yml")
    assert again.recap["failed"] == 0, again.stdout[-4000:]
    assert again.recap["changed"] == 0, "changed on a second run: %s" % again.changed_tasks()
    assert server_pid() == pid


def test_check_mode_reports_no_change(canary_deploy):
    checked = run_again(canary_deploy, "playbooks/serve.yml", "--check")
    assert checked.recap["failed"] == 0, checked.stdout[-4000:]
    assert checked.recap["changed"] == 0, checked.changed_tasks()


def test_status_playbook_reports_running_and_healthy(canary_deploy):
    """status.yml asks /v1/models with the vault's key (the server refuses any other)."""
    status = run_again(canary_deploy, "playbooks/status.yml")
    assert status.recap["changed"] == 0 and status.recap["failed"] == 0, status.stdout[-3000:]
    assert "health: healthy" in status.stdout, status.stdout[-3000:]
    assert "process: running (pid %d, " % server_pid() in status.stdout, status.stdout[-3000:]
    assert "configuration current" in status.stdout
    assert "models: %s'" % deployed_plan(canary_deploy)["served_name"] in status.stdout, status.stdout[-3000:]


def test_changed_plan_restarts_exactly_once(canary_deploy):
    """max-num-seqs (the planner's default) -> 32 restarts the server once; the same plan again does not.

    The module's last test: it replaces the rendered files and the process the tests above read, and the fixture's
    playbooks/stop.yml stops the server by its service name whatever plan it serves, so the deployed plan is not
    served again (a restart and a wait for health that nothing after this test reads). Its plan files go to a
    directory of their own, so the deploy's stay what the canary grepped."""
    before_pid, before_starts = server_pid(), starts_logged()
    changed = {"vllm_max_num_seqs": 32, "plan_dir": str(canary_deploy["work"] / "plans-max-num-seqs-32")}
    first = run_again(canary_deploy, "playbooks/serve.yml", **changed)
    assert first.recap["failed"] == 0, first.stdout[-4000:]
    # The task names carry their arguments here (ANSIBLE_DISPLAY_ARGS_TO_STDOUT).
    assert any(name.startswith("sparkfleet.vllm.vllm_native : Start the server") for name in first.changed_tasks()), \
        first.changed_tasks()
    restarted_pid = server_pid()
    assert restarted_pid != before_pid
    wait_for_health(BASE_URL, PID_FILE, LOG_FILE, HEALTH_TIMEOUT_S)
    second = run_again(canary_deploy, "playbooks/serve.yml", **changed)
    assert second.recap["changed"] == 0, second.changed_tasks()
    assert server_pid() == restarted_pid
    assert starts_logged() == before_starts + 1
    cmdline = server_cmdline(restarted_pid)
    assert cmdline[cmdline.index(b"--max-num-seqs") + 1] == b"32"
