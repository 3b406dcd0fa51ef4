"""Topology advice and the memory-bandwidth ceiling, each rule with the notes' own statement and figures.

The figures below are written from the reference notes, not read from the catalog, so a wrong baseline or
a wrong rule fails here.
"""
import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils import topology
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import planner
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import summary as plan_summary
from conftest import keyless


@pytest.fixture(scope="module")
def catalog():
    return cat.load_catalog()


def advice(catalog, model, nodes, drafter="none", release="v0.30.0"):
    return topology.topology_advice(catalog, "dgx_spark", model, drafter, release, nodes)


def test_measured_layouts_are_the_notes_figures(catalog):
    # "31B goes 8.9 -> 15.5 -> 24.8 tok/s single-stream from one Spark to two to four"; 68 / 116 / 157 at 8 streams.
    measured = advice(catalog, "31b", 4)["measured"]
    assert [(m["nodes"], m["single_stream_tok_s"], m["aggregate_8_tok_s"]) for m in measured] == [
        (1, 8.9, 68), (2, 15.5, 116), (4, 24.8, 157)]


@pytest.mark.parametrize("model", ["31b", "12b"])
def test_dense_models_pay_off_on_four_sparks(catalog, model):
    # "The dense models keep scaling, by less with each doubling" (31B +74% then +60%, 12b +60% then +30%).
    assert advice(catalog, model, 4)["warnings"] == []


def test_moe_stops_scaling_past_two_and_replicas_are_offered(catalog):
    # "TP=4 adds 6% single-stream over TP=2 and nothing at 8 streams" (65.6 vs 61.6; 298 vs 299).
    warnings = advice(catalog, "26b-a4b", 4)["warnings"]
    assert len(warnings) == 1, warnings
    assert "adds only 6% single-stream over 2 (65.6 against 61.6 tok/s)" in warnings[0]
    assert "2 independent 2-node replicas would serve about 598 tok/s at 16 streams" in warnings[0]


def test_e4b_runs_better_on_two_sparks_than_four(catalog):
    # "The E4B gains 11% single-stream over TP=2 but loses 10% at 8 streams" (379 vs 422);
    # "The fastest Spark setup for the E4B is two Sparks with MTP (71.1 tok/s)".
    warnings = advice(catalog, "e4b", 4)["warnings"]
    assert any("measured slower than on 2: 8 streams 379 against 422 tok/s" in w for w in warnings), warnings
    assert any("fastest measured e4b setup is 2 nodes with mtp at 71.1 tok/s" in w for w in warnings), warnings


def test_e2b_is_best_on_one_spark(catalog):
    # "the E2B loses on both (-2% / -19%)" against TP=2 (-2% is inside the notes' 2.5% spread, -19% is not);
    # "for the E2B a single Spark with MTP (112.4)".
    warnings = advice(catalog, "e2b", 4)["warnings"]
    assert any("slower than on 2: 8 streams 501 against 615 tok/s; 2 independent 2-node replicas" in w
               for w in warnings), warnings
    assert any("fastest measured e2b setup is 1 node with mtp at 112.4" in w for w in warnings), warnings
    # Two Sparks with MTP are slower than one with MTP on both figures (108.2 / 645 against 112.4 / 701).
    two = advice(catalog, "e2b", 2, drafter="mtp")["warnings"]
    assert any("slower than on 1: single-stream 108.2 against 112.4 tok/s; 8 streams 645 against 701" in w for w in two), two


def test_differences_within_the_notes_spread_are_not_called_slower(catalog):
    # 298 against 299 tok/s at 8 streams (26B-A4B, TP=4 vs TP=2) is a tie, not a loss.
    assert not any("measured slower" in w for w in advice(catalog, "26b-a4b", 4)["warnings"])
    assert topology._below(298, 299) is False and topology._below(379, 422) is True


def test_no_measurement_for_the_layout_is_said(catalog):
    # v0.29.0 has no four-Spark table in the notes.
    result = advice(catalog, "31b", 4, release="v0.29.0")
    assert result["warnings"] and "no measurement of 31b on 4 nodes with vLLM v0.29.0" in result["warnings"][0]


def test_single_node_profiles_get_no_advice(catalog):
    assert topology.topology_advice(catalog, "rtx_pro_6000", "31b", "none", "v0.30.0", 1) is None


def test_ceiling_from_bandwidth_parameters_and_format(catalog):
    # 1.79 TB/s (both GB202 cards) / (31B x 4.5 bits) = 102.7 tok/s; measured 56.3 is 55% of it.
    ceiling = topology.decode_ceiling(catalog, "rtx_pro_6000", "31b")
    assert ceiling["decode_tok_s"] == pytest.approx(1.79e12 / (31e9 * 4.5 / 8), abs=0.1)
    assert "1,792 GB/s" in ceiling["memory_bandwidth_source"]
    # The MoE reads only its 3.8B active parameters per token.
    moe = topology.decode_ceiling(catalog, "rtx_pro_6000", "26b-a4b")
    assert moe["decode_tok_s"] == pytest.approx(1.79e12 / (3.8e9 * 4.5 / 8), abs=0.1)
    assert "3.8B active parameters" in moe["basis"]


def test_spark_ceiling_is_the_specifications_bandwidth_and_scales_with_nodes(catalog):
    # NVIDIA's specification, 273 GB/s, not the notes' "roughly a fifth of the discrete card's" (0.36 TB/s, 31% higher).
    one = topology.decode_ceiling(catalog, "dgx_spark", "31b")
    four = topology.decode_ceiling(catalog, "dgx_spark", "31b", 4)
    assert one["memory_bandwidth_tb_s"] == pytest.approx(0.273) and "273 GB/s" in one["memory_bandwidth_source"]
    assert one["decode_tok_s"] == pytest.approx(0.273e12 / (31e9 * 4.5 / 8), abs=0.1)
    assert four["decode_tok_s"] == pytest.approx(4 * one["decode_tok_s"], abs=0.2)
    # Every stock single-stream figure without a drafter stays under its ceiling (the ceiling is an upper bound).
    for row in cat.find_baselines(catalog, drafter="none"):
        ceiling = topology.decode_ceiling(catalog, row["profile"], row["model"], row["nodes"])
        if ceiling and row.get("single_stream_tok_s") is not None:
            assert cat.figure_low(row["single_stream_tok_s"]) < ceiling["decode_tok_s"], row


def test_stand_ins_have_no_ceiling(catalog):
    assert topology.decode_ceiling(catalog, "cpu", "tiny") is None


def test_the_plan_carries_ceiling_and_advice_and_prints_them(catalog):
    plans = planner.plan_cluster(catalog, keyless({"profile": "dgx_spark", "model": "26b-a4b", "node_count": 4,
                                                   "head_address": "10.0.0.1", "cluster_interface": "enp1s0f1np1",
                                                   "cluster_hca": "rocep1s0f1"}),
                                 ["10.0.0.%d" % i for i in range(1, 5)])
    head, worker = plans[0], plans[1]
    assert head["ceiling"]["nodes"] == 4 and head["advice"]["measured"][-1]["nodes"] == 4
    assert any(w.startswith("topology: 26b-a4b on 4 nodes adds only 6%") for w in head["warnings"])
    # Said once per cluster, on the head.
    assert not any(w.startswith("topology:") for w in worker["warnings"])
    text = "\n".join(plan_summary.summarize(head))
    assert "memory-bandwidth ceiling: " in text
    assert "1 node 47.7 / 216, 2 nodes 61.6 / 299, 4 nodes 65.6 / 298" in text
