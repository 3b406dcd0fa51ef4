"""data/catalog.yml and its loader.

The figures below are copied by hand from the reference notes' tables (not read
from the catalog), so a typo in the data file fails here. Entries marked
stand-in (profile `cpu`, model `tiny`) are named as such: they are the local
no-GPU default, not Gemma 4 on Blackwell.
"""
import re

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from conftest import REPO


@pytest.fixture()
def catalog():
    return cat.load_catalog()


def test_catalog_has_every_top_level_key(catalog):
    for key in ("models", "drafters", "profiles", "releases", "baselines", "sweeps", "rules", "objectives", "bench_modes",
                "diagnostics"):
        assert key in catalog


def test_load_returns_independent_copies(catalog):
    catalog["models"]["31b"]["max_context"] = 1
    assert cat.load_catalog()["models"]["31b"]["max_context"] == 262144


def test_missing_catalog_is_a_clear_error(tmp_path):
    with pytest.raises(cat.CatalogError, match="catalog not found"):
        cat.load_catalog(str(tmp_path / "nope.yml"))


def test_catalog_without_required_keys_is_refused(tmp_path):
    path = tmp_path / "catalog.yml"
    path.write_text("models: {}\n")
    with pytest.raises(cat.CatalogError, match="lacks the top-level keys"):
        cat.load_catalog(str(path))


# (profile, nodes, release, model, drafter, metric, value) — from the notes' tables.
PUBLISHED = [
    # RTX PRO 6000, v0.26.0
    ("rtx_pro_6000", 1, "v0.26.0", "31b", "none", "single_stream_tok_s", 56.3),
    ("rtx_pro_6000", 1, "v0.26.0", "26b-a4b", "none", "kv_cache_tokens", 1950000),
    ("rtx_pro_6000", 1, "v0.26.0", "e2b", "none", "aggregate_8_tok_s", 2072),
    ("rtx_pro_6000", 1, "v0.26.0", "e4b", "none", "kv_cache_tokens", 4370000),
    # RTX PRO 6000 drafters (v0.26.0; the 12b MTP figure is the v0.29.0 one)
    ("rtx_pro_6000", 1, "v0.26.0", "31b", "dflash", "single_stream_tok_s", 120.3),
    ("rtx_pro_6000", 1, "v0.26.0", "26b-a4b", "mtp", "aggregate_8_tok_s", 1462),
    ("rtx_pro_6000", 1, "v0.26.0", "26b-a4b", "dflash", "kv_cache_tokens", 1720000),
    ("rtx_pro_6000", 1, "v0.26.0", "12b", "dflash", "single_stream_tok_s", 203.1),
    # v0.29.0 / v0.30.0 pairs
    ("rtx_pro_6000", 1, "v0.29.0", "26b-a4b", "none", "single_stream_tok_s", 228.6),
    ("rtx_pro_6000", 1, "v0.30.0", "26b-a4b", "none", "single_stream_tok_s", 216.3),
    ("rtx_pro_6000", 1, "v0.30.0", "e2b", "none", "aggregate_8_tok_s", 1874),
    ("rtx_pro_6000", 1, "v0.29.0", "31b", "dflash", "aggregate_8_tok_s", 665),
    ("rtx_pro_6000", 1, "v0.30.0", "12b", "mtp", "single_stream_tok_s", 197.0),
    # RTX 5090, v0.30.0
    ("rtx_5090", 1, "v0.30.0", "26b-a4b", "mtp", "kv_cache_tokens", 607331),
    ("rtx_5090", 1, "v0.30.0", "26b-a4b", "mtp", "acceptance_pct", 53),
    ("rtx_5090", 1, "v0.30.0", "31b", "mtp", "single_stream_tok_s", 103.8),
    ("rtx_5090", 1, "v0.30.0", "31b", "none", "kv_cache_tokens", 78847),
    ("rtx_5090", 1, "v0.30.0", "12b", "dflash", "kv_cache_tokens", 758979),
    ("rtx_5090", 1, "v0.30.0", "e2b", "mtp", "aggregate_8_tok_s", 2569),
    # DGX Spark, v0.30.0 and its v0.29.0 column
    ("dgx_spark", 1, "v0.30.0", "31b", "none", "single_stream_tok_s", 8.9),
    ("dgx_spark", 1, "v0.30.0", "e2b", "none", "kv_cache_tokens", 14200000),
    ("dgx_spark", 1, "v0.29.0", "e4b", "none", "aggregate_8_tok_s", 357),
    ("dgx_spark", 1, "v0.30.0", "31b", "dflash", "single_stream_tok_s", [17.9, 19.6]),
    ("dgx_spark", 1, "v0.30.0", "31b", "dflash", "acceptance_pct", [20.9, 21.6]),
    ("dgx_spark", 1, "v0.30.0", "26b-a4b", "mtp", "single_stream_tok_s", 65.8),
    ("dgx_spark", 1, "v0.30.0", "12b", "mtp", "acceptance_pct", 50.9),
    ("dgx_spark", 1, "v0.29.0", "31b", "dflash", "single_stream_tok_s", [18.0, 19.8]),
    # Two Sparks
    ("dgx_spark", 2, "v0.30.0", "31b", "none", "kv_cache_tokens", 1100000),
    ("dgx_spark", 2, "v0.30.0", "e2b", "none", "single_stream_tok_s", 95.6),
    ("dgx_spark", 2, "v0.30.0", "31b", "dflash", "single_stream_tok_s", 33.5),
    ("dgx_spark", 2, "v0.30.0", "12b", "mtp", "aggregate_8_tok_s", 378),
    ("dgx_spark", 2, "v0.29.0", "26b-a4b", "dflash", "single_stream_tok_s", 75.6),
    ("dgx_spark", 2, "v0.29.0", "26b-a4b", "none", "aggregate_8_tok_s", 291),
    ("dgx_spark", 2, "v0.27-nightly", "12b", "dflash", "single_stream_tok_s", 66.7),
    # Four Sparks
    ("dgx_spark", 4, "v0.30.0", "26b-a4b", "none", "kv_cache_tokens", 7570000),
    ("dgx_spark", 4, "v0.30.0", "31b", "dflash", "single_stream_tok_s", 48.0),
    ("dgx_spark", 4, "v0.30.0", "e2b", "mtp", "aggregate_8_tok_s", 515),
    ("dgx_spark", 4, "v0.30.0", "e4b", "none", "single_stream_tok_s", 65.9),
]


@pytest.mark.parametrize("profile,nodes,release,model,drafter,metric,value", PUBLISHED,
                         ids=["%s-%dn-%s-%s-%s-%s" % row[:6] for row in PUBLISHED])
def test_published_figure(catalog, profile, nodes, release, model, drafter, metric, value):
    row = cat.find_baseline(catalog, profile, model, drafter, nodes, release)
    if row is None or row.get(metric) != value:
        # Some keys were measured twice (the 26B-A4B and 12b MTP on v0.29.0); any of them may hold the figure.
        rows = cat.find_baselines(catalog, profile, model, drafter, nodes, release)
        assert any(r.get(metric) == value for r in rows), "%s: catalog has %r, the notes publish %r" % (
            metric, [r.get(metric) for r in rows], value)


# (model, drafter, nodes, metric, value) of the dagger rows: measured with upstream fixes patched in.
PATCHED = [
    ("26b-a4b", "mtp", 2, "single_stream_tok_s", 77.5),
    ("26b-a4b", "dflash", 2, "kv_cache_tokens", 3920000),
    ("26b-a4b", "mtp", 4, "aggregate_8_tok_s", 381),
    ("26b-a4b", "dflash", 4, "single_stream_tok_s", 80.7),
]


@pytest.mark.parametrize("model,drafter,nodes,metric,value", PATCHED)
def test_patched_rows_are_kept_but_never_expected(catalog, model, drafter, nodes, metric, value):
    assert cat.find_baseline(catalog, "dgx_spark", model, drafter, nodes, "v0.30.0") is None
    rows = cat.find_baselines(catalog, "dgx_spark", model, drafter, nodes, "v0.30.0", include_patched=True)
    assert len(rows) == 1 and rows[0]["patched"] is True and rows[0][metric] == value


def test_newest_measurement_wins_for_a_key_measured_twice(catalog):
    row = cat.find_baseline(catalog, "rtx_pro_6000", "26b-a4b", "mtp", 1, "v0.29.0")
    assert (row["date"], row["single_stream_tok_s"]) == ("2026-10-01", 284.1)


def test_every_table_row_count(catalog):
    # Row counts of the notes' tables: a dropped or duplicated row fails here.
    counts = {}
    for group in catalog["baselines"]:
        counts[group["table"]] = len(group["rows"])
    # 90 rows of the notes and five calibrated CPU stand-in rows (tiny, the three tiny Gemma 4s, and tiny-26b-a4b
    # with its generated MTP drafter).
    assert sum(counts.values()) == 95
    by_key = {}
    for row in cat.baseline_rows(catalog):
        key = (row["profile"], row["nodes"], row["release"])
        by_key[key] = by_key.get(key, 0) + 1
    assert by_key[("rtx_5090", 1, "v0.30.0")] == 11
    assert by_key[("dgx_spark", 1, "v0.30.0")] == 13
    assert by_key[("dgx_spark", 2, "v0.30.0")] == 13
    assert by_key[("dgx_spark", 4, "v0.30.0")] == 13
    assert by_key[("rtx_pro_6000", 1, "v0.30.0")] == 9


SWEEP = [
    # (profile, nodes, model, prompt_tokens, concurrency, key, value)
    ("rtx_pro_6000", 1, "26b-a4b", 1024, 64, "output_tok_s", 4247),
    ("rtx_pro_6000", 1, "26b-a4b", 1024, 64, "p99_itl_ms", 16),
    ("rtx_pro_6000", 1, "31b", 8192, 64, "p99_itl_ms", 52),
    ("dgx_spark", 1, "31b", 1024, 64, "p99_itl_ms", 273),
    ("dgx_spark", 1, "31b", 8192, 64, "median_ttft_s", 271.09),
    ("dgx_spark", 1, "26b-a4b", 1024, 64, "median_ttft_s", 3.88),
    ("dgx_spark", 2, "26b-a4b", 1024, 64, "median_ttft_s", 4.72),
    ("dgx_spark", 2, "31b", 1024, 64, "output_tok_s", 341),
    ("dgx_spark", 2, "31b", 8192, 1, "median_ttft_s", 4.96),
    ("rtx_pro_6000", 1, "31b", 1024, 1, "median_ttft_s", 0.09),
]


@pytest.mark.parametrize("profile,nodes,model,prompt,conc,key,value", SWEEP)
def test_published_sweep_cell(catalog, profile, nodes, model, prompt, conc, key, value):
    rows = [r for r in catalog["sweeps"]["concurrency"]["rows"]
            if (r["profile"], r["nodes"], r["model"], r["prompt_tokens"]) == (profile, nodes, model, prompt)]
    assert len(rows) == 1
    assert rows[0]["cells"][conc][key] == value


def test_sweep_grid_is_complete(catalog):
    rows = catalog["sweeps"]["concurrency"]["rows"]
    assert len(rows) == 12
    for row in rows:
        assert sorted(row["cells"]) == [1, 8, 32, 64]
        assert row["cells"][1]["median_ttft_s"] > 0 and row["cells"][64]["median_ttft_s"] > 0


def test_rtx_5090_batched_tokens_sweep(catalog):
    rows = {r["max_num_batched_tokens"]: r for r in catalog["sweeps"]["max_num_batched_tokens_rtx_5090"]["rows"]}
    assert rows[32768]["starts"] is False and rows[32768]["kv_cache_gib"] == 7.47
    assert rows[4096]["kv_cache_tokens"] == 888194 and rows[16384]["full_context_requests"] == 1.71


MODELS = {
    # short: (checkpoint, max context, audio)
    "31b": ("unsloth/gemma-4-31B-it-NVFP4", 262144, False),
    "26b-a4b": ("unsloth/gemma-4-26B-A4B-it-NVFP4", 262144, False),
    "12b": ("unsloth/gemma-4-12b-it-NVFP4", 262144, False),
    "e4b": ("unsloth/gemma-4-E4B-it-NVFP4", 131072, True),
    "e2b": ("unsloth/gemma-4-E2B-it-NVFP4", 131072, True),
}


@pytest.mark.parametrize("short", sorted(MODELS))
def test_model_facts(catalog, short):
    model = catalog["models"][short]
    assert (model["checkpoint"], model["max_context"], model["audio"]) == MODELS[short]
    assert model["vision"] is True and not model.get("stand_in")


def test_kv_heads_where_the_notes_give_them(catalog):
    assert catalog["models"]["31b"]["kv_heads"]["global"] == 4
    assert catalog["models"]["26b-a4b"]["kv_heads"]["global"] == 2
    assert catalog["models"]["12b"]["kv_heads"]["global"] == 1
    assert catalog["models"]["e2b"]["kv_heads"]["total"] == 1
    assert catalog["models"]["26b-a4b"]["served_name"] == "gemma-4-26b-a4b"


def test_weights_where_the_notes_measure_them(catalog):
    """The notes' RTX 5090 section: 16.13 GiB for the 26B-A4B; 23.55 GiB for the 31B, 22.47 without the vision tower;
    the 31B's drafters 0.88 GiB (MTP) and 2.86 GiB (DFlash). The other models have no measured size."""
    models = catalog["models"]
    assert models["26b-a4b"]["weights_gib"] == 16.13 and models["31b"]["weights_gib"] == 23.55
    assert models["31b"]["language_model_only_weights_gib"] == 22.47
    assert [m for m in ("12b", "e4b", "e2b") if "weights_gib" in models[m]] == []
    assert catalog["drafters"]["mtp"]["size_gib"] == {"31b": 0.88} and catalog["drafters"]["dflash"]["size_gib"] == {"31b": 2.86}


def test_memory_budget_figures(catalog):
    """The DGX Spark's budget closes at the notes' cap for the configuration they measured: 120 x (1 - 0.78) = 26.4 GiB
    outside vLLM's pool holds the host reserve, the engine's estimate and the default multimodal cache (two copies)."""
    spark, rules = catalog["profiles"]["dgx_spark"], catalog["rules"]
    budget = spark["memory_budget"]
    assert (budget["host_reserve_gib"], budget["engine_overhead_gib"], rules["memory_budget"]["mm_processor_cache_gib"]) == (12, 6, 4)
    outside = spark["memory_gb"] * (1 - rules["unified_memory_max_utilization"])
    assert budget["host_reserve_gib"] + budget["engine_overhead_gib"] + 2 * 4 <= outside < 27
    assert budget["host_reserve_why"].strip() and "planning estimate" in budget["engine_overhead_why"]
    assert set(rules["memory_budget"]["host_memory_flags"]) == {"--cpu-offload-gb", "--kv-offloading-size"}
    assert [p for p, v in catalog["profiles"].items() if v.get("memory_budget")] == ["dgx_spark"]


def test_drafter_ids_exactly_as_published(catalog):
    assert catalog["drafters"]["dflash"]["checkpoints"] == {
        "31b": "z-lab/gemma-4-31B-it-DFlash",
        "26b-a4b": "z-lab/gemma-4-26B-A4B-it-DFlash",
        "12b": "z-lab/gemma4-12B-it-DFlash",  # the gemma4- prefix is the published id
    }
    mtp = catalog["drafters"]["mtp"]["checkpoints"]
    assert mtp["31b"] == "google/gemma-4-31B-it-assistant"
    assert mtp["26b-a4b"] == "google/gemma-4-26B-A4B-it-assistant"
    assert mtp["12b"] == "google/gemma-4-12B-it-assistant"
    assert cat.drafters_for(catalog, "e4b") == ["mtp"] and cat.drafters_for(catalog, "e2b") == ["mtp"]
    assert catalog["drafters"]["dflash"]["num_speculative_tokens"] == 8
    assert catalog["drafters"]["dflash"]["attention_backend"] == "triton_attn"
    assert catalog["drafters"]["mtp"]["num_speculative_tokens"] == 2


def test_profile_facts(catalog):
    profiles = catalog["profiles"]
    assert profiles["rtx_pro_6000"]["memory_gb"] == 96 and profiles["rtx_pro_6000"]["unified_memory"] is False
    assert profiles["rtx_5090"]["memory_gb"] == 32 and profiles["rtx_5090"]["max_num_batched_tokens"] == 8192
    assert profiles["rtx_5090"]["memory_bandwidth_tb_s"] == 1.79
    assert profiles["dgx_spark"]["unified_memory"] is True and profiles["dgx_spark"]["gpu_memory_utilization"] == 0.78
    assert profiles["rtx_pro_6000"]["gpu_memory_utilization"] == 0.92
    assert profiles["rtx_5090"]["default_drafter"] == "mtp" and profiles["rtx_pro_6000"]["default_drafter"] == "none"
    assert profiles["cpu"]["stand_in"] is True and profiles["cpu"]["blackwell"] is False
    assert profiles["cpu"]["gpu_memory_utilization"] == 0.2 and profiles["cpu"]["fp8_kv_cache"] is False
    assert catalog["models"]["tiny"]["stand_in"] is True and catalog["models"]["tiny"]["source"] == "generate"
    assert catalog["models"]["tiny"]["checkpoint"] == "sparkfleet/tiny-random-llama"


def test_rules(catalog):
    rules = catalog["rules"]
    assert (rules["max_num_seqs"], rules["images_per_prompt"], rules["multimodal_min_num_batched_tokens"]) == (64, 4, 4096)
    assert (rules["max_num_batched_tokens"], rules["unified_memory_max_utilization"]) == (32768, 0.78)
    assert rules["min_release_multi_node"] == "v0.27.0" and rules["cluster_sizes"] == [2, 4]
    assert catalog["defaults"]["release"] == "v0.30.0" and catalog["defaults"]["model"] == "26b-a4b"


def test_release_images_and_defects(catalog):
    releases = catalog["releases"]
    for name in ("v0.26.0", "v0.27.0", "v0.29.0", "v0.30.0"):
        assert releases[name]["image"] == "vllm/vllm-openai:%s" % name
    ids = {name: [d["id"] for d in r.get("defects") or []] for name, r in releases.items()}
    assert "multi-node-rpc-timeout" in ids["v0.26.0"]
    assert "v1-runner-mtp-reduction-dim" in ids["v0.27.0"] and "v1-runner-mtp-reduction-dim" not in ids["v0.29.0"]
    assert "expert-parallel-copied-into-drafter" in ids["v0.30.0"] and "expert-parallel-copied-into-drafter" not in ids["v0.29.0"]
    for name in ("v0.26.0", "v0.27.0", "v0.29.0", "v0.30.0"):
        assert "mtp-under-expert-parallel" in ids[name]  # vllm-project/vllm#56936 is open on every release


@pytest.mark.parametrize("image,release", [
    ("vllm/vllm-openai:v0.30.0", "v0.30.0"),
    ("vllm/vllm-openai:0.29.0", "v0.29.0"),
    ("registry.example:5000/vllm/vllm-openai:v0.27.0", "v0.27.0"),
    ("vllm/vllm-openai:latest", None),
    ("vllm/vllm-openai", None),
    ("vllm/vllm-openai@sha256:0123", None),
    ("", None),
])
def test_release_from_image(image, release):
    assert cat.release_from_image(image) == release


def test_version_ordering():
    assert cat.release_at_least("v0.30.0", "v0.27.0") and not cat.release_at_least("v0.26.0", "v0.27.0")
    assert cat.version_tuple("cpu-0.32.0") == (0, 32, 0) and cat.version_tuple("nightly") is None


@pytest.mark.parametrize("name", ["31B", "gemma-4-31b", "unsloth/gemma-4-31B-it-NVFP4", " 31b "])
def test_model_names_are_case_insensitive(catalog, name):
    assert cat.resolve_model(catalog, name) == "31b"


def test_unknown_model_lists_valid_ones(catalog):
    with pytest.raises(cat.CatalogError) as err:
        cat.resolve_model(catalog, "gemma-5")
    assert "31b, 26b-a4b, 12b, e4b, e2b" in str(err.value)


@pytest.mark.parametrize("gpu,profile", [
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx_pro_6000"),
    ("NVIDIA GeForce RTX 5090", "rtx_5090"),
    ("NVIDIA GB10", "dgx_spark"),
    ("NVIDIA H200", None),
])
def test_profile_from_gpu_name(catalog, gpu, profile):
    assert cat.profile_from_gpu_name(catalog, gpu) == profile


def test_get_path(catalog):
    assert cat.get_path(catalog, "models.e4b.max_context") == 131072
    assert cat.get_path(catalog, "sweeps.concurrency.rows.0.cells.64.output_tok_s") == 4247
    with pytest.raises(cat.CatalogError, match="valid at this level"):
        cat.get_path(catalog, "models.gemma5")


def test_objectives_and_bench_modes(catalog):
    assert list(catalog["objectives"]) == ["interactive", "throughput"]
    assert catalog["objectives"]["interactive"]["metric"] == "single_stream_tok_s"
    assert catalog["objectives"]["throughput"]["metric"] == "aggregate_8_tok_s"
    assert catalog["defaults"]["objective"] == "interactive"
    assert list(catalog["bench_modes"]) == ["standard", "sweep", "load"]
    assert catalog["defaults"]["bench_mode"] == "standard"
    assert cat.objective_names(catalog) == ["interactive", "throughput"]
    assert cat.bench_mode_names(catalog) == ["standard", "sweep", "load"]
    for table in ("objectives", "bench_modes"):
        assert all(entry["description"].strip() for entry in catalog[table].values()), table


def test_catalog_view_reads_the_catalog_on_first_use(monkeypatch):
    view = cat.CatalogView(cat.bench_mode_names)
    assert list(view) == ["standard", "sweep", "load"] and len(view) == 3 and view[0] == "standard"
    assert view == ("standard", "sweep", "load") and "load" in view

    def unreadable(*_args, **_kwargs):
        raise cat.CatalogError("no catalog here")
    monkeypatch.setattr(cat, "load_catalog", unreadable)
    assert list(cat.CatalogView(cat.diagnostics, missing=())) == []
    with pytest.raises(cat.CatalogError):
        list(cat.CatalogView(cat.objective_names))


# Numbers in docs/planner.md that are not catalog figures, each with why.
NOT_FIGURES = {
    "0600": "file mode of the secrets env file",
}


def _numbers(text, standalone):
    pattern = r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w.])" if standalone else r"\d[\d,]*(?:\.\d+)?"
    found = set()
    for match in re.findall(pattern, text):
        number = match.rstrip(",").replace(",", "")
        found.add(number)
        if "." in number:
            found.add(number.rstrip("0").rstrip("."))
    return found


def test_every_number_in_planner_md_is_in_the_catalog():
    catalog_numbers = _numbers((REPO / "data/catalog.yml").read_text(encoding="utf-8"), standalone=False)
    doc_numbers = _numbers((REPO / "docs/planner.md").read_text(encoding="utf-8"), standalone=True)
    assert len(doc_numbers) > 30
    missing = sorted(n for n in doc_numbers if n not in catalog_numbers and n not in NOT_FIGURES)
    assert not missing, "docs/planner.md quotes figures the catalog does not hold: %s" % missing


def test_the_cpu_stand_in_baseline_is_calibrated_not_fixed(catalog):
    """A CPU's speed belongs to the machine under test: the stand-in row names no figure and asks for calibration."""
    row = cat.find_baseline(catalog, "cpu", "tiny", "none", 1, "cpu-0.32.0")
    assert row["calibrate"] is True and row["stand_in"] is True
    assert all(row.get(metric) is None for metric in cat.METRICS)
    expected = cat.expected_from_baseline(row)
    assert expected["calibrate"] is True and expected["single_stream_tok_s"] is None
    # The gate's request length for a calibrated row comes with it; measured rows carry none (1,024, the notes').
    assert expected["output_tokens"] == 128
    measured = cat.find_baseline(catalog, "rtx_pro_6000", "31b", "none", 1, "v0.30.0")
    assert measured and "output_tokens" not in cat.expected_from_baseline(measured)
    # Every other row is real hardware with measured figures, never calibrated; the cpu rows are the stand-ins'.
    calibrated = [(r["profile"], r["model"], r["drafter"]) for r in cat.baseline_rows(catalog) if r.get("calibrate")]
    assert calibrated == [("cpu", "tiny", "none"), ("cpu", "tiny-31b", "none"), ("cpu", "tiny-26b-a4b", "none"),
                          ("cpu", "tiny-26b-a4b", "mtp"), ("cpu", "tiny-e2b", "none")]


def test_multi_node_rows_name_the_executor_they_were_measured_under(catalog):
    """The notes: "run_cluster.sh joins two DGX Sparks into a Ray cluster and serves one Gemma 4 model across both GPUs
    with tensor parallelism (TP=2)"; four Sparks join the same way. Every two- and four-Spark figure (the 31B's 15.5
    tok/s on two, 24.8 on four) is Ray's; single-node rows have no executor."""
    assert catalog["defaults"]["baseline_executor"] == "ray"
    for nodes, single in ((2, 15.5), (4, 24.8)):
        row = cat.find_baseline(catalog, "dgx_spark", "31b", "none", nodes, "v0.30.0")
        assert (row["single_stream_tok_s"], row["executor"]) == (single, "ray")
        assert cat.find_baseline(catalog, "dgx_spark", "31b", "none", nodes, "v0.30.0", executor="ray") == row
        assert cat.find_baseline(catalog, "dgx_spark", "31b", "none", nodes, "v0.30.0", executor="mp") is None
        assert "ray executor" in cat.expected_from_baseline(row)["source"]
    rows = cat.baseline_rows(catalog)
    assert {r["executor"] for r in rows if r["nodes"] > 1} == {"ray"}
    assert all(r.get("executor") is None for r in rows if r["nodes"] == 1)
    # A row without an executor (one node) matches whichever executor is asked for.
    one = cat.find_baseline(catalog, "dgx_spark", "31b", "none", 1, "v0.30.0", executor="mp")
    assert one["single_stream_tok_s"] == 8.9 and cat.expected_from_baseline(one)["executor"] is None


def test_a_table_or_row_may_name_its_own_executor(catalog):
    group = next(g for g in catalog["baselines"] if (g["profile"], g["nodes"], g["release"]) == ("dgx_spark", 4, "v0.30.0"))
    group["executor"] = "mp"
    group["rows"][1]["executor"] = "ray"
    measured = {r["model"]: r["executor"] for r in cat.find_baselines(catalog, "dgx_spark", None, "none", 4, "v0.30.0")}
    assert measured["31b"] == "mp" and measured["26b-a4b"] == "ray"
