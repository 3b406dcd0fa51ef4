"""Check a catalog for the mistakes the planner would otherwise meet at plan time (a tool of the checkout).

``validate_catalog`` returns a list of problems (empty when the catalog is sound): unknown names in conditions,
figures that are not figures, smoke misses and diagnostics that name what does not exist. The unit tests run it
on the shipped catalog and on broken copies (tests/unit/harness/test_catalog_validate.py); no plugin calls it,
so it does not ship in the collection. The loader and the queries live in plugins/module_utils/catalog.py.

    python tests/harness/catalog_validate.py [CATALOG.yml]

prints each problem of data/catalog.yml (or of the catalog named, such as one passed as the plan's
catalog_path) and exits 1 when there is one.
"""
import pathlib
import re
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
# The collection's plugins as ansible_collections.sparkfleet.vllm.*, straight from the checkout.
sys.path.insert(0, str(REPO / ".collections"))

from ansible_collections.sparkfleet.vllm.plugins.module_utils.catalog import (  # noqa: E402
    DRAFTER_NONE,
    METRICS,
    TOP_LEVEL_KEYS,
    baseline_rows,
    drafter_checkpoint,
    load_catalog,
    version_tuple,
)
from ansible_collections.sparkfleet.vllm.plugins.module_utils.catalog_conditions import CONDITION_KEYS  # noqa: E402
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan.planner import EXECUTORS, RUNTIMES  # noqa: E402
from ansible_collections.sparkfleet.vllm.plugins.module_utils.smoke import CHECKS as SMOKE_CHECKS  # noqa: E402

# The fields of a diagnostics entry (plugins/module_utils/diagnose.py reads them).
DIAGNOSTIC_FIELDS = ("id", "patterns", "title", "explanation", "fix")


def _is_figure(value):
    if value is None or isinstance(value, bool):
        return value is None
    if isinstance(value, (int, float)):
        return value >= 0
    if isinstance(value, list):
        return len(value) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value) and value[0] <= value[1]
    return False


def _condition_problems(catalog, where, when):
    if when is None:
        return []
    if not isinstance(when, dict):
        return ["%s must be a mapping of conditions" % where]
    problems = []
    names = {"profiles": catalog["profiles"], "drafters": list(catalog["drafters"]) + [DRAFTER_NONE],
             "models": catalog["models"], "models_except": catalog["models"]}
    for key, value in when.items():
        if key not in CONDITION_KEYS:
            problems.append("%s: unknown condition %s (valid: %s)" % (where, key, ", ".join(CONDITION_KEYS)))
        elif key in names:
            unknown = [v for v in (value if isinstance(value, list) else [value]) if v not in names[key]]
            if not isinstance(value, list) or unknown:
                problems.append("%s.%s must list known names (unknown: %s)" % (where, key, unknown or value))
        elif key in ("min_nodes", "max_nodes") and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            problems.append("%s.%s must be a positive integer" % (where, key))
    return problems


def _smoke_misses_problems(catalog, model, table):
    if table is None:
        return []
    where = "models.%s.smoke_expected_misses" % model
    if not isinstance(table, dict):
        return ["%s must map smoke checks to lists of misses" % where]
    problems = []
    for check, entries in table.items():
        if check not in SMOKE_CHECKS:
            problems.append("%s names unknown smoke check %s (valid: %s)" % (where, check, ", ".join(SMOKE_CHECKS)))
        if not isinstance(entries, list) or not entries:
            problems.append("%s.%s must be a non-empty list" % (where, check))
            continue
        for index, entry in enumerate(entries):
            at = "%s.%s[%d]" % (where, check, index)
            if not isinstance(entry, dict) or not str(entry.get("miss") or "").strip():
                problems.append("%s lacks miss" % at)
                continue
            unknown = sorted(set(entry) - {"miss", "when", "unless", "note"})
            if unknown:
                problems.append("%s has unknown keys %s" % (at, ", ".join(unknown)))
            problems.extend(_condition_problems(catalog, at + ".when", entry.get("when")))
            problems.extend(_condition_problems(catalog, at + ".unless", entry.get("unless")))
    return problems


def _diagnostics_problems(table):
    if not isinstance(table, list) or not table:
        return ["diagnostics must be a non-empty list"]
    problems, seen = [], set()
    for index, entry in enumerate(table):
        where = "diagnostics[%d] (%s)" % (index, (entry or {}).get("id") if isinstance(entry, dict) else entry)
        if not isinstance(entry, dict):
            problems.append("%s is not a mapping" % where)
            continue
        if set(entry) != set(DIAGNOSTIC_FIELDS):
            problems.append("%s must have exactly the keys %s" % (where, ", ".join(DIAGNOSTIC_FIELDS)))
        if entry.get("id") in seen:
            problems.append("%s: duplicated id" % where)
        seen.add(entry.get("id"))
        for field in ("id", "title", "explanation", "fix"):
            if not isinstance(entry.get(field), str) or not entry[field].strip():
                problems.append("%s.%s must be a non-empty string" % (where, field))
        patterns = entry.get("patterns")
        if not isinstance(patterns, list) or not patterns:
            problems.append("%s.patterns must be a non-empty list of regular expressions" % where)
            continue
        for pattern in patterns:
            try:
                re.compile(pattern)
            except (re.error, TypeError) as exc:
                problems.append("%s: pattern %r does not compile: %s" % (where, pattern, exc))
    return problems


def _runtime_disk_problems(defaults, releases):
    """defaults.runtime_disk_gib sizes every runtime; a release may override a runtime's figure, never add one."""
    sizes = defaults.get("runtime_disk_gib")
    if not isinstance(sizes, dict) or set(sizes) != set(RUNTIMES):
        return ["defaults.runtime_disk_gib must give a size in GiB for each runtime (%s)" % ", ".join(RUNTIMES)]
    problems = ["defaults.runtime_disk_gib.%s must be a positive number" % k for k, v in sizes.items()
                if not isinstance(v, (int, float)) or v <= 0]
    for name, release in releases.items():
        for key, value in (release.get("runtime_disk_gib") or {}).items():
            if key not in sizes or not isinstance(value, (int, float)) or value <= 0:
                problems.append("releases.%s.runtime_disk_gib.%s must be a runtime (%s) with a positive size" % (
                    name, key, ", ".join(RUNTIMES)))
    return problems


def _compile_cache_problems(rules):
    """rules.compile_cache_settings: each names a planned setting, the flag the planner manages for it, its effect and
    the notes' words (plan/settings.py's compile_cache quotes them)."""
    problems = []
    for index, entry in enumerate(rules.get("compile_cache_settings") or []):
        where = "rules.compile_cache_settings[%d]" % index
        missing = [k for k in ("setting", "flag", "effect", "notes") if not str((entry or {}).get(k) or "").strip()]
        if missing:
            problems.append("%s lacks %s" % (where, ", ".join(missing)))
        elif entry["flag"] not in (rules.get("managed_flags") or {}):
            problems.append("%s.flag %s is not a flag the planner manages (rules.managed_flags)" % (where, entry["flag"]))
    return problems


def _executor_problems(row, where):
    """A multi-node row with figures names the executor they were measured under (its own, its table's or
    defaults.baseline_executor); a single-node row has none, and a calibrated row is measured under the plan's own."""
    executor = row.get("executor")
    if not isinstance(row.get("nodes"), int) or row["nodes"] <= 1:
        return ["%s: a single-node row has no executor (got %r)" % (where, executor)] if executor is not None else []
    if row.get("calibrate"):
        return ["%s: a calibrated row is measured under the plan's own executor in the same run; drop executor %r" % (
            where, executor)] if executor is not None else []
    if executor not in EXECUTORS:
        return ["%s: executor %r must name the executor the figures were measured under (%s; defaults.baseline_executor "
                "unless the table or row names one)" % (where, executor, ", ".join(EXECUTORS))]
    return []


def _memory_budget_problems(name, profile):
    """A unified-memory profile carries the figures of its plan-time memory budget (plugins/module_utils/plan/memory.py),
    each a figure with its why; a discrete card has none."""
    budget = profile.get("memory_budget")
    if not profile.get("unified_memory"):
        return ["profiles.%s has a memory_budget but no unified memory" % name] if budget is not None else []
    if not isinstance(budget, dict):
        return ["profiles.%s has unified memory but no memory_budget (host_reserve_gib, engine_overhead_gib)" % name]
    problems = [] if _is_figure(profile.get("memory_gb")) and profile.get("memory_gb") else [
        "profiles.%s has unified memory but no memory_gb" % name]
    for field in ("host_reserve_gib", "engine_overhead_gib"):
        if not isinstance(budget.get(field), (int, float)) or isinstance(budget.get(field), bool) or budget[field] < 0:
            problems.append("profiles.%s.memory_budget.%s must be a figure in GiB" % (name, field))
        elif not str(budget.get(field.replace("_gib", "_why")) or "").strip():
            problems.append("profiles.%s.memory_budget.%s gives no why" % (name, field.replace("_gib", "_why")))
    return problems


def validate_catalog(catalog):
    """Structural problems in a catalog, as a list of strings (empty when sound)."""
    problems = []
    for key in TOP_LEVEL_KEYS:
        if key not in catalog:
            problems.append("missing top-level key %s" % key)
    if problems:
        return problems
    models, profiles, releases, drafters = catalog["models"], catalog["profiles"], catalog["releases"], catalog["drafters"]
    defaults = catalog["defaults"]
    if defaults.get("model") not in models:
        problems.append("defaults.model %r is not a model" % defaults.get("model"))
    if defaults.get("release") not in releases:
        problems.append("defaults.release %r is not a release" % defaults.get("release"))
    for key in ("executor", "baseline_executor"):
        if defaults.get(key) not in EXECUTORS:
            problems.append("defaults.%s %r is not an executor (%s)" % (key, defaults.get(key), ", ".join(EXECUTORS)))
    for table, metric_needed in (("objectives", True), ("bench_modes", False)):
        entries = catalog[table]
        if not isinstance(entries, dict) or not entries:
            problems.append("%s must be a non-empty mapping" % table)
            continue
        for name, entry in entries.items():
            if not isinstance(entry, dict) or not str(entry.get("description") or "").strip():
                problems.append("%s.%s lacks a description" % (table, name))
            elif metric_needed and entry.get("metric") not in METRICS:
                problems.append("%s.%s.metric %r is not a baseline metric (%s)" % (
                    table, name, entry.get("metric"), ", ".join(METRICS)))
    if defaults.get("objective") not in (catalog["objectives"] or {}):
        problems.append("defaults.objective %r is not an objective" % defaults.get("objective"))
    if defaults.get("bench_mode") not in (catalog["bench_modes"] or {}):
        problems.append("defaults.bench_mode %r is not a bench mode" % defaults.get("bench_mode"))
    problems.extend(_runtime_disk_problems(defaults, releases))
    problems.extend(_diagnostics_problems(catalog["diagnostics"]))
    problems.extend(_compile_cache_problems(catalog["rules"]))
    for name, model in models.items():
        if name != name.lower():
            problems.append("model key %s must be lower case" % name)
        for field in ("checkpoint", "served_name", "max_context", "vision", "audio", "source"):
            if field not in model:
                problems.append("models.%s lacks %s" % (name, field))
        problems.extend(_smoke_misses_problems(catalog, name, model.get("smoke_expected_misses")))
        real = model.get("stands_in_for")
        if real is not None:
            if not model.get("stand_in"):
                problems.append("models.%s stands in for %s but is not marked stand_in: true" % (name, real))
            if real not in models or (models.get(real) or {}).get("stand_in"):
                problems.append("models.%s.stands_in_for %r is not a real (non-stand-in) model" % (name, real))
            if model.get("source") == "generate" and not isinstance(model.get("generate"), dict):
                problems.append("models.%s is generated but has no generate block (its shape)" % name)
        for flag, why in (model.get("gaps") or {}).items():
            if not str(why or "").strip():
                problems.append("models.%s.gaps.%s gives no reason" % (name, flag))
    for name, drafter in drafters.items():
        for model in (drafter.get("checkpoints") or {}):
            if model not in models:
                problems.append("drafters.%s.checkpoints names unknown model %s" % (name, model))
        if not isinstance(drafter.get("num_speculative_tokens"), int):
            problems.append("drafters.%s.num_speculative_tokens must be an integer" % name)
    for name, profile in profiles.items():
        for field in ("gpu_memory_utilization", "max_num_batched_tokens", "default_drafter", "default_release", "node_counts"):
            if field not in profile:
                problems.append("profiles.%s lacks %s" % (name, field))
        problems.extend(_memory_budget_problems(name, profile))
        if profile.get("default_release") not in releases:
            problems.append("profiles.%s.default_release %r is not a release" % (name, profile.get("default_release")))
        if profile.get("default_drafter") not in list(drafters) + [DRAFTER_NONE]:
            problems.append("profiles.%s.default_drafter %r is not a drafter" % (name, profile.get("default_drafter")))
        if profile.get("enforce_eager") and "--enforce-eager" not in (profile.get("stand_in_differences") or {}):
            problems.append("profiles.%s.enforce_eager needs its why in stand_in_differences[--enforce-eager]" % name)
        reference = profile.get("stand_in_reference_profile")
        if reference is not None and (reference not in profiles or (profiles.get(reference) or {}).get("stand_in")):
            problems.append("profiles.%s.stand_in_reference_profile %r is not a real (non-stand-in) profile" % (
                name, reference))
        diagnosis_ids = [d.get("id") for d in catalog.get("diagnostics") or []]
        for model, rules in (profile.get("models") or {}).items():
            if model not in models:
                problems.append("profiles.%s.models names unknown model %s" % (name, model))
            failure = (rules or {}).get("first_start_failure")
            if failure is not None and failure not in diagnosis_ids:
                problems.append("profiles.%s.models.%s.first_start_failure %r is not a diagnostics id" % (name, model, failure))
    for name, release in releases.items():
        if version_tuple(release.get("version")) is None:
            problems.append("releases.%s has no version" % name)
        for defect in release.get("defects") or []:
            if defect.get("action") not in ("refuse", "warn", "env"):
                problems.append("releases.%s defect %s has action %r" % (name, defect.get("id"), defect.get("action")))
            problems.extend(_condition_problems(catalog, "releases.%s defect %s when" % (name, defect.get("id")),
                                                defect.get("when")))
    seen = {}
    for row in baseline_rows(catalog):
        where = "baseline %s/%s/%s nodes/%s/%s (%s)" % (
            row.get("profile"), row.get("model"), row.get("nodes"), row.get("release"), row.get("drafter"), row.get("table"))
        if row.get("profile") not in profiles:
            problems.append("%s: unknown profile" % where)
        if row.get("model") not in models:
            problems.append("%s: unknown model" % where)
        if row.get("release") not in releases:
            problems.append("%s: unknown release" % where)
        if row.get("drafter") != DRAFTER_NONE and not drafter_checkpoint(catalog, row.get("drafter"), row.get("model")):
            problems.append("%s: no such drafter for the model" % where)
        if not isinstance(row.get("nodes"), int) or row["nodes"] < 1:
            problems.append("%s: nodes must be a positive integer" % where)
        for metric in METRICS:
            if not _is_figure(row.get(metric)):
                problems.append("%s: %s=%r is not a figure" % (where, metric, row.get(metric)))
        if row.get("calibrate"):
            if not row.get("stand_in"):
                problems.append("%s: only a stand-in's baseline may be calibrated; real hardware keeps its measured "
                                "figures" % where)
            if any(row.get(m) is not None for m in METRICS):
                problems.append("%s: a calibrated row records no figures" % where)
        elif not any(row.get(m) is not None for m in METRICS):
            problems.append("%s: no figure at all" % where)
        problems.extend(_executor_problems(row, where))
        if row.get("output_tokens") is not None:
            if not row.get("calibrate"):
                problems.append("%s: output_tokens belongs to calibrated rows only; measured figures keep the length "
                                "they were measured at (1,024)" % where)
            if not isinstance(row["output_tokens"], int) or isinstance(row["output_tokens"], bool) or row["output_tokens"] < 16:
                problems.append("%s: output_tokens=%r must be an integer of at least 16" % (where, row["output_tokens"]))
        key = (row.get("profile"), row.get("model"), row.get("drafter"), row.get("nodes"), row.get("release"), row.get("date"),
               bool(row.get("patched")), row.get("executor"))
        if key in seen:
            problems.append("%s: duplicates %s" % (where, seen[key]))
        seen[key] = where
    return problems


def main(argv):
    catalog = load_catalog(argv[1] if len(argv) > 1 else None, use_cache=False)
    problems = validate_catalog(catalog)
    for problem in problems:
        print(problem)
    print("%d problem(s)" % len(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
