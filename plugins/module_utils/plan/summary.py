# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A plan as people read it: the one-line command and the per-node summary plan.yml prints."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

try:
    from shlex import quote as _shell_quote
except ImportError:  # pragma: no cover - Python 2 only
    from pipes import quote as _shell_quote

from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan.inputs import fmt as _fmt


def shell_command(plan_dict):
    """The plan as one shell-quoted command line (for display only)."""
    return " ".join(_shell_quote(part) for part in list(plan_dict["entrypoint"]) + list(plan_dict["argv"]))


def _figure_text(value):
    if isinstance(value, (list, tuple)):
        return "%s-%s" % (_fmt(value[0]), _fmt(value[1]))
    return _fmt(value)


def endpoint_line(plan_dict):
    """Where clients reach the API and whether they need the key (a worker of a cluster has no API of its own)."""
    if plan_dict["node_role"] == "worker":
        return "endpoint: none on a worker (the head serves the cluster's API)"
    endpoint = plan_dict["endpoint"]
    access = {None: "clients send the API key", "loopback": "NO API KEY, this host's own clients only (vllm_open_api=loopback)",
              "all": "OPEN: NO API KEY, every route answers anyone (vllm_open_api=all)"}[endpoint.get("open")]
    return "endpoint: %s/v1 (%s; %s)" % (endpoint["url"], "through the gateway" if endpoint["via"] == "gateway" else
                                         "vLLM's own port", access)


def firewall_line(plan_dict):
    """Whether the playbooks load the firewall's rules on this host, and why (the planner's reason)."""
    why = next((r[len("firewall "):] for r in plan_dict["reasons"] if r.startswith("firewall ")), None)
    return "firewall: " + (why or ("on" if plan_dict["firewall"] else "off (vllm_firewall=false)"))


def memory_budget_lines(plan_dict):
    """The memory budget of a unified-memory node, one line per item (none on other profiles): what the node's memory
    holds, in the order it adds up, the parts of vLLM's pool indented under it."""
    budget = plan_dict.get("memory_budget")
    if not budget:
        return []
    lines = ["memory budget (%s, unified memory, %s per node):" % (plan_dict["profile"], budget["unit"])]
    for line in budget["lines"]:
        indent = "  " * line["level"]
        lines.append("  %s%-*s %7.2f  %s" % (indent, 28 - len(indent), line["item"], line["gib"], line["note"]))
    return lines


def summarize(plan_dict, host=None):
    """A readable per-node summary, one string per line."""
    lines = []
    role = plan_dict["node_role"]
    where = "single node" if role == "single" else "%s, node %d of %d, executor %s" % (
        role, plan_dict["node_index"] + 1, plan_dict["node_count"], plan_dict["executor"])
    lines.append("%s%s%s on %s (%s)" % ("%s: " % host if host else "", plan_dict["model"]["short"],
                                        "" if plan_dict["drafter"] == "none" else " + " + plan_dict["drafter"],
                                        plan_dict["profile"], where))
    lines.append("image: %s (vLLM %s, runtime %s)" % (plan_dict["image"] or "none, native venv: %s" % plan_dict.get("pip"),
                                                      plan_dict["release"], plan_dict["runtime"]))
    lines.append("command: %s" % shell_command(plan_dict))
    lines.append(endpoint_line(plan_dict))
    lines.append(firewall_line(plan_dict))
    if plan_dict["env"]:
        lines.append("env: %s" % " ".join("%s=%s" % kv for kv in sorted(plan_dict["env"].items())))
    if plan_dict["secret_env"]:
        lines.append("secrets (0600 env file only): %s" % ", ".join(plan_dict["secret_env"]))
    expected = plan_dict.get("expected")
    if expected:
        parts = []
        if expected.get("single_stream_tok_s") is not None:
            parts.append("%s tok/s single-stream" % _figure_text(expected["single_stream_tok_s"]))
        if expected.get("aggregate_8_tok_s") is not None:
            parts.append("%s tok/s at 8 streams" % _figure_text(expected["aggregate_8_tok_s"]))
        if expected.get("kv_cache_tokens") is not None:
            parts.append("%s KV tokens" % _figure_text(expected["kv_cache_tokens"]))
        if expected.get("acceptance") is not None:
            parts.append("%s%% acceptance" % _figure_text(expected["acceptance"]))
        lines.append("expected: %s [%s]" % (", ".join(parts), expected["source"]))
    else:
        lines.append("expected: none in the catalog (measured, not gated)")
    ceiling = plan_dict.get("ceiling")
    if ceiling:
        lines.append("memory-bandwidth ceiling: %s tok/s single-stream (%s)" % (_fmt(ceiling["decode_tok_s"]), ceiling["basis"]))
    lines.extend(memory_budget_lines(plan_dict))
    measured = [m for m in ((plan_dict.get("advice") or {}).get("measured") or []) if m["single_stream_tok_s"] is not None]
    if measured:
        lines.append("measured layouts (%s%s, vLLM %s; single-stream / 8 streams tok/s): %s" % (
            plan_dict["model"]["short"], "" if plan_dict["drafter"] == "none" else " + " + plan_dict["drafter"],
            plan_dict["release"], ", ".join("%d node%s %s / %s" % (
                m["nodes"], "" if m["nodes"] == 1 else "s", _figure_text(m["single_stream_tok_s"]),
                _figure_text(m["aggregate_8_tok_s"])) for m in measured)))
    for warning in plan_dict["warnings"]:
        lines.append("WARNING: %s" % warning)
    return lines
