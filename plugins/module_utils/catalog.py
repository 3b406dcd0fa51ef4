# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Load and query the sparkfleet.vllm catalog (``data/catalog.yml``).

The catalog is the single source of truth for models, drafters, hardware
profiles, vLLM releases, rules and measured baselines. Everything here is pure:
``load_catalog`` reads the file once (cached per path and mtime) and the other
functions answer questions about the loaded dict, so unit tests can feed a
modified copy. The `when` / `unless` conditions are evaluated by ``catalog_conditions``; checking a catalog
and rendering docs/catalog.md are tools of the checkout (tests/harness/catalog_validate.py, catalog_docs.py).

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
                # libyaml's safe loader where PyYAML has it: the same documents, parsed about 5 times faster (each
                # Ansible worker is a fresh fork, so every task that templates a lookup of it parses the file anew).
                data = yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
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

    For module-level names that other code imports (``plan.drafter.OBJECTIVES``,
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


def drafter_weights(catalog, drafter, model):
    """What the weights role places for ``drafter`` serving ``model`` (the plan's ``drafter_model``), or None.

    Drafters are hub checkpoints like the models: ``source`` huggingface, ``gated`` as the drafter entry says
    (default false), the size the catalog measured for this model when it has one. A stand-in's drafter that the
    entry's ``generate`` names for this model is ``source`` generate instead, never gated, with the generator's
    shape as ``generate``: the drafter's own dimensions plus, as ``target``, the served stand-in's ``generate``
    block, whose vocabulary, hidden size and KV layout the draft shares (the one source of those figures)."""
    checkpoint = drafter_checkpoint(catalog, drafter, model)
    if not checkpoint:
        return None
    entry = catalog["drafters"][drafter]
    shape = (entry.get("generate") or {}).get(model)
    if shape is not None:
        target = ((catalog["models"].get(model) or {}).get("generate")) or {}
        return {"short": drafter, "checkpoint": checkpoint, "source": "generate", "gated": False, "revision": "main",
                "generate": dict(copy.deepcopy(shape), target=copy.deepcopy(target))}
    weights = {"short": drafter, "checkpoint": checkpoint, "source": entry.get("source", "huggingface"),
               "gated": bool(entry.get("gated", False)), "revision": entry.get("revision", "main")}
    size = (entry.get("size_gib") or {}).get(model)
    if size is not None:
        weights["size_gib"] = size
    return weights


def disk_need(catalog, release, runtime, model, drafter_model=None):
    """Disk a deployment needs besides preflight's margin, in GiB (the plan's ``disk``).

    ``weights_gib``: the model's catalog size plus the drafter's where the catalog has them (0 when it has none,
    as for the generated stand-ins); ``runtime_gib``: the runtime's footprint, from ``defaults.runtime_disk_gib``
    unless the release entry overrides it."""
    sizes = dict(catalog["defaults"]["runtime_disk_gib"], **(release.get("runtime_disk_gib") or {}))
    weights = (model.get("weights_gib") or 0) + ((drafter_model or {}).get("size_gib") or 0)
    return {"weights_gib": round(weights, 2), "runtime_gib": sizes[runtime], "runtime": runtime}


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
    """Flatten ``baselines`` groups into one dict per measured configuration.

    A multi-node row with measured figures carries the ``executor`` it was measured under: its own or its table's,
    else ``defaults.baseline_executor``. Single-node rows have none, and neither has a calibrated row (the throughput
    module measures it on the serving machine, under the plan's own executor, in the same run)."""
    rows = []
    for group in catalog.get("baselines") or []:
        shared = {k: v for k, v in group.items() if k != "rows"}
        for row in group.get("rows") or []:
            merged = dict(shared)
            merged.update(row)
            merged.setdefault("drafter", DRAFTER_NONE)
            merged.setdefault("patched", False)
            if _as_nodes(merged.get("nodes")) > 1 and not merged.get("calibrate"):
                merged["executor"] = row.get("executor") or table_executor(catalog, group)
            rows.append(merged)
    return rows


def table_executor(catalog, group):
    """The executor a baselines table's multi-node figures were measured under: the table's own, else
    ``defaults.baseline_executor``. A row may name another (``baseline_rows`` gives each row's)."""
    return group.get("executor") or (catalog.get("defaults") or {}).get("baseline_executor")


def _as_nodes(value):
    # The validator reads these rows before it has checked them: a node count that is not a number counts as none.
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def find_baselines(catalog, profile=None, model=None, drafter=None, nodes=None, release=None, include_patched=False,
                   executor=None):
    """Every baseline row matching the given keys (None matches anything), newest first.

    ``executor`` keeps the rows measured under it and the rows that name no executor (single-node and calibrated
    rows)."""
    found = []
    for row in baseline_rows(catalog):
        if row.get("patched") and not include_patched:
            continue
        if executor is not None and row.get("executor") not in (None, executor):
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


def find_baseline(catalog, profile, model, drafter, nodes, release, include_patched=False, executor=None):
    """The newest stock baseline for exactly this configuration (and ``executor``, when given), or None."""
    found = find_baselines(catalog, profile, model, drafter or DRAFTER_NONE, nodes, release, include_patched, executor)
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
    measured_under = ", %s executor" % row["executor"] if row.get("executor") else ""
    where = "%s, %s node%s, %s%s" % (row["profile"], row["nodes"], "" if int(row["nodes"]) == 1 else "s", row["release"], measured_under)
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
        # The executor the figures were measured under (multi-node rows); the planner fills a calibrated cluster
        # row's with the plan's own.
        "executor": row.get("executor"),
    }
    if row.get("calibrate"):
        # No fixed figures: the throughput module calibrates on the serving machine (bench_metrics.wants_calibration).
        expected["calibrate"] = True
    if row.get("output_tokens"):
        # The request length the gate measures with for this row (a calibrated stand-in's; verify.yml reads it).
        expected["output_tokens"] = int(row["output_tokens"])
    if row.get("conditions"):
        expected["conditions"] = dict(row["conditions"])
    if row.get("note"):
        expected["note"] = row["note"]
    return expected
