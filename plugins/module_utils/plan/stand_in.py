# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A stand-in model's argv against its real model's: every flag that differs, with the catalog's reason for it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import inputs

# Request keys the real model's plan does not take from a stand-in's: where and with what it runs.
REFERENCE_UNSET_KEYS = ("model", "profile", "gpu_name", "release", "image", "runtime")
# vllm serve flags the planner writes without a value.
_SWITCHES = ("--enable-auto-tool-choice", "--language-model-only", "--enable-expert-parallel", "--headless")
# A flag one of two compared argvs does not have.
ABSENT = "absent"


def _argv_flags(argv):
    """``[(name, value)]`` of a planned vllm serve argv: ``checkpoint`` for the positional, None for a switch."""
    flags = [("checkpoint", argv[0])] if argv and not str(argv[0]).startswith("--") else []
    index = len(flags)
    while index < len(argv):
        name = str(argv[index])
        if name in _SWITCHES or index + 1 >= len(argv) or str(argv[index + 1]).startswith("--"):
            flags.append((name, None))
            index += 1
        else:
            flags.append((name, str(argv[index + 1])))
            index += 2
    return flags


def argv_differences(real, stand_in):
    """``[(flag, real value, stand-in value)]`` where two planned argvs differ; ``absent`` marks a missing flag."""
    theirs, ours = dict(_argv_flags(real)), dict(_argv_flags(stand_in))
    names = list(theirs) + [n for n in ours if n not in theirs]
    return [(n, theirs.get(n, ABSENT), ours.get(n, ABSENT)) for n in names if theirs.get(n, ABSENT) != ours.get(n, ABSENT)]


def _shown(value):
    return "set" if value is None else str(value)


def compare_with_real(state, plan):
    """A stand-in's argv (``state.argv``) against its real model's, as ``plan(catalog, request)`` plans it on the
    profile's reference profile.

    Returns ``{"model", "profile", "argv", "differences"}`` (None for a model that stands in for nothing);
    each difference is ``{"flag", "real", "stand_in", "why"}``, the why from the profile's
    ``stand_in_differences`` or the stand-in's ``gaps``. A difference neither names is a warning.
    """
    if not state.real_name:
        return None
    # A cluster is compared with the real model as a cluster of the same size on the profile that forms them.
    reference = (state.cluster and state.profile.get("stand_in_cluster_reference_profile")) or \
        state.profile.get("stand_in_reference_profile")
    request = {k: v for k, v in state.request.items() if k not in REFERENCE_UNSET_KEYS}
    request.update({"model": state.real_name, "profile": reference})
    try:
        real = plan(state.catalog, request)
    except inputs.PlanError as exc:
        state.warn("stand-in for %s: the real model cannot be planned on %s with these settings, so the flags "
                   "are not compared: %s" % (state.real_name, reference, exc))
        return {"model": state.real_name, "profile": reference, "argv": None, "differences": None}
    known = dict(state.profile.get("stand_in_differences") or {})
    known.update(state.model.get("gaps") or {})
    differences = []
    for name, real_value, own_value in argv_differences(real["argv"], state.argv):
        why = " ".join(str(known.get(name) or "").split())
        differences.append({"flag": name, "real": real_value, "stand_in": own_value, "why": why or None})
        shown = "%s: %s on %s, %s here" % (name, _shown(real_value), reference, _shown(own_value))
        if why:
            state.reason("stand-in for %s, %s: %s" % (state.real_name, shown, why))
        else:
            state.warn("stand-in for %s differs in %s, which the catalog does not explain (profiles.%s."
                       "stand_in_differences or models.%s.gaps)" % (
                           state.real_name, shown, state.profile_name, state.model_name))
    state.reason("stand-in for %s: every other flag is the one %s gets on %s" % (
        state.real_name, state.real_name, reference))
    return {"model": state.real_name, "profile": reference, "argv": list(real["argv"]), "differences": differences}
