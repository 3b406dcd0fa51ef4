"""Faults on a single node, measured: what detects each, how fast, how it recovers, what is lost.

Stand-ins, named as such: vLLM's CPU build (.venv-vllm) serving the tiny
random Llama-shaped model (sparkfleet/tiny-random-llama as `tiny`) in place of
Gemma 4 on a GPU, run by the vllm_native role. Here systemd is not PID 1, so the
server runs under start-stop-daemon, which has NO automatic restart: a dead
server is recovered by re-running playbooks/serve.yml (under systemd the unit's
Restart=on-failure does it). This module's server has its own port and service
name (18200, vllm-serve-faults) because the faults kill it.

Each test appends its row to results/faults-single.json (written and printed at
the end of the module); docs/reliability.md quotes those figures.
"""
import datetime
import hashlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

from conftest import (
    LOCAL_INVENTORY,
    REPO,
    VLLM_VENV,
    ansible_env,
    ansible_playbook,
    http_get,
    native_vars,
    require,
    stand_in_plan,
    tool,
    wait_for_health,
)

PORT = 18200
SERVICE = "vllm-serve-faults"
PID_FILE = pathlib.Path("/run/%s.pid" % SERVICE)
LOG_FILE = pathlib.Path("/var/log/sparkfleet/%s.log" % SERVICE)
CONFIG_DIR = pathlib.Path("/etc/sparkfleet/%s" % SERVICE)
HF_HOME = pathlib.Path("/var/lib/vllm/.cache/huggingface")
WEIGHTS = HF_HOME / "hub" / "models--sparkfleet--tiny-random-llama"
VLLM_CACHE = pathlib.Path("/var/lib/vllm/.cache/vllm")
BASE_URL = "http://127.0.0.1:%d" % PORT
ROWS = []
# verify.yml's wait timeout in the fault tests, and the bound on "fails fast": a quarter of it. The whole
# verify.yml run took 14-16 s on a loaded 2-core machine; a wait_healthy that stopped noticing a dead process
# would run into the timeout, so the bound can fail without depending on this machine's speed.
WAIT_TIMEOUT_S = 240
FAIL_FAST_S = WAIT_TIMEOUT_S / 4


def extra_vars(max_num_seqs=64, **more):
    # verify.yml reads the pid file from vllm_native_pid_file (default /run/vllm-serve.pid), not from the service name.
    return native_vars(stand_in_plan(port=PORT, max_num_seqs=max_num_seqs), vllm_native_service_name=SERVICE,
                       vllm_native_pid_file=str(PID_FILE), **more)


def record(**row):
    ROWS.append(row)
    sys.stderr.write("\nfault: %s\n" % json.dumps(row))


def hashes(root):
    root = pathlib.Path(root)
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def data_state():
    """Weights, vLLM's caches and the rendered env files: what a fault must not lose."""
    return {"weights": hashes(WEIGHTS), "caches": sorted(hashes(VLLM_CACHE)), "env": hashes(CONFIG_DIR)}


def lost(before, after):
    """What disappeared or changed (caches may grow; weights and env files must be identical)."""
    out = []
    if before["weights"] != after["weights"]:
        out.append("weights")
    if set(before["caches"]) - set(after["caches"]):
        out.append("caches")
    env_before = {k: v for k, v in before["env"].items() if k != "applied.sha256"}
    env_after = {k: v for k, v in after["env"].items() if k != "applied.sha256"}
    if env_before != env_after:
        out.append("env files")
    return out


def server_pid():
    return int(PID_FILE.read_text().strip())


def kill_server(pid):
    """SIGKILL the whole server: the API process and its engine and worker processes (its session).

    start-stop-daemon --background forks after setsid, so the session id is NOT the pid in the pid file;
    killing only that pid leaves VLLM::EngineCore and VLLM::Worker orphaned, holding their memory.
    """
    sid = os.getsid(pid)
    os.kill(pid, signal.SIGKILL)
    subprocess.run(["pkill", "-KILL", "-s", str(sid)], check=False)
    deadline = time.monotonic() + 10
    while subprocess.run(["pgrep", "-s", str(sid)], capture_output=True, check=False).returncode == 0 and time.monotonic() < deadline:
        time.sleep(0.2)


def serve(max_num_seqs=64):
    return ansible_playbook("playbooks/serve.yml", extra_vars(max_num_seqs), env=ansible_env(HF_TOKEN="hf_faults_standin"))


def serve_and_wait(max_num_seqs=64):
    started = time.monotonic()
    run = serve(max_num_seqs)
    wait_for_health(BASE_URL, PID_FILE, LOG_FILE, 600)
    return run, time.monotonic() - started


@pytest.fixture(scope="module")
def faults_server(vllm_cpu_venv):
    require(tool("ansible-playbook"), "ansible-playbook (run `make venv`)")
    # Not waited for: the module's first test, test_killed_while_loading, kills this very start while it loads and
    # waits for the recovery start instead (one server start fewer than starting, waiting and starting again).
    serve()
    yield
    ansible_playbook("playbooks/stop.yml", extra_vars(), check=False)
    results = REPO / "results"
    results.mkdir(exist_ok=True)
    document = {"date": datetime.date.today().isoformat(), "machine": os.uname().nodename,
                "stand_in": "vLLM CPU build + tiny random Llama (sparkfleet/tiny-random-llama), start-stop-daemon",
                "faults": ROWS}
    (results / "faults-single.json").write_text(json.dumps(document, indent=2) + "\n")
    sys.stderr.write("\nresults/faults-single.json:\n%s\n" % json.dumps(document, indent=2))


def test_killed_while_loading(faults_server):
    if http_get_or_none(BASE_URL + "/health") == 200:  # run on its own after a test that left the server healthy
        kill_server(server_pid())
        serve()
    before = data_state()
    pid = server_pid()
    time.sleep(3)  # the CPU build is importing torch and loading the weights now
    assert http_get_or_none(BASE_URL + "/health") != 200, "already healthy: not a kill while loading"
    kill_server(pid)
    killed = time.monotonic()
    verify = ansible_playbook("playbooks/verify.yml", extra_vars(vllm_verify_throughput=False,
                                                                 vllm_wait_timeout=WAIT_TIMEOUT_S), check=False)
    detect_s = time.monotonic() - killed
    text = verify.stdout + verify.stderr
    assert verify.returncode != 0, text[-3000:]
    assert "exited" in text, text[-3000:]
    assert detect_s < FAIL_FAST_S, "wait_healthy took %.1f s to notice the dead server" % detect_s
    started = time.monotonic()
    serve_and_wait()
    recover_s = time.monotonic() - started
    gone = lost(before, data_state())
    assert not gone, "lost across the fault: %s" % gone
    record(fault="server process killed while loading", detected_by="wait_healthy (process from pidfile has exited)",
           detect_s=round(detect_s, 1), recovery="re-run playbooks/serve.yml", recover_s=round(recover_s, 1),
           data_lost=gone or "none")


def http_get_or_none(url):
    try:
        return http_get(url, timeout=2)[0]
    except OSError:
        return None


def test_killed_while_serving(faults_server):
    wait_for_health(BASE_URL, PID_FILE, LOG_FILE, 600)  # the recovery start of test_killed_while_loading
    before = data_state()
    pid = server_pid()
    assert http_get(BASE_URL + "/health")[0] == 200
    killed = time.monotonic()
    kill_server(pid)
    status = ansible_playbook("playbooks/status.yml", extra_vars())
    detect_s = time.monotonic() - killed
    assert "process: not running" in status.stdout, status.stdout[-3000:]
    assert status.recap["changed"] == 0
    # wait_healthy (verify.yml) on the dead server: it must fail fast, naming the exit.
    started = time.monotonic()
    verify = ansible_playbook("playbooks/verify.yml", extra_vars(vllm_verify_throughput=False,
                                                                 vllm_wait_timeout=WAIT_TIMEOUT_S), check=False)
    verify_s = time.monotonic() - started
    assert verify.returncode != 0 and "not running" in verify.stdout, verify.stdout[-3000:]
    assert verify_s < FAIL_FAST_S, "verify.yml took %.1f s to fail on a dead server" % verify_s
    started = time.monotonic()
    rerun, _seconds = serve_and_wait()
    recover_s = time.monotonic() - started
    assert any("Start the server" in name for name in rerun.changed_tasks()), rerun.changed_tasks()
    assert server_pid() != pid
    gone = lost(before, data_state())
    assert not gone, "lost across the fault: %s" % gone
    record(fault="server process killed while serving (SIGKILL)", detected_by="status.yml (process: not running); "
           "wait_healthy in verify.yml (the server is not running)", detect_s=round(detect_s, 1),
           wait_healthy_fail_s=round(verify_s, 1), recovery="re-run playbooks/serve.yml (start-stop-daemon does not restart)",
           recover_s=round(recover_s, 1), data_lost=gone or "none")


def test_play_interrupted_midway(faults_server):
    """SIGKILL of ansible-playbook mid-run stands in for a dropped SSH connection: the re-run finishes the rest."""
    before = data_state()
    old_pid = server_pid()
    cmd = [tool("ansible-playbook"), "-i", str(LOCAL_INVENTORY), str(REPO / "playbooks/serve.yml"),
           "-e", json.dumps(extra_vars(max_num_seqs=32))]
    proc = subprocess.Popen(cmd, cwd=REPO, env=ansible_env(HF_TOKEN="hf_faults_standin"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines, launcher_seen = [], False
    for line in proc.stdout:
        lines.append(line)
        if "Render the launcher]" in line:  # the task itself, not the include "Render the launcher, env files and unit"
            launcher_seen = True
        elif launcher_seen and line.startswith("TASK ["):
            os.killpg(proc.pid, signal.SIGKILL)  # our own ansible-playbook's process group
            break
    proc.wait(timeout=60)
    first = "".join(lines)
    assert launcher_seen and proc.returncode == -signal.SIGKILL, first[-3000:]
    assert server_pid() == old_pid, "the interrupted run already restarted the server"
    started = time.monotonic()
    rerun, _seconds = serve_and_wait(max_num_seqs=32)
    recover_s = time.monotonic() - started
    changed = rerun.changed_tasks()
    assert not any("Render the launcher" in name for name in changed), changed  # done before the interruption
    assert any("Start the server" in name for name in changed), changed  # the restart the interruption cut off
    cmdline = pathlib.Path("/proc/%d/cmdline" % server_pid()).read_bytes().split(b"\0")
    assert cmdline[cmdline.index(b"--max-num-seqs") + 1] == b"32"
    again = serve(max_num_seqs=32)
    assert again.recap["changed"] == 0, again.changed_tasks()
    after = data_state()
    gone = [k for k in lost(before, after) if k != "env files"]  # the launcher changed on purpose (new max-num-seqs)
    assert not gone, gone
    assert after["env"].get("serve.env") == before["env"].get("serve.env")
    assert after["env"].get("secret.env") == before["env"].get("secret.env")
    record(fault="play interrupted mid-run (SIGKILL of ansible-playbook, standing in for a dropped SSH connection)",
           detected_by="ansible-playbook exits (killed); the applied-configuration hash remembers the pending restart",
           detect_s=None, recovery="re-run playbooks/serve.yml: changed only %s" % changed,
           recover_s=round(recover_s, 1), data_lost=gone or "none")
    # The server stays on max-num-seqs 32: the tests after this one work on their own weights caches and never talk
    # to it, and the module's teardown stops it by its service name (a restart back to 64 cost ~35 s for nothing).


def weights_play(hf_home, check=True):
    return ansible_playbook("playbooks/serve.yml", extra_vars(weights_hf_home=str(hf_home)), check=check,
                            args=["--tags", "weights_preflight,weights_install"])


def snapshot_integrity(hf_home):
    """Problems of the generated snapshot: refs/main, every link resolving to a blob whose sha256 is its name."""
    repo = pathlib.Path(hf_home) / "hub" / "models--sparkfleet--tiny-random-llama"
    ref = repo / "refs" / "main"
    if not ref.exists():
        return ["refs/main missing"]
    snapshot = repo / "snapshots" / ref.read_text().strip()
    problems = []
    files = sorted(snapshot.rglob("*"))
    if not any(p.name == "model.safetensors" for p in files):
        problems.append("model.safetensors missing")
    for link in files:
        if link.is_dir():
            continue
        blob = link.resolve()
        if not blob.exists():
            problems.append("%s dangles" % link.name)
        elif hashlib.sha256(blob.read_bytes()).hexdigest() != blob.name:
            problems.append("%s -> blob %s is corrupt (%d bytes)" % (link.name, blob.name[:12], blob.stat().st_size))
    return problems


def leftovers(hf_home):
    repo = pathlib.Path(hf_home) / "hub" / "models--sparkfleet--tiny-random-llama"
    return sorted(p.name for p in repo.glob(".*")) if repo.exists() else []


def test_weight_generation_interrupted(faults_server, tmp_path):
    """The stand-in model's generator killed mid-write; the re-run must leave a complete, valid snapshot."""
    require((VLLM_VENV / "bin/python").exists(), "vLLM CPU build in .venv-vllm")
    hf_home = tmp_path / "hf"
    cmd = [tool("ansible-playbook"), "-i", str(LOCAL_INVENTORY), str(REPO / "playbooks/serve.yml"),
           "-e", json.dumps(extra_vars(weights_hf_home=str(hf_home))), "--tags", "weights_preflight,weights_install"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    repo = hf_home / "hub" / "models--sparkfleet--tiny-random-llama"
    victim, deadline = None, time.monotonic() + 300
    while victim is None and time.monotonic() < deadline and proc.poll() is None:
        staged = [p for p in repo.glob(".staging-*/*") if p.is_file()] if repo.exists() else []
        if staged:
            victim = generator_pid(hf_home)
            if victim:
                os.kill(victim, signal.SIGKILL)
                break
        time.sleep(0.05)
    killed = time.monotonic()
    output = proc.communicate(timeout=120)[0]
    detect_s = time.monotonic() - killed
    assert victim, "never caught the generator mid-write:\n" + output[-3000:]
    assert proc.returncode != 0, output[-3000:]
    partial = leftovers(hf_home)
    started = time.monotonic()
    rerun = weights_play(hf_home)
    recover_s = time.monotonic() - started
    problems = snapshot_integrity(hf_home)
    assert not problems, problems
    assert weights_play(hf_home).recap["changed"] == 0
    record(fault="weight download interrupted (stand-in: the tiny-model generator SIGKILLed mid-write)",
           detected_by="the weights task fails (generator killed)", detect_s=round(detect_s, 1),
           recovery="re-run: generation starts over (the stand-in is not resumable; hub downloads resume in "
                    "snapshot_download); snapshot published by an atomic rename, so no half snapshot is ever linked",
           recover_s=round(recover_s, 1), data_lost="none (snapshot valid)",
           leftovers_after_kill=partial, leftovers_after_rerun=leftovers(hf_home), rerun_changed=rerun.changed_tasks())


def generator_pid(hf_home):
    for proc_dir in pathlib.Path("/proc").iterdir():
        if not proc_dir.name.isdigit():
            continue
        try:
            cmdline = (proc_dir / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "generate_tiny_model" in cmdline and str(hf_home) in cmdline and "--check" not in cmdline:
            return int(proc_dir.name)
    return None


def test_full_disk_at_download(faults_server, tmp_path):
    """A 5 MiB tmpfs as the Hugging Face cache: the stand-in model (~3.6 MB) fits staged but not twice."""
    mount = tmp_path / "small"
    mount.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", str(mount)], capture_output=True, text=True,
                             check=False)
    require(mounted.returncode == 0, "mount a tmpfs (root with CAP_SYS_ADMIN): %s" % mounted.stderr.strip())
    try:
        # 1. preflight, pointed at the same disk, refuses up front with the path and the space needed.
        started = time.monotonic()
        pre = ansible_playbook("playbooks/preflight.yml", {"preflight_hf_cache_path": str(mount), "vllm_profile": "cpu",
                                                           "vllm_model": "tiny",
                                                           "ansible_python_interpreter": sys.executable}, check=False)
        preflight_s = time.monotonic() - started
        pre_text = " ".join((pre.stdout + pre.stderr).split())
        assert pre.returncode != 0 and str(mount) in pre_text and "GiB" in pre_text, pre_text[-3000:]
        # 2. the weights role alone (serve.yml does not run preflight) writing onto the full disk.
        started = time.monotonic()
        full = weights_play(mount, check=False)
        fail_s = time.monotonic() - started
        text = full.stdout + full.stderr
        assert full.returncode != 0, text[-3000:]
        names_path = str(mount) in text
        says_no_space = "No space left on device" in text
        # 3. more space, re-run: the snapshot must be complete and every blob intact.
        subprocess.run(["mount", "-o", "remount,size=64m", str(mount)], check=True)
        started = time.monotonic()
        rerun = weights_play(mount, check=False)
        recover_s = time.monotonic() - started
        problems = snapshot_integrity(mount) if rerun.returncode == 0 else ["re-run failed"]
        record(fault="disk full while the weights are written (5 MiB tmpfs as the HF cache)",
               detected_by="preflight.yml disk check when preflight_hf_cache_path is that disk (names the path and "
                           "GiB needed); otherwise the weights task fails: %s" % (
                               "ENOSPC naming the path" if names_path and says_no_space else "ENOSPC, path not named"),
               detect_s=round(preflight_s, 1), weights_fail_s=round(fail_s, 1),
               recovery="free space, re-run", recover_s=round(recover_s, 1),
               data_lost="none" if not problems else "CORRUPT snapshot after re-run: %s" % problems,
               leftovers_after_rerun=leftovers(mount))
        assert says_no_space and names_path, "the weights failure does not name the path and ENOSPC:\n" + text[-3000:]
        # generate_tiny_model.py copies each blob under a temporary name and re-hashes blobs it finds, so a copy
        # cut short by ENOSPC can never be mistaken for a good blob by the re-run.
        assert not problems, "the re-run after a full disk left a corrupt snapshot: %s" % problems
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
