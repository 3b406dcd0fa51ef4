"""The standard mode's 8-stream gap on one NVIDIA H200: captures of tests/harness/device/gpu_c8_probe.py (issue 18 item 3).

Each of the 30 rounds ran the module's run_standard, the module's client with vLLM's own random prompts, and
`vllm bench serve` with the module's eight prompts and with its random ones, back to back on one server
(tests/fixtures/h200/c8-probe/README.md). These tests recompute the paired ratios from the rounds and keep the
summary and the docs equal to them.
"""
import json
import pathlib
import statistics

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PROBE = REPO / "tests" / "fixtures" / "h200" / "c8-probe"
ROUNDS = [json.loads(line) for line in (PROBE / "c8-probe.jsonl").read_text().splitlines() if line]
SUMMARY = (PROBE / "c8-probe-summary.txt").read_text().splitlines()
PAIRS = [
    ("standard c1: run_standard / vllm, module's prompts", "std_single", "vb_std_c1"),
    ("standard c8: run_standard / vllm, module's prompts", "std_agg8", "vb_std_c8"),
    ("standard c8: run_standard / vllm, random prompts (old pairing)", "std_agg8", "vb_rand_c8"),
    ("c8, same random prompts: module client / vllm", "m_rand_c8", "vb_rand_c8"),
    ("c8 prompt effect, vllm's client: module's / random", "vb_std_c8", "vb_rand_c8"),
]


def ratios(mine, theirs):
    return [r[mine] / r[theirs] for r in ROUNDS if r.get(mine) and r.get(theirs)]


def test_thirty_rounds_without_errors():
    assert len(ROUNDS) == 30 and not any(r.get("errors") for r in ROUNDS)
    assert SUMMARY[0].endswith("30 rounds, order rotating")


@pytest.mark.parametrize("label, mine, theirs", PAIRS)
def test_the_summary_is_the_rounds_paired_ratios(label, mine, theirs):
    values = ratios(mine, theirs)
    line = next(x for x in SUMMARY if x.startswith(label))
    assert "paired ratio median %.3f (min %.3f max %.3f, n=%d)" % (
        statistics.median(values), min(values), max(values), len(values)) in line


def test_the_module_and_vllm_time_an_8_stream_batch_alike():
    # Same definition on both sides: the batch's duration is its requests' span (nothing outside it) ...
    for key in ("std_agg8", "vb_std_c8", "m_rand_c8", "vb_rand_c8"):
        outside = statistics.median(r[key + "_timing"]["outside_span_ms"] for r in ROUNDS)
        assert outside < 1.0, key
    # ... and the module starts its 8 streams closer together than vLLM's client, with the earlier first token.
    spread = {k: statistics.median(r[k + "_timing"]["start_spread_ms"] for r in ROUNDS) for k in ("std_agg8", "vb_std_c8")}
    ttft = {k: statistics.median(r[k + "_timing"]["ttft_mean_ms"] for r in ROUNDS) for k in ("std_agg8", "vb_std_c8")}
    assert spread["std_agg8"] < spread["vb_std_c8"] and ttft["std_agg8"] < ttft["vb_std_c8"]


def test_the_docs_quote_the_probe():
    figures = ["%.3f" % statistics.median(ratios(mine, theirs)) for _label, mine, theirs in PAIRS]
    for doc in ("gpu-proof.md", "verify-and-bench.md"):
        text = (REPO / "docs" / doc).read_text()
        missing = [f for f in figures if f not in text]
        assert not missing, "docs/%s lacks the probe's figures %s" % (doc, missing)
