"""plugins/module_utils/plan/state.py: the record the planner's steps fill.

Every field of the record is named in state.FIELDS with the step that fills it; run step by step, each of the
planner's steps fills exactly those fields, so a step that starts reading or writing another's field (or a field
the record does not name) fails here, and a field read before its step has run is an error, not a default.
"""
import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import planner, state
from conftest import keyless

REPLICA_NODES = [{"host": "spark-%d" % (i + 1), "address": "10.0.0.%d" % (i + 1), "machine": "192.0.2.%d" % (11 + i),
                  "client": "192.0.2.%d" % (11 + i)} for i in range(2)]
REQUESTS = {
    "cpu": {"profile": "cpu"},
    "cpu-stand-in": {"profile": "cpu", "model": "tiny-26b-a4b"},
    "mp-head": {"profile": "dgx_spark", "node_count": 2, "node_index": 0, "head_address": "10.0.0.1",
                "node_address": "10.0.0.1", "executor": "mp"},
    "ray-worker": {"profile": "dgx_spark", "node_count": 2, "node_index": 1, "head_address": "10.0.0.1",
                   "node_address": "10.0.0.2", "executor": "ray", "api_key": "sk-0123456789"},
    "replica": {"profile": "dgx_spark", "node_count": 2, "node_index": 1, "head_address": "10.0.0.1",
                "node_address": "10.0.0.2", "cluster_nodes": REPLICA_NODES, "topology": "replicas", "host": "spark-2"},
    "drafter-extra-args": {"profile": "rtx_pro_6000", "model": "31b", "drafter": "auto",
                           "extra_args": ["--seed", "1"], "env": {"A": "1"}},
}


def step_name(step):
    return "%s.%s" % (step.__module__.rsplit(".", 1)[-1], step.__name__)


def test_the_record_names_its_steps_in_the_planners_order():
    names = [step_name(step) for step in planner.STEPS]
    filling = [name for name, _fields in state.FIELDS]
    assert set(filling) <= set(names), set(filling) - set(names)
    assert filling == [name for name in names if name in filling]


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_each_step_fills_the_fields_the_record_names_and_no_other(name):
    catalog = cat.load_catalog()
    request = keyless(REQUESTS[name])
    record = state.PlanState(catalog, request)
    assert set(record.filled()) == set(state.GIVEN)
    fields = dict(state.FIELDS)
    for step in planner.STEPS:
        before = set(record.filled())
        step(record)
        assert set(record.filled()) - before == set(fields.get(step_name(step), ())), step_name(step)
    assert set(record.filled()) == set(state.PlanState.__slots__)
    assert planner.contract(record) == planner.plan(catalog, request)


def test_a_field_no_step_has_filled_is_absent():
    record = state.PlanState(cat.load_catalog(), {})
    with pytest.raises(AttributeError):
        record.profile  # noqa: B018 -- reading it is the test
    with pytest.raises(AttributeError):
        record.anything_else = 1


def test_reasons_and_warnings_keep_the_first_of_each():
    record = state.PlanState(cat.load_catalog(), {})
    for text in ("b", "a", "b"):
        record.reason(text)
        record.warn(text)
    assert record.reasons == record.warnings == ["b", "a"]
