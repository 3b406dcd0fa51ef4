# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The plan-time memory budget of a unified-memory profile (the DGX Spark), one step over the plan's record.

CPU and GPU draw on one pool there, and vLLM's --gpu-memory-utilization bounds only what vLLM counts: the engine's
processes, its multimodal processor cache and host-memory flags come on top, and an overshoot starves the host
instead of failing the engine. The budget, per node, in GiB:

    memory (profiles.<p>.memory_gb)  -  host reserve  =  the server's ceiling
    the server's ceiling  >=  vLLM's pool (utilization x memory)  +  what the engine holds outside it

and vLLM's pool must hold the weights (and the drafter's) before any KV cache. A plan that does not fit is refused,
naming the variable to change and the value that fits; one that fits carries the budget line by line
(``memory_budget``) and what an OS-level guard on the server needs (``memory_guard``). Profiles without unified
memory get neither (None).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible_collections.sparkfleet.vllm.plugins.module_utils import vllm_flags
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import inputs

_refuse = inputs.refuse
GIB = 1024 ** 3
# The vllm_extra_args flags that change the multimodal processor cache (its size in GiB, and how many API server
# processes keep a copy of it beside the engine core's).
CACHE_FLAG, API_SERVERS_FLAG = "--mm-processor-cache-gb", "--api-server-count"
MM_CACHE = "multimodal processor cache"


def _gib(value):
    return round(float(value), 2)


def _floor2(value):
    return math.floor(value * 100 + 1e-9) / 100


def _ceil2(value):
    return math.ceil(value * 100 - 1e-9) / 100


def _format_gib(catalog, name):
    """A model's weights in GiB at its format's own bits per parameter (None without the figures)."""
    model = catalog["models"][name]
    bits = ((catalog.get("weight_formats") or {}).get(model.get("weight_format")) or {}).get("bits_per_parameter")
    if not bits or not model.get("parameters_b"):
        return None
    return float(model["parameters_b"]) * 1e9 * float(bits) / 8 / GIB


def _estimate_ratio(catalog):
    """(ratio, model): the largest measured checkpoint over its format's own bytes, among the catalog's models."""
    ratios = [(float(m["weights_gib"]) / _format_gib(catalog, n), n) for n, m in catalog["models"].items()
              if m.get("weights_gib") and _format_gib(catalog, n)]
    return max(ratios) if ratios else (None, None)


def model_weights(state):
    """(GiB, how it is known) of the served model's weights: measured, or estimated from its parameters."""
    model, name = state.model, state.model_name
    if state.language_model_only and model.get("language_model_only_weights_gib"):
        return float(model["language_model_only_weights_gib"]), "%s without the vision tower, measured" % name
    if model.get("weights_gib"):
        return float(model["weights_gib"]), "%s, measured" % name
    ratio, source = _estimate_ratio(state.catalog)
    own = _format_gib(state.catalog, name)
    if ratio is None or own is None:
        return 0.0, "%s: no size in the catalog, not counted" % name
    effective = ("; effective parameters, without the per-layer embeddings: errs low"
                 if model.get("effective_parameters") else "")
    return own * ratio, "%s, estimate: %sB parameters of %s x %.2f (the %s's measured checkpoint over its format)%s" % (
        name, model["parameters_b"], model["weight_format"], ratio, source, effective)


def drafter_weights(state):
    """(GiB, how it is known) of the planned drafter's weights: (0, None) without one."""
    if state.drafter == "none":
        return 0.0, None
    sizes = (state.catalog["drafters"][state.drafter].get("size_gib") or {})
    if state.model_name in sizes:
        return float(sizes[state.model_name]), "%s drafter, measured" % state.drafter
    if not sizes:
        return 0.0, "%s drafter: no size in the catalog, not counted" % state.drafter
    largest = max(sizes, key=lambda k: sizes[k])
    return float(sizes[largest]), "%s drafter, estimate: the largest measured (%s's)" % (state.drafter, largest)


def _flag_number(flag, integer=False):
    """A memory flag's value as a number; a value the budget cannot read is refused (vLLM would refuse it too)."""
    try:
        number = int(flag.value) if integer else float(flag.value)
        if math.isnan(number) or number < (1 if integer else 0):
            raise ValueError(flag.value)
    except (TypeError, ValueError):
        _refuse("memory-flag", "vllm_extra_args sets %s to %r, which is not %s: the memory budget of this unified-memory "
                "host cannot account it; give %s, or drop %s from vllm_extra_args" % (
                    flag.canonical, flag.value, "a whole number of processes" if integer else "a size in GiB",
                    "a whole number of at least 1" if integer else "a number of GiB", flag.given.split("=", 1)[0]),
                "vllm_extra_args", flag.given)
    return number


def memory_flags(state):
    """{canonical flag: its number} of the vllm_extra_args flags that size memory outside the pool (the last wins)."""
    names = set((state.rules.get("memory_budget") or {}).get("host_memory_flags") or {}) | {CACHE_FLAG, API_SERVERS_FLAG}
    if not state.extra_args:
        return {}
    found = {}
    for flag in vllm_flags.normalise(state.extra_args, vllm_flags.load_flags()):
        if flag.canonical in names and flag.dotted is None:
            found[flag.canonical] = _flag_number(flag, integer=flag.canonical == API_SERVERS_FLAG)
    return found


def outside_pool(state, flags):
    """[(item, GiB, note)] of what the engine holds outside vLLM's pool on this node."""
    budget, rules = state.profile["memory_budget"], state.rules.get("memory_budget") or {}
    lines = [("engine outside the pool", float(budget["engine_overhead_gib"]),
              "Python processes, CUDA runtime's host side: a planning estimate")]
    if (state.vision or state.audio) and state.node_role != "worker":
        per_copy = float(flags.get(CACHE_FLAG, rules.get("mm_processor_cache_gib") or 0))
        copies = int(flags.get(API_SERVERS_FLAG, 1)) + 1
        lines.append((MM_CACHE, per_copy * copies, "%s GiB x %d copies (%d API server%s + the engine "
                      "core%s)" % (_gib(per_copy), copies, copies - 1, "" if copies == 2 else "s",
                                   "; %s" % CACHE_FLAG if CACHE_FLAG in flags else ", vLLM's default")))
    for flag, what in sorted(((rules.get("host_memory_flags") or {})).items()):
        if flags.get(flag):
            lines.append((flag, float(flags[flag]), "%s (vllm_extra_args)" % " ".join(str(what).split())))
    return lines


def memory_budget(state):
    """The budget of a unified-memory node (state.memory_budget, state.memory_guard); None on other profiles."""
    if not state.profile.get("unified_memory"):
        state.memory_budget = state.memory_guard = None
        return
    budget = state.profile["memory_budget"]
    total, reserve = float(state.profile["memory_gb"]), float(budget["host_reserve_gib"])
    ceiling = total - reserve
    pool = state.gpu_util * total
    flags = memory_flags(state)
    outside = outside_pool(state, flags)
    outside_total = sum(gib for _item, gib, _note in outside)
    need = pool + outside_total
    largest = _floor2((ceiling - outside_total) / total)
    if need > ceiling + 1e-9:
        refuse_overshoot(state, total, reserve, pool, outside, flags, largest)
    weights, weights_note = model_weights(state)
    extra, extra_note = drafter_weights(state)
    share = state.node_count
    on_node = (weights + extra) / share
    if on_node >= pool:
        _refuse("memory-weights", "on %s --gpu-memory-utilization %s gives vLLM a %s GiB pool, which cannot hold the %s GiB of "
                "weights it loads before any KV cache (%s%s%s); set vllm_gpu_memory_utilization to at least %s (at most %s "
                "here, and the KV cache needs more on top), or a smaller vllm_model%s" % (
                    state.profile_name, state.gpu_util, _gib(pool), _gib(on_node), weights_note,
                    ", " + extra_note if extra_note else "", ", 1/%d per node" % share if share > 1 else "",
                    round(_floor2(on_node / total) + 0.01, 2), state.rules["unified_memory_max_utilization"],
                    " or vllm_drafter=none" if extra_note else ""),
                "vllm_gpu_memory_utilization", state.gpu_util)
    lines = budget_lines(state, total, reserve, pool, (weights, weights_note), (extra, extra_note), share, outside)
    headroom = ceiling - need
    lines.append(_line("headroom", headroom, "the server's ceiling less the pool and what is outside it", 0))
    state.memory_budget = {
        "unit": "GiB", "total_gib": _gib(total), "host_reserve_gib": _gib(reserve), "ceiling_gib": _gib(ceiling),
        "pool_gib": _gib(pool), "weights_gib": _gib(on_node), "kv_cache_and_activations_gib": _gib(pool - on_node),
        "outside_pool_gib": _gib(outside_total), "headroom_gib": _gib(headroom),
        "max_gpu_memory_utilization": min(largest, state.rules["unified_memory_max_utilization"]), "lines": lines,
    }
    # What an OS-level guard on the server unit needs (issue 46, item 2; the native runtime applies the ceiling and no
    # swap as the unit's MemoryMax and MemorySwapMax): the hard ceiling the host reserve leaves, the planned footprint,
    # and no swap, so that an overrun kills the engine instead of thrashing the host (the notes).
    state.memory_guard = {"memory_max_bytes": int(ceiling * GIB), "memory_high_bytes": int(math.ceil(need * GIB)),
                          "memory_swap_max_bytes": 0}
    state.reason("memory budget (%s, unified memory): vLLM's %s GiB pool and %s GiB outside it fit the %s GiB the host "
                 "reserve leaves the server, %s GiB to spare" % (state.profile_name, _gib(pool), _gib(outside_total),
                                                                 _gib(ceiling), _gib(headroom)))


def refuse_overshoot(state, total, reserve, pool, outside, flags, largest):
    """Refuse a plan whose pool and what the engine holds outside it pass the server's ceiling, naming the largest
    utilization that fits and the vllm_extra_args flags that add to it (only those when no utilization fits)."""
    named = [f for f in sorted(flags) if any(item == f for item, _gib_, _note in outside)
             or (f in (CACHE_FLAG, API_SERVERS_FLAG) and any(item == MM_CACHE for item, _gib_, _note in outside))]
    outside_total = sum(gib for _item, gib, _note in outside)
    by_utilization = largest >= 0.01 or not named
    fix = "lower %s in vllm_extra_args" % " / ".join(named)
    if by_utilization:
        fix = "set vllm_gpu_memory_utilization <= %s%s" % (largest, ", or " + fix if named else "")
    _refuse("memory-budget", "%s has unified memory: --gpu-memory-utilization %s gives vLLM a %s GiB pool of the %s GiB, and the "
            "engine holds %s GiB outside it (%s): %s GiB in all against the %s GiB the host leaves the server (%s GiB less "
            "the %s GiB host reserve), past which the host starves instead of the engine failing; %s" % (
                state.profile_name, state.gpu_util, _gib(pool), _gib(total), _gib(outside_total),
                ", ".join("%s %s" % (item, _gib(gib)) for item, gib, _note in outside), _gib(pool + outside_total),
                _gib(total - reserve), _gib(total), _gib(reserve), fix),
            "vllm_gpu_memory_utilization" if by_utilization else "vllm_extra_args", state.gpu_util if by_utilization else named)


def _line(item, gib, note, level):
    return {"item": item, "gib": _gib(gib), "note": note, "level": level}


def budget_lines(state, total, reserve, pool, weights, drafter, share, outside):
    """The budget's lines, in the order they add up; ``level`` 1 marks the parts of vLLM's pool."""
    per_node = " (1/%d per node, tensor parallel)" % share if share > 1 else ""
    lines = [
        _line("memory", total, "profiles.%s.memory_gb: CPU and GPU share it" % state.profile_name, 0),
        _line("host reserve", reserve, "OS, sshd, page-cache floor (profiles.%s.memory_budget)" % state.profile_name, 0),
        _line("the server's ceiling", total - reserve, "memory less the host reserve", 0),
        _line("vLLM's pool", pool, "--gpu-memory-utilization %s x %s GiB" % (state.gpu_util, _gib(total)), 0),
        _line("weights", weights[0] / share, weights[1] + per_node, 1),
    ]
    if drafter[1]:
        lines.append(_line("drafter weights", drafter[0] / share, drafter[1] + per_node, 1))
    lines.append(_line("KV cache and activations", pool - (weights[0] + drafter[0]) / share, "the rest of the pool", 1))
    lines.extend(_line(item, gib, note, 0) for item, gib, note in outside)
    return lines
