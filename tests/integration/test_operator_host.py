"""site.yml on a single-node host reached the way operators reach theirs: SSH as an ordinary user, sudo with a password.

tests/harness/operator-host-up.sh makes the host: a systemd container with a login account
`operator` (key-based SSH, no root login over SSH) whose sudo asks for a password. The password
exists on the controller only inside an Ansible Vault file; the playbooks get it as
ansible_become_password (tests/integration/operator_host/group_vars/vllm_single.yml), the way an
operator keeps theirs (docs/security.md, "Privilege escalation").

Stand-ins, named as such:
  * a Debian bookworm container (the locally built systemd image, systemd as PID 1) for Ubuntu /
    DGX OS on a DGX Spark or an RTX workstation;
  * vLLM's CPU build serving the tiny random Llama (`tiny`) for Gemma 4 on a Blackwell GPU; the
    host-built .venv-vllm and its interpreter are bind-mounted read-only at the same paths (as the
    simulated cluster does), so vllm_native_manage_venv is false and the container's /root is made
    traversable for the `vllm` service account (a real host has a role-built venv under /opt/vllm/venv);
  * the image has no C++ compiler: TORCHDYNAMO_DISABLE=1 (the cpu plan runs --enforce-eager, as everywhere).

Checked: the SSH login is `operator`, and its sudo refuses to run without the password; without the
vault the first play that changes the host stops at privilege escalation, having changed nothing;
a read-only play (status) runs without it; with the vault, site.yml (plan, host set-up, weights,
the native runtime under the host's systemd, health, smoke and the throughput gate) passes; the API
answers from the controller; the server runs as the `vllm` account, its secret env file is root's
0600 and the unit is root's; vLLM's own cache directory is the account's, and vLLM saved its model inspection there.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from conftest import REPO, ansible_env, require, run, tool
from sim_host import LOGIN, recap, ssh_as, vault_args

INVENTORY = REPO / "tests/integration/operator_host"
STATE = REPO / "tests/output/operator"
# The operator host's container (tests/harness/operator-host-up.sh, OP_NAME), for the test's own look as root.
CONTAINER = "sparkfleet-op-1"
ADDR = "172.29.48.11"
VAULT = vault_args(STATE)
TIMINGS = {}


def playbook(name, *args, check=True, timeout=1200):
    started = time.monotonic()
    proc = run([tool("ansible-playbook"), "-i", str(INVENTORY), str(REPO / name), *args], env=ansible_env(),
               timeout=timeout, check=check)
    TIMINGS.setdefault(name + (" (vault)" if "--vault-password-file" in args else ""), []).append(
        round(time.monotonic() - started, 1))
    return proc


def ssh(command, timeout=60):
    return ssh_as(LOGIN, ADDR, STATE / "id_ed25519", command, timeout)


@pytest.fixture(scope="module")
def operator_host(vllm_cpu_venv):
    require(shutil.which("docker") is not None, "docker client (tests/harness/docker-up.sh installs the engine)")
    require(tool("ansible-playbook"), "ansible-playbook (run `make venv`)")
    started = time.monotonic()
    run(["bash", str(REPO / "tests/harness/operator-host-up.sh")], timeout=1800)
    TIMINGS["operator-host-up.sh"] = [round(time.monotonic() - started, 1)]
    yield
    STATE.mkdir(parents=True, exist_ok=True)
    (STATE / "timings.json").write_text(json.dumps(TIMINGS, indent=1) + "\n")
    sys.stderr.write("\noperator host timings: %s\n" % json.dumps(TIMINGS))
    if os.environ.get("OP_KEEP") != "1":
        run(["bash", str(REPO / "tests/harness/operator-host-down.sh")], check=False)


def test_site_over_ssh_as_a_sudo_user(operator_host):
    # The login is an ordinary account, and its sudo wants a password.
    who = ssh("id -un; sudo -n true 2>&1; echo rc=$?")
    assert who.stdout.splitlines()[0] == LOGIN, who.stdout + who.stderr
    assert "rc=1" in who.stdout and "password" in who.stdout, "sudo without a password must fail:\n" + who.stdout

    # Without the vault: the first play that changes the host stops at privilege escalation, nothing changed.
    refused = playbook("playbooks/serve.yml", check=False, timeout=300)
    text = refused.stdout + refused.stderr
    assert refused.returncode != 0, text[-3000:]
    assert "missing sudo password" in text.lower(), text[-3000:]
    changed = re.findall(r"^TASK \[([^\]]*)\][^\n]*\n(?:(?!TASK \[).*\n)*?changed: ", refused.stdout, re.M)
    # Only the plan, which the controller writes for itself; nothing on the host.
    assert all("on the controller" in task for task in changed), changed

    # With the vaulted become password: the whole deploy, as the operator does it.
    site = playbook("site.yml", *VAULT)
    assert recap(site.stdout)["op-1"]["failed"] == 0, site.stdout[-4000:]

    # A read-only play needs no sudo (no vault given).
    status = playbook("playbooks/status.yml", timeout=300)
    assert "health: healthy" in status.stdout, status.stdout[-3000:]

    body = {"model": "tiny", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 8}
    request = urllib.request.Request("http://%s:8000/v1/chat/completions" % ADDR, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - test host on a private bridge
        assert response.status == 200 and json.load(response)["choices"], "no completion"

    # Who owns what on the host: the server as `vllm`, the unit and the secret env file root's.
    facts = ssh("ps -o user= -p $(systemctl show -p MainPID --value vllm-serve); "
                "sudo -n true 2>/dev/null; stat -c '%U %a %n' /etc/systemd/system/vllm-serve.service; "
                "ls -l /etc/sparkfleet/vllm-serve/ | grep -c secret.env")
    lines = facts.stdout.split("\n")
    assert lines[0].strip() == "vllm", facts.stdout
    assert lines[1].startswith("root 644 "), facts.stdout
    secret = subprocess.run(["docker", "exec", CONTAINER, "stat", "-c", "%U %a", "/etc/sparkfleet/vllm-serve/secret.env"],
                            capture_output=True, text=True, check=False)
    assert secret.stdout.strip() == "root 600", secret.stdout + secret.stderr

    # The firewall is on without a word in the inventory: the API binds every address (vllm_open_api=all), so the plan
    # turns it on, and site.yml loaded the table (nftables from Debian's mirror) with the API port and the boot include.
    assert "firewall: on (vllm_firewall unset): the API binds 0.0.0.0" in " ".join(site.stdout.split()), site.stdout[-3000:]
    table = subprocess.run(["docker", "exec", CONTAINER, "bash", "-c",
                            "nft list table inet sparkfleet; systemctl is-enabled nftables"],
                           capture_output=True, text=True, check=False)
    assert re.search(r'comment "sparkfleet\.vllm ruleset [0-9a-f]{16}"', table.stdout), table.stdout + table.stderr
    assert "tcp dport 8000 accept" in table.stdout and "6379" not in table.stdout, table.stdout
    assert table.stdout.split()[-1] == "enabled", table.stdout

    # vLLM's own cache is the service account's (vllm_native_cache_root): vLLM saved there what it learned about the
    # model at this first start, so the next start does not inspect the model again in a separate interpreter (and
    # on a GPU, keeps torch.compile's artifacts). Under the root-owned ~/.cache the weights role makes, vLLM logged
    # "Error saving model info cache" (PermissionError) and saved nothing.
    cache = subprocess.run(["docker", "exec", CONTAINER, "bash", "-c",
                            "stat -c '%U %a' /var/lib/vllm/.cache/vllm; ls /var/lib/vllm/.cache/vllm/modelinfos; "
                            "journalctl -u vllm-serve --no-pager | grep -c 'Error saving model info cache'"],
                           capture_output=True, text=True, check=False)
    lines = cache.stdout.splitlines()
    assert lines and lines[0] == "vllm 750", cache.stdout + cache.stderr
    assert any(name.endswith("LlamaForCausalLM.json") for name in lines[1:-1]), cache.stdout + cache.stderr
    assert lines[-1] == "0", cache.stdout


def unit_state(*props):
    out = subprocess.run(["docker", "exec", CONTAINER, "systemctl", "show", "vllm-serve", "-p", ",".join(props)],
                         capture_output=True, text=True, check=False).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def test_the_memory_guard_stops_an_overrunning_server_and_a_fixed_rerun_serves(operator_host):
    """The memory guard on a real systemd host: the operator's vllm_native_memory_max (1 GiB, below what the stand-in
    takes while it loads) becomes the unit's MemoryMax, a real cgroup limit; the kernel's OOM killer stops the server
    there, the unit's ExecStopPost records it from the cgroup's own oom_kill counter, and verify's wait_healthy names
    "the memory guard" within seconds of the kill. systemd restarts it up to the start limit and leaves it failed;
    the host answers SSH throughout. Then the day-two fix: serve.yml without the ceiling starts it again (the role
    forgets the start limit's failed state) and it serves.

    Stand-in, named as such: this machine's kernel runs cgroup v1 (the container sees the host's hierarchy), where
    systemd ends such a unit with result 'signal' (9/KILL) and reads no OOM event; on a DGX Spark (cgroup v2) systemd
    also says Result=oom-kill. The recorder reads memory.oom_control here and memory.events there."""
    guard = ["-e", "vllm_native_memory_max=1G", "-e", "vllm_native_restart_sec=2"]
    answers, stop = [], threading.Event()

    def watch_ssh():
        while not stop.is_set():
            began = time.monotonic()
            ok = ssh("true", timeout=30).returncode == 0
            answers.append((ok, round(time.monotonic() - began, 2)))
            stop.wait(2)

    watcher = threading.Thread(target=watch_ssh, daemon=True)
    watcher.start()
    try:
        serve = playbook("playbooks/serve.yml", *VAULT, *guard)
        assert recap(serve.stdout)["op-1"]["failed"] == 0, serve.stdout[-3000:]
        unit = subprocess.run(["docker", "exec", CONTAINER, "systemctl", "cat", "vllm-serve"],
                              capture_output=True, text=True, check=False).stdout
        assert "MemoryMax=1G" in unit and "MemorySwapMax=0" in unit, unit
        verify_began = time.time()
        verify = playbook("playbooks/verify.yml", *VAULT, *guard, check=False, timeout=600)
        verify_ended = time.time()
        words = " ".join(verify.stdout.split())
        assert verify.returncode != 0 and "Stopped by the memory guard at the server's memory ceiling" in words, \
            verify.stdout[-3000:]
        assert "1073741824 bytes, MemoryMax of vllm-serve.service" in words, verify.stdout[-3000:]
        killed = wait_for_failed_unit()
        journal = subprocess.run(["docker", "exec", CONTAINER, "journalctl", "-u", "vllm-serve", "--no-pager",
                                  "-o", "short-unix", "--since", "@%d" % int(verify_began - 120)],
                                 capture_output=True, text=True, check=False).stdout
        records = [(float(line.split()[0]), line) for line in journal.splitlines() if "sparkfleet memory guard: " in line]
        assert records and all("at its memory ceiling of 1073741824 bytes (memory." in line for _t, line in records), \
            journal[-3000:]
        # How fast it was named: from the first record the wait could see (after the wait began) to the end of verify.
        seen = [t for t, _line in records if t >= verify_began]
        named_s = round(verify_ended - seen[0], 1) if seen else round(verify_ended - verify_began, 1)
    finally:
        stop.set()
        watcher.join(60)
    assert killed["ActiveState"] == "failed" and int(killed["NRestarts"]) >= 2, killed
    assert answers and all(ok for ok, _s in answers), answers
    assert named_s <= 20, "the guard was named %.1f s after the kill it recorded" % named_s
    GUARD.update(named_after_kill_s=named_s, verify_s=round(verify_ended - verify_began, 1), ssh_answers=len(answers),
                 ssh_slowest_s=max(s for _ok, s in answers), restarts=int(killed["NRestarts"]), oom_records=len(records),
                 final=killed)
    sys.stderr.write("\nmemory guard: %s\n" % json.dumps(GUARD))

    # The fix, on day two: the same play without the ceiling starts the failed unit again.
    fixed = playbook("playbooks/serve.yml", *VAULT)
    assert recap(fixed.stdout)["op-1"]["failed"] == 0, fixed.stdout[-3000:]
    # Ready again (wait_healthy and the smoke checks; the throughput gate is site.yml's, proven above).
    status = playbook("playbooks/verify.yml", *VAULT, "-e", "vllm_verify_throughput=false", timeout=600)
    assert recap(status.stdout)["op-1"]["failed"] == 0, status.stdout[-3000:]
    unit = subprocess.run(["docker", "exec", CONTAINER, "systemctl", "cat", "vllm-serve"],
                          capture_output=True, text=True, check=False).stdout
    assert not [line for line in unit.splitlines() if line.startswith("MemoryMax=")], unit


GUARD = {}


def wait_for_failed_unit(timeout=300):
    """The unit's state once systemd gave up restarting it (ActiveState failed), or as it is at the timeout."""
    deadline = time.monotonic() + timeout
    state = unit_state("ActiveState", "SubState", "Result", "NRestarts")
    while state.get("ActiveState") != "failed" and time.monotonic() < deadline:
        time.sleep(2)
        state = unit_state("ActiveState", "SubState", "Result", "NRestarts")
    return state
