"""plugins/module_utils/catalog_conditions.py: the catalog's `when` / `unless` conditions against a plan's context."""
import ast

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog_conditions
from conftest import REPO


@pytest.mark.parametrize("when,context,holds", [
    ({}, {}, True),
    ({"profiles": ["dgx_spark"]}, {"profile": "dgx_spark"}, True),
    ({"profiles": ["dgx_spark"]}, {"profile": "rtx_5090"}, False),
    ({"profiles": ["dgx_spark"]}, {}, False),
    ({"drafters": ["dflash"], "min_nodes": 2}, {"drafter": "dflash", "node_count": 2}, True),
    ({"drafters": ["dflash"], "min_nodes": 2}, {"drafter": "dflash", "node_count": 1}, False),
    ({"models_except": ["12b"]}, {"model": "12b"}, False),
    ({"max_nodes": 1}, {"node_count": 1}, True),
    ({"max_nodes": 1}, {"node_count": 2}, False),
    ({"max_nodes": 1}, {}, False),
    ({"expert_parallel": True}, {"expert_parallel": False}, False),
])
def test_conditions_hold(when, context, holds):
    assert catalog_conditions.conditions_hold(when, context) is holds


def test_an_unknown_condition_names_the_valid_ones():
    with pytest.raises(catalog_conditions.ConditionError, match="unknown condition gpus .valid: profiles, drafters"):
        catalog_conditions.conditions_hold({"gpus": 2}, {})
    assert issubclass(catalog_conditions.ConditionError, ValueError)


@pytest.mark.parametrize("module", ["catalog_conditions.py", "smoke.py"])
def test_host_side_code_needs_neither_the_catalog_nor_yaml(module):
    """The smoke module may run on a managed host: what it imports from module_utils must not load data/catalog.yml."""
    tree = ast.parse((REPO / "plugins/module_utils" / module).read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
            imported.update("%s.%s" % (node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    assert not any(name == "yaml" or name.endswith("module_utils.catalog") for name in imported), imported
