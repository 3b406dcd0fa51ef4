# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where the API listens and who may reach it: the address vLLM binds, the gateway in front of it, a plan without an
API key (vllm_open_api) and the firewall. Each step takes the plan's record (state.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import inputs

_refuse, _unset, _as_bool, _as_choice = inputs.refuse, inputs.unset, inputs.as_bool, inputs.as_choice

# vllm_open_api: how a plan without an API key may serve (unset: it may not). docs/security.md says why.
OPEN_API = ("loopback", "all")


def resolve_binding(state):
    """Where the API listens on the host: every address (the catalog's defaults.host), or loopback only when the
    gateway (roles/vllm_gateway) fronts it, so that no route outside /v1 and /health is reachable from elsewhere,
    or when a plan without a key keeps it to this host (vllm_open_api=loopback).

    vllm_gateway unset: the gateway fronts a single node or a cluster's head that has an API key (vLLM's key guards
    only /v1, and a key says the operator wants the API guarded) and nothing else; on a cluster the head's API then
    binds its link address (bind_head). Replicas always have it (bind_replica)."""
    public = str(state.catalog["defaults"]["host"])
    requested = _as_bool(state.request, "gateway")
    keyed = not _unset(state.request.get("api_key"))
    state.open_api = resolve_open_api(state, keyed, requested)
    state.bind_address = state.serve_host = public
    if state.replicas is not None:
        bind_replica(state, requested, public)
        return
    state.gateway = keyed if requested is None else requested
    if not state.gateway:
        if state.open_api == "loopback":
            bind_loopback(state, public, "vllm_open_api=loopback: no API key, so only this host's own clients reach it")
        elif requested is False and keyed:
            state.reason("no API gateway: vllm_gateway=false (the bypass); vLLM answers /invocations, /metrics, "
                         "/tokenize, ... without the key on %s" % public)
        return
    if state.cluster:
        bind_head(state, requested)
        return
    bind_loopback(state, public, "the gateway (%s) forwards only /v1 and /health to it" % (
        "vllm_gateway" if requested else "on by default: an API key is set and vllm_gateway is unset"))


def bind_loopback(state, public, why):
    loopback = str(state.catalog["defaults"]["gateway_host"])
    state.bind_address = loopback
    # A container listens on every address of its own network namespace; Docker publishes the port on loopback.
    state.serve_host = public if state.runtime == "compose" else loopback
    state.reason("API bound to %s: %s%s" % (
        loopback, why, " (compose publishes the container's port there)" if state.runtime == "compose" else ""))


def resolve_open_api(state, keyed, requested):
    """vllm_open_api, the explicit word for a plan without an API key: 'loopback' keeps a single node's API on
    127.0.0.1 (only the host itself reaches it), 'all' serves every route on every address without a key and says
    so in the plan's warnings. Unset, a plan needs a key: check_open_api refuses it once every other check has
    spoken, so that a plan with two mistakes names the other one first. A key, when there is one, wins."""
    mode = _as_choice(state.request, "open_api", OPEN_API)
    if mode and keyed:
        # An inventory may say how its key-less runs serve while a vault or AWX supplies a key to others.
        state.reason("vllm_open_api=%s has no effect: an API key is set (vllm_api_key, else the controller's "
                     "VLLM_API_KEY), and clients send it" % mode)
        return None
    if mode == "loopback" and (state.cluster or state.replicas is not None):
        _refuse("open-api-loopback", "vllm_open_api=loopback keeps the API on 127.0.0.1 of one host, but %s serves "
                "the cluster group's hosts over their link; set vllm_api_key (docs/security.md), or "
                "vllm_open_api=all to serve it without a key on purpose" % (
                    "vllm_topology=replicas" if state.replicas is not None else "a tensor-parallel cluster"),
                "vllm_open_api", mode)
    if mode == "loopback" and requested:
        _refuse("open-api-gateway", "vllm_gateway=true would put nginx on every address in front of an API without a "
                "key, and vllm_open_api=loopback asks for this host only; set vllm_api_key to serve other hosts "
                "through the gateway, or unset vllm_gateway", "vllm_gateway", True)
    return mode


def check_open_api(state):
    """No silent open API: without a key a plan is refused unless vllm_open_api says how it may serve; with
    vllm_open_api=all the plan's warnings (the summary, and verify's report) say that it is open and where."""
    if "VLLM_API_KEY" in state.secret_env:
        return
    where = "%s:%d" % (state.bind_address, state.port)
    if not state.open_api:
        _refuse("open-api", "no API key: vllm_api_key is unset and the controller has no VLLM_API_KEY, so every "
                "route of vLLM (/v1, /invocations, /metrics, ...) would answer anyone on %s; set vllm_api_key from "
                "an ansible-vault file (docs/security.md), or say it on purpose: vllm_open_api=loopback (this "
                "host's own clients only) or vllm_open_api=all (every address, no key)" % where,
                "vllm_api_key", "(unset)")
    if state.open_api == "all" and state.node_role in ("single", "head"):
        state.warn("OPEN API (vllm_open_api=all): no API key, so every route of vLLM (/v1, /invocations, /metrics, "
                   "...) answers anyone who reaches %s" % where)


def resolve_firewall(state):
    """vllm_firewall (sparkfleet.vllm.firewall's nftables table): on by default wherever something listens beyond
    loopback: a cluster (Ray's GCS and agents bind every address, the ranks' rendezvous and NCCL ports are
    unauthenticated), replicas, a gateway on every address, or an API that binds beyond 127.0.0.1. Off by default
    only where the API is this host's alone. false turns it off and, where it would have been on, says so in the
    plan's warnings; true loads it anyway. serve.yml and cluster.yml read plan.firewall, and load the rules
    before the first server listens."""
    requested = _as_bool(state.request, "firewall")
    loopback = str(state.catalog["defaults"]["gateway_host"])
    exposed = []
    if state.cluster:
        exposed.append("a %d-node cluster: Ray's and the ranks' ports listen on the link and every address" % state.node_count)
    elif state.replicas is not None:
        exposed.append("a replica: vLLM's port listens on its link address for the front's gateway")
    if state.gateway and state.node_role in ("single", "head"):
        exposed.append("the gateway listens on every address")
    elif state.bind_address != loopback and not exposed:
        exposed.append("the API binds %s" % state.bind_address)
    state.firewall = bool(exposed) if requested is None else requested
    if requested is None:
        state.reason("firewall %s: %s" % (
            "on (vllm_firewall unset)" if exposed else "off (vllm_firewall unset)",
            "; ".join(exposed) if exposed else "the API listens on %s only; vllm_firewall=true loads it anyway" % loopback))
    elif requested is False and exposed and state.node_role in ("single", "head"):
        state.warn("FIREWALL OFF (vllm_firewall=false): %s, open to every machine that reaches %s; unset "
                   "vllm_firewall unless another firewall already filters these ports" % (
                       "; ".join(exposed), "the cluster's nodes" if state.cluster or state.replicas is not None else "this host"))
    else:
        state.reason("firewall %s: vllm_firewall=%s" % ("on" if requested else "off", "true" if requested else "false"))


def bind_head(state, requested):
    """The gateway on a cluster (an API key with vllm_gateway unset, or vllm_gateway=true): the head's API binds its
    link address (the ranks and the gateway on the head reach it there, nothing on the management network does);
    nginx on the head is the only way in. A worker has no API: only the head runs the gateway."""
    if state.node_role != "head":
        state.gateway = False
        state.reason("no API gateway on a worker: the head's gateway fronts the cluster's one API")
        return
    state.bind_address = state.serve_host = state.node_address or state.head_address
    state.reason("API bound to %s (the head's link address): the gateway on this host (%s) forwards only /v1 and "
                 "/health to it; vllm_gateway=false is the bypass" % (
                     state.bind_address, "vllm_gateway" if requested else
                     "on by default: an API key is set and vllm_gateway is unset"))


def bind_replica(state, requested, public):
    """A replica listens on its link address, where the front's gateway reaches it; only the front runs the gateway."""
    if requested is False:
        _refuse("replicas-gateway", "vllm_topology=replicas balances clients through the gateway on %s, and "
                "vllm_gateway=false leaves nothing in front of the replicas; unset vllm_gateway, or unset vllm_topology "
                "for one tensor-parallel server" % state.replicas["front"], "vllm_gateway", False)
    state.bind_address = state.replicas["address"]
    # A container listens on every address of its own network namespace; compose publishes the port on this one.
    state.serve_host = public if state.runtime == "compose" else state.bind_address
    state.gateway = state.replicas["index"] == 0
    state.reason("API bound to %s (the replica's link address): the gateway on %s forwards only /v1 and /health to "
                 "it" % (state.bind_address, state.replicas["front"]))
