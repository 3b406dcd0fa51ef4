# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The speculative-decoding drafter: the one asked for, the shipped default where it applies, or (vllm_drafter=auto)
the best measured for the objective. A step over the plan's record (state.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import inputs, release

_refuse, _fmt, _as_choice = inputs.refuse, inputs.fmt, inputs.as_choice

DRAFTER_CHOICES = ("none", "mtp", "dflash", "auto")
# The catalog's objectives (interactive, throughput), read when first used; plan() reads the catalog it is given.
OBJECTIVES = cat.CatalogView(cat.objective_names)


def drafter_refusal(state, drafter):
    """Why ``drafter`` cannot run in this configuration (a message), or None."""
    if drafter == "none":
        return None
    if not cat.drafter_checkpoint(state.catalog, drafter, state.model_name):
        has = [m for m in state.catalog["models"] if cat.drafter_checkpoint(state.catalog, drafter, m)]
        valid = ["none"] + cat.drafters_for(state.catalog, state.model_name)
        gap = " ".join(str((state.model.get("gaps") or {}).get("--speculative-config") or "").split())
        return ("%s has no %s drafter (%s exists for %s)%s; set vllm_drafter to one of: %s" % (
            state.model_name, drafter, drafter, ", ".join(has) or "no model", ": " + gap if gap else "",
            ", ".join(valid)), "drafter")
    refused = (state.model_rules.get("refused_drafters") or {}).get(drafter)
    if refused:
        valid = ["none"] + [d for d in cat.drafters_for(state.catalog, state.model_name)
                            if not (state.model_rules.get("refused_drafters") or {}).get(d)]
        return ("%s + %s on %s: %s; set vllm_drafter to one of: %s" % (
            state.model_name, drafter, state.profile_name, refused, ", ".join(valid)), "profile-drafter")
    defects = release.refusing_defects(state.release, release.context(state, drafter))
    if not defects:
        return None
    works = release.working_release(state.catalog, release.context(state, drafter))
    fixes = [d["fix"] for d in defects if d.get("fix")]
    if fixes:
        fix = fixes[0]
    elif works:
        fix = "use vllm_image=vllm/vllm-openai:%s (on the head and every worker), or vllm_drafter=none" % works
    else:
        fix = "no vLLM release in the catalog runs it yet; set vllm_drafter=none"
    where = "a %d-node cluster" % state.node_count if state.node_count > 1 else state.profile_name
    summaries = "; and ".join(" ".join(d["summary"].split()) for d in defects)
    return ("%s + %s on %s cannot start on vLLM %s: %s; %s" % (
        state.model_name, drafter, where, state.release_name, summaries, fix),
        "release-defect:%s" % "+".join(d["id"] for d in defects))


def resolve_drafter(state):
    """The drafter and the objective vllm_drafter=auto optimises for."""
    requested = _as_choice(state.request, "drafter", DRAFTER_CHOICES)
    state.objective = (_as_choice(state.request, "objective", cat.objective_names(state.catalog))
                       or state.catalog["defaults"]["objective"])
    if requested is None:
        default = state.model_rules.get("default_drafter") or state.profile.get("default_drafter") or "none"
        refusal = drafter_refusal(state, default)
        if refusal:
            state.drafter = "none"
            if default != "none":
                state.reason("drafter none: the %s default (%s) does not apply to %s" % (state.profile_name, default, state.model_name))
        else:
            state.drafter = default
            if default != "none":
                state.reason("drafter %s: the shipped default on %s" % (default, state.profile_name))
        return
    if requested == "auto":
        state.drafter = auto_drafter(state)
        return
    refusal = drafter_refusal(state, requested)
    if refusal:
        _refuse(refusal[1], refusal[0], "vllm_drafter", requested)
    state.drafter = requested
    if requested != "none":
        state.reason("drafter %s: requested" % requested)


def auto_drafter(state):
    """vllm_drafter=auto: the drafter (or none) with the best measured figure for the objective, on the newest
    release that measured the most of them."""
    objective = state.catalog["objectives"][state.objective]
    metric = objective["metric"]
    label = objective.get("label") or metric
    candidates = ["none"]
    for drafter in cat.drafters_for(state.catalog, state.model_name):
        refusal = drafter_refusal(state, drafter)
        if refusal:
            state.warn("vllm_drafter=auto skipped %s: %s" % (drafter, refusal[0]))
        else:
            candidates.append(drafter)
    releases = [state.release_name] + sorted(
        [k for k in state.catalog["releases"] if k != state.release_name], key=cat.version_tuple, reverse=True)
    best_release, best_rows = None, {}
    for name in releases:
        rows = {}
        for drafter in candidates:
            row = cat.find_baseline(state.catalog, state.profile_name, state.model_name, drafter, state.node_count, name)
            if row and cat.figure_low(row.get(metric)) is not None:
                rows[drafter] = row
        if len(rows) > len(best_rows):
            best_release, best_rows = name, rows
        if len(rows) == len(candidates):
            break
    if not best_rows:
        state.warn("vllm_drafter=auto: no %s measurement of %s on %s x%d; chose none" % (
            label, state.model_name, state.profile_name, state.node_count))
        return "none"
    unmeasured = [d for d in candidates if d not in best_rows]
    if unmeasured:
        state.warn("vllm_drafter=auto compared only measured configurations; %s not measured on %s x%d" % (
            ", ".join(unmeasured), state.profile_name, state.node_count))
    chosen = None
    for drafter in candidates:
        if drafter in best_rows and (chosen is None or
                                     cat.figure_low(best_rows[drafter][metric]) > cat.figure_low(best_rows[chosen][metric])):
            chosen = drafter
    figures = ", ".join("%s %s" % (d, _fmt(cat.figure_low(best_rows[d][metric]))) for d in candidates if d in best_rows)
    state.reason("drafter %s: vllm_drafter=auto with objective %s picks the best measured %s tok/s for %s on %s x%d "
                 "(vLLM %s: %s)" % (chosen, state.objective, label, state.model_name, state.profile_name, state.node_count,
                                    best_release, figures))
    return chosen
