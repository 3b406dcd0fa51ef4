#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: ray_cluster
short_description: Wait until every node of a Ray cluster is ALIVE on its cluster-link address
version_added: 1.0.0
description:
  - Runs a probe with Ray's interpreter on the head (directly, or inside the Ray container through O(probe_prefix)),
    reads Ray's node table (C(ray.nodes()), which works with the dashboard off) and compares it with the inventory.
  - Succeeds when every address in O(expected_addresses) has an ALIVE node with at least O(min_gpus_per_node) GPUs.
    Fails at O(timeout) with a message naming each node that is DEAD, missing or short of GPUs,
    by its inventory name from O(node_names).
  - The head's serve unit runs the same check (the module_utils file as a script) before it starts vLLM.
options:
  address:
    description: Ray GCS address, C(host:port), on the cluster link.
    type: str
    required: true
  expected_addresses:
    description: Link IPv4 address of every node, head first.
    type: list
    elements: str
    required: true
  node_names:
    description: Map of link address to inventory name, used in messages and RV(failed_nodes).
    type: dict
    default: {}
  min_gpus_per_node:
    description: GPUs each node must offer to Ray. 0 for the CPU stand-in (the simulated cluster).
    type: float
    default: 0
  python:
    description: Interpreter that has Ray installed (inside the container when O(probe_prefix) is set).
    type: str
    default: python3
  probe_prefix:
    description: Command words put before O(python), for example C([docker, exec, vllm-cluster-ray]).
    type: list
    elements: str
    default: []
  auth_token_path:
    description:
      - File holding the cluster's Ray token, for a cluster started with C(RAY_AUTH_MODE=token) (Ray 2.52 or later).
        The probe runs with C(RAY_AUTH_MODE=token) and C(RAY_AUTH_TOKEN_PATH) set to it; the token is never read here.
      - Inside a container (O(probe_prefix)) the container's own environment carries the token instead.
    type: path
  timeout:
    description: Seconds to wait for the cluster to become whole.
    type: int
    default: 300
  interval:
    description: Seconds between probes.
    type: int
    default: 5
author:
  - sparkfleet.vllm contributors (@sparkfleet)
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
attributes:
  check_mode:
    support: full
    details: Read-only; in check mode it probes once and reports without waiting or failing.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Never changes anything.
"""

EXAMPLES = r"""
- name: Wait for the Ray cluster (native runtime)
  sparkfleet.vllm.ray_cluster:
    address: "10.10.0.1:6379"
    expected_addresses: [10.10.0.1, 10.10.0.2]
    node_names: {10.10.0.1: spark-01, 10.10.0.2: spark-02}
    min_gpus_per_node: 1
    python: /opt/vllm/venv/bin/python

- name: Wait for the Ray cluster inside the head's Ray container
  sparkfleet.vllm.ray_cluster:
    address: "10.10.0.1:6379"
    expected_addresses: [10.10.0.1, 10.10.0.2, 10.10.0.3, 10.10.0.4]
    min_gpus_per_node: 1
    probe_prefix: [docker, exec, vllm-cluster-ray]
    timeout: 600
"""

RETURN = r"""
ok:
  description: Whether every expected node is ALIVE with enough GPUs.
  returned: always
  type: bool
  sample: true
nodes:
  description: Ray's node table, normalized.
  returned: always
  type: list
  elements: dict
  sample: [{"node_id": "2241...", "alive": true, "state": "ALIVE", "ip": "10.10.0.1", "hostname": "spark-01",
            "cpus": 20.0, "gpus": 1.0, "is_head": true}]
alive:
  description: Link addresses with an ALIVE node.
  returned: always
  type: list
  elements: str
  sample: [10.10.0.1, 10.10.0.2]
failed_nodes:
  description: Inventory names of the nodes that are DEAD, missing or short of GPUs.
  returned: always
  type: list
  elements: str
  sample: [spark-02]
elapsed:
  description: Seconds spent waiting.
  returned: always
  type: float
  sample: 12.4
probes:
  description: Number of probes run.
  returned: always
  type: int
  sample: 3
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.vllm.plugins.module_utils.ray_status import (
    PROBE_SOURCE,
    RayStatusError,
    evaluate,
    parse_nodes,
)


def probe(module):
    p = module.params
    cmd = list(p["probe_prefix"]) + [p["python"], "-c", PROBE_SOURCE, p["address"]]
    environ = {}
    if p["auth_token_path"] and not p["probe_prefix"]:
        environ = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": p["auth_token_path"]}
    rc, out, err = module.run_command(cmd, environ_update=environ)
    if rc != 0:
        tail = (err or out or "").strip().splitlines()[-3:]
        raise RayStatusError("the probe exited %d: %s" % (rc, " | ".join(tail)))
    return parse_nodes(out)


def main():
    module = AnsibleModule(
        argument_spec={
            "address": {"type": "str", "required": True},
            "expected_addresses": {"type": "list", "elements": "str", "required": True},
            "node_names": {"type": "dict", "default": {}},
            "min_gpus_per_node": {"type": "float", "default": 0},
            "python": {"type": "str", "default": "python3"},
            "probe_prefix": {"type": "list", "elements": "str", "default": []},
            "auth_token_path": {"type": "path"},
            "timeout": {"type": "int", "default": 300},
            "interval": {"type": "int", "default": 5},
        },
        supports_check_mode=True,
    )
    p = module.params
    names = {str(k): str(v) for k, v in p["node_names"].items()}
    started = time.time()
    deadline = started + p["timeout"]
    probes = 0
    nodes = []
    while True:
        probes += 1
        try:
            nodes = probe(module)
            verdict = evaluate(nodes, p["expected_addresses"], names, p["min_gpus_per_node"])
        except RayStatusError as exc:
            verdict = {"ok": False, "alive": [], "failed_nodes": [names.get(ip, ip) for ip in p["expected_addresses"]],
                       "message": "Ray at %s does not answer: %s" % (p["address"], exc)}
        if verdict["ok"] or module.check_mode or time.time() >= deadline:
            break
        time.sleep(p["interval"])
    result = {"changed": False, "ok": verdict["ok"], "nodes": nodes, "alive": verdict["alive"], "failed_nodes": verdict["failed_nodes"],
              "elapsed": round(time.time() - started, 1), "probes": probes, "msg": verdict["message"]}
    if not verdict["ok"] and not module.check_mode:
        result["msg"] = "Ray cluster at %s is not whole after %ds: %s" % (p["address"], p["timeout"], verdict["message"])
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
