# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The record one plan is built in: every field named here, each filled by one step.

The planner (planner.py) runs its steps in order over one ``PlanState``; a step reads the fields earlier steps
filled and fills its own (``FIELDS`` lists them by step). A field no step has filled yet is absent, so a step that
reads one too early fails loudly instead of reading a default. ``reason`` and ``warn`` add to the plan's reasons and
warnings once each, in the order they are first given.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# What the record starts with: the catalog, the request and the plan's growing lists.
GIVEN = ("catalog", "request", "rules", "warnings", "reasons", "env", "secret_env", "overridden")
# The fields each step fills ("<module>.<step>", in the order planner.STEPS runs them); a step not named fills none.
FIELDS = (
    # The hardware profile and the model (a stand-in's flags come from the model it stands in for).
    ("model.resolve_profile", ("profile_name", "profile")),
    ("model.resolve_model", ("model_name", "model", "model_rules", "real_name", "flag_model")),
    # One node, a rank of a cluster, or a replica.
    ("cluster.resolve_nodes", ("node_count", "node_index", "replicas", "replica_nodes", "cluster", "head_address",
                               "node_address", "expert_parallel", "executor", "node_role")),
    ("release.resolve_release", ("release_name", "release", "image")),
    ("release.resolve_runtime", ("runtime",)),
    # Where the API listens and who may reach it.
    ("binding.resolve_binding", ("open_api", "bind_address", "serve_host", "gateway")),
    ("binding.resolve_firewall", ("firewall",)),
    ("drafter.resolve_drafter", ("objective", "drafter")),
    # One step per serving setting (settings.STEPS).
    ("settings.resolve", ("language_model_only", "vision", "required_lmo", "max_model_len", "images_per_prompt", "audio",
                          "mnbt", "gpu_util", "max_num_seqs", "port", "served_name", "client_endpoint", "extra_args")),
    # What vllm_allow_guarded lets through, and the routes that opens.
    ("guards.resolve_allowed", ("allowed_guarded", "allowed_routes")),
    # What the node holds in a unified memory, and the ceiling an OS-level guard on the server needs.
    ("memory.memory_budget", ("memory_budget", "memory_guard")),
    ("expected.expect_start_failures", ("start_failures",)),
    # What the node runs.
    ("argv.resolve_serve_argv", ("argv", "spec_config")),
    ("planner.compare_stand_in", ("stand_in_for",)),
    ("argv.resolve_entrypoint", ("entrypoint", "ray_argv")),
    # The figures the plan is gated against, and the advice on other layouts.
    ("expected.resolve_expected", ("expected",)),
    ("expected.resolve_topology", ("ceiling", "advice")),
)


class PlanState(object):
    """One plan in the making (see the module's docstring)."""

    __slots__ = GIVEN + tuple(name for _step, names in FIELDS for name in names)

    def __init__(self, catalog, request):
        self.catalog = catalog
        self.request = dict(request)
        self.rules = catalog["rules"]
        self.warnings = []
        self.reasons = []
        self.env = {}
        self.secret_env = []
        self.overridden = []

    def reason(self, text):
        if text not in self.reasons:
            self.reasons.append(text)

    def warn(self, text):
        if text not in self.warnings:
            self.warnings.append(text)

    def filled(self):
        """{field: value} of every field filled so far (the given ones included)."""
        return {name: getattr(self, name) for name in self.__slots__ if hasattr(self, name)}
