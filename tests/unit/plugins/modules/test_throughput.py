"""The throughput module against the fast token source (a stand-in for vLLM: fixed-speed SSE, usage at the end)."""
import json

import pytest
import yaml
from http_module_helpers import FastTokenSource, run_module

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_run
from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.modules import throughput


@pytest.fixture()
def source():
    server = FastTokenSource(step_delay=0.0005, model="fake").start_in_thread()
    yield server
    server.stop()


def test_standard_writes_vllm_named_results(source, tmp_path):
    kind, res = run_module(throughput, {"url": source.url, "model": "fake", "output_tokens": 32, "warmup": 0,
                                        "results_dir": str(tmp_path)})
    assert kind == "exit", res
    assert res["changed"] is False
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 2 and files[0].endswith("-standard-fake.json") and files[1].endswith(".md")
    result = json.loads((tmp_path / files[0]).read_text())
    for key in ("output_throughput", "median_ttft_ms", "p99_itl_ms", "mean_tpot_ms", "total_output_tokens",
                "completed", "duration", "request_throughput", "std_itl_ms", "p99_ttft_ms"):
        assert key in result, key
    assert result["total_output_tokens"] == 8 * 32 and result["completed"] == 8
    extra = result["sparkfleet"]
    assert len(extra["single_stream_runs"]) == 8 and all(r["output_tokens"] == 32 for r in extra["single_stream_runs"])
    assert res["single_stream_tok_s"] > 0 and res["aggregate_8_tok_s"] > 0
    assert res["gate"]["gated"] is False
    # 16 measured requests, all greedy, streaming with usage and ignore_eos, through the chat endpoint.
    measured = source.requests[-16:]
    assert all(r["temperature"] == 0 and r["ignore_eos"] and r["stream_options"]["include_usage"] for r in measured)
    assert len({r["messages"][0]["content"] for r in measured[:8]}) == 8


def test_gate_fails_on_a_high_baseline_and_passes_on_a_low_one(source):
    args = {"url": source.url, "model": "fake", "output_tokens": 16, "warmup": 0}
    kind, res = run_module(throughput, dict(args, baseline={"single_stream_tok_s": 1e9, "aggregate_8_tok_s": 1e9}))
    assert kind == "fail" and "below baseline" in res["msg"] and "expected 1000000000.0" in res["msg"]
    kind, res = run_module(throughput, dict(args, baseline={"single_stream_tok_s": 1.0, "aggregate_8_tok_s": 1.0}))
    assert kind == "exit" and res["gate"]["passed"] and res["gate"]["gated"]


# The fake server's own pace in the calibrated-gate tests: 2 ms a step, so the source's steps, not the CPU the
# source shares with the client, set the rate. At 0 (as fast as possible) a busy 2-core machine (both test lanes,
# load average 5-12) moved two back-to-back runs by more than 2x and a second pair was measured where none was due.
PACE_S = 0.002


def test_a_stand_in_baseline_is_calibrated_on_the_server_first(source, monkeypatch):
    """The catalog's CPU stand-in row: no figures, calibrate=true; the module measures first and gates on that."""
    # A floor of 0.5: the fake source shares this process's CPU with the client, so two runs of the same speed can
    # differ by more than 10% on a loaded machine; the slower-server test below covers the gate's failing side.
    monkeypatch.setattr(source, "step_delay", PACE_S)
    args = {"url": source.url, "model": "fake", "output_tokens": 64, "warmup": 0, "min_ratio": 0.5,
            "baseline": {"calibrate": True, "single_stream_tok_s": None, "source": "catalog: CPU stand-in"}}
    kind, res = run_module(throughput, args)
    assert kind == "exit", res
    gate, extra = res["gate"], res["result"]["sparkfleet"]
    assert gate["gated"] and gate["passed"] and "calibrated on this machine in this run" in gate["message"]
    calibration = extra["calibration"]
    # Calibration uses the same method and requests; the gate compares with it.
    assert extra["baseline"]["calibration_output_tokens"] == 64 and extra["baseline"]["catalog_source"] == "catalog: CPU stand-in"
    assert [c["expected"] for c in gate["checks"]] == [calibration["single_stream_tok_s"], calibration["aggregate_8_tok_s"]]
    # 8 single-stream + 8 concurrent requests for the calibration, the same measured, the same calibrated again
    # after it; one bracket, as it passed. The gate's figures are the slower calibration's, per figure.
    assert len(source.requests) == 48
    attempt = extra["calibration_attempts"][0]
    assert [a["passed"] for a in extra["calibration_attempts"]] == [True]
    assert calibration["runs"] == [attempt["calibration"], attempt["calibration_after"]]
    for key in ("single_stream_tok_s", "aggregate_8_tok_s"):
        assert calibration[key] == min(attempt["calibration"][key], attempt["calibration_after"][key])


def _paced(source, monkeypatch, delays):
    """Run each standard run (calibration, measurement, calibration, measurement, ...: each measured run between
    two calibrations, the closing one opening the next bracket) at the next step delay in `delays`
    (the last one for any run beyond them)."""
    original, calls = bench_run.run_standard, []
    monkeypatch.setattr(source, "step_delay", source.step_delay)  # restored after the test

    def paced(client, output_tokens, warmup, streams, **kw):
        source.step_delay = delays[min(len(calls), len(delays) - 1)]
        calls.append(output_tokens)
        return original(client, output_tokens, warmup, streams, **kw)
    monkeypatch.setattr(bench_run, "run_standard", paced)
    return calls


def test_a_calibrated_gate_fails_when_every_measured_run_is_slower(source, monkeypatch):
    # 10x slower steps in each measured run than in both calibrations around it: the retry cannot rescue it.
    # (8-token answers: the five slow runs are most of this test's time, 29 s at 16 tokens and 20x.)
    calls = _paced(source, monkeypatch, [PACE_S, 10 * PACE_S] * throughput.CALIBRATION_ATTEMPTS + [PACE_S])
    kind, res = run_module(throughput, {"url": source.url, "model": "fake", "output_tokens": 8, "warmup": 0,
                                        "baseline": {"calibrate": True}})
    assert calls == [8] * (1 + 2 * throughput.CALIBRATION_ATTEMPTS) == [8] * 11
    assert kind == "fail" and "below baseline" in res["msg"] and "calibrated on this machine" in res["msg"], res["msg"]
    assert "measured 5 times" in res["msg"]
    attempts = res["result"]["sparkfleet"]["calibration_attempts"]
    assert [a["passed"] for a in attempts] == [False] * 5


def test_a_calibrated_gate_compares_with_the_slower_calibration_around_the_measured_run(source, monkeypatch):
    # A neighbour's load rising across the gate: a fast calibration, a measured run 5x slower, a closing calibration
    # 10x slower. Against the calibration before it alone the measured run misses; against the slower of the two
    # bracketing it, it passes at once, so a load change moves both sides of the comparison.
    calls = _paced(source, monkeypatch, [PACE_S, 0.01, 0.02])
    kind, res = run_module(throughput, {"url": source.url, "model": "fake", "output_tokens": 16, "warmup": 0,
                                        "baseline": {"calibrate": True}})
    assert kind == "exit", res
    attempts = res["result"]["sparkfleet"]["calibration_attempts"]
    assert [a["passed"] for a in attempts] == [True] and calls == [16] * 3
    first = attempts[0]
    assert first["measured"]["single_stream_tok_s"] < first["calibration"]["single_stream_tok_s"] / 2
    assert res["gate"]["checks"][0]["expected"] == first["calibration_after"]["single_stream_tok_s"]


def test_a_calibrated_gate_measures_a_miss_once_more(source, monkeypatch):
    # One slow measured run (a neighbour's burst), then the server's own pace: a later pair passes. The second
    # pair should; a third is allowed, as the module allows it, for a neighbour's burst in this test's own run.
    calls = _paced(source, monkeypatch, [PACE_S, 0.04, PACE_S])
    kind, res = run_module(throughput, {"url": source.url, "model": "fake", "output_tokens": 16, "warmup": 0,
                                        "baseline": {"calibrate": True}, "min_ratio": 0.5})
    assert kind == "exit", res
    attempts = res["result"]["sparkfleet"]["calibration_attempts"]
    passed = [a["passed"] for a in attempts]
    assert passed in ([False, True], [False, False, True]) and res["gate"]["passed"], attempts
    assert calls == [16] * (1 + 2 * len(attempts))
    assert attempts[0]["measured"]["single_stream_tok_s"] < attempts[0]["calibration"]["single_stream_tok_s"] / 5


def test_mid_stream_failures_fail_the_run(monkeypatch, source):
    original = bench_run.Client.payload

    def failing(self, prompt, max_tokens, **kw):
        return dict(original(self, prompt, max_tokens, **kw), x_fail_after=3)
    monkeypatch.setattr(bench_run.Client, "payload", failing)
    kind, res = run_module(throughput, {"url": source.url, "model": "fake", "output_tokens": 16, "warmup": 0})
    assert kind == "fail" and "request(s) failed" in res["msg"] and "before [DONE]" in res["msg"]


def test_sweep_resets_prefix_cache_and_plots(source, tmp_path):
    kind, res = run_module(throughput, {"url": source.url, "model": "fake", "mode": "sweep", "output_tokens": 16,
                                        "concurrency": [1, 4], "prompt_tokens": [32, 64], "warmup": 0,
                                        "results_dir": str(tmp_path)})
    assert kind == "exit", res
    assert source.resets == 4
    cells = res["result"]["sparkfleet"]["cells"]
    assert [(c["prompt_tokens"], c["concurrency"]) for c in cells] == [(32, 1), (32, 4), (64, 1), (64, 4)]
    assert all(c["failed"] == 0 and c["output_throughput"] > 0 for c in cells)
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".json", ".md", ".png"]
    assert "/tokenize unavailable" in " ".join(res["result"]["sparkfleet"]["notes"])


def test_sweep_reports_its_single_stream_cells_against_the_ceiling(source, tmp_path):
    # Issue 14 item 6: the physical limit in every throughput report, the sweep's too (the load test measures no
    # decode rate). The ceiling is the plan's; here a made-up one, as only the arithmetic is under test.
    ceiling = {"decode_tok_s": 1000.0, "basis": "test ceiling"}
    kind, res = run_module(throughput, {"url": source.url, "model": "fake", "mode": "sweep", "output_tokens": 16,
                                        "concurrency": [1, 4], "prompt_tokens": [32, 64], "warmup": 0,
                                        "ceiling": ceiling, "results_dir": str(tmp_path)})
    assert kind == "exit", res
    extra = res["result"]["sparkfleet"]
    single = [c for c in extra["cells"] if c["concurrency"] == 1]
    assert [c["ceiling_fraction"] for c in single] == [round(c["output_throughput"] / 1000.0, 4) for c in single]
    assert not any("ceiling_fraction" in c for c in extra["cells"] if c["concurrency"] != 1)
    best = max(single, key=lambda c: c["output_throughput"])
    assert extra["ceiling"]["single_stream_fraction"] == best["ceiling_fraction"]
    assert extra["ceiling"]["prompt_tokens"] == best["prompt_tokens"]
    assert "of the memory-bandwidth ceiling (1000.0 tok/s: test ceiling)" in res["msg"]
    report = next(p for p in tmp_path.iterdir() if p.suffix == ".md").read_text()
    assert "Memory-bandwidth ceiling, one stream: 1,000.0 tok/s (test ceiling); single-stream cells at " in report
    # Without a ceiling (stand-ins, profiles without a bandwidth figure) nothing is reported.
    kind, res = run_module(throughput, {"url": source.url, "model": "fake", "mode": "sweep", "output_tokens": 8,
                                        "concurrency": [1], "prompt_tokens": [16], "warmup": 0})
    assert kind == "exit" and res["result"]["sparkfleet"]["ceiling"] is None and "ceiling" not in res["msg"]


def test_sweep_says_when_the_prefix_cache_cannot_be_reset(tmp_path):
    server = FastTokenSource(allow_reset=False).start_in_thread()
    try:
        kind, res = run_module(throughput, {"url": server.url, "model": "fake", "mode": "sweep", "output_tokens": 8,
                                            "concurrency": [2], "prompt_tokens": [16], "warmup": 0})
    finally:
        server.stop()
    assert kind == "exit" and res["result"]["sparkfleet"]["prefix_cache_reset"] is False
    assert "VLLM_SERVER_DEV_MODE=1" in " ".join(res["result"]["sparkfleet"]["notes"])


def test_load_bursts_and_memory_note(source):
    kind, res = run_module(throughput, {"url": source.url, "model": "fake", "mode": "load",
                                        "load_shape": {"max_model_len": 512, "image_limit": 2, "long_concurrency": 4,
                                                       "image_concurrency": 2, "output_tokens": 8}})
    assert kind == "exit", res
    bursts = res["result"]["sparkfleet"]["bursts"]
    assert [b["name"] for b in bursts] == ["long prompts", "multi-image prompts", "near-full context"]
    assert [b["requests"] for b in bursts] == [4, 2, 2] and all(b["failed"] == 0 for b in bursts)
    image_request = [r for r in source.requests if isinstance(r.get("messages", [{}])[0].get("content"), list)][0]
    parts = image_request["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["image_url", "image_url", "text"]
    assert image_request["mm_processor_kwargs"] == {"max_soft_tokens": 1120}


def test_load_needs_the_context(source):
    kind, res = run_module(throughput, {"url": source.url, "model": "fake", "mode": "load"})
    assert kind == "fail" and "max_model_len" in res["msg"]


def test_check_mode_sends_nothing(source):
    kind, res = run_module(throughput, {"url": source.url, "model": "fake"}, check_mode=True)
    assert kind == "exit" and res["changed"] is False and source.requests == []


def test_mode_choices_are_the_catalogs_bench_modes():
    """The module cannot read the catalog on a managed host, so its choices repeat the catalog's keys."""
    catalog = cat.load_catalog()
    documented = yaml.safe_load(throughput.DOCUMENTATION)["options"]["mode"]
    assert documented["choices"] == list(catalog["bench_modes"])
    assert throughput.ARGUMENT_SPEC["mode"]["choices"] == list(catalog["bench_modes"])
    assert documented["default"] == throughput.ARGUMENT_SPEC["mode"]["default"] == catalog["defaults"]["bench_mode"]


@pytest.mark.parametrize("name", sorted(set(throughput.ARGUMENT_SPEC) - {"url", "model", "api_key", "validate_certs",
                                                                         "ca_path"}))
def test_documented_options_match_the_argument_spec(name):
    """url, model, api_key and the TLS options come from the http_api fragment (tests/unit/plugins/doc_fragments)."""
    documented = yaml.safe_load(throughput.DOCUMENTATION)["options"][name]
    spec = throughput.ARGUMENT_SPEC[name]
    assert documented["type"] == spec["type"]
    assert documented.get("default") == spec.get("default")
    assert documented.get("elements") == spec.get("elements")


def test_sweep_sends_num_prompts_per_shape(source):
    kind, res = run_module(throughput, {"url": source.url, "model": "fake", "mode": "sweep", "output_tokens": 8,
                                        "concurrency": [1, 3], "prompt_tokens": [16], "num_prompts": 5, "warmup": 0})
    assert kind == "exit", res
    cells = res["result"]["sparkfleet"]["cells"]
    assert [(c["concurrency"], c["num_prompts"], c["completed"]) for c in cells] == [(1, 5, 5), (3, 5, 5)]
    assert len(source.requests) == 10


def test_sweep_refuses_a_negative_num_prompts(source):
    kind, res = run_module(throughput, {"url": source.url, "model": "fake", "mode": "sweep", "num_prompts": -1,
                                        "concurrency": [1], "prompt_tokens": [16], "warmup": 0})
    assert kind == "fail" and "num_prompts" in res["msg"] and source.requests == []
