"""tests/harness/catalog_validate.py: the checks on a loaded catalog, on the shipped one and on broken copies."""
import copy

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from conftest import load_harness_module

catalog_validate = load_harness_module("catalog_validate.py")


@pytest.fixture()
def catalog():
    return cat.load_catalog()


def test_catalog_is_structurally_sound(catalog):
    assert catalog_validate.validate_catalog(catalog) == []


def test_validation_catches_a_bad_row(catalog):
    catalog["baselines"][0]["rows"][0]["single_stream_tok_s"] = "fast"
    catalog["baselines"][0]["rows"].append(dict(catalog["baselines"][0]["rows"][1]))
    problems = catalog_validate.validate_catalog(catalog)
    assert any("is not a figure" in p for p in problems) and any("duplicates" in p for p in problems)


def test_validation_of_the_new_tables(catalog):
    catalog["defaults"]["objective"] = "latency"
    catalog["defaults"]["bench_mode"] = "soak"
    catalog["objectives"]["interactive"]["metric"] = "tok_s"
    del catalog["bench_modes"]["sweep"]["description"]
    catalog["models"]["12b"]["smoke_expected_misses"]["vision"][0]["unless"] = {"drafters": ["eagle"]}
    catalog["models"]["e2b"]["smoke_expected_misses"]["speling"] = [{"miss": "x"}]
    catalog["models"]["e4b"]["smoke_expected_misses"]["thinking"][0]["when"] = {"gpus": 2}
    catalog["diagnostics"][0]["patterns"].append("unbalanced (")
    catalog["diagnostics"][1]["id"] = catalog["diagnostics"][0]["id"]
    del catalog["diagnostics"][2]["fix"]
    catalog["releases"]["v0.30.0"]["defects"][0]["when"]["profiles"] = ["h100"]
    problems = "\n".join(catalog_validate.validate_catalog(catalog))
    for expected in ("defaults.objective 'latency'", "defaults.bench_mode 'soak'", "objectives.interactive.metric",
                     "bench_modes.sweep lacks a description", "smoke_expected_misses.vision[0].unless.drafters",
                     "unknown smoke check speling", "unknown condition gpus", "does not compile", "duplicated id",
                     "must have exactly the keys", "defect expert-parallel-copied-into-drafter when.profiles"):
        assert expected in problems, expected


@pytest.mark.parametrize("change,problem", [
    ({"stand_in": False}, "only a stand-in's baseline may be calibrated"),
    ({"single_stream_tok_s": 555}, "a calibrated row records no figures"),
    ({"output_tokens": 8}, "output_tokens=8 must be an integer of at least 16"),
], ids=["real-hardware-calibrated", "calibrated-with-a-figure", "calibrated-too-short"])
def test_validation_refuses_a_misused_calibrated_row(catalog, change, problem):
    broken = copy.deepcopy(catalog)
    group = next(g for g in broken["baselines"] if g["profile"] == "cpu")
    if "stand_in" in change:
        group["stand_in"] = change["stand_in"]
    else:
        group["rows"][0].update(change)
    assert any(problem in p for p in catalog_validate.validate_catalog(broken)), catalog_validate.validate_catalog(broken)


def test_validation_refuses_a_request_length_on_a_measured_row(catalog):
    """A measured figure keeps the length it was measured at: only calibrated rows may name their own."""
    broken = copy.deepcopy(catalog)
    group = next(g for g in broken["baselines"] if g["profile"] == "rtx_pro_6000")
    group["rows"][0]["output_tokens"] = 256
    problems = catalog_validate.validate_catalog(broken)
    assert any("output_tokens belongs to calibrated rows only" in p for p in problems), problems


def test_a_first_start_failure_names_a_diagnosis(catalog):
    """The notes: the 31B's first start on the RTX 5090 runs out of KV cache and the restart comes up."""
    assert catalog["profiles"]["rtx_5090"]["models"]["31b"]["first_start_failure"] == "kv_cache_below_one_request"
    broken = copy.deepcopy(catalog)
    broken["profiles"]["rtx_5090"]["models"]["31b"]["first_start_failure"] = "kv_too_small"
    assert any("first_start_failure 'kv_too_small' is not a diagnostics id" in p for p in catalog_validate.validate_catalog(broken))


def test_the_command_line_names_each_problem(tmp_path, capsys):
    assert catalog_validate.main(["catalog_validate.py"]) == 0
    assert capsys.readouterr().out.strip().endswith("0 problem(s)")
    broken = cat.load_catalog()
    broken["defaults"]["objective"] = "latency"
    path = tmp_path / "catalog.yml"
    path.write_text(cat.yaml.safe_dump(broken), encoding="utf-8")
    assert catalog_validate.main(["catalog_validate.py", str(path)]) == 1
    assert "defaults.objective 'latency' is not an objective" in capsys.readouterr().out


def test_the_smoke_checks_and_condition_keys_are_the_plugins_own():
    """The validator checks against the tuples the smoke grader and the condition evaluator use, not copies."""
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog_conditions, smoke
    assert catalog_validate.SMOKE_CHECKS is smoke.CHECKS
    assert catalog_validate.CONDITION_KEYS is catalog_conditions.CONDITION_KEYS


def test_validation_wants_the_why_of_a_profiles_eager_mode(catalog):
    """profiles.cpu plans --enforce-eager; the reason line it gives comes from stand_in_differences."""
    assert catalog["profiles"]["cpu"]["enforce_eager"] is True
    del catalog["profiles"]["cpu"]["stand_in_differences"]["--enforce-eager"]
    assert catalog_validate.validate_catalog(catalog) == [
        "profiles.cpu.enforce_eager needs its why in stand_in_differences[--enforce-eager]"]


def _group(catalog, profile, nodes):
    return next(g for g in catalog["baselines"] if g["profile"] == profile and g["nodes"] == nodes)


@pytest.mark.parametrize("change,problem", [
    (lambda c: _group(c, "dgx_spark", 1)["rows"][0].update(executor="ray"), "a single-node row has no executor (got 'ray')"),
    (lambda c: _group(c, "cpu", 1).update(nodes=2, executor="mp"),
     "a calibrated row is measured under the plan's own executor in the same run; drop executor 'mp'"),
    (lambda c: _group(c, "dgx_spark", 2)["rows"][0].update(executor="slurm"),
     "executor 'slurm' must name the executor the figures were measured under (ray, mp"),
    (lambda c: c["defaults"].pop("baseline_executor"), "defaults.baseline_executor None is not an executor"),
], ids=["single-node-with-executor", "calibrated-with-executor", "unknown-executor", "no-default-executor"])
def test_validation_of_the_measured_executor(catalog, change, problem):
    """Multi-node figures name the executor they were measured under (the notes' run_cluster.sh: Ray); one node has
    none, and a calibrated stand-in row is measured under the plan's own."""
    broken = copy.deepcopy(catalog)
    change(broken)
    problems = catalog_validate.validate_catalog(broken)
    assert any(problem in p for p in problems), problems


def test_a_row_measured_under_another_executor_is_no_duplicate(catalog):
    group = _group(catalog, "dgx_spark", 2)
    group["rows"].append(dict(group["rows"][0], executor="mp"))
    assert catalog_validate.validate_catalog(catalog) == []


def test_validation_of_the_compile_cache_settings(catalog):
    """The notes' "Changing --max-model-len invalidates the cache" is data: each entry names a managed flag."""
    entry = catalog["rules"]["compile_cache_settings"][0]
    assert entry["flag"] == "--max-model-len" and entry["flag"] in catalog["rules"]["managed_flags"]
    broken = copy.deepcopy(catalog)
    broken["rules"]["compile_cache_settings"][0]["flag"] = "--max-len"
    broken["rules"]["compile_cache_settings"].append({"setting": "max_num_seqs"})
    problems = catalog_validate.validate_catalog(broken)
    assert "rules.compile_cache_settings[0].flag --max-len is not a flag the planner manages (rules.managed_flags)" in problems
    assert "rules.compile_cache_settings[1] lacks flag, effect, notes" in problems


@pytest.mark.parametrize("change,problem", [
    (lambda c: c["profiles"]["dgx_spark"].pop("memory_budget"), "profiles.dgx_spark has unified memory but no memory_budget"),
    (lambda c: c["profiles"]["dgx_spark"]["memory_budget"].update(host_reserve_gib="12"),
     "profiles.dgx_spark.memory_budget.host_reserve_gib must be a figure in GiB"),
    (lambda c: c["profiles"]["dgx_spark"]["memory_budget"].pop("engine_overhead_why"),
     "profiles.dgx_spark.memory_budget.engine_overhead_why gives no why"),
    (lambda c: c["profiles"]["rtx_pro_6000"].update(memory_budget={"host_reserve_gib": 4}),
     "profiles.rtx_pro_6000 has a memory_budget but no unified memory"),
], ids=["missing", "not-a-figure", "no-why", "discrete"])
def test_validation_of_the_memory_budget_figures(catalog, change, problem):
    """The planner's memory budget reads a unified-memory profile's reserve and engine estimate, each with its why."""
    broken = copy.deepcopy(catalog)
    change(broken)
    problems = catalog_validate.validate_catalog(broken)
    assert any(problem in p for p in problems), problems
