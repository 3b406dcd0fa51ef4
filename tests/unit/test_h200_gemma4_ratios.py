"""Issue 18 item 3 on the Gemma 4 stand-in (pass 4): gpu-ratios.sh MODEL=tiny_gemma4_h200 on one NVIDIA H200,
served with pass 3's planned argv (tests/fixtures/h200/gemma4-ratios/, README there).

CI has no GPU: these tests recompute the paired medians from the committed rounds, hold them to the device's own
summary, and state which cells were within ±5% of `vllm bench serve` as measured; docs/gpu-proof.md and
docs/verify-and-bench.md quote the same figures.
"""
import json
import pathlib
import re
import shlex
import statistics

from conftest import SUMMARY_LINE, paired_cell, paired_ratios, ratio_rounds

REPO = pathlib.Path(__file__).resolve().parents[2]
RUN = REPO / "tests" / "fixtures" / "h200" / "gemma4-ratios"
# module figure, vllm bench serve figure, in the summary's order
PAIRS = {"std_single": "vb_chat_c1", "std_single_old_def": "vb_chat_c1", "std_agg8": "vb_chat_c8",
         "std_agg64": "vb_chat_c64", "sweep_c1": "vb_cmpl_c1", "sweep_c8": "vb_cmpl_c8", "sweep_c64": "vb_cmpl_c64"}
# As measured on 2026-12-03 (n=10): only standard c8 and c64 came within ±5%; the cause is not yet explained.
MEASURED_WITHIN = {"std_single": False, "std_single_old_def": False, "std_agg8": True, "std_agg64": True,
                   "sweep_c1": False, "sweep_c8": False, "sweep_c64": False}


def ratios(mine):
    return paired_ratios(ratio_rounds(RUN), PAIRS, mine)


def test_ten_paired_rounds_without_errors_alternating_the_first_side():
    rows = ratio_rounds(RUN)
    assert [r["round"] for r in rows] == list(range(1, 11)) and not any(r.get("errors") for r in rows)
    firsts = [r["order"][0].rsplit(":", 1)[1] for r in rows]
    assert firsts == ["module", "vllm"] * 5
    assert all((r["sweep_c1_prompts"], r["sweep_c8_prompts"], r["sweep_c64_prompts"]) == (16, 16, 128) for r in rows)


def test_the_summary_is_the_rounds_paired_medians_and_says_which_are_within_five_percent():
    summary = (RUN / "ratio-rounds-summary.txt").read_text()
    assert summary in (RUN / "summary.txt").read_text()
    found = SUMMARY_LINE.findall(summary)
    assert found == [paired_cell(ratios(mine)) for mine in PAIRS]
    assert all(n == "10" for _m, _lo, _hi, n, _w in found)
    assert {mine: w == "within" for mine, (*_r, w) in zip(PAIRS, found)} == MEASURED_WITHIN


def test_the_run_served_gemma4_with_pass_3s_planned_argv():
    summary = (RUN / "summary.txt").read_text()
    argv = shlex.split(re.search(r"server argv: (.*)", summary).group(1))
    plan = json.loads((REPO / "tests" / "fixtures" / "h200" / "gemma4-run" / "plan-h200.json").read_text())
    assert argv == ["--model"] + plan["argv"]  # gpu-ratios.sh: `--model` + the plan's argv
    assert "settings: 256 output tokens, ignore_eos" in summary and "10 rounds" in summary
    assert re.search(r"healthy after 104\.4 s", summary)
    log = (RUN / "server-startup.log").read_text()
    assert "Resolved architecture: Gemma4ForCausalLM" in log and "Application startup complete." in log


def test_the_docs_quote_the_pass_4_medians():
    healthy = re.search(r"healthy after ([\d.]+) s", (RUN / "summary.txt").read_text()).group(1)
    figures = [healthy] + ["%.3f" % statistics.median(ratios(mine)) for mine in PAIRS if mine != "std_single_old_def"]
    for doc in ("gpu-proof.md", "verify-and-bench.md"):
        text = (REPO / "docs" / doc).read_text()
        missing = [f for f in figures if f not in text]
        assert not missing, "docs/%s lacks the pass 4 figures %s" % (doc, missing)
