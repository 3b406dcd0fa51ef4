"""Secrets canary: plant recognisable HF_TOKEN and VLLM_API_KEY values, deploy, and grep everything.

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

Stand-ins, named as such: profile `cpu` (vLLM's CPU build) and model `tiny`
(a generated random Llama, never downloaded, so HF_TOKEN is planted but no
download uses it); port 18300 and service vllm-serve-canary are this test's own.
The throughput gate runs with a short output and the inventory's own floor against
the stand-in's calibration (measured on this server in the same run), so it can fail.
"""
import json
import pathlib
import shlex
import stat
import subprocess

import pytest

from canary import Canary, command_lines, http_status, run_sampled
from conftest import REPO, ansible_env, require, run, tool, wait_for_health

PORT = 18300
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
    }
    vault = CANARY.vault(work, tool("ansible-vault"))
    env = ansible_env(**CANARY.decoy_env(), ANSIBLE_DISPLAY_ARGS_TO_STDOUT="True",
                      ANSIBLE_CACHE_PLUGIN="ansible.builtin.jsonfile", ANSIBLE_CACHE_PLUGIN_CONNECTION=str(work / "facts"),
                      ANSIBLE_GATHERING="smart")
    cmd = [tool("ansible-playbook"), str(REPO / "site.yml"), "-i", str(REPO / "inventories/local"), "-vvv",
           *vault, "-e", json.dumps(extra)]
    # While the deploy runs, every process's command line twice a second, straight from /proc (what ps shows).
    try:
        rc, stdout, stderr, ps_samples = run_sampled(cmd, work, command_lines, CMDLINE_SAMPLE_S, cwd=REPO, env=env)
        yield {"rc": rc, "stdout": stdout, "stderr": stderr, "work": work, "ps": ps_samples}
    finally:
        stop_extra = {"vllm_native_service_name": SERVICE}
        run([tool("ansible-playbook"), str(REPO / "playbooks/stop.yml"), "-i", str(REPO / "inventories/local"),
             "-e", json.dumps(stop_extra)], env=ansible_env(), check=False, timeout=300)


def files_under(*roots):
    for root in roots:
        root = pathlib.Path(root)
        if root.is_file():
            yield root
        elif root.is_dir():
            yield from (p for p in root.rglob("*") if p.is_file())


def test_deploy_succeeds(canary_deploy):
    assert canary_deploy["rc"] == 0, canary_deploy["stdout"][-6000:] + canary_deploy["stderr"][-3000:]


def test_verify_proved_the_key_is_enforced(canary_deploy):
    """verify.yml's smoke module ran its auth check with the resolved key: 401 without it and with a wrong one."""
    assert "smoke: auth passed" in canary_deploy["stdout"], canary_deploy["stdout"][-4000:]


def test_playbook_output_has_no_secret(canary_deploy):
    assert "TASK [" in canary_deploy["stdout"] and "ESTABLISH LOCAL CONNECTION" in canary_deploy["stdout"], \
        "not the -vvv output expected"
    assert not leaks(canary_deploy["stdout"]), "secret in stdout"
    assert not leaks(canary_deploy["stderr"]), "secret in stderr"


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
    assert LOG_FILE in others and (CONFIG_DIR / "serve.env") in others and (CONFIG_DIR / "launch") in others, others
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
    now = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=False).stdout
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
