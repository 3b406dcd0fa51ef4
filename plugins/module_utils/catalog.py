# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Load and query the sparkfleet.vllm catalog (``data/catalog.yml``).

The catalog is the single source of truth for models, drafters, hardware
profiles, vLLM releases, rules and measured baselines. Everything here is pure:
``load_catalog`` reads the file once (cached per path and mtime) and the other
functions answer questions about the loaded dict, so unit tests can feed a
modified copy.

The catalog lives on the controller (it ships inside the collection); code
that runs on a managed host receives the values it needs as arguments.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os
import re

from ansible_collections.sparkfleet.vllm.plugins.module_utils import gpu

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    HAS_YAML = False

# Metric names of a baseline row, as the plan contract's `expected` carries them.
METRICS = ("single_stream_tok_s", "aggregate_8_tok_s", "kv_cache_tokens", "acceptance_pct")
DRAFTER_NONE = "none"
TOP_LEVEL_KEYS = ("defaults", "objectives", "bench_modes", "models", "drafters", "profiles", "releases", "rules",
                  "diagnostics", "baselines", "sweeps")
# Keys a `when` / `unless` condition may test (release defects, smoke misses), and the plan context each reads.
CONDITION_KEYS = ("profiles", "drafters", "models", "models_except", "min_nodes", "expert_parallel")
# Smoke checks a model's smoke_expected_misses may name (plugins/module_utils/smoke.py grades them).
SMOKE_CHECKS = ("auth", "chat", "thinking", "tools", "vision", "audio", "accuracy")
DIAGNOSTIC_FIELDS = ("id", "patterns", "title", "explanation", "fix")

_CACHE = {}


class CatalogError(Exception):
    """The catalog is missing, unreadable, or has no entry for a name."""


def default_catalog_path():
    """``<collection root>/data/catalog.yml``, found relative to this file."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "data", "catalog.yml"))


def load_catalog(path=None, use_cache=True):
    """Return the catalog as a dict (a deep copy: callers may modify it)."""
    if not HAS_YAML:
        raise CatalogError("reading the catalog needs PyYAML on the controller")
    path = os.path.abspath(path or default_catalog_path())
    try:
        mtime = os.path.getmtime(path)
    except OSError as exc:
        raise CatalogError("catalog not found at %s: %s" % (path, exc)) from exc
    key = (path, mtime)
    if not use_cache or key not in _CACHE:
        try:
            with open(path) as handle:
                data = yaml.safe_load(handle)
        except (OSError, yaml.YAMLError) as exc:
            raise CatalogError("cannot read the catalog %s: %s" % (path, exc)) from exc
        if not isinstance(data, dict):
            raise CatalogError("the catalog %s is not a mapping" % path)
        missing = [k for k in TOP_LEVEL_KEYS if k not in data]
        if missing:
            raise CatalogError("the catalog %s lacks the top-level keys: %s" % (path, ", ".join(missing)))
        _CACHE.clear()
        _CACHE[key] = data
    return copy.deepcopy(_CACHE[key])


def get_path(catalog, dotted):
    """``get_path(c, "models.31b.max_context")``; empty path returns the catalog.

    A segment that is an integer also matches an integer key (sweep cells are
    keyed by concurrency).
    """
    node = catalog
    if dotted in (None, ""):
        return node
    walked = []
    for part in str(dotted).split("."):
        walked.append(part)
        if isinstance(node, dict):
            if part in node:
                node = node[part]
                continue
            if re.match(r"^-?\d+$", part) and int(part) in node:
                node = node[int(part)]
                continue
            raise CatalogError("the catalog has no key %s (valid at this level: %s)" % (
                ".".join(walked), ", ".join(sorted(str(k) for k in node))))
        if isinstance(node, list) and re.match(r"^\d+$", part) and int(part) < len(node):
            node = node[int(part)]
            continue
        raise CatalogError("the catalog has no key %s" % ".".join(walked))
    return node


class CatalogView(object):
    """A read-only sequence built from the collection's catalog on first use.

    For module-level names that other code imports (``planner.OBJECTIVES``,
    ``diagnose.FATAL_SIGNATURES``): the values stay in the catalog, and the
    file is read only when the name is first used. ``build(catalog)`` returns
    the items. Where the catalog cannot be read (code shipped to a managed
    host), ``missing`` is used when given, else the CatalogError is raised.
    """

    _UNSET = object()

    def __init__(self, build, missing=_UNSET):
        self._build = build
        self._missing = missing
        self._items = None

    def _load(self):
        if self._items is None:
            try:
                self._items = tuple(self._build(load_catalog()))
            except CatalogError:
                if self._missing is CatalogView._UNSET:
                    raise
                return tuple(self._missing)
        return self._items

    def __getitem__(self, index):
        return self._load()[index]

    def __len__(self):
        return len(self._load())

    def __iter__(self):
        return iter(self._load())

    def __contains__(self, item):
        return item in self._load()

    def __eq__(self, other):
        return tuple(self) == tuple(other) if isinstance(other, (tuple, list, CatalogView)) else NotImplemented

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = None

    def __repr__(self):
        return "CatalogView(%r)" % (self._load(),)


def objective_names(catalog):
    """The objectives ``vllm_objective`` accepts, in catalog order."""
    return list(catalog["objectives"])


def bench_mode_names(catalog):
    """The throughput measurements ``vllm_bench_mode`` (the throughput module's ``mode``) accepts."""
    return list(catalog["bench_modes"])


def diagnostics(catalog):
    """The fatal log signature table, in catalog order (the generic engine_startup_failed last)."""
    table = catalog.get("diagnostics")
    if not table:
        raise CatalogError("the catalog has no diagnostics table")
    return list(table)


def conditions_hold(when, context):
    """True when every condition of ``when`` holds for ``context``.

    ``when`` uses the catalog's condition keys (profiles, drafters, models,
    models_except, min_nodes, expert_parallel); ``context`` carries profile,
    drafter, model, node_count and expert_parallel. A condition on a value the
    context lacks (None) does not hold. An empty ``when`` always holds.
    """
    when = when or {}
    context = context or {}
    for key, wanted in when.items():
        if key == "min_nodes":
            have = context.get("node_count")
            if have is None or int(have) < int(wanted):
                return False
        elif key == "expert_parallel":
            have = context.get("expert_parallel")
            if have is None or bool(have) != bool(wanted):
                return False
        elif key in ("profiles", "drafters", "models"):
            have = context.get(key[:-1])
            if have is None or have not in wanted:
                return False
        elif key == "models_except":
            have = context.get("model")
            if have is None or have in wanted:
                return False
        else:
            raise CatalogError("unknown condition %s (valid: %s)" % (key, ", ".join(CONDITION_KEYS)))
    return True


# --- names -------------------------------------------------------------------


def _lookup_name(table, name, kind, variable):
    if name is None or str(name).strip() == "":
        raise CatalogError("no %s given; set %s to one of: %s" % (kind, variable, ", ".join(sorted(table))))
    wanted = str(name).strip().lower()
    for key in table:
        if key.lower() == wanted:
            return key
    return None


def model_names(catalog, include_stand_ins=True):
    return [k for k, v in catalog["models"].items() if include_stand_ins or not v.get("stand_in")]


def resolve_model(catalog, name, variable="vllm_model"):
    """Short model name for ``name``: the short name, checkpoint id, served or display name, any case."""
    models = catalog["models"]
    key = _lookup_name(models, name, "model", variable)
    if key:
        return key
    wanted = str(name).strip().lower()
    for key, model in models.items():
        for alias in (model.get("checkpoint"), model.get("served_name"), model.get("display")):
            if alias and alias.lower() == wanted:
                return key
    raise CatalogError("unknown model %r; set %s to one of: %s" % (name, variable, ", ".join(models)))


def resolve_profile(catalog, name, variable="vllm_profile"):
    profiles = catalog["profiles"]
    key = _lookup_name(profiles, name, "hardware profile", variable)
    if key:
        return key
    raise CatalogError("unknown hardware profile %r; set %s to one of: %s" % (name, variable, ", ".join(profiles)))


def profile_from_gpu_name(catalog, gpu_name, compute_capability=None):
    """The profile for an nvidia-smi GPU name (and its compute capability when known), or None: gpu_facts' own
    rule (gpu.profile_for), so the planner and the host's facts cannot pick different profiles."""
    if not gpu_name:
        return None
    return gpu.profile_for({"name": str(gpu_name), "compute_capability": compute_capability}, catalog["profiles"],
                           capability_known=False)


def drafter_checkpoint(catalog, drafter, model):
    """Checkpoint id of ``drafter`` for ``model``, or None when none exists."""
    entry = catalog["drafters"].get(drafter) or {}
    return (entry.get("checkpoints") or {}).get(model)


def drafters_for(catalog, model):
    """Drafter names that have a checkpoint for ``model``, in catalog order."""
    return [name for name in catalog["drafters"] if drafter_checkpoint(catalog, name, model)]


# --- releases ----------------------------------------------------------------

_VERSION_RE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def version_tuple(release):
    """``v0.30.0`` / ``0.30.0`` / ``cpu-0.32.0`` -> (0, 30, 0); None when no version is in it."""
    if release is None:
        return None
    match = _VERSION_RE.search(str(release))
    if not match:
        return None
    return tuple(int(part or 0) for part in match.groups())


def release_from_image(image):
    """The release key an image tag names (``vllm/vllm-openai:v0.30.0`` -> ``v0.30.0``), or None.

    Only a tag that is a version (optionally ``v``-prefixed) counts; ``latest``,
    ``nightly`` or a digest tell nothing about the release.
    """
    if not image:
        return None
    ref = str(image).split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last:
        return None
    tag = last.rsplit(":", 1)[1]
    match = re.match(r"^v?(\d+\.\d+\.\d+)$", tag)
    if not match:
        return None
    return "v" + match.group(1)


def release_key(catalog, release):
    """Catalog key for a release name (``0.30.0`` and ``v0.30.0`` both give ``v0.30.0``), or None."""
    if release is None:
        return None
    text = str(release).strip()
    releases = catalog["releases"]
    for candidate in (text, "v" + text, text.lstrip("v")):
        if candidate in releases:
            return candidate
    for key in releases:
        if key.lower() == text.lower():
            return key
    return None


def release_below(catalog, version, stand_in=False):
    """The newest catalog release at or below ``version`` of the same kind (stand-in or not), or None.

    A tag the catalog has never seen is placed between the known releases: the
    defects of the range it falls in (from that release up to the next known one)
    apply to it, since a fix is known only from the release that records it.
    Pre-release entries (``0.27.0.dev0``) never bound a range.
    """
    want = version_tuple(version)
    if want is None:
        return None
    best = None
    for key, entry in catalog["releases"].items():
        number = str(entry.get("version", ""))
        if bool(entry.get("stand_in")) != bool(stand_in) or re.search(r"(dev|rc|a|b)\d*$", number):
            continue
        have = version_tuple(number)
        if have is not None and have <= want and (best is None or have > version_tuple(catalog["releases"][best]["version"])):
            best = key
    return best


def release_at_least(release, minimum):
    have, need = version_tuple(release), version_tuple(minimum)
    if have is None or need is None:
        return False
    return have >= need


# --- baselines -----------------------------------------------------------------


def baseline_rows(catalog):
    """Flatten ``baselines`` groups into one dict per measured configuration."""
    rows = []
    for group in catalog.get("baselines") or []:
        shared = {k: v for k, v in group.items() if k != "rows"}
        for row in group.get("rows") or []:
            merged = dict(shared)
            merged.update(row)
            merged.setdefault("drafter", DRAFTER_NONE)
            merged.setdefault("patched", False)
            rows.append(merged)
    return rows


def find_baselines(catalog, profile=None, model=None, drafter=None, nodes=None, release=None, include_patched=False):
    """Every baseline row matching the given keys (None matches anything), newest first."""
    found = []
    for row in baseline_rows(catalog):
        if row.get("patched") and not include_patched:
            continue
        if profile is not None and row.get("profile") != profile:
            continue
        if model is not None and row.get("model") != model:
            continue
        if drafter is not None and row.get("drafter") != drafter:
            continue
        if nodes is not None and int(row.get("nodes") or 0) != int(nodes):
            continue
        if release is not None and row.get("release") != release:
            continue
        found.append(row)
    found.sort(key=lambda r: str(r.get("date") or ""), reverse=True)
    return found


def find_baseline(catalog, profile, model, drafter, nodes, release, include_patched=False):
    """The newest stock baseline for exactly this configuration, or None."""
    found = find_baselines(catalog, profile, model, drafter or DRAFTER_NONE, nodes, release, include_patched)
    return found[0] if found else None


def figure_low(value):
    """A figure as one number: the low end of a [low, high] range; None stays None."""
    if isinstance(value, (list, tuple)):
        return value[0] if value else None
    return value


def expected_from_baseline(row):
    """The plan contract's ``expected`` dict for a baseline row (None for None)."""
    if not row:
        return None
    where = "%s, %s node%s, %s" % (row["profile"], row["nodes"], "" if int(row["nodes"]) == 1 else "s", row["release"])
    source = "catalog: %s (%s%s)" % (row.get("table") or where, where, ", measured %s" % row["date"] if row.get("date") else "")
    expected = {
        "single_stream_tok_s": row.get("single_stream_tok_s"),
        "aggregate_8_tok_s": row.get("aggregate_8_tok_s"),
        "kv_cache_tokens": row.get("kv_cache_tokens"),
        "acceptance": row.get("acceptance_pct"),
        "acceptance_pct": row.get("acceptance_pct"),
        "source": source,
        "date": row.get("date"),
        "stand_in": bool(row.get("stand_in")),
    }
    if row.get("calibrate"):
        # No fixed figures: the throughput module calibrates on the serving machine (bench_metrics.wants_calibration).
        expected["calibrate"] = True
    if row.get("conditions"):
        expected["conditions"] = dict(row["conditions"])
    if row.get("note"):
        expected["note"] = row["note"]
    return expected


# --- validation ----------------------------------------------------------------


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
        elif key == "min_nodes" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            problems.append("%s.min_nodes must be a positive integer" % where)
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
    problems.extend(_diagnostics_problems(catalog["diagnostics"]))
    for name, model in models.items():
        if name != name.lower():
            problems.append("model key %s must be lower case" % name)
        for field in ("checkpoint", "served_name", "max_context", "vision", "audio", "source"):
            if field not in model:
                problems.append("models.%s lacks %s" % (name, field))
        problems.extend(_smoke_misses_problems(catalog, name, model.get("smoke_expected_misses")))
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
        if profile.get("default_release") not in releases:
            problems.append("profiles.%s.default_release %r is not a release" % (name, profile.get("default_release")))
        if profile.get("default_drafter") not in list(drafters) + [DRAFTER_NONE]:
            problems.append("profiles.%s.default_drafter %r is not a drafter" % (name, profile.get("default_drafter")))
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
        key = (row.get("profile"), row.get("model"), row.get("drafter"), row.get("nodes"), row.get("release"), row.get("date"),
               bool(row.get("patched")))
        if key in seen:
            problems.append("%s: duplicates %s" % (where, seen[key]))
        seen[key] = where
    return problems


# --- documentation ---------------------------------------------------------------


def _cell(value):
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return "%s-%s" % (_cell(value[0]), _cell(value[1]))
    if isinstance(value, int):
        return "{:,}".format(value)
    return str(value)


def _table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return lines


def _conditions_text(entry):
    parts = []
    for keyword, conditions in (("when", entry.get("when")), ("unless", entry.get("unless"))):
        for key, value in sorted((conditions or {}).items()):
            shown = ", ".join(str(v) for v in value) if isinstance(value, list) else value
            parts.append("%s %s %s" % (keyword, key.replace("_", " "), shown))
    return "; ".join(parts) or "always"


def render_markdown(catalog):
    """docs/catalog.md, generated from the catalog (a unit test keeps the file in step)."""
    out = [
        "# Catalog",
        "",
        "<!-- Generated from data/catalog.yml by sparkfleet.vllm.plugins.module_utils.catalog.render_markdown;",
        "     do not edit by hand. Regenerate: REGENERATE_DOCS=1 pytest tests/unit/plugins/module_utils/test_catalog.py -->",
        "",
        "Everything the planner, the templates, the docs and the throughput gate know about Gemma 4 NVFP4 on",
        "NVIDIA Blackwell lives in `data/catalog.yml`. Read it in playbooks with the `sparkfleet.vllm.catalog` lookup",
        "(`lookup('sparkfleet.vllm.catalog', 'models.31b.max_context')`). Entries marked *stand-in* are not Gemma 4 or",
        "Blackwell: they let the collection run end to end on a machine without a GPU.",
        "",
        "Throughput is output tokens per second; KV cache is tokens as vLLM reports them at startup; acceptance is",
        "percent; `a-b` is a range measured over several starts.",
        "",
        "## Models",
        "",
    ]
    rows = []
    for name, model in catalog["models"].items():
        rows.append(["`%s`%s" % (name, " (stand-in)" if model.get("stand_in") else ""), "`%s`" % model["checkpoint"],
                     "`%s`" % model["served_name"], model.get("architecture"), model["max_context"], model.get("vision"),
                     model.get("audio"), ", ".join("%s %s" % kv for kv in sorted((model.get("kv_heads") or {}).items())) or None])
    out += _table(["Model", "Checkpoint", "Served name", "Type", "Max context", "Vision", "Audio", "KV heads"], rows)
    out += ["", "### Known smoke-test misses", "",
            "Misses the notes record as the model's own. `sparkfleet.vllm.smoke` reports them as `expected_miss`",
            "and does not fail on them; any other miss fails the check.", ""]
    rows = []
    for name, model in catalog["models"].items():
        for check, entries in (model.get("smoke_expected_misses") or {}).items():
            for entry in entries:
                rows.append(["`%s`" % name, check, "`%s`" % entry["miss"], _conditions_text(entry), entry.get("note")])
    out += _table(["Model", "Check", "Miss", "Applies", "Note"], rows)
    out += ["", "## Drafters", ""]
    rows = []
    for name, drafter in catalog["drafters"].items():
        for model, checkpoint in (drafter.get("checkpoints") or {}).items():
            rows.append(["`%s`" % name, "`%s`" % model, "`%s`" % checkpoint, drafter["num_speculative_tokens"],
                         drafter.get("attention_backend")])
    out += _table(["Drafter", "Model", "Checkpoint", "k", "Attention backend"], rows)
    out += ["", "## Hardware profiles", ""]
    rows = []
    for name, profile in catalog["profiles"].items():
        rows.append(["`%s`%s" % (name, " (stand-in)" if profile.get("stand_in") else ""), profile.get("display"),
                     profile.get("memory_gb"), profile.get("unified_memory"), profile.get("memory_bandwidth_tb_s"),
                     profile["gpu_memory_utilization"], profile["max_num_batched_tokens"], profile["default_drafter"],
                     profile["default_release"], ", ".join(str(n) for n in profile["node_counts"])])
    out += _table(["Profile", "Hardware", "Memory (GB)", "Unified", "Bandwidth (TB/s)", "GPU mem util", "Max batched tokens",
                   "Default drafter", "Default release", "Nodes"], rows)
    out += ["", "## Objectives", "", "What `vllm_drafter=auto` optimises (`vllm_objective`; default `%s`)." % (
        catalog["defaults"]["objective"]), ""]
    out += _table(["Objective", "Compares", "Description"],
                  [["`%s`" % name, "`%s`" % entry["metric"], entry["description"]] for name, entry in catalog["objectives"].items()])
    out += ["", "## Benchmark modes", "", "What `playbooks/bench.yml` measures (`vllm_bench_mode`, the throughput module's `mode`;"
            " default `%s`)." % catalog["defaults"]["bench_mode"], ""]
    out += _table(["Mode", "Description"],
                  [["`%s`" % name, " ".join(entry["description"].split())] for name, entry in catalog["bench_modes"].items()])
    out += ["", "## vLLM releases and known defects", ""]
    rows = []
    for name, release in catalog["releases"].items():
        defects = release.get("defects") or []
        text = "; ".join("**%s** (%s%s): %s" % (
            d["id"], d["action"], ", " + d["upstream"] if d.get("upstream") else "", " ".join(d.get("summary", "").split()))
            for d in defects) or None
        rows.append(["`%s`" % name, release.get("image") and "`%s`" % release["image"], release.get("plannable"), text])
    out += _table(["Release", "Image", "Plannable", "Defects"], rows)
    out += ["", "## Start-up failure diagnostics", "",
            "`sparkfleet.vllm.wait_healthy` scans the engine log for these signatures and fails at the first match,",
            "with the explanation and the fix, instead of waiting for its timeout. A line matches when any of the",
            "entry's regular expressions does; entries are tried in this order.", ""]
    out += _table(["Id", "Log signature (any of)", "Meaning", "Fix"],
                  [["`%s`" % d["id"], "<br>".join("`%s`" % p.replace("|", "\\|") for p in d["patterns"]),
                    "**%s.** %s" % (d["title"], " ".join(d["explanation"].split())), " ".join(d["fix"].split())]
                   for d in catalog["diagnostics"]])
    out += ["", "## Measured baselines", "",
            "Rows marked patched ran with upstream fixes patched into the image; the planner never returns them",
            "as the expectation of a stock release.", ""]
    for group in catalog["baselines"]:
        out += ["### %s" % group["table"], "",
                "Profile `%s`, %d node%s, vLLM `%s`%s." % (
                    group["profile"], group["nodes"], "" if group["nodes"] == 1 else "s", group["release"],
                    ", measured %s" % group["date"] if group.get("date") else ""), ""]
        rows = []
        for row in group["rows"]:
            rows.append(["%s%s" % (row["model"], " + " + row["drafter"] if row.get("drafter", "none") != "none" else ""),
                         row.get("single_stream_tok_s"), row.get("aggregate_8_tok_s"), row.get("kv_cache_tokens"),
                         row.get("acceptance_pct"), ("patched. " if row.get("patched") else "") + (
                             "calibrated on the serving machine in the same run. " if row.get("calibrate") else "") + (
                             row.get("note") or "") + (
                             " " + ", ".join("%s %s" % kv for kv in sorted(row["conditions"].items())) if row.get("conditions") else "")
                         or None])
        out += _table(["Config", "Single-stream", "Aggregate, 8 streams", "KV cache", "Acceptance %", "Note"], rows)
        out.append("")
    sweep = catalog["sweeps"]["concurrency"]
    out += ["## Concurrency sweeps", "",
            "`vllm bench serve`, random prompts, %d output tokens per request, all requests at once. Cells: output tok/s /"
            " p99 ITL (ms); median TTFT (s) at c1 and c64." % sweep["output_tokens"], ""]
    rows = []
    for row in sweep["rows"]:
        cells = row["cells"]
        rows.append(["%dx %s" % (row["nodes"], row["profile"]), row["model"], row["prompt_tokens"], row.get("release")]
                    + ["%s / %s" % (_cell(cells[c]["output_tok_s"]), _cell(cells[c]["p99_itl_ms"])) for c in sorted(cells)]
                    + [cells[min(cells)].get("median_ttft_s"), cells[max(cells)].get("median_ttft_s")])
    concurrencies = sorted(sweep["rows"][0]["cells"])
    out += _table(["Nodes x profile", "Model", "Prompt tokens", "Release"] + ["c%d" % c for c in concurrencies]
                  + ["TTFT c%d (s)" % concurrencies[0], "TTFT c%d (s)" % concurrencies[-1]], rows)
    mnbt = catalog["sweeps"]["max_num_batched_tokens_rtx_5090"]
    out += ["", "## --max-num-batched-tokens on the RTX 5090 (%s, vLLM %s, no drafter)" % (mnbt["model"], mnbt["release"]), ""]
    out += _table(["Max batched tokens", "KV cache (GiB)", "KV tokens", "Full-context requests", "Starts"],
                  [[r["max_num_batched_tokens"], r["kv_cache_gib"], r["kv_cache_tokens"], r["full_context_requests"], r["starts"]]
                   for r in mnbt["rows"]])
    spec = catalog["sweeps"]["num_speculative_tokens"]
    out += ["", "## Draft length (%s, %s, vLLM %s)" % (spec["model"], spec["profile"], spec["release"]), ""]
    out += _table(["Drafter", "k", "Single-stream", "Aggregate, 8 streams"],
                  [[r["drafter"], r["k"], r.get("single_stream_tok_s"), r.get("aggregate_8_tok_s")] for r in spec["rows"]])
    out.append("")
    return "\n".join(out)
