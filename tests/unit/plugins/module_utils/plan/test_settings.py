"""plugins/module_utils/plan/settings.py: one step per serving setting, run in order by the planner.

The settings' values, refusals and warnings are held by the golden plans in test_planner.py; this file holds
the split itself: each step sets its own settings and no other step's, and a step that reads an earlier one's
setting runs after it.
"""
import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils import planner
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import settings as plan_settings

SETS = {
    plan_settings.language_model_only: {"language_model_only", "vision", "required_lmo"},
    plan_settings.max_model_len: {"max_model_len"},
    plan_settings.media: {"images_per_prompt", "audio"},
    plan_settings.max_num_batched_tokens: {"mnbt"},
    plan_settings.vision_fit: set(),
    plan_settings.gpu_memory_utilization: {"gpu_util"},
    plan_settings.max_num_seqs: {"max_num_seqs"},
    plan_settings.endpoint: {"port", "served_name"},
    plan_settings.client_endpoint: {"client_endpoint"},
    plan_settings.api_key: set(),
    plan_settings.extra_args: {"extra_args"},
}


def resolved_up_to_settings(request):
    state = planner._Planner(cat.load_catalog(), request)
    for step in (state.resolve_profile, state.resolve_model, state.resolve_nodes, state.resolve_release,
                 state.resolve_runtime, state.resolve_binding, state.resolve_drafter):
        step()
    return state


def test_every_step_is_run_once_in_order():
    assert list(plan_settings.STEPS) == list(SETS)


@pytest.mark.parametrize("request_", [
    {"profile": "cpu"},
    {"profile": "rtx_5090", "model": "31b"},
    {"profile": "dgx_spark", "model": "26b-a4b", "api_key": "sk-0123456789", "extra_args": ["--seed", "1"]},
], ids=["cpu", "rtx_5090-31b", "dgx_spark-key-extra"])
def test_each_step_sets_its_own_settings(request_):
    state = resolved_up_to_settings(request_)
    for step, names in SETS.items():
        before = set(vars(state))
        step(state)
        assert set(vars(state)) - before == names, step.__name__
    assert state.max_model_len > 0 and state.mnbt > 0 and 0 < state.gpu_util <= 1 and state.served_name


def test_the_planner_runs_the_steps():
    request = {"profile": "rtx_pro_6000", "model": "12b"}
    state = resolved_up_to_settings(request)
    state.resolve_settings()
    alone = resolved_up_to_settings(request)
    plan_settings.resolve(alone)
    assert vars(state) == vars(alone)
