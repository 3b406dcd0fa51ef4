# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Is the Ray cluster whole? Parse Ray's node table and judge it against the inventory.

Pure functions, used by the ``sparkfleet.vllm.ray_cluster`` module and, as a
script, by the head's serve unit before it starts (``ExecStartPre``):

    python3 ray_status.py --address 10.0.0.1:6379 --expect 10.0.0.1,10.0.0.2 \
        [--name 10.0.0.1=spark-01 ...] [--min-gpus 1] [--timeout 300]

The node table comes from ``ray.nodes()`` (works with the dashboard off) or
from ``ray list nodes --format json`` (the state API, needs the dashboard);
both shapes are accepted. This file imports nothing outside the standard
library at module level so the role can copy it to a host as it is.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

# Run by the probe command with Ray's interpreter: prints ray.nodes() as JSON.
# argv[1] is the GCS address (host:port).
PROBE_SOURCE = (
    "import json, logging, sys\n"
    "import ray\n"
    "ray.init(address=sys.argv[1], logging_level=logging.ERROR, log_to_driver=False)\n"
    "print(json.dumps(ray.nodes(), default=str))\n"
)


class RayStatusError(Exception):
    """The probe's output is not a Ray node table."""


def _number(value):
    try:
        return float(value or 0)
    except (TypeError, ValueError):
        return 0.0


def normalize_node(raw):
    """One node from either table shape as {node_id, alive, state, ip, hostname, cpus, gpus, is_head}."""
    if not isinstance(raw, dict):
        raise RayStatusError("a node entry is not an object: %r" % (raw,))
    if "NodeManagerAddress" in raw or "Alive" in raw:  # ray.nodes()
        resources = raw.get("Resources") or {}
        alive = bool(raw.get("Alive", raw.get("alive", False)))
        return {
            "node_id": raw.get("NodeID", ""),
            "alive": alive,
            "state": "ALIVE" if alive else "DEAD",
            "ip": raw.get("NodeManagerAddress", ""),
            "hostname": raw.get("NodeManagerHostname", ""),
            "cpus": _number(resources.get("CPU")),
            "gpus": _number(resources.get("GPU")),
            "is_head": "node:__internal_head__" in resources,
        }
    if "node_ip" in raw or "state" in raw:  # ray list nodes --format json (state API)
        resources = raw.get("resources_total") or {}
        state = str(raw.get("state", "")).upper()
        return {
            "node_id": raw.get("node_id", ""),
            "alive": state == "ALIVE",
            "state": state,
            "ip": raw.get("node_ip", ""),
            "hostname": raw.get("node_name", ""),
            "cpus": _number(resources.get("CPU")),
            "gpus": _number(resources.get("GPU")),
            "is_head": bool(raw.get("is_head_node", False)),
        }
    raise RayStatusError("unknown node entry shape (keys: %s)" % ", ".join(sorted(raw)))


def parse_nodes(text):
    """Parse the probe's stdout (the last line that is a JSON list) into normalized nodes."""
    for line in reversed((text or "").strip().splitlines()):
        line = line.strip()
        if line.startswith("["):
            try:
                table = json.loads(line)
            except ValueError as exc:
                raise RayStatusError("the node table is not valid JSON: %s" % exc) from None
            return [normalize_node(entry) for entry in table]
    raise RayStatusError("no node table (a JSON list) in the probe's output")


def evaluate(nodes, expected, names=None, min_gpus=0):
    """Judge the node table against the expected link addresses.

    ``expected``: the link IPv4 address of every node, head first. ``names``
    maps an address to the inventory name used in messages. A node counts when
    an ALIVE entry has its address and at least ``min_gpus`` GPUs; Ray keeps
    DEAD entries of earlier runs, which count only when no ALIVE one exists.
    """
    names = names or {}

    def label(ip):
        return "%s (%s)" % (names[ip], ip) if ip in names else ip

    alive = {}
    dead = set()
    for node in nodes:
        if node["alive"]:
            alive.setdefault(node["ip"], node)
        else:
            dead.add(node["ip"])
    missing, short, dead_only = [], [], []
    for ip in expected:
        if ip in alive:
            if alive[ip]["gpus"] < min_gpus:
                short.append(ip)
        elif ip in dead:
            dead_only.append(ip)
        else:
            missing.append(ip)
    unexpected = sorted(ip for ip in alive if ip not in expected)
    problems = []
    if dead_only:
        problems.append("DEAD in Ray: %s" % ", ".join(label(ip) for ip in dead_only))
    if missing:
        problems.append("not joined on its link address: %s" % ", ".join(label(ip) for ip in missing))
    if short:
        problems.append("fewer than %s GPU(s): %s" % (min_gpus, ", ".join(label(ip) for ip in short)))
    if unexpected:
        problems.append("ALIVE at an address outside the cluster link (check --node-ip-address / VLLM_HOST_IP): %s"
                        % ", ".join(unexpected))
    ok = not (dead_only or missing or short)
    message = ("all %d nodes ALIVE on their link addresses" % len(expected)) if ok else "; ".join(problems)
    return {
        "ok": ok,
        "alive": sorted(alive),
        "dead": dead_only,
        "missing": missing,
        "short_of_gpus": short,
        "unexpected": unexpected,
        "failed_nodes": [names.get(ip, ip) for ip in dead_only + missing + short],
        "message": message,
    }


def _main(argv=None):  # pragma: no cover - exercised on hosts by the serve unit's gate
    import argparse
    import subprocess
    import sys
    import time

    parser = argparse.ArgumentParser(description="Wait until every expected node is ALIVE in Ray.")
    parser.add_argument("--address", required=True)
    parser.add_argument("--expect", required=True, help="comma-separated link addresses, head first")
    parser.add_argument("--name", action="append", default=[], help="ADDRESS=NAME for messages")
    parser.add_argument("--min-gpus", type=float, default=0)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--interval", type=float, default=5)
    parser.add_argument("--python", default=sys.executable, help="interpreter with Ray installed")
    args = parser.parse_args(argv)
    expected = [ip for ip in args.expect.split(",") if ip]
    names = dict(item.split("=", 1) for item in args.name)
    deadline = time.time() + args.timeout
    verdict = {"message": "no probe ran"}
    while True:
        try:
            probe = subprocess.run([args.python, "-c", PROBE_SOURCE, args.address], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, universal_newlines=True, timeout=max(10, args.interval * 6), check=False)
            verdict = evaluate(parse_nodes(probe.stdout), expected, names, args.min_gpus)
        except (RayStatusError, subprocess.TimeoutExpired) as exc:
            verdict = {"ok": False, "message": "Ray at %s does not answer: %s" % (args.address, exc)}
        if verdict["ok"]:
            sys.stdout.write("ray-gate: %s\n" % verdict["message"])
            return 0
        if time.time() >= deadline:
            sys.stderr.write("ray-gate: gave up after %ds: %s\n" % (args.timeout, verdict["message"]))
            return 1
        time.sleep(args.interval)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main())
