"""The simulated four-Spark cluster (make test-cluster).

Four containers from the locally built systemd image on a private Docker
network (tests/harness/cluster-up.sh), reached over SSH through
inventories/sim4. Stand-ins, named as such: no GPU, RoCE or Docker exists in
the containers, so the cluster roles run their native runtime (processes from
the host-built virtual environments, bind-mounted read-only), vLLM's CPU build
stands in for a GPU server and the tiny random model for Gemma 4; the Docker
bridge's eth0 stands in for the 200 GbE link.

For real: a four-node Ray cluster formed by the roles' units and judged by
sparkfleet.vllm.ray_cluster; a second run that changes and restarts nothing;
a stopped worker named by status and healed by a re-run; a cut link named
within a minute; and vLLM's CPU build tensor-parallel across two containers
(mp executor; the CPU build refuses the Ray executor), measured by
sparkfleet.vllm.throughput.
"""
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import REPO, require, run, tool

INVENTORY = str(REPO / "inventories" / "sim4")
NODES = ["sim-1", "sim-2", "sim-3", "sim-4"]
ADDR = {n: "172.29.47.%d" % (11 + i) for i, n in enumerate(NODES)}
KEY = REPO / "tests" / "output" / "cluster" / "id_ed25519"
RESULTS = REPO / "tests" / "output" / "cluster" / "results"
TIMINGS = {}


def playbook(name, *extra, check=True, timeout=900):
    started = time.time()
    proc = run([tool("ansible-playbook"), "-i", INVENTORY, str(REPO / "playbooks" / name), *extra],
               timeout=timeout, check=check)
    TIMINGS.setdefault(name + " " + " ".join(extra), []).append(round(time.time() - started, 1))
    return proc


def adhoc(host, module, args, check=True, timeout=300):
    return run([tool("ansible"), "-i", INVENTORY, host, "-m", module, "-a", json.dumps(args), "-o"],
               timeout=timeout, check=check)


def ssh(node, command, timeout=60):
    return subprocess.run(["ssh", "-q", "-i", str(KEY), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                           "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5", "root@" + ADDR[node], command],
                          capture_output=True, text=True, timeout=timeout, check=False)


def recap(output):
    """{host: {'changed': n, 'failed': n, 'unreachable': n}} from the PLAY RECAP."""
    result = {}
    for host, body in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", output, re.M):
        result[host] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", body)}
    return result


def unit_identity(units):
    """(MainPID, ActiveEnterTimestamp) of each unit on each node: a restart changes both."""
    out = {}
    for node in NODES:
        for unit in units:
            proc = ssh(node, "systemctl show -p MainPID,ActiveEnterTimestamp,ActiveState %s" % unit)
            out[(node, unit)] = proc.stdout.strip()
    return out


@pytest.fixture(scope="module")
def cluster():
    require(shutil.which("docker") is not None, "docker client (tests/harness/docker-up.sh installs the engine)")
    require((REPO / ".venv-vllm" / "bin" / "python").exists(), ".venv-vllm (tests/harness/vllm-cpu-env.sh)")
    started = time.time()
    run(["bash", str(REPO / "tests/harness/cluster-up.sh")], timeout=1800)
    TIMINGS["cluster-up.sh"] = [round(time.time() - started, 1)]
    yield
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "timings.json").write_text(json.dumps(TIMINGS, indent=1) + "\n")
    if os.environ.get("SIM_KEEP") != "1":
        run(["bash", str(REPO / "tests/harness/cluster-down.sh")], check=False)


@pytest.fixture(scope="module")
def ray_cluster(cluster):
    playbook("cluster_stop.yml", check=False)
    playbook("cluster.yml", "-e", "vllm_executor=ray", "-e", "vllm_cluster_serve=false")
    return True


def ray_check(timeout):
    return adhoc("sim-1", "sparkfleet.vllm.ray_cluster", {
        "address": "172.29.47.11:6379", "expected_addresses": [ADDR[n] for n in NODES],
        "node_names": {ADDR[n]: n for n in NODES}, "python": str(REPO / ".venv-ray/bin/python"),
        "timeout": timeout, "interval": 3}, check=False, timeout=timeout + 60)


def test_ray_forms_a_cluster_of_four(ray_cluster):
    proc = ray_check(60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.split("=>", 1)[1])
    assert sorted(result["alive"]) == sorted(ADDR.values())
    assert sum(1 for n in result["nodes"] if n["alive"] and n["is_head"]) == 1
    for node in NODES:
        assert ssh(node, "systemctl is-active vllm-cluster-ray.service").stdout.strip() == "active", node


def test_second_run_changes_and_restarts_nothing(ray_cluster):
    before = unit_identity(["vllm-cluster-ray.service"])
    proc = playbook("cluster.yml", "-e", "vllm_executor=ray", "-e", "vllm_cluster_serve=false")
    assert {h: r["changed"] for h, r in recap(proc.stdout).items()} == dict.fromkeys(NODES, 0), proc.stdout[-3000:]
    assert unit_identity(["vllm-cluster-ray.service"]) == before


def test_stopped_worker_is_named_and_rerun_heals(ray_cluster):
    assert ssh("sim-3", "systemctl stop vllm-cluster-ray.service").returncode == 0
    status = playbook("cluster_status.yml", check=False, timeout=300)
    assert status.returncode != 0
    assert re.search(r"cluster unhealthy on: .*sim-3 \(vllm-cluster-ray.service (inactive|failed)\)", status.stdout), status.stdout[-3000:]
    assert "sim-2 (" not in status.stdout.split("cluster unhealthy on:", 1)[1].splitlines()[0]
    playbook("cluster.yml", "-e", "vllm_executor=ray", "-e", "vllm_cluster_serve=false")
    healed = playbook("cluster_status.yml", check=False, timeout=300)
    assert healed.returncode == 0, healed.stdout[-3000:]
    assert ray_check(30).returncode == 0


def test_cut_link_is_named_within_a_minute(ray_cluster):
    run(["docker", "network", "disconnect", "--force", "sparkfleet-sim", "sim-4"])
    try:
        started = time.time()
        # Ray notices within a minute (vllm_cluster_ray_health_check) and the wait names the node.
        while True:
            check = ray_check(0)
            if check.returncode != 0 or time.time() - started > 90:
                break
            time.sleep(3)
        elapsed = time.time() - started
        assert check.returncode != 0 and "sim-4 (172.29.47.14)" in check.stdout, check.stdout
        assert elapsed < 60, "Ray named the cut node after %.0f s" % elapsed
        TIMINGS["link cut named by ray_cluster after s"] = [round(elapsed, 1)]
        # A re-run cannot reach the node and says which one.
        proc = playbook("cluster.yml", "-e", "vllm_executor=ray", "-e", "vllm_cluster_serve=false", check=False, timeout=600)
        assert proc.returncode != 0
        assert re.search(r"sim-4\s+:.*unreachable=1", proc.stdout), proc.stdout[-3000:]
    finally:
        run(["docker", "network", "connect", "--ip", ADDR["sim-4"], "sparkfleet-sim", "sim-4"])
    playbook("cluster.yml", "-e", "vllm_executor=ray", "-e", "vllm_cluster_serve=false")
    assert ray_check(60).returncode == 0


def test_mp_tensor_parallel_across_two_containers(cluster):
    playbook("cluster_stop.yml", check=False)
    playbook("cluster.yml", "-e", "cluster_group=sim_pair", "-e", "vllm_executor=mp", "-e", "cluster_wait_timeout=600",
             timeout=1200)
    for node, rank_flag in (("sim-1", "--node-rank 0"), ("sim-2", "--headless")):
        cmdline = ssh(node, "systemctl show -p ExecStart vllm-cluster.service").stdout
        assert rank_flag in cmdline.replace('"', ""), (node, cmdline)
        assert ssh(node, "systemctl is-active vllm-cluster.service").stdout.strip() == "active", node
    RESULTS.mkdir(parents=True, exist_ok=True)
    proc = adhoc("sim-1", "sparkfleet.vllm.throughput", {
        "url": "http://172.29.47.11:8000", "model": "tiny", "output_tokens": 128, "streams": 8}, timeout=900)
    result = json.loads(proc.stdout.split("=>", 1)[1])
    (RESULTS / "mp-tp2-throughput.json").write_text(json.dumps(result, indent=1) + "\n")
    assert result["single_stream_tok_s"] > 0 and result["aggregate_8_tok_s"] > result["single_stream_tok_s"]
    again = playbook("cluster.yml", "-e", "cluster_group=sim_pair", "-e", "vllm_executor=mp")
    assert {h: r["changed"] for h, r in recap(again.stdout).items()} == {"sim-1": 0, "sim-2": 0}
