# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a plan is expected to do: the failed first start a profile is known for, the catalog's baseline figures
the throughput gate compares with, and the topology advice. Each step takes the plan's record (state.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils import topology
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import inputs

_fmt = inputs.fmt

# Settings a baseline was measured with; overriding one makes `expected` approximate.
TUNING_KEYS = ("max_model_len", "max_num_batched_tokens", "gpu_memory_utilization", "max_num_seqs", "extra_args")


def expect_start_failures(state):
    """A model whose first start on this profile is known to fail once (the compile cache is cold)."""
    state.start_failures = [state.model_rules["first_start_failure"]] if state.model_rules.get("first_start_failure") else []
    if state.start_failures:
        state.warn("%s on %s: the first start compiles from scratch, gets too little KV cache and exits; the restart "
                   "(restart policy) loads the compile cache and comes up, and wait_healthy waits through it once "
                   "(%s)" % (state.model_name, state.profile_name, state.start_failures[0]))


def resolve_expected(state):
    """The catalog's baseline for this configuration (None: measured, not gated)."""
    key = (state.catalog, state.profile_name, state.model_name, state.drafter, state.node_count, state.release_name)
    # A figure measured under this plan's executor first; else the one measured under another, with a warning.
    row = cat.find_baseline(*key, executor=state.executor) or cat.find_baseline(*key)
    if row is None:
        state.warn("no catalog baseline for %s%s on %s x%d with vLLM %s: throughput will be measured, not gated" % (
            state.model_name, "" if state.drafter == "none" else " + " + state.drafter, state.profile_name, state.node_count,
            state.release_name))
        state.expected = None
        return
    expected = cat.expected_from_baseline(row)
    if state.cluster:
        check_measured_executor(state, expected, row)
    tuned = [k for k in TUNING_KEYS if k in state.overridden]
    if tuned:
        state.warn("expected figures were measured with the catalog defaults; %s override%s may move them" % (
            ", ".join(inputs.VARIABLES[k] for k in tuned), "" if len(tuned) == 1 else "s"))
    state.expected = expected


def check_reading_speed(state):
    """A configuration the notes call not worth serving (no faster than the single-stream figure they call below
    reading speed) plans, with a warning that names the measured alternatives on the same machines and release."""
    floor = state.rules.get("below_reading_speed_tok_s")
    single = cat.figure_low((state.expected or {}).get("single_stream_tok_s"))
    if floor is None or single is None or single > float(floor) or state.node_role not in ("single", "head"):
        return
    rows = [(cat.figure_low(row.get("single_stream_tok_s")), row) for row in cat.find_baselines(
        state.catalog, profile=state.profile_name, nodes=state.node_count, release=state.release_name)]
    rows = [(figure, row) for figure, row in rows if figure is not None and figure > float(floor)]
    # The same model's fastest measured drafter, and the catalog's default model as it ships (no drafter).
    same = max((fr for fr in rows if fr[1]["model"] == state.model_name), key=lambda fr: fr[0], default=None)
    default = next((fr for fr in rows if fr[1]["model"] == state.catalog["defaults"]["model"]
                    and fr[1].get("drafter") in (None, "none")), None)
    names = ", ".join("%s%s %s tok/s" % (
        row["model"], "" if row.get("drafter") in (None, "none") else " + " + row["drafter"], _fmt(figure))
        for figure, row in [fr for fr in (same, default) if fr])
    state.warn("%s%s on %s x%d decodes %s tok/s single-stream (measured), no faster than the %s tok/s the notes call "
               "below reading speed: not worth serving for interactive use%s" % (
                   state.model_name, "" if state.drafter == "none" else " + " + state.drafter, state.profile_name,
                   state.node_count, _fmt(single), _fmt(float(floor)),
                   "; measured faster here: %s (vllm_drafter, vllm_model)" % names if names else ""))


def check_measured_executor(state, expected, row):
    """A cluster's figures hold for the executor they were measured under: a calibrated row is measured under the
    plan's own; a measured row under another warns that the gate compares this cluster with that executor's."""
    if row.get("calibrate"):
        expected["executor"] = state.executor
        return
    measured = expected.get("executor")
    if measured is None or measured == state.executor:
        return
    single = cat.figure_low(expected.get("single_stream_tok_s"))
    state.warn("vllm_executor=%s: the catalog's baseline for %s%s on %s x%d with vLLM %s was measured under the %s "
               "executor, and none under %s; the throughput gate still compares this cluster with the %s figures%s, "
               "so a miss may be the executor's and not the deploy's; set vllm_executor=%s to be gated against the "
               "executor that was measured" % (
                   state.executor, state.model_name, "" if state.drafter == "none" else " + " + state.drafter,
                   state.profile_name, state.node_count, state.release_name, measured, state.executor, measured,
                   "" if single is None else " (%s tok/s single-stream)" % _fmt(single), measured))


def resolve_topology(state):
    """The memory-bandwidth ceiling and the topology advice (other layouts of the same machines), whose warnings
    the head or a single node carries."""
    state.ceiling = topology.decode_ceiling(state.catalog, state.profile_name, state.model_name, state.node_count)
    state.advice = topology.topology_advice(state.catalog, state.profile_name, state.model_name, state.drafter,
                                            state.release_name, state.node_count)
    if state.advice and state.node_role in ("single", "head"):
        for warning in state.advice["warnings"]:
            state.warn("topology: " + warning)
