# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the catalog's measurements say about a layout: the decode ceiling and the topology advice.

Both are pure functions of the catalog, read by the planner into the plan (`ceiling`, `advice`):

- ``decode_ceiling``: the memory-bandwidth limit of single-stream decode. Decode reads every active weight
  once per token, so one stream cannot go faster than bandwidth / (active parameters x bytes per parameter).
  A cluster splits the weight reads across its nodes' memory systems (tensor or expert parallelism), so the
  ceiling scales with the node count; the all-reduce each layer ends in is what keeps real clusters below it.
  Speculative decoding checks several tokens per weight read and can exceed it.
- ``topology_advice``: the notes' measured figures of the same model, drafter and release on 1, 2 and 4
  nodes, and the warnings an operator needs when the chosen layout is measured slower than a smaller one or
  buys so little over it that independent replicas of the smaller one would serve more.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat

# A layout that adds less than this fraction of single-stream speed over a smaller measured one is not worth
# its extra nodes for interactivity; replicas of the smaller layout then serve more in aggregate (the notes:
# "TP=4 adds 6% single-stream over TP=2 and nothing at 8 streams" on the 26B-A4B).
MIN_SINGLE_STREAM_GAIN = 0.10
# Differences smaller than this are the notes' run-to-run spread ("every figure is within 2.5% of the ... measurement
# this table replaces"), not a slower layout.
NOISE = 0.025
FIGURES = ("single_stream_tok_s", "aggregate_8_tok_s", "kv_cache_tokens")


def memory_bandwidth(catalog, profile_name):
    """(TB/s of one node, its source) for a profile, or (None, None) when the catalog gives none."""
    profile = (catalog.get("profiles") or {}).get(profile_name) or {}
    if not profile.get("memory_bandwidth_tb_s"):
        return None, None
    return float(profile["memory_bandwidth_tb_s"]), profile.get("memory_bandwidth_source")


def decode_ceiling(catalog, profile_name, model_name, nodes=1):
    """The plan's ``ceiling``: the single-stream decode limit set by memory bandwidth, or None when unknown.

    None for profiles without a bandwidth figure (the CPU stand-in) and models without a weight format or
    parameter count (the tiny stand-in)."""
    model = (catalog.get("models") or {}).get(model_name) or {}
    fmt = (catalog.get("weight_formats") or {}).get(model.get("weight_format")) or {}
    bandwidth, bandwidth_source = memory_bandwidth(catalog, profile_name)
    params_b = model.get("active_parameters_b") or model.get("parameters_b")
    if bandwidth is None or not params_b or not fmt.get("bits_per_parameter"):
        return None
    nodes = max(1, int(nodes or 1))
    bytes_per_parameter = float(fmt["bits_per_parameter"]) / 8
    tok_s = bandwidth * 1e12 * nodes / (float(params_b) * 1e9 * bytes_per_parameter)
    kind = "active" if model.get("active_parameters_b") else ("effective" if model.get("effective_parameters") else "")
    basis = "%s TB/s%s / (%sB %sparameters x %s bytes, %s)" % (
        _num(bandwidth), " x %d nodes" % nodes if nodes > 1 else "", _num(params_b), kind + " " if kind else "",
        _num(bytes_per_parameter), fmt.get("display") or model.get("weight_format"))
    return {
        "decode_tok_s": round(tok_s, 1),
        "memory_bandwidth_tb_s": round(bandwidth, 3),
        "nodes": nodes,
        "parameters_b": float(params_b),
        "bytes_per_parameter": bytes_per_parameter,
        "basis": basis,
        "memory_bandwidth_source": bandwidth_source,
        "note": "an upper bound for one stream: higher-precision layers and KV-cache reads add bytes, a cluster's "
                "all-reduce adds time, and speculative decoding can pass it (several tokens per weight read)",
    }


def _layouts(catalog, profile, model, drafter, release):
    """{nodes: baseline row} for the stock measurements of this model + drafter on this release."""
    found = {}
    for row in cat.find_baselines(catalog, profile=profile, model=model, drafter=drafter, release=release):
        found.setdefault(int(row["nodes"]), row)
    return found


def _figure(row, key):
    return cat.figure_low(row.get(key)) if row else None


def _fastest(catalog, profile, model, release):
    """The fastest single-stream measurement of the model on this profile and release, any drafter, any size."""
    best = None
    for row in cat.find_baselines(catalog, profile=profile, model=model, release=release):
        value = _figure(row, "single_stream_tok_s")
        if value is not None and (best is None or value > best["single_stream_tok_s"]):
            best = {"nodes": int(row["nodes"]), "drafter": row["drafter"], "single_stream_tok_s": value,
                    "aggregate_8_tok_s": _figure(row, "aggregate_8_tok_s")}
    return best


def topology_advice(catalog, profile, model, drafter, release, nodes):
    """The plan's ``advice``: measured alternatives and warnings, or None where the profile cannot cluster."""
    node_counts = ((catalog.get("profiles") or {}).get(profile) or {}).get("node_counts") or [1]
    if len(node_counts) < 2:
        return None
    layouts = _layouts(catalog, profile, model, drafter, release)
    measured = [dict({"nodes": n, "source": layouts[n].get("table")},
                     **{key: _figure(layouts[n], key) for key in FIGURES}) for n in sorted(layouts)]
    advice = {"nodes": int(nodes), "drafter": drafter, "release": release, "measured": measured,
              "fastest": _fastest(catalog, profile, model, release), "warnings": []}
    chosen = layouts.get(int(nodes))
    if chosen is None:
        advice["warnings"].append(
            "no measurement of %s%s on %d node%s with vLLM %s: the catalog cannot say whether this layout pays off" % (
                model, _drafter_text(drafter), int(nodes), "" if int(nodes) == 1 else "s", release))
        return advice
    advice["warnings"].extend(_layout_warnings(model, drafter, int(nodes), chosen, layouts))
    fastest = advice["fastest"]
    # A drafter on the same nodes is the drafter choice's business (vllm_drafter=auto); fewer nodes is topology.
    if fastest and fastest["nodes"] < int(nodes) and _below(_figure(chosen, "single_stream_tok_s"), fastest["single_stream_tok_s"]):
        advice["warnings"].append("the fastest measured %s setup is %d node%s with %s at %s tok/s single-stream" % (
            model, fastest["nodes"], "" if fastest["nodes"] == 1 else "s",
            "no drafter" if fastest["drafter"] == cat.DRAFTER_NONE else fastest["drafter"],
            _num(fastest["single_stream_tok_s"])))
    return advice


def _layout_warnings(model, drafter, nodes, chosen, layouts):
    warnings = []
    single, aggregate = _figure(chosen, "single_stream_tok_s"), _figure(chosen, "aggregate_8_tok_s")
    name = "%s%s" % (model, _drafter_text(drafter))
    for smaller in sorted(n for n in layouts if n < nodes):
        other = layouts[smaller]
        other_single, other_aggregate = _figure(other, "single_stream_tok_s"), _figure(other, "aggregate_8_tok_s")
        slower = []
        if _below(single, other_single):
            slower.append("single-stream %s against %s tok/s" % (_num(single), _num(other_single)))
        if _below(aggregate, other_aggregate):
            slower.append("8 streams %s against %s tok/s" % (_num(aggregate), _num(other_aggregate)))
        replicas = _replicas_text(nodes, smaller, single, aggregate, other_single, other_aggregate)
        if slower:
            warnings.append("%s on %d nodes is measured slower than on %d: %s%s" % (
                name, nodes, smaller, "; ".join(slower), "; " + replicas if replicas else ""))
        elif replicas:
            warnings.append("%s on %d nodes adds only %d%% single-stream over %d (%s against %s tok/s); %s" % (
                name, nodes, round(100 * (single / other_single - 1)), smaller, _num(single), _num(other_single),
                replicas))
    return warnings


def _below(value, other):
    """Measured lower by more than the notes' run-to-run spread (NOISE)."""
    return value is not None and other is not None and value < other * (1 - NOISE)


def _replicas_text(nodes, smaller, single, aggregate, other_single, other_aggregate):
    """Independent replicas of the smaller layout, when the chosen one buys too little single-stream for its nodes."""
    if nodes % smaller or None in (single, other_single, other_aggregate):
        return ""
    replicas = nodes // smaller
    if single >= other_single * (1 + MIN_SINGLE_STREAM_GAIN) or (aggregate is not None and aggregate >= replicas * other_aggregate):
        return ""
    return ("%d independent %d-node replicas would serve about %s tok/s at %d streams against this layout's %s at 8 "
            "(estimate: %d x the %d-node 8-stream figure)" % (
                replicas, smaller, _num(replicas * other_aggregate), 8 * replicas, _num(aggregate), replicas, smaller))


def _drafter_text(drafter):
    return "" if drafter in (None, cat.DRAFTER_NONE) else " + " + drafter


def _num(value):
    value = float(value)
    return ("%d" % value) if value == int(value) else ("%.3f" % value).rstrip("0").rstrip(".")
