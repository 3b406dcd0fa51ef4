# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What a node runs: the ``vllm serve`` argv (with its --speculative-config), and on a Ray cluster the ``ray start``
argv a worker runs instead. Each step takes the plan's record (state.py) once every setting is resolved."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat

SERVE_ENTRYPOINT = ["vllm", "serve"]
RAY_ENTRYPOINT = ["ray", "start"]


def speculative_config(state):
    """The drafter's --speculative-config (None without a drafter)."""
    if state.drafter == "none":
        return None
    spec = state.catalog["drafters"][state.drafter]
    config = {}
    if spec.get("method_in_config"):
        config["method"] = spec["method"]
    config["model"] = cat.drafter_checkpoint(state.catalog, state.drafter, state.model_name)
    config["num_speculative_tokens"] = int(spec["num_speculative_tokens"])
    if spec.get("attention_backend"):
        config["attention_backend"] = spec["attention_backend"]
    if state.drafter == "dflash":
        state.reason("--speculative-config DFlash k=%d with \"attention_backend\": \"%s\": vLLM does not pass the target's "
                     "forced Triton backend to DFlash drafters" % (config["num_speculative_tokens"], spec["attention_backend"]))
    else:
        state.reason("--speculative-config MTP k=%d, method inferred from the assistant checkpoint" % config["num_speculative_tokens"])
    return config


def resolve_serve_argv(state):
    """The ``vllm serve`` argv from the resolved settings, with vllm_extra_args last."""
    rules = state.rules
    argv = [state.model["checkpoint"], "--served-model-name", state.served_name,
            "--host", state.serve_host, "--port", str(state.port),
            "--max-model-len", str(state.max_model_len)]
    if state.profile.get("fp8_kv_cache"):
        argv += ["--kv-cache-dtype", rules["kv_cache_dtype"]]
        state.reason("--kv-cache-dtype fp8: the checkpoint ships calibrated fp8 KV scales (~2x KV capacity)")
    argv += ["--gpu-memory-utilization", str(state.gpu_util),
             "--max-num-batched-tokens", str(state.mnbt),
             "--max-num-seqs", str(state.max_num_seqs)]
    if state.profile.get("enforce_eager"):
        argv.append("--enforce-eager")
        why = (state.profile.get("stand_in_differences") or {}).get("--enforce-eager") or "the profile runs eager"
        state.reason("--enforce-eager: %s" % " ".join(str(why).split()))
    if state.vision or state.audio:
        limits = {}
        if state.vision:
            limits["image"] = state.images_per_prompt
            state.reason("--limit-mm-per-prompt image %d: vision on (images before text in the content array)" % state.images_per_prompt)
        if state.audio:
            limits["audio"] = rules["audio_per_prompt"]
            state.reason("--limit-mm-per-prompt audio %d: %s takes audio input" % (rules["audio_per_prompt"], state.model_name))
        argv += ["--limit-mm-per-prompt", json.dumps(limits, separators=(", ", ": "))]
    if state.language_model_only:
        argv.append("--language-model-only")
    if state.flag_model.get("family") == "gemma4":
        argv += ["--reasoning-parser", rules["reasoning_parser"], "--tool-call-parser", rules["tool_call_parser"]]
        if rules.get("enable_auto_tool_choice"):
            argv.append("--enable-auto-tool-choice")
        state.reason("gemma4 reasoning and tool-call parsers with auto tool choice: Gemma 4's thinking and native tool calls")
        state.reason("no --quantization: vLLM detects compressed-tensors and picks the fast NVFP4 kernel")
    spec = speculative_config(state)
    state.spec_config = spec
    if spec:
        argv += ["--speculative-config", json.dumps(spec, separators=(", ", ": "))]
    if state.cluster:
        argv += ["--tensor-parallel-size", str(state.node_count)]
        state.reason("--tensor-parallel-size %d: one rank per node" % state.node_count)
        if state.expert_parallel:
            argv.append("--enable-expert-parallel")
            state.reason("--enable-expert-parallel: TP would split each expert to a shape the NVFP4 MoE kernel cannot pad; "
                         "with EP each rank holds whole experts")
        if state.executor == "ray":
            argv += ["--distributed-executor-backend", "ray"]
            state.reason("--distributed-executor-backend ray: the nodes join one Ray cluster first")
        else:
            argv += ["--nnodes", str(state.node_count), "--node-rank", str(state.node_index), "--master-addr", state.head_address]
            if state.node_role == "worker":
                argv.append("--headless")
            state.reason("multiprocessing executor: --nnodes/--node-rank/--master-addr%s" % (
                ", --headless on workers" if state.node_role == "worker" else ""))
    state.argv = argv + list(state.extra_args)


def ray_port(state):
    """Ray's GCS port on the head: the profile's cluster.ray_port (the plan carries it as ray_port)."""
    return int((state.profile.get("cluster") or {}).get("ray_port", 6379))


def ray_start_argv(state):
    """What follows ``ray start`` on this node: the head's ``--head``, a worker's ``--address``, the pinned ports."""
    port = ray_port(state)
    argv = ["--head", "--port", str(port)] if state.node_role == "head" else ["--address", "%s:%s" % (state.head_address, port)]
    if state.node_address:
        argv += ["--node-ip-address", state.node_address]
    pinned = dict(state.rules.get("ray_node_ports") or {})
    if state.node_role == "head":
        pinned.update(state.rules.get("ray_head_ports") or {})
    for flag, value in pinned.items():
        argv += [flag, str(value)]
    if pinned:
        state.reason("Ray's node ports pinned (%s) so the firewall can allow exactly the cluster's ports from peers"
                     % ", ".join("%s %s" % kv for kv in pinned.items()))
    return argv + ["--block"]


def resolve_entrypoint(state):
    """``vllm serve`` everywhere but on a Ray worker, which only joins the head's Ray cluster (``ray start``)."""
    state.entrypoint, state.ray_argv = list(SERVE_ENTRYPOINT), None
    if not state.cluster or state.executor != "ray":
        return
    state.ray_argv = ray_start_argv(state)
    if state.node_role == "worker":
        state.entrypoint, state.argv = list(RAY_ENTRYPOINT), list(state.ray_argv)
        state.reason("Ray worker: joins the head's Ray cluster; the head runs vllm serve for every node")
