"""plugins/module_utils/plan/memory.py: the plan-time memory budget of a unified-memory node (issue 46, item 1).

The figures are written here from the notes and the catalog's reasoning, not read from the catalog, so a changed
reserve, estimate or weight fails these tests: the DGX Spark's ~120 GiB less a 12 GiB host reserve leaves the
server 108 GiB; the notes' 0.78 gives vLLM a 93.6 GiB pool; the engine holds 6 GiB outside it, plus 2 x 4 GiB of
multimodal processor cache with vision or audio; the weights are the notes' (16.13 GiB, 23.55 / 22.47 for the 31B,
0.88 / 2.86 for the 31B's drafters) or the catalog's estimate.
"""
import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import memory, planner
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import summary as plan_summary
from conftest import keyless

GIB = 1024 ** 3
# (model, drafter) -> (weights, drafter weights) in GiB on one DGX Spark: measured (the notes) or estimated (the
# 31B's 1.45 ratio of checkpoint to NVFP4 bytes; a drafter without a size takes its kind's largest, the 31B's).
WEIGHTS = {"31b": 23.55, "26b-a4b": 16.13, "12b": 9.12, "e4b": 3.04, "e2b": 1.52}
DRAFTER = {"none": 0, "mtp": 0.88, "dflash": 2.86}
SPARK = [(m, d) for m in WEIGHTS for d in DRAFTER if not (d == "dflash" and m in ("e4b", "e2b"))]


@pytest.fixture(scope="module")
def catalog():
    return cat.load_catalog()


def make(catalog, **request):
    return planner.plan(catalog, keyless(request))


def refusal(catalog, **request):
    with pytest.raises(planner.PlanError) as err:
        make(catalog, **request)
    return err.value


def lines_of(plan):
    return [(line["item"], line["gib"]) for line in plan["memory_budget"]["lines"]]


@pytest.mark.parametrize("model,drafter", SPARK, ids=["-".join(c) for c in SPARK])
def test_every_model_plans_within_the_budget_of_one_spark(catalog, model, drafter):
    """Every model of the catalog, with each of its drafters, fits one Spark at the shipped 0.78 with 0.4 GiB to spare:
    the cap the notes measured is the largest fraction the budget allows with vision on."""
    plan = make(catalog, profile="dgx_spark", model=model, drafter=drafter)
    weights, extra = WEIGHTS[model], DRAFTER[drafter]
    expected = [("memory", 120.0), ("host reserve", 12.0), ("the server's ceiling", 108.0), ("vLLM's pool", 93.6),
                ("weights", weights)] + ([("drafter weights", extra)] if extra else []) + [
        ("KV cache and activations", round(93.6 - weights - extra, 2)), ("engine outside the pool", 6.0),
        ("multimodal processor cache", 8.0), ("headroom", 0.4)]
    assert lines_of(plan) == expected
    budget = plan["memory_budget"]
    assert (budget["ceiling_gib"], budget["pool_gib"], budget["outside_pool_gib"], budget["headroom_gib"]) == (108, 93.6, 14, 0.4)
    assert budget["weights_gib"] == round(weights + extra, 2) and budget["max_gpu_memory_utilization"] == 0.78
    # The server's ceiling is the guard's hard limit, its planned footprint (pool and outside: 107.6 GiB) the point
    # where reclaim starts; no swap, so an overrun kills the engine instead of thrashing (the notes).
    assert plan["memory_guard"] == {"memory_max_bytes": 108 * GIB, "memory_high_bytes": 115534620263, "memory_swap_max_bytes": 0}
    assert any(r.startswith("memory budget (dgx_spark, unified memory): vLLM's 93.6 GiB pool and 14.0 GiB outside it fit "
                            "the 108.0 GiB") for r in plan["reasons"])


def test_measured_weights_are_said_to_be_measured_and_estimates_estimates(catalog):
    notes = {line["item"]: line["note"] for line in make(catalog, profile="dgx_spark", model="12b", drafter="dflash")[
        "memory_budget"]["lines"]}
    assert notes["weights"] == ("12b, estimate: 12B parameters of nvfp4 x 1.45 (the 31b's measured checkpoint over its "
                                "format)")
    assert notes["drafter weights"] == "dflash drafter, estimate: the largest measured (31b's)"
    e2b = make(catalog, profile="dgx_spark", model="e2b")["memory_budget"]["lines"]
    assert next(line["note"] for line in e2b if line["item"] == "weights").endswith(
        "; effective parameters, without the per-layer embeddings: errs low")
    measured = make(catalog, profile="dgx_spark", model="31b", drafter="mtp")["memory_budget"]["lines"]
    assert [line["note"] for line in measured if "weights" in line["item"]] == ["31b, measured", "mtp drafter, measured"]


def test_a_text_only_plan_has_no_multimodal_cache_and_the_31b_sheds_its_vision_tower(catalog):
    plan = make(catalog, profile="dgx_spark", model="31b", language_model_only=True)
    assert lines_of(plan)[4:] == [("weights", 22.47), ("KV cache and activations", 71.13), ("engine outside the pool", 6.0),
                                  ("headroom", 8.4)]
    assert plan["memory_guard"]["memory_high_bytes"] == 106944685671  # 99.6 GiB


def test_a_cluster_node_holds_its_share_and_only_the_head_the_multimodal_cache(catalog):
    """Tensor parallel over two Sparks: each node holds half the weights; the API server and engine core, and with them
    the multimodal processor cache, run on the head only."""
    head, worker = planner.plan_cluster(catalog, keyless({"profile": "dgx_spark", "node_count": 2, "model": "31b",
                                                          "drafter": "mtp", "head_address": "10.0.0.1"}),
                                        ["10.0.0.1", "10.0.0.2"])
    shared = [("weights", 11.78), ("drafter weights", 0.44), ("KV cache and activations", 81.39),
              ("engine outside the pool", 6.0)]
    assert lines_of(head)[4:] == shared + [("multimodal processor cache", 8.0), ("headroom", 0.4)]
    assert lines_of(worker)[4:] == shared + [("headroom", 8.4)]
    assert head["memory_budget"]["lines"][4]["note"] == "31b, measured (1/2 per node, tensor parallel)"


def test_a_lower_utilization_leaves_headroom_and_host_memory_flags_are_lines(catalog):
    plan = make(catalog, profile="dgx_spark", gpu_memory_utilization=0.7, extra_args=["--cpu-offload-gb", "2"])
    assert lines_of(plan)[3:] == [("vLLM's pool", 84.0), ("weights", 16.13), ("KV cache and activations", 67.87),
                                  ("engine outside the pool", 6.0), ("multimodal processor cache", 8.0),
                                  ("--cpu-offload-gb", 2.0), ("headroom", 8.0)]
    assert plan["memory_budget"]["max_gpu_memory_utilization"] == 0.76


@pytest.mark.parametrize("profile", ["rtx_pro_6000", "rtx_5090", "cpu"])
def test_profiles_without_unified_memory_have_no_budget(catalog, profile):
    """A discrete card's memory is the card's own (vLLM's utilization bounds it), and the CPU stand-in is a stand-in:
    no budget, no guard, and the same flags as before."""
    plan = make(catalog, profile=profile, extra_args=["--mm-processor-cache-gb", "64"])
    assert plan["memory_budget"] is None and plan["memory_guard"] is None
    assert not any(line.startswith("memory budget") for line in plan_summary.summarize(plan))


def test_the_summary_prints_the_budget_line_by_line(catalog):
    lines = plan_summary.summarize(make(catalog, profile="dgx_spark"))
    start = lines.index("memory budget (dgx_spark, unified memory, GiB per node):")
    assert lines[start + 1:start + 10] == [
        "  memory                        120.00  profiles.dgx_spark.memory_gb: CPU and GPU share it",
        "  host reserve                   12.00  OS, sshd, page-cache floor (profiles.dgx_spark.memory_budget)",
        "  the server's ceiling          108.00  memory less the host reserve",
        "  vLLM's pool                    93.60  --gpu-memory-utilization 0.78 x 120.0 GiB",
        "    weights                      16.13  26b-a4b, measured",
        "    KV cache and activations     77.47  the rest of the pool",
        "  engine outside the pool         6.00  Python processes, CUDA runtime's host side: a planning estimate",
        "  multimodal processor cache      8.00  4.0 GiB x 2 copies (1 API server + the engine core, vLLM's default)",
        "  headroom                        0.40  the server's ceiling less the pool and what is outside it",
    ] and not lines[start + 10].startswith("  ")


# --- refusals -------------------------------------------------------------------------------------------------------


def test_memory_outside_the_pool_that_overshoots_the_host_is_refused_with_the_utilization_that_fits(catalog):
    """Twice the default multimodal cache (8 GiB a copy) puts 22 GiB outside the pool: 93.6 + 22 = 115.6 GiB against the
    108 the host leaves; (108 - 22) / 120 = 0.716, so 0.71 fits."""
    err = refusal(catalog, profile="dgx_spark", extra_args=["--mm-processor-cache-gb", "8"])
    assert err.rule == "memory-budget" and err.variable == "vllm_gpu_memory_utilization" and err.value == 0.78
    assert str(err) == (
        "dgx_spark has unified memory: --gpu-memory-utilization 0.78 gives vLLM a 93.6 GiB pool of the 120.0 GiB, and the "
        "engine holds 22.0 GiB outside it (engine outside the pool 6.0, multimodal processor cache 16.0): 115.6 GiB in all "
        "against the 108.0 GiB the host leaves the server (120.0 GiB less the 12.0 GiB host reserve), past which the host "
        "starves instead of the engine failing; set vllm_gpu_memory_utilization <= 0.71, or lower --mm-processor-cache-gb "
        "in vllm_extra_args [rule: memory-budget]")
    assert make(catalog, profile="dgx_spark", gpu_memory_utilization=0.71, extra_args=["--mm-processor-cache-gb", "8"])


def test_a_second_api_server_adds_a_cache_copy_in_any_spelling(catalog):
    err = refusal(catalog, profile="dgx_spark", extra_args=["-asc", "2"])
    assert "multimodal processor cache 12.0): 111.6 GiB in all" in str(err)
    assert str(err).endswith("set vllm_gpu_memory_utilization <= 0.75, or lower --api-server-count in vllm_extra_args "
                             "[rule: memory-budget]")
    # Text only: no cache to copy, so more API servers change nothing here.
    assert make(catalog, profile="dgx_spark", model="31b", language_model_only=True, extra_args=["--api-server-count", "4"])


def test_host_memory_no_utilization_can_make_room_for_names_the_flag(catalog):
    err = refusal(catalog, profile="dgx_spark", extra_args=["--cpu-offload-gb=200"])
    assert err.rule == "memory-budget" and err.variable == "vllm_extra_args" and err.value == ["--cpu-offload-gb"]
    assert "(engine outside the pool 6.0, multimodal processor cache 8.0, --cpu-offload-gb 200.0): 307.6 GiB" in str(err)
    assert str(err).endswith("; lower --cpu-offload-gb in vllm_extra_args [rule: memory-budget]")


def test_a_pool_too_small_for_the_weights_is_refused_naming_what_to_change(catalog):
    """0.15 x 120 = 18 GiB cannot hold the 31B's 23.55 GiB of weights; 0.2 (24 GiB) is the least that can."""
    err = refusal(catalog, profile="dgx_spark", model="31b", gpu_memory_utilization=0.15)
    assert err.rule == "memory-weights" and err.variable == "vllm_gpu_memory_utilization" and err.value == 0.15
    assert str(err) == (
        "on dgx_spark --gpu-memory-utilization 0.15 gives vLLM a 18.0 GiB pool, which cannot hold the 23.55 GiB of weights "
        "it loads before any KV cache (31b, measured); set vllm_gpu_memory_utilization to at least 0.2 (at most 0.78 here, "
        "and the KV cache needs more on top), or a smaller vllm_model [rule: memory-weights]")
    err = refusal(catalog, profile="dgx_spark", model="31b", drafter="dflash", gpu_memory_utilization=0.2)
    assert "(31b, measured, dflash drafter, measured); set vllm_gpu_memory_utilization to at least 0.23" in str(err)
    assert str(err).endswith("or a smaller vllm_model or vllm_drafter=none [rule: memory-weights]")


@pytest.mark.parametrize("args,shown", [
    (["--mm-processor-cache-gb=lots"], "--mm-processor-cache-gb to 'lots', which is not a size in GiB"),
    (["--api-server-count", "0"], "--api-server-count to '0', which is not a whole number of processes"),
    (["--kv-offloading-size", "-4"], "--kv-offloading-size to '-4', which is not a size in GiB"),
], ids=["cache-text", "no-api-server", "negative"])
def test_a_memory_flag_the_budget_cannot_read_is_refused(catalog, args, shown):
    err = refusal(catalog, profile="dgx_spark", extra_args=args)
    assert err.rule == "memory-flag" and err.variable == "vllm_extra_args" and err.value == args[0]
    assert str(err).startswith("vllm_extra_args sets %s: the memory budget of this unified-memory host cannot account it" % shown)


def test_the_measured_cap_holds_where_the_budget_would_allow_more(catalog):
    """Text only, the engine holds just its 6 GiB outside the pool and the budget would allow (108 - 6) / 120 = 0.85;
    the notes measured no fraction above 0.78, so the cap still refuses 0.8, by its own rule."""
    plan = make(catalog, profile="dgx_spark", model="31b", language_model_only=True)
    assert plan["memory_budget"]["max_gpu_memory_utilization"] == 0.78
    err = refusal(catalog, profile="dgx_spark", model="31b", language_model_only=True, gpu_memory_utilization=0.8)
    assert err.rule == "gpu-util-unified" and err.variable == "vllm_gpu_memory_utilization" and err.value == 0.8
    assert str(err).startswith("dgx_spark has unified memory: --gpu-memory-utilization 0.8 starves the host")


@pytest.mark.parametrize("args", [["--kv-cache-memory-bytes", "80G"], ["--num-gpu-blocks-override", "100000"]])
def test_kv_cache_sized_outside_the_cap_stays_refused_as_a_managed_flag(catalog, args):
    """The flags that size the KV cache past the utilization cap are refused before the budget, naming the variable."""
    err = refusal(catalog, profile="dgx_spark", extra_args=args)
    assert err.rule == "managed-flag" and "vllm_gpu_memory_utilization" in str(err)


def test_the_estimate_ratio_is_the_largest_measured(catalog):
    ratio, source = memory._estimate_ratio(catalog)
    assert source == "31b" and round(ratio, 2) == 1.45
