"""Issue 18 item 3 on one NVIDIA H200: the throughput module against `vllm bench serve`, paired (captures of
tests/harness/device/gpu-ratios.sh in tests/fixtures/h200/ratios/).

CI has no GPU: these tests hold the committed rounds, vLLM's own saved results and the figures that
docs/verify-and-bench.md states to one another, and the sweep's prompt counts to today's bench_run.
"""
import json
import pathlib
import re
import statistics

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_run

REPO = pathlib.Path(__file__).resolve().parents[2]
RATIOS = REPO / "tests" / "fixtures" / "h200" / "ratios"
DOC = (REPO / "docs" / "verify-and-bench.md").read_text()
TAGS = ("a", "b", "t1024")
# module figure, vllm bench serve figure, the vllm run's max concurrency
PAIRS = {"std_single": ("vb_chat_c1", 1), "std_single_old_def": ("vb_chat_c1", 1), "std_agg8": ("vb_chat_c8", 8),
         "std_agg64": ("vb_chat_c64", 64), "sweep_c1": ("vb_cmpl_c1", 1), "sweep_c8": ("vb_cmpl_c8", 8),
         "sweep_c64": ("vb_cmpl_c64", 64)}


def rounds(tag):
    return [json.loads(line) for line in (RATIOS / ("ratio-rounds-%s.jsonl" % tag)).read_text().splitlines()]


def ratios(rows, mine):
    theirs = PAIRS[mine][0]
    return [r[mine] / r[theirs] for r in rows if r.get(mine) and r.get(theirs)]


@pytest.mark.parametrize("tag", TAGS)
def test_each_run_has_at_least_five_rounds_without_errors(tag):
    rows = rounds(tag)
    assert len(rows) >= 5 and not any(r.get("errors") for r in rows)


@pytest.mark.parametrize("tag", TAGS)
def test_summary_lines_are_the_rounds_medians(tag):
    rows = rounds(tag)
    summary = (RATIOS / ("ratio-rounds-%s-summary.txt" % tag)).read_text()
    found = re.findall(r"paired ratio median ([0-9.]+) \(min ([0-9.]+) max ([0-9.]+), n=(\d+)\)", summary)
    expected = []
    for mine in PAIRS:
        values = ratios(rows, mine)
        if values:
            expected.append(("%.3f" % statistics.median(values), "%.3f" % min(values), "%.3f" % max(values),
                             str(len(values))))
    assert found == expected


@pytest.mark.parametrize("tag", TAGS)
def test_vllm_figures_are_vllm_bench_serve_saved_results(tag):
    saved = [json.loads(line) for line in (RATIOS / ("vllm-bench-results-%s.jsonl" % tag)).read_text().splitlines()]
    assert all(s["failed"] == 0 and s["completed"] == s["num_prompts"] for s in saved)
    by_value = {round(s["output_throughput"], 6): s for s in saved}
    for row in rounds(tag):
        for mine, (theirs, concurrency) in PAIRS.items():
            if theirs not in row:
                continue
            result = by_value[round(row[theirs], 6)]
            assert result["max_concurrency"] == concurrency
            assert result["backend"] == ("openai-chat" if theirs.startswith("vb_chat") else "openai")
            if mine.startswith("sweep"):
                # The same count the module's sweep sent in that round (vllm bench serve's --num-prompts).
                assert result["num_prompts"] == row["%s_prompts" % mine] == bench_run.sweep_prompt_count(concurrency)


def test_docs_state_the_pooled_medians_of_the_256_token_runs():
    rows = rounds("a") + rounds("b")
    for mine in PAIRS:
        values = ratios(rows, mine)
        quartiles = statistics.quantiles(values, n=4)
        shown = (statistics.median(values), quartiles[0], quartiles[2], min(values), max(values))
        figure = "%.3f (%.3f–%.3f, %.3f–%.3f)" % shown
        assert figure in DOC, (mine, figure)


def test_docs_state_the_1024_token_run():
    rows = rounds("t1024")
    for mine in ("std_single", "std_agg8"):
        values = ratios(rows, mine)
        assert "%.3f (%.3f–%.3f, n=%d)" % (statistics.median(values), min(values), max(values), len(values)) in DOC
