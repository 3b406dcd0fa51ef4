"""Issue 18 item 3, pass 7: pass 6's three outside cells with windows 4-8 times longer, on one NVIDIA H100
(tests/fixtures/h200/gemma4-ratios-pass7/, README there). Two `run` calls against one server, one round each.

CI has no GPU: these tests recompute the device's last summary from the committed rounds (each side's figure
from its two runs, each paired ratio, its median and range, each side's run 2 / run 1 spread), check the
settings and the card, and hold docs/gpu-proof.md to the figures.
"""
import json
import pathlib
import re
import statistics

from conftest import SUMMARY_LINE_COUNTS, paired_cell, paired_ratios, ratio_rounds

REPO = pathlib.Path(__file__).resolve().parents[2]
RUN = REPO / "tests" / "fixtures" / "h200" / "gemma4-ratios-pass7"
PAIRS = {"std_agg8": "vb_chat_c8", "std_agg64": "vb_chat_c64", "sweep_c64": "vb_cmpl_c64"}
CALLS = ("ratio-rounds.jsonl", "ratio-rounds-b.jsonl")


def rounds():
    return ratio_rounds(RUN, CALLS)


def ratios(mine):
    return paired_ratios(rounds(), PAIRS, mine)


def summary():
    return (RUN / "ratio-rounds-b-summary.txt").read_text()


def test_two_rounds_of_the_three_cells_with_the_longer_windows():
    rows = rounds()
    assert [r["round"] for r in rows] == [1, 2] and not any(r.get("errors") for r in rows)
    for row in rows:
        assert [o.rsplit(":", 1)[0] for o in row["order"]] == ["standard c8", "standard c64", "sweep c64"]
        assert row["sweep_c64_prompts"] == 512
        for key in list(PAIRS) + list(PAIRS.values()):
            runs = row[key + "_runs"]
            assert len(runs) == 2 and all(v > 0 for v in runs)
            assert abs(row[key] - sum(runs) / 2) < 1e-9 * row[key]
    first = summary().splitlines()[0]
    assert "(standard c8: 2048, c64: 2048)" in first and "[16, 64, 512] prompts" in first
    assert "; 2 rounds; cells standard c8, standard c64, sweep c64" in first


def test_the_summary_is_the_rounds_paired_medians_and_spread():
    assert SUMMARY_LINE_COUNTS.findall(summary()) == [paired_cell(ratios(mine), counts=True) for mine in PAIRS]
    spread = {line.split(" repeat spread: ")[0].strip(): line for line in summary().splitlines()
              if " repeat spread: " in line}
    for label, mine in zip(("standard 8 streams (c8)", "standard 64 streams (c64)", "sweep c64 (512 prompts)"), PAIRS):
        for side, key in (("module", mine), ("vllm", PAIRS[mine])):
            values = [r[key + "_runs"][1] / r[key + "_runs"][0] for r in rounds()]
            shown = re.search(side + r" run2/run1 median ([0-9.]+) \(min ([0-9.]+) max ([0-9.]+)\)", spread[label])
            assert shown.groups() == ("%.3f" % statistics.median(values), "%.3f" % min(values), "%.3f" % max(values))


def test_the_card_was_an_h100_and_the_server_pass_3s_argv():
    text = (RUN / "summary.txt").read_text()
    assert "NVIDIA H100 80GB HBM3" in text and "vllm 0.25.0 torch 2.11.0+cu130" in text
    plan = json.loads((REPO / "tests" / "fixtures" / "h200" / "gemma4-run" / "plan-h200.json").read_text())
    assert "server argv: " + " ".join(["--model"] + plan["argv"]) in text
    assert "healthy after 119.6 s" in text and "server from the previous call still healthy: rounds only" in text
    processes = [line.split() for line in (RUN / "server-affinity.txt").read_text().splitlines()]
    assert [p[1] for p in processes] == ["python3", "python3", "VLLM::EngineCor"] and all(p[2] == "0-7" for p in processes)


def test_the_docs_quote_the_pass_7_figures():
    figures = ["%.3f" % statistics.median(ratios(mine)) for mine in PAIRS]
    text = (REPO / "docs" / "gpu-proof.md").read_text()
    assert not [f for f in figures if f not in text], "docs/gpu-proof.md lacks the pass 7 figures %s" % figures
