"""docs/catalog.md, rendered from data/catalog.yml (a tool of the checkout; no plugin calls it).

tests/unit/harness/test_catalog_docs.py keeps docs/catalog.md equal to ``render_markdown(load_catalog())``.
Regenerate the page after changing the catalog:

    python tests/harness/catalog_docs.py
"""
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "catalog.md"


def _cell(value):
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return "%s-%s" % (_cell(value[0]), _cell(value[1]))
    if isinstance(value, int):
        return "{:,}".format(value)
    return str(value)


def _table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return lines


def _conditions_text(entry):
    parts = []
    for keyword, conditions in (("when", entry.get("when")), ("unless", entry.get("unless"))):
        for key, value in sorted((conditions or {}).items()):
            shown = ", ".join(str(v) for v in value) if isinstance(value, list) else value
            parts.append("%s %s %s" % (keyword, key.replace("_", " "), shown))
    return "; ".join(parts) or "always"


def _weights_text(model):
    """The measured weights, with the size without the vision tower where the notes give it."""
    if model.get("weights_gib") is None:
        return None
    lmo = model.get("language_model_only_weights_gib")
    return "%s%s" % (model["weights_gib"], " (%s without vision)" % lmo if lmo is not None else "")


def _memory_budget_section(catalog):
    """The figures of the plan-time memory budget on unified-memory profiles (docs/planner.md explains the budget)."""
    rules = catalog["rules"].get("memory_budget") or {}
    out = ["", "### Memory budget (unified memory)", "",
           "The planner's budget of a unified-memory node, in GiB (docs/planner.md). The multimodal processor cache is",
           "%s GiB per copy, one copy per API server and one for the engine core (%s)." % (
               rules.get("mm_processor_cache_gib"), " ".join(str(rules.get("mm_processor_cache_source") or "-").split())),
           ""]
    rows = []
    for name, profile in catalog["profiles"].items():
        budget = profile.get("memory_budget")
        if budget:
            rows.append(["`%s`" % name, profile.get("memory_gb"), budget["host_reserve_gib"],
                         " ".join(str(budget["host_reserve_why"]).split()), budget["engine_overhead_gib"],
                         " ".join(str(budget["engine_overhead_why"]).split())])
    out += _table(["Profile", "Memory (GiB)", "Host reserve", "Why", "Engine outside the pool", "Why"], rows)
    out += ["", "Flags of `vllm_extra_args` the budget counts as host memory outside the pool (GiB):", ""]
    out += _table(["Flag", "What it holds"], [["`%s`" % flag, " ".join(str(what).split())]
                                              for flag, what in (rules.get("host_memory_flags") or {}).items()])
    return out


def render_markdown(catalog):
    """docs/catalog.md's text for ``catalog`` (a loaded catalog)."""
    from ansible_collections.sparkfleet.vllm.plugins.module_utils.catalog import table_executor

    out = [
        "# Catalog",
        "",
        "<!-- Generated from data/catalog.yml by tests/harness/catalog_docs.py; do not edit by hand.",
        "     Regenerate: python tests/harness/catalog_docs.py -->",
        "",
        "Everything the planner, the templates, the docs and the throughput gate know about Gemma 4 NVFP4 on",
        "NVIDIA Blackwell lives in `data/catalog.yml`. Read it in playbooks with the `sparkfleet.vllm.catalog` lookup",
        "(`lookup('sparkfleet.vllm.catalog', 'models.31b.max_context')`). Entries marked *stand-in* are not Gemma 4 or",
        "Blackwell: they let the collection run end to end on a machine without a GPU.",
        "",
        "Throughput is output tokens per second; KV cache is tokens as vLLM reports them at startup; acceptance is",
        "percent; `a-b` is a range measured over several starts.",
        "",
        "## Models",
        "",
    ]
    rows = []
    for name, model in catalog["models"].items():
        rows.append(["`%s`%s" % (name, " (stand-in)" if model.get("stand_in") else ""), "`%s`" % model["checkpoint"],
                     "`%s`" % model["served_name"], model.get("architecture"), model["max_context"], model.get("vision"),
                     model.get("audio"), ", ".join("%s %s" % kv for kv in sorted((model.get("kv_heads") or {}).items())) or None,
                     _weights_text(model)])
    out += _table(["Model", "Checkpoint", "Served name", "Type", "Max context", "Vision", "Audio", "KV heads", "Weights (GiB)"],
                  rows)
    out += ["", "### Known smoke-test misses", "",
            "Misses the notes record as the model's own. `sparkfleet.vllm.smoke` reports them as `expected_miss`",
            "and does not fail on them; any other miss fails the check.", ""]
    rows = []
    for name, model in catalog["models"].items():
        for check, entries in (model.get("smoke_expected_misses") or {}).items():
            for entry in entries:
                rows.append(["`%s`" % name, check, "`%s`" % entry["miss"], _conditions_text(entry), entry.get("note")])
    out += _table(["Model", "Check", "Miss", "Applies", "Note"], rows)
    out += ["", "## Drafters", ""]
    rows = []
    for name, drafter in catalog["drafters"].items():
        for model, checkpoint in (drafter.get("checkpoints") or {}).items():
            rows.append(["`%s`" % name, "`%s`" % model, "`%s`" % checkpoint, drafter["num_speculative_tokens"],
                         drafter.get("attention_backend")])
    out += _table(["Drafter", "Model", "Checkpoint", "k", "Attention backend"], rows)
    out += ["", "## Hardware profiles", ""]
    rows = []
    for name, profile in catalog["profiles"].items():
        rows.append(["`%s`%s" % (name, " (stand-in)" if profile.get("stand_in") else ""), profile.get("display"),
                     profile.get("memory_gb"), profile.get("unified_memory"), profile.get("memory_bandwidth_tb_s"),
                     profile.get("memory_bandwidth_source"),
                     profile["gpu_memory_utilization"], profile["max_num_batched_tokens"], profile["default_drafter"],
                     profile["default_release"], ", ".join(str(n) for n in profile["node_counts"])])
    out += _table(["Profile", "Hardware", "Memory (GB)", "Unified", "Bandwidth (TB/s)", "Bandwidth source", "GPU mem util",
                   "Max batched tokens",
                   "Default drafter", "Default release", "Nodes"], rows)
    out += _memory_budget_section(catalog)
    out += ["", "## Weight formats", "", "Bytes read per parameter per decoded token: the memory-bandwidth ceiling's divisor.", ""]
    out += _table(["Format", "Name", "Bits per parameter", "Source"],
                  [["`%s`" % name, entry.get("display"), entry.get("bits_per_parameter"), " ".join(str(entry.get("source") or "-").split())]
                   for name, entry in (catalog.get("weight_formats") or {}).items()])
    out += ["", "## Objectives", "", "What `vllm_drafter=auto` optimises (`vllm_objective`; default `%s`)." % (
        catalog["defaults"]["objective"]), ""]
    out += _table(["Objective", "Compares", "Description"],
                  [["`%s`" % name, "`%s`" % entry["metric"], entry["description"]] for name, entry in catalog["objectives"].items()])
    out += ["", "## Benchmark modes", "", "What `playbooks/bench.yml` measures (`vllm_bench_mode`, the throughput module's `mode`;"
            " default `%s`)." % catalog["defaults"]["bench_mode"], ""]
    out += _table(["Mode", "Description"],
                  [["`%s`" % name, " ".join(entry["description"].split())] for name, entry in catalog["bench_modes"].items()])
    out += ["", "## vLLM releases and known defects", ""]
    rows = []
    for name, release in catalog["releases"].items():
        defects = release.get("defects") or []
        text = "; ".join("**%s** (%s%s): %s" % (
            d["id"], d["action"], ", " + d["upstream"] if d.get("upstream") else "", " ".join(d.get("summary", "").split()))
            for d in defects) or None
        rows.append(["`%s`" % name, release.get("image") and "`%s`" % release["image"], release.get("plannable"), text])
    out += _table(["Release", "Image", "Plannable", "Defects"], rows)
    out += ["", "## Start-up failure diagnostics", "",
            "`sparkfleet.vllm.wait_healthy` scans the engine log for these signatures and fails at the first match,",
            "with the explanation and the fix, instead of waiting for its timeout. A line matches when any of the",
            "entry's regular expressions does; entries are tried in this order.", ""]
    out += _table(["Id", "Log signature (any of)", "Meaning", "Fix"],
                  [["`%s`" % d["id"], "<br>".join("`%s`" % p.replace("|", "\\|") for p in d["patterns"]),
                    "**%s.** %s" % (d["title"], " ".join(d["explanation"].split())), " ".join(d["fix"].split())]
                   for d in catalog["diagnostics"]])
    out += ["", "## Measured baselines", "",
            "Rows marked patched ran with upstream fixes patched into the image; the planner never returns them",
            "as the expectation of a stock release. A multi-node table names the executor its figures were measured",
            "under (`defaults.baseline_executor`, `%s`, unless the table says otherwise); a cluster planned with another"
            % catalog["defaults"].get("baseline_executor"),
            "`vllm_executor` is still gated against them, with a warning.", ""]
    for group in catalog["baselines"]:
        # Calibrated rows are measured under the plan's own executor: a table of them names none.
        measured = [r for r in group["rows"] if not (r.get("calibrate") or group.get("calibrate"))]
        executor = table_executor(catalog, group) if group["nodes"] > 1 and measured else None
        out += ["### %s" % group["table"], "",
                "Profile `%s`, %d node%s, vLLM `%s`%s%s." % (
                    group["profile"], group["nodes"], "" if group["nodes"] == 1 else "s", group["release"],
                    ", %s executor" % executor if executor else "",
                    ", measured %s" % group["date"] if group.get("date") else ""), ""]
        rows = []
        for row in group["rows"]:
            if row.get("executor") and row["executor"] != executor:
                row = dict(row, note=("measured under the %s executor. " % row["executor"]) + (row.get("note") or ""))
            rows.append(["%s%s" % (row["model"], " + " + row["drafter"] if row.get("drafter", "none") != "none" else ""),
                         row.get("single_stream_tok_s"), row.get("aggregate_8_tok_s"), row.get("kv_cache_tokens"),
                         row.get("acceptance_pct"), ("patched. " if row.get("patched") else "") + (
                             "calibrated on the serving machine in the same run. " if row.get("calibrate") else "") + (
                             row.get("note") or "") + (
                             " " + ", ".join("%s %s" % kv for kv in sorted(row["conditions"].items())) if row.get("conditions") else "")
                         or None])
        out += _table(["Config", "Single-stream", "Aggregate, 8 streams", "KV cache", "Acceptance %", "Note"], rows)
        out.append("")
    sweep = catalog["sweeps"]["concurrency"]
    out += ["## Concurrency sweeps", "",
            "`vllm bench serve`, random prompts, %d output tokens per request, all requests at once. Cells: output tok/s /"
            " p99 ITL (ms); median TTFT (s) at c1 and c64." % sweep["output_tokens"], ""]
    rows = []
    for row in sweep["rows"]:
        cells = row["cells"]
        rows.append(["%dx %s" % (row["nodes"], row["profile"]), row["model"], row["prompt_tokens"], row.get("release")]
                    + ["%s / %s" % (_cell(cells[c]["output_tok_s"]), _cell(cells[c]["p99_itl_ms"])) for c in sorted(cells)]
                    + [cells[min(cells)].get("median_ttft_s"), cells[max(cells)].get("median_ttft_s")])
    concurrencies = sorted(sweep["rows"][0]["cells"])
    out += _table(["Nodes x profile", "Model", "Prompt tokens", "Release"] + ["c%d" % c for c in concurrencies]
                  + ["TTFT c%d (s)" % concurrencies[0], "TTFT c%d (s)" % concurrencies[-1]], rows)
    mnbt = catalog["sweeps"]["max_num_batched_tokens_rtx_5090"]
    out += ["", "## --max-num-batched-tokens on the RTX 5090 (%s, vLLM %s, no drafter)" % (mnbt["model"], mnbt["release"]), ""]
    out += _table(["Max batched tokens", "KV cache (GiB)", "KV tokens", "Full-context requests", "Starts"],
                  [[r["max_num_batched_tokens"], r["kv_cache_gib"], r["kv_cache_tokens"], r["full_context_requests"], r["starts"]]
                   for r in mnbt["rows"]])
    spec = catalog["sweeps"]["num_speculative_tokens"]
    out += ["", "## Draft length (%s, %s, vLLM %s)" % (spec["model"], spec["profile"], spec["release"]), ""]
    out += _table(["Drafter", "k", "Single-stream", "Aggregate, 8 streams"],
                  [[r["drafter"], r["k"], r.get("single_stream_tok_s"), r.get("aggregate_8_tok_s")] for r in spec["rows"]])
    out.append("")
    return "\n".join(out)


def main():
    # The collection's plugins as ansible_collections.sparkfleet.vllm.*, straight from the checkout.
    sys.path.insert(0, str(REPO / ".collections"))
    from ansible_collections.sparkfleet.vllm.plugins.module_utils.catalog import load_catalog

    PAGE.write_text(render_markdown(load_catalog(use_cache=False)), encoding="utf-8")
    print("wrote %s" % PAGE.relative_to(REPO))
    return 0


if __name__ == "__main__":
    sys.exit(main())
