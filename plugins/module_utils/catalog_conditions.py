# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The catalog's `when` / `unless` conditions, evaluated against a plan's context.

Release defects (the planner) and smoke misses (``smoke``) carry these conditions. This file needs neither
PyYAML nor the catalog file, so code that may run on a managed host (the smoke module) imports it alone; the
catalog's loader and queries live in ``catalog``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Keys a `when` / `unless` condition may test, and the plan context each reads.
CONDITION_KEYS = ("profiles", "drafters", "models", "models_except", "min_nodes", "max_nodes", "expert_parallel")


class ConditionError(ValueError):
    """A condition tests a key the evaluator does not know (the catalog's validator refuses it first)."""


def conditions_hold(when, context):
    """True when every condition of ``when`` holds for ``context``.

    ``when`` uses the catalog's condition keys (profiles, drafters, models,
    models_except, min_nodes, max_nodes, expert_parallel); ``context`` carries profile,
    drafter, model, node_count and expert_parallel. A condition on a value the
    context lacks (None) does not hold. An empty ``when`` always holds.
    """
    when = when or {}
    context = context or {}
    for key, wanted in when.items():
        if key in ("min_nodes", "max_nodes"):
            have = context.get("node_count")
            if have is None or (int(have) < int(wanted) if key == "min_nodes" else int(have) > int(wanted)):
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
            raise ConditionError("unknown condition %s (valid: %s)" % (key, ", ".join(CONDITION_KEYS)))
    return True
