# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The serve planner: a few choices in, the exact ``vllm serve`` invocation out.

``plan(catalog, request)`` is pure: it reads the catalog (see catalog.py) and a
request dict, and returns the plan contract every runtime consumes, or raises
``PlanError`` whose message names the rule, the variable, the value given and
the fix. Nothing here touches a host, a file or the network.

Request keys (all optional except where a rule needs them; ``None`` or ``""``
means "not set, use the catalog default"):

  model, drafter (none|mtp|dflash|auto), profile, gpu_name (picks the profile
  when ``profile`` is unset), node_count, node_index (0 = head), image,
  release, executor (ray|mp), objective (the catalog's objectives), runtime
  (compose|native), max_model_len, max_num_batched_tokens,
  gpu_memory_utilization, max_num_seqs, language_model_only, enable_audio,
  images_per_prompt, port, served_name, api_key (validated only; its value
  never enters the plan), extra_args (list of str), head_address,
  node_address, cluster_interface, cluster_hca, env, allow_dev_mode,
  native_env, cluster_extra_env, cluster_ray_health_check (the runtime roles'
  extra environments: only their names are checked, the roles merge them),
  cluster_nodes (every node of the cluster group: ``{"host", "address",
  "machine"}``, for the link-address check), host and host_groups (this host's
  inventory name and which of vllm_single / the cluster group list it),
  client_address (its ansible_host: where ``endpoint.url`` points clients),
  gateway (vllm_gateway: the API gateway fronts the server, which then binds
  loopback; unset, it fronts a single node that has an API key; the plan's
  ``bind_address`` says where it listens), topology (vllm_topology:
  tensor-parallel, the default, makes the cluster group one server; replicas
  makes each of its hosts serve the model alone behind the gateway on the
  group's first host, the front).

Cluster nodes: the head (node_index 0) gets the full serve argv. Under the
``mp`` executor every worker runs ``vllm serve`` too, with ``--headless`` and
its ``--node-rank``; under ``ray`` a worker only joins the Ray cluster, so its
``entrypoint`` is ``["ray", "start"]`` and ``argv`` is what follows it. Ray
nodes also carry ``ray_start_argv`` (the head's ``ray start --head ...``).

``STEPS`` below is the planner: functions run in order over one record
(``state.PlanState``), each reading the fields earlier steps filled and filling
its own. They live beside this file: model.py (profile, model), cluster.py
(nodes, replicas, link addresses, pinned ports, the link environment),
release.py (release, runtime, floors, defects), binding.py (bind address,
gateway, open API, firewall), drafter.py, settings.py (one step per serving
setting), guards.py (extra args, user environments), memory.py (the memory
budget of a unified-memory node), argv.py (the vllm serve and ray start argv),
stand_in.py (a stand-in against its real model) and expected.py (start
failures, baseline, topology advice); inputs.py holds the request keys and
their coercion, summary.py prints a plan.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import (
    argv,
    binding,
    cluster,
    drafter,
    expected,
    guards,
    inputs,
    memory,
    model,
    release,
    settings,
    stand_in,
)
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan.state import PlanState

# The names callers read from here: the request's keys and variables, the refusal, the choices a request may make.
PlanError, REQUEST_KEYS, VARIABLES = inputs.PlanError, inputs.REQUEST_KEYS, inputs.VARIABLES
DEV_MODE_ENV, dev_mode_on = inputs.DEV_MODE_ENV, inputs.dev_mode_on
SINGLE_GROUP, EXECUTORS, TOPOLOGIES = cluster.SINGLE_GROUP, cluster.EXECUTORS, cluster.TOPOLOGIES
DRAFTER_CHOICES, OBJECTIVES = drafter.DRAFTER_CHOICES, drafter.OBJECTIVES
RUNTIMES, OPEN_API = release.RUNTIMES, binding.OPEN_API


def compare_stand_in(state):
    """A stand-in's flags against its real model's (stand_in.py), planned by this module's plan()."""
    state.stand_in_for = stand_in.compare_with_real(state, plan)


# The planner, in order: each step reads the record's fields earlier steps filled and fills its own (state.FIELDS).
STEPS = (
    model.resolve_profile,
    model.resolve_model,
    cluster.resolve_nodes,
    release.resolve_release,
    release.resolve_runtime,
    binding.resolve_binding,
    binding.resolve_firewall,
    drafter.resolve_drafter,
    release.check_release_floors,
    settings.resolve,
    cluster.check_cluster_ports,
    guards.resolve_allowed,
    guards.check_extra_args,
    guards.check_role_envs,
    release.apply_release_defects,
    memory.memory_budget,
    expected.expect_start_failures,
    model.profile_env,
    argv.resolve_serve_argv,
    compare_stand_in,
    cluster.link_env,
    argv.resolve_entrypoint,
    guards.apply_user_env,
    # Last of the refusals: a plan with two mistakes names the other one first.
    binding.check_open_api,
    expected.resolve_expected,
    expected.check_reading_speed,
    expected.resolve_topology,
)


def contract(state):
    """The plan contract every runtime consumes, from a record every step has filled."""
    model_entry = copy.deepcopy(state.model)
    model_entry["short"] = state.model_name
    drafter_model = cat.drafter_weights(state.catalog, state.drafter, state.model_name) if state.drafter != "none" else None
    plan_dict = {
        "image": state.image,
        "entrypoint": state.entrypoint,
        "argv": state.argv,
        "env": dict(sorted(state.env.items())),
        "secret_env": list(state.secret_env),
        "expected_start_failures": list(state.start_failures),
        "node_role": state.node_role,
        "node_index": state.node_index,
        "node_count": state.node_count,
        "executor": state.executor,
        "head_address": state.head_address if state.cluster else None,
        "expected": state.expected,
        "ceiling": state.ceiling,
        "advice": state.advice,
        "warnings": list(state.warnings),
        "reasons": list(state.reasons),
        "model": model_entry,
        "drafter": state.drafter,
        "drafter_model": drafter_model,
        "disk": cat.disk_need(state.catalog, state.release, state.runtime, state.model, drafter_model),
        "memory_budget": state.memory_budget,
        "memory_guard": state.memory_guard,
        "objective": state.objective,
        "speculative_config": state.spec_config,
        "profile": state.profile_name,
        "release": state.release_name,
        "pip": state.release.get("pip"),
        "port": state.port,
        "bind_address": state.bind_address,
        "gateway": state.gateway,
        "firewall": state.firewall,
        "refused_routes": guards.refused_routes(state),
        "replicas": None if state.replicas is None else dict(state.replicas, upstreams=[
            {"host": host, "address": address, "port": state.port} for host, address in state.replica_nodes]),
        "endpoint": state.client_endpoint,
        "served_name": state.served_name,
        "runtime": state.runtime,
        "settings": {
            "max_model_len": state.max_model_len,
            "max_num_batched_tokens": state.mnbt,
            "gpu_memory_utilization": state.gpu_util,
            "max_num_seqs": state.max_num_seqs,
            "language_model_only": state.language_model_only,
            "images_per_prompt": state.images_per_prompt,
            "audio": state.audio,
            "tensor_parallel_size": state.node_count,
            "expert_parallel": state.expert_parallel,
        },
        "stand_in": bool(state.profile.get("stand_in") or state.model.get("stand_in")),
        "stand_in_for": state.stand_in_for,
    }
    if state.ray_argv is not None:
        plan_dict["ray_start_argv"] = state.ray_argv
        plan_dict["ray_port"] = argv.ray_port(state)
    if state.cluster and state.node_role == "worker" and state.executor == "ray":
        plan_dict["serve_argv"] = None
    return plan_dict


def plan(catalog, request):
    """Plan one node. Returns the plan contract dict; raises PlanError on refusal."""
    request = request or {}
    inputs.check_request_keys(request)
    state = PlanState(catalog, request)
    for step in STEPS:
        step(state)
    return contract(state)


def plan_cluster(catalog, request, node_addresses=None):
    """Plan every node of a cluster (``request['node_count']`` nodes), head first."""
    count = int(request.get("node_count") or 1)
    plans = []
    nodes = [{"host": "node %d" % (i + 1), "address": a} for i, a in enumerate(node_addresses or [])]
    for index in range(count):
        node_request = dict(request)
        node_request["node_index"] = index
        if node_addresses:
            node_request["node_address"] = node_addresses[index]
            node_request.setdefault("cluster_nodes", nodes)
        plans.append(plan(catalog, node_request))
    return plans
