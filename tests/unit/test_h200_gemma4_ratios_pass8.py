"""Issue 18 item 3, pass 8: each side's own drift, on the tiny Gemma 4 stand-in and on a ~3 B one, one NVIDIA H100
(tests/fixtures/h200/gemma4-ratios-pass8/, README there). gpu-drift.sh in three `run` calls: per cell, one side
5 times in a row, then the other, on each model; no paired rounds (the drift did not fall under 5%).

CI has no GPU: these tests recompute every line of the device's drift summaries from the raw runs (median, min,
max, max/min, coefficient of variation, CPU and GPU use, the ratio of the two sides' medians), check the design
(blocks of 5, the first side alternating), the card, the servers and the larger stand-in's spec, and derive the
drift table of docs/gpu-proof.md from the runs.
"""
import json
import pathlib
import re
import shlex
import statistics

from conftest import load_h200_catalog_module

REPO = pathlib.Path(__file__).resolve().parents[2]
RUN = REPO / "tests" / "fixtures" / "h200" / "gemma4-ratios-pass8"
# model -> its drift files: the first call's (or the second's) cells, then the third call's sweep c64
CALLS = {"tiny": ("drift-tiny.jsonl", "drift-tiny-c.jsonl"), "large": ("drift-large.jsonl", "drift-large-c.jsonl")}
CELLS = ("standard c1", "standard c8", "standard c64", "sweep c1", "sweep c8", "sweep c64")
KEYS = {"standard c1": ("std_single", "vb_chat_c1"), "standard c8": ("std_agg8", "vb_chat_c8"),
        "standard c64": ("std_agg64", "vb_chat_c64"), "sweep c1": ("sweep_c1", "vb_cmpl_c1"),
        "sweep c8": ("sweep_c8", "vb_cmpl_c8"), "sweep c64": ("sweep_c64", "vb_cmpl_c64")}
REPEATS = 5


def runs(model, names=None):
    return [json.loads(line) for name in names or CALLS[model] for line in (RUN / name).read_text().splitlines()
            if line.strip()]


def side_runs(model, cell, side):
    return [r for r in runs(model) if r["cell"] == cell and r["side"] == side]


def values(model, cell, side):
    return [r["value"] for r in side_runs(model, cell, side)]


def cv(vals):
    return 100 * statistics.stdev(vals) / statistics.mean(vals)


def summary_line(model, cell, side):
    """gpu_drift.py's summary line for one cell and side, recomputed from the runs."""
    rows = side_runs(model, cell, side)
    vals = [r["value"] for r in rows]
    use = "; ".join("%s %.2f" % (name, statistics.median(r[name + "_cpu_s"] / r["wall_s"] for r in rows))
                    for name in ("api", "engine", "client"))
    gpu = "; gpu util %.0f%%, sm %.0f-%.0f MHz" % (
        statistics.median(r["gpu_util"] for r in rows), min(r["sm_mhz"] for r in rows), max(r["sm_mhz"] for r in rows))
    return ("%-13s %-6s n=%d median %9.1f tok/s (min %.1f max %.1f) max/min %.3f cv %.1f%%; wall %.1f s; cpu/wall %s%s" % (
        cell, side, len(vals), statistics.median(vals), min(vals), max(vals), max(vals) / min(vals), cv(vals),
        statistics.median(r["wall_s"] for r in rows), use, gpu))


def block_ratio(model, cell):
    return statistics.median(values(model, cell, "module")) / statistics.median(values(model, cell, "vllm"))


def drift_table():
    """docs/gpu-proof.md's pass 8 table: per cell and side, each model's median, max/min, CV and GPU utilization."""
    rows = []
    for cell in CELLS:
        for side in ("module", "vllm"):
            parts = [cell, side]
            for model in ("tiny", "large"):
                vals = values(model, cell, side)
                util = statistics.median(r["gpu_util"] for r in side_runs(model, cell, side))
                parts += ["{:,.0f}".format(statistics.median(vals)), "%.3f" % (max(vals) / min(vals)),
                          "%.1f%%" % cv(vals), "%.0f%%" % util]
            rows.append("| " + " | ".join(parts) + " |")
    return rows


def test_each_cell_ran_one_side_five_times_in_a_row_then_the_other():
    for model in CALLS:
        for name in CALLS[model]:
            rows = runs(model, [name])
            cells = list(dict.fromkeys(r["cell"] for r in rows))
            for cell in cells:
                block = [(r["side"], r["i"]) for r in rows if r["cell"] == cell]
                first = "module" if CELLS.index(cell) % 2 == 0 else "vllm"  # alternating from cell to cell
                other = "vllm" if first == "module" else "module"
                assert block == [(first, i) for i in range(1, REPEATS + 1)] + [(other, i) for i in range(1, REPEATS + 1)]
        assert sorted({r["cell"] for r in runs(model)}) == sorted(CELLS)
        for r in runs(model):
            assert r["model"] == model and r["key"] == KEYS[r["cell"]][r["side"] != "module"] and r["value"] > 0


def test_the_summaries_are_the_runs_own():
    text = (RUN / "summary.txt").read_text()
    for model in CALLS:
        for cell in CELLS:
            for side in ("module", "vllm"):
                assert summary_line(model, cell, side) in text, (model, cell, side)
            assert "%-13s module median / vllm median %.3f (blocks, not pairs)" % (cell, block_ratio(model, cell)) in text


def test_the_card_its_clocks_and_the_two_servers():
    text = (RUN / "summary.txt").read_text()
    assert "vllm 0.25.0 torch 2.11.0+cu130 NVIDIA H100 80GB HBM3" in text
    assert "gpu: NVIDIA H100 80GB HBM3, 580.159.04, 1980 MHz, 2619 MHz, 700.00 W" in text
    assert {r["sm_mhz"] for model in CALLS for r in runs(model)} == {1980.0}  # no clock moved in any run
    plan = json.loads((REPO / "tests" / "fixtures" / "h200" / "gemma4-run" / "plan-h200.json").read_text())
    starts = {m: shlex.split(a) for m, a in re.findall(r"\] start (tiny|large): (.*)", text)}
    assert starts["tiny"] == ["--model"] + plan["argv"]
    large = ["--model"] + plan["argv"]
    large[1], large[large.index("--served-model-name") + 1] = "sparkfleet/random-gemma4-moe-3b-h200", "gemma-4-3b-standin"
    assert starts["large"] == large
    healthy = re.findall(r"(tiny|large) healthy after ([\d.]+) s", text)
    assert healthy == [("tiny", "155.5"), ("large", "136.7"), ("tiny", "94.9")]
    assert "Model loading took 5.63 GiB memory" in text and "large stand-in generated in 66.8 s: 5.7G" in text
    log = (RUN / "server-startup-large.log").read_text()
    assert "Resolved architecture: Gemma4ForCausalLM" in log and "Asynchronous scheduling is enabled." in log
    processes = [line.split() for line in (RUN / "server-affinity.txt").read_text().splitlines()]
    assert [(p[0], p[2], p[3]) for p in processes] == [(m, n, "0-7") for m in ("large", "tiny")
                                                       for n in ("python3", "python3", "VLLM::EngineCor")]


def test_the_larger_stand_in_is_the_catalog_modules_spec_of_about_3_b_parameters():
    catalog = load_h200_catalog_module()
    text = (RUN / "summary.txt").read_text()
    logged = json.loads(re.search(r"large stand-in generating in the background: \S+, spec (\{.*\})", text).group(1))
    assert logged == catalog.GEMMA4_LARGE_SPEC
    assert 2.9e9 < catalog.parameters(catalog.GEMMA4_LARGE_SPEC) < 3.1e9
    assert catalog.parameters(catalog.GEMMA4_SPEC) < 3e6


def test_what_the_runs_show_as_measured():
    # The tiny stand-in keeps the GPU busy under 10% of the time in every cell: its steps wait on the CPU.
    assert all(statistics.median(r["gpu_util"] for r in side_runs("tiny", c, s)) < 10
               for c in CELLS for s in ("module", "vllm"))
    # The ~3 B stand-in keeps it busy 50-90% of each run in every cell but sweep c64 (there the runs' walls include
    # the prompts' preparation: 22% and 45%) ...
    assert all(50 <= statistics.median(r["gpu_util"] for r in side_runs("large", c, s)) <= 90
               for c in CELLS[:-1] for s in ("module", "vllm"))
    # ... but the drift did not fall well under 5%: per model, the median CV over the 12 cell-sides, and the worst.
    for model, (median_cv, worst) in {"tiny": ("5.6", "15.1"), "large": ("4.8", "15.2")}.items():
        cvs = [cv(values(model, c, s)) for c in CELLS for s in ("module", "vllm")]
        assert ("%.1f" % statistics.median(cvs), "%.1f" % max(cvs)) == (median_cv, worst)


def test_the_docs_quote_the_pass_8_drift_table():
    text = (REPO / "docs" / "gpu-proof.md").read_text()
    missing = [row for row in drift_table() if row not in text]
    assert not missing, "docs/gpu-proof.md lacks the pass 8 rows %s" % missing
    for model in CALLS:
        for cell in CELLS:
            assert "%.3f" % block_ratio(model, cell) in text
