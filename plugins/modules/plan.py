# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Documentation only: sparkfleet.vllm.plan is an action plugin (plugins/action/plan.py)
# that runs on the controller; the planning logic is plugins/module_utils/plan/planner.py.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: plan
short_description: Plan the exact C(vllm serve) invocation for Gemma 4 on Blackwell, or refuse
version_added: 1.0.0
description:
  - Turns a few choices (model, drafter, hardware profile, cluster size, vLLM release, overrides) into the
    image, the full C(vllm serve) argument list, the environment, the catalog's expected throughput for
    exactly this configuration, warnings and a one-line reason for every choice.
  - Every rule comes from the collection's catalog (C(data/catalog.yml)); a configuration the reference
    measurements show cannot work is refused with a message naming the rule, the value and the fix.
  - Runs entirely on the controller and never contacts the managed host, so nothing changes on any host
    when planning fails.
  - Options left unset take the catalog's defaults for the hardware profile.
  - On a cluster (a host in the O(cluster_group) inventory group) the first host of the group is the head.
    The head gets the full serve argv; under O(executor=mp) workers run C(vllm serve ... --headless
    --node-rank N); under O(executor=ray) a worker's RV(plan.entrypoint) is C(ray start) and RV(plan.argv)
    joins the head's Ray cluster.
author:
  - sparkfleet.vllm contributors (@sparkfleet)
options:
  model:
    description:
      - Model short name (V(31b), V(26b-a4b), V(12b), V(e4b), V(e2b), or a stand-in of the V(cpu) profile, V(tiny),
        V(tiny-31b), V(tiny-26b-a4b), V(tiny-e2b)), any case; a checkpoint id or served name also works. Unset means the catalog default (V(26b-a4b); V(tiny) on
        the V(cpu) stand-in profile).
    type: str
  drafter:
    description:
      - Speculative decoding drafter. V(auto) picks the best measured option for O(objective).
      - Unset means the profile's shipped default (MTP on the RTX 5090, none elsewhere).
    type: str
    choices: [none, mtp, dflash, auto]
  profile:
    description:
      - Hardware profile (V(rtx_pro_6000), V(rtx_5090), V(dgx_spark), or the stand-in V(cpu)).
    type: str
  gpu_name:
    description:
      - GPU name as C(nvidia-smi) reports it; picks the profile when O(profile) is unset.
    type: str
  node_count:
    description:
      - Number of nodes. Unset means the size of the O(cluster_group) group when the host is in it, else 1.
    type: int
  node_index:
    description:
      - This host's place in the cluster, 0 being the head. Unset means its position in O(cluster_group).
    type: int
  cluster_group:
    description:
      - Inventory group whose members form one tensor-parallel cluster.
      - Every machine in it needs its own C(vllm_cluster_link_ip), the API port must lie outside the cluster's pinned
        port ranges (catalog C(rules.cluster_tcp_ports)), and a host in both C(vllm_single) and this group is refused.
    type: str
    default: vllm_cluster
  head_address:
    description:
      - Head's address on the cluster link. Unset means the head's C(vllm_cluster_link_ip) or C(ansible_host).
    type: str
  node_address:
    description:
      - This node's address on the cluster link. Unset means its C(vllm_cluster_link_ip) or C(ansible_host).
    type: str
  cluster_interface:
    description:
      - Netdev of the cluster link (NCCL and Gloo socket interface). Unset uses a placeholder and warns.
    type: str
  cluster_hca:
    description:
      - RoCE device of the cluster link (C(NCCL_IB_HCA)). Unset uses a placeholder and warns.
    type: str
  image:
    description:
      - Container image; the release is read from its tag (V(vllm/vllm-openai:v0.29.0)).
    type: str
  release:
    description:
      - vLLM release (V(v0.30.0)). Needed when the image tag is not a version.
    type: str
  executor:
    description:
      - Distributed executor on a cluster.
    type: str
    choices: [ray, mp]
  objective:
    description:
      - What O(drafter=auto) optimizes, single-stream (V(interactive)) or 8-stream aggregate (V(throughput)).
    type: str
    choices: [interactive, throughput]
  runtime:
    description:
      - How the plan will be run, a container (V(compose)) or a virtualenv with systemd (V(native)).
    type: str
    choices: [compose, native]
  max_model_len:
    description:
      - Override C(--max-model-len). At most the model's context.
    type: int
  max_num_batched_tokens:
    description:
      - Override C(--max-num-batched-tokens). Never below 4096 unless language-model-only.
    type: int
  gpu_memory_utilization:
    description:
      - Override C(--gpu-memory-utilization). At most 0.78 on unified memory.
    type: float
  max_num_seqs:
    description:
      - Override C(--max-num-seqs).
    type: int
  language_model_only:
    description:
      - Drop the vision encoder (C(--language-model-only)).
    type: bool
  enable_audio:
    description:
      - Accept one audio clip per prompt. Unset means on for models with audio input (E4B, E2B).
    type: bool
  images_per_prompt:
    description:
      - Images per prompt (C(--limit-mm-per-prompt)). Unset means 4.
    type: int
  port:
    description:
      - API port. Unset means 8000.
    type: int
  served_name:
    description:
      - Name clients use in the C(model) field. Unset means the catalog's served name.
    type: str
  api_key:
    description:
      - API key. Only validated; the plan lists C(VLLM_API_KEY) in RV(plan.secret_env) and never carries the value.
      - At least 8 characters, each printable ASCII without whitespace (quotes, C($), backslash and backtick included;
        every runtime quotes the value for its reader); a refusal names the characters (see C(docs/security.md)).
    type: str
  extra_args:
    description:
      - Extra C(vllm serve) arguments, appended after the planned ones and checked against the same rules.
      - Read the way vLLM's parser reads them (underscores, C(--flag=value), unique prefixes, short aliases such as
        C(-tp), dotted C(--flag.field) keys), with the flag list in C(data/vllm_serve_flags.yml) generated from the
        real parser. Planned flags and flags that carry a credential (C(--api-key), C(--hf-token)) are refused in any
        spelling, C(--config) always; flags that open routes the API key does not guard (C(--profiler-config),
        C(--grpc), ...) or trace-level uvicorn logging unless O(allow_dev_mode=true).
    type: list
    elements: str
  env:
    description:
      - Extra server environment, merged over the planned env (an override is reported as a warning).
      - Secret-looking names (C(*TOKEN*) but not C(*TOKENS*) or C(*TOKENIZER*), C(*_KEY), C(*SECRET*), C(*PASSWORD*),
        C(RAY_AUTH_*)) are refused here and in O(native_env), O(cluster_extra_env) and O(cluster_ray_health_check);
        secrets reach the server only through the 0600 secret file.
      - C(VLLM_SERVER_DEV_MODE) is refused unless O(allow_dev_mode=true).
    type: dict
  native_env:
    description:
      - C(vllm_native_env), the native runtime's extra environment. Only its names are checked here (the role merges it).
    type: dict
  cluster_extra_env:
    description:
      - C(vllm_cluster_extra_env), every cluster rank's extra environment. Only its names are checked here; Ray's token
        authentication is switched only by C(vllm_cluster_ray_auth).
    type: dict
  cluster_ray_health_check:
    description:
      - C(vllm_cluster_ray_health_check), environment of Ray's health check on every node. Only its names are checked.
    type: dict
  allow_dev_mode:
    description:
      - Let C(VLLM_SERVER_DEV_MODE) through, and the C(extra_args) flags of the catalog's C(dev_mode_flags).
      - C(VLLM_SERVER_DEV_MODE)'s routes (C(/reset_prefix_cache), C(/sleep), C(/collective_rpc))
        answer without the API key; only a benchmark host that resets the prefix cache between sweep shapes needs it.
    type: bool
    default: false
  allow_guarded:
    description:
      - The catalog's guarded flags and environment variables (C(rules.guarded)) to let through, each by name; options
        that load code (C(--trust-remote-code), C(--tool-parser-plugin), ...), open routes the API key does not guard
        (C(VLLM_ALLOW_RUNTIME_LORA_UPDATING)) or widen what clients may read (C(--allowed-local-media-path)).
      - Omitted, each is refused in O(extra_args) and in every environment mapping. Named, the plan warns, and the
        routes it registers leave RV(plan.refused_routes).
    type: list
    elements: str
  gateway:
    description:
      - The API gateway (role C(sparkfleet.vllm.vllm_gateway)) fronts the server, so the plan binds the API to the
        catalog's C(defaults.gateway_host) (127.0.0.1) and reports it as RV(plan.bind_address). Under compose vLLM keeps
        C(--host 0.0.0.0) inside its container and the port is published on that address.
      - Omitted, it is on when O(api_key) is set. On a cluster the head's API then binds its link address
        (O(node_address)) and the head runs the gateway; a worker runs none. With O(topology=replicas) the group's
        first host runs it (omitted or true); false is refused there, since the gateway is what balances over the
        replicas.
    type: bool
    default: false
  gateway_port:
    description:
      - The gateway's port, where clients reach the API with O(gateway=true) (RV(plan.endpoint)); the catalog's
        C(defaults.gateway_port) (8080) when omitted. Refused when it is O(port).
    type: int
  gateway_tls:
    description:
      - The gateway serves TLS (its certificate is set), so RV(plan.endpoint) is C(https).
    type: bool
    default: false
  topology:
    description:
      - What the hosts of the cluster group (O(cluster_group)) become. C(tensor-parallel) (the default) makes them one
        server. C(replicas) makes each of them serve the model alone (a single-node plan, C(node_count) 1),
        bound to its link address (C(vllm_cluster_link_ip), else C(ansible_host)); the group's first host, the
        front, also runs the gateway, which balances clients over every replica, and every replica's
        RV(plan.endpoint) is the front's gateway. See RV(plan.replicas).
    type: str
    choices: [tensor-parallel, replicas]
  open_api:
    description:
      - How a plan without an API key (O(api_key)) may serve. Omitted, such a plan is refused, so that no API
        answers every route without a key by accident.
      - V(loopback) binds a single node's API to 127.0.0.1 (only the host's own clients reach it); V(all) serves
        every address without a key, and the plan's warnings and C(open) in RV(plan.endpoint) say so.
      - With O(api_key) set it has no effect.
    type: str
    choices: [loopback, all]
  firewall:
    description:
      - Whether C(serve.yml) and C(cluster.yml) load the nftables rules of role C(sparkfleet.vllm.firewall) before the
        first server listens (RV(plan.firewall)).
      - Omitted, it is on wherever something listens beyond loopback (a cluster, a replica, the gateway, an API bound
        beyond 127.0.0.1) and off for an API on 127.0.0.1 only. V(false) where it would be on is a plan warning.
    type: bool
  catalog_path:
    description:
      - Catalog file to read instead of the collection's C(data/catalog.yml).
    type: path
  plan_dir:
    description:
      - Controller directory for the plan file C(<plan_dir>/<inventory_hostname>.json), relative to where
        C(ansible-playbook) runs. Reported as RV(plan_file); written when O(write=true).
    type: path
  write:
    description:
      - Write the plan as JSON to RV(plan_file) on the controller (atomically, mode 0644), only when its
        content differs. In check mode nothing is written and the result says whether it would change.
    type: bool
    default: false
extends_documentation_fragment:
  - action_common_attributes
  - action_common_attributes.conn
  - action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  become:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details: Check mode plans exactly as a normal run does and writes no plan file.
  connection:
    support: none
  delegation:
    support: none
    details: The plan is computed on the controller for the inventory host; delegation has no effect.
  diff_mode:
    support: none
  idempotent:
    description: When run twice in a row with the same arguments and catalog, the second run returns the same plan and no change.
    support: full
  platform:
    platforms: all
notes:
  - The catalog is read and the plan file written on the controller; the managed host is never contacted.
seealso:
  - name: Planner guide
    description: Every rule the planner applies and why.
    link: https://github.com/sparkfleet/vllm/blob/main/docs/planner.md
"""

EXAMPLES = r"""
- name: Plan the shipped default for this host's profile and write plans/<host>.json
  sparkfleet.vllm.plan:
    profile: rtx_pro_6000
    plan_dir: plans
    write: true
  register: serve_plan

- name: Plan the 31B with DFlash on a four-Spark cluster (hosts in group vllm_cluster)
  sparkfleet.vllm.plan:
    profile: dgx_spark
    model: 31b
    drafter: dflash
    executor: ray
    cluster_interface: enp1s0f0np0
    cluster_hca: rocep1s0f0

- name: Let the catalog pick the drafter for throughput on an RTX 5090
  sparkfleet.vllm.plan:
    profile: rtx_5090
    model: 12b
    drafter: auto
    objective: throughput
"""

RETURN = r"""
plan:
  description: The plan contract every runtime role reads.
  returned: success
  type: dict
  contains:
    image:
      description: Container image (null for the native CPU stand-in).
      type: str
      sample: vllm/vllm-openai:v0.30.0
    entrypoint:
      description: Command the argv follows, C([vllm, serve]) or C([ray, start]) for a Ray worker.
      type: list
      elements: str
      sample: [vllm, serve]
    argv:
      description: Arguments after the entrypoint; for C(vllm serve) the checkpoint first.
      type: list
      elements: str
      sample: [unsloth/gemma-4-26B-A4B-it-NVFP4, --served-model-name, gemma-4-26b-a4b, --port, "8000"]
    env:
      description: Non-secret environment variables.
      type: dict
      sample: {}
    secret_env:
      description: Names of secret variables whose values belong only in a 0600 env file.
      type: list
      elements: str
      sample: [HF_TOKEN]
    expected_start_failures:
      description:
        - Diagnosis ids a first start of this configuration is expected to end in once (the catalog's
          C(first_start_failure)); the restart policy brings the server back, and wait_healthy waits through it.
      type: list
      elements: str
      sample: [kv_cache_below_one_request]
    node_role:
      description: V(single), V(head) or V(worker).
      type: str
      sample: single
    expected:
      description:
        - Catalog baseline for exactly this configuration, or null.
        - A stand-in's calibrated row has C(calibrate=true), no figures, and C(output_tokens), the request length
          the throughput gate in C(playbooks/verify.yml) measures with.
        - C(executor) is the executor a cluster's figures were measured under (the catalog's
          C(defaults.baseline_executor), V(ray), unless the row names another; a calibrated row's is the plan's own),
          null on a single node. A cluster planned under another executor is still gated against them, with a warning.
      type: dict
      sample: {single_stream_tok_s: 216.3, aggregate_8_tok_s: 1150, kv_cache_tokens: null, acceptance: null}
    warnings:
      description: Warnings about the plan.
      type: list
      elements: str
      sample: []
    reasons:
      description: One line per planned choice and why.
      type: list
      elements: str
      sample: ["--kv-cache-dtype fp8: the checkpoint ships calibrated fp8 KV scales (~2x KV capacity)"]
    release:
      description: vLLM release.
      type: str
      sample: v0.30.0
    stand_in_for:
      description:
        - For a stand-in that stands in for a Gemma 4 model (V(tiny-31b), V(tiny-26b-a4b), V(tiny-e2b)) on the
          V(cpu) profile, the real model, the reference profile it is planned on, that plan's argv and every
          flag that differs, with why (the catalog's C(stand_in_differences) or the stand-in's C(gaps)); null
          otherwise.
      type: dict
      sample:
        model: 26b-a4b
        profile: rtx_pro_6000
        differences:
          - {flag: --kv-cache-dtype, real: fp8, stand_in: absent, why: the CPU build keeps the KV cache in bfloat16}
    bind_address:
      description: Host address the API listens on, 127.0.0.1 when O(gateway=true), else 0.0.0.0.
      type: str
      sample: 0.0.0.0
    gateway:
      description: Whether the API gateway fronts the server (O(gateway)).
      type: bool
      sample: false
    firewall:
      description: Whether the playbooks load the firewall role's rules on this host before a server starts (O(firewall)).
      type: bool
      sample: true
    refused_routes:
      description: Routes under C(/v1) that guarded settings register and this plan does not allow (O(allow_guarded)); the gateway answers them with 404.
      type: list
      elements: str
      sample: [/v1/load_lora_adapter, /v1/unload_lora_adapter]
    replicas:
      description:
        - With O(topology=replicas), this host's place among the replicas, else null. C(index) and C(count); C(front)
          (the inventory name of the host whose gateway balances over them) and C(front_address) (where clients reach
          it); C(address) (where this replica listens); C(upstreams), every replica as C(host), C(address) and
          C(port), which the front's gateway forwards to.
      type: dict
      sample:
        index: 1
        count: 2
        front: spark-1
        front_address: 192.0.2.11
        address: 10.0.0.2
        upstreams: [{host: spark-1, address: 10.0.0.1, port: 8000}, {host: spark-2, address: 10.0.0.2, port: 8000}]
    endpoint:
      description:
        - Where clients reach the API, what verify, bench and status use. C(via) is C(vllm) (vLLM's own port, C(http))
          or C(gateway) (O(gateway_port), C(https) with O(gateway_tls)); C(scheme) and C(port).
        - C(open) is O(open_api) for a plan without a key, else null (clients send the key).
        - C(url) is the base URL clients use, at the host's C(ansible_host) (else its inventory name); verify.yml,
          bench.yml and status.yml read it, and C(vllm_verify_url) overrides it for verify and bench.
      type: dict
      sample: {via: vllm, scheme: http, port: 8000, url: "http://192.0.2.10:8000", open: null}
    drafter_model:
      description:
        - The drafter's checkpoint that the weights role places beside the model and the cluster copies to every
          worker (C(checkpoint), C(source), C(gated), C(revision), C(size_gib) where the catalog measured it); null
          when the plan runs no drafter. A stand-in's drafter is C(source=generate), with the generator's shape as
          C(generate) (the drafter's own dimensions, and the served stand-in's shape as C(target)).
      type: dict
      sample: {short: mtp, checkpoint: google/gemma-4-31B-it-assistant, source: huggingface, gated: false,
               revision: main, size_gib: 0.88}
    memory_budget:
      description:
        - On a unified-memory profile (V(dgx_spark)), what the node's memory holds, in GiB, per node; null elsewhere.
          The profile's memory less the host reserve is the server's ceiling; vLLM's pool
          (C(--gpu-memory-utilization) times the memory) holds the weights, the drafter's and the KV cache; the
          engine holds more outside the pool (a planning estimate, the multimodal processor cache, host-memory flags).
        - C(lines) lists it in the order it adds up, each as C(item), C(gib), C(note) and C(level) (1 for the parts
          of the pool); the totals are C(total_gib), C(host_reserve_gib), C(ceiling_gib), C(pool_gib), C(weights_gib),
          C(kv_cache_and_activations_gib), C(outside_pool_gib), C(headroom_gib), and C(max_gpu_memory_utilization)
          is the largest fraction that fits. A plan that does not fit is refused instead.
      type: dict
      sample: {unit: GiB, total_gib: 120.0, host_reserve_gib: 12.0, ceiling_gib: 108.0, pool_gib: 93.6, weights_gib: 16.13,
               kv_cache_and_activations_gib: 77.47, outside_pool_gib: 14.0, headroom_gib: 0.4,
               max_gpu_memory_utilization: 0.78, lines: [{item: memory, gib: 120.0, note: CPU and GPU share it, level: 0}]}
    memory_guard:
      description:
        - On a unified-memory profile, what an OS-level guard on the server needs, derived from C(memory_budget);
          C(memory_max_bytes) (the server's ceiling), C(memory_high_bytes) (its planned footprint, the pool and what
          the engine holds outside it) and C(memory_swap_max_bytes) (0); null elsewhere. The runtime roles do not
          read it yet.
      type: dict
      sample: {memory_max_bytes: 115964116992, memory_high_bytes: 115534620263, memory_swap_max_bytes: 0}
summary:
  description: Readable summary, one line per item.
  returned: success
  type: list
  elements: str
  sample: ["26b-a4b on rtx_pro_6000 (single node)"]
plan_file:
  description: Absolute path of C(<plan_dir>/<inventory_hostname>.json) when O(plan_dir) is given.
  returned: success and plan_dir given
  type: str
  sample: /home/user/sparkfleet/plans/localhost.json
refused:
  description: True when the planner refused the configuration.
  returned: failure
  type: bool
  sample: true
rule:
  description: The rule that refused the configuration.
  returned: failure
  type: str
  sample: max-model-len
"""
