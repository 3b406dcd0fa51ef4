"""Refusal paths of the planner that no other test reaches (tests/unit/test_mutations.py runs each of these with its
refusal removed, and each must then fail). Each asserts the rule and the message the user gets."""
import copy

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils import vllm_flags
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import planner
from conftest import keyless


@pytest.fixture(scope="module")
def catalog():
    return cat.load_catalog()


def refusal(catalog, request):
    with pytest.raises(planner.PlanError) as err:
        planner.plan(catalog, keyless(request))
    return err.value


def test_native_runtime_is_refused_for_a_release_without_a_pip_package(catalog):
    """A tag the catalog does not know (placed after v0.30.0) has an image but no pip package: native is refused."""
    err = refusal(catalog, {"profile": "rtx_pro_6000", "release": "v0.31.0", "runtime": "native"})
    assert err.rule == "runtime" and err.variable == "vllm_runtime" and err.value == "native"
    assert str(err).startswith("vLLM v0.31.0 has no pip package in the catalog; set vllm_runtime=compose"), str(err)


def test_a_refusing_release_defect_refuses_without_the_multi_node_release_rule(catalog):
    """v0.26.0's multi-node defect refuses a cluster by itself: with rules.min_release_multi_node lowered so that
    resolve_release lets v0.26.0 through, the release's own defect list still stops the plan."""
    lowered = copy.deepcopy(catalog)
    lowered["rules"]["min_release_multi_node"] = "v0.26.0"
    err = refusal(lowered, {"profile": "dgx_spark", "node_count": 2, "head_address": "192.0.2.101", "drafter": "none",
                            "image": "vllm/vllm-openai:v0.26.0"})
    assert err.rule == "release-defect:multi-node-rpc-timeout" and err.variable == "vllm_image", (err.rule, str(err))
    assert str(err).startswith("vLLM v0.26.0 cannot run this: "), str(err)


def test_extra_args_are_refused_when_the_flag_list_cannot_be_read(catalog, monkeypatch):
    """Without vLLM's flag list the guards cannot tell a managed or secret flag in any spelling: refuse, never pass."""
    def missing():
        raise vllm_flags.FlagsError("vLLM's flag list not found at /nowhere/vllm_serve_flags.yml: gone")
    monkeypatch.setattr(vllm_flags, "load_flags", missing)
    err = refusal(catalog, {"profile": "rtx_pro_6000", "extra_args": ["--enforce-eager"]})
    assert err.rule == "flags" and err.variable == "vllm_extra_args"
    assert str(err).startswith("cannot check vllm_extra_args: vLLM's flag list not found at /nowhere"), str(err)


def test_a_cluster_on_a_release_before_the_multi_node_minimum_is_refused_by_that_rule(catalog):
    """v0.26.0 on two nodes: the multi-node minimum refuses it first, with its own rule (v0.26.0's defect, which says
    much the same, comes later: test_documented_failures_are_refused[6] passes on either)."""
    err = refusal(catalog, {"profile": "dgx_spark", "node_count": 2, "head_address": "192.0.2.101",
                            "image": "vllm/vllm-openai:v0.26.0"})
    assert err.rule == "multi-node-release" and err.variable == "vllm_image" and err.value == "v0.26.0", err.rule
    assert str(err).startswith("multi-node needs vLLM %s or later" % catalog["rules"]["min_release_multi_node"]), str(err)
