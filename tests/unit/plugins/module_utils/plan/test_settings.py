"""plugins/module_utils/plan/settings.py: one step per serving setting, run in order by the planner.

The settings' values, refusals and warnings are held by the golden plans in test_planner.py; this file holds
the split itself: each step sets its own settings and no other step's, and a step that reads an earlier one's
setting runs after it.
"""
import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import planner, settings
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan.state import PlanState

SETS = {
    settings.language_model_only: {"language_model_only", "vision", "required_lmo"},
    settings.max_model_len: {"max_model_len"},
    settings.media: {"images_per_prompt", "audio"},
    settings.max_num_batched_tokens: {"mnbt"},
    settings.vision_fit: set(),
    settings.gpu_memory_utilization: {"gpu_util"},
    settings.max_num_seqs: {"max_num_seqs"},
    settings.endpoint: {"port", "served_name"},
    settings.client_endpoint: {"client_endpoint"},
    settings.api_key: set(),
    settings.extra_args: {"extra_args"},
}


def resolved_up_to_settings(request):
    """The planner's record once every step before the settings has run."""
    state = PlanState(cat.load_catalog(), request)
    for step in planner.STEPS[:planner.STEPS.index(settings.resolve)]:
        step(state)
    return state


def test_every_step_is_run_once_in_order():
    assert list(settings.STEPS) == list(SETS)


@pytest.mark.parametrize("request_", [
    {"profile": "cpu"},
    {"profile": "rtx_5090", "model": "31b"},
    {"profile": "dgx_spark", "model": "26b-a4b", "api_key": "sk-0123456789", "extra_args": ["--seed", "1"]},
], ids=["cpu", "rtx_5090-31b", "dgx_spark-key-extra"])
def test_each_step_sets_its_own_settings(request_):
    state = resolved_up_to_settings(request_)
    for step, names in SETS.items():
        before = set(state.filled())
        step(state)
        assert set(state.filled()) - before == names, step.__name__
    assert state.max_model_len > 0 and state.mnbt > 0 and 0 < state.gpu_util <= 1 and state.served_name


def test_the_planner_runs_the_steps():
    assert planner.STEPS.count(settings.resolve) == 1
    request = {"profile": "rtx_pro_6000", "model": "12b"}
    state = resolved_up_to_settings(request)
    settings.resolve(state)
    alone = resolved_up_to_settings(request)
    for step in settings.STEPS:
        step(alone)
    assert state.filled() == alone.filled()
