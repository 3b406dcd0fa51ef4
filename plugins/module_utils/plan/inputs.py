# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The planner's inputs: the request keys, the inventory variable each comes from, and their coercion.

Every coercion refuses a bad value with ``PlanError``, whose message names the variable, the value and the fix
(the planner's steps turn the checked values into a plan; summary.py prints one).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import json
import re

REQUEST_KEYS = (
    "model", "drafter", "profile", "gpu_name", "node_count", "node_index", "image", "release", "executor", "objective",
    "runtime", "max_model_len", "max_num_batched_tokens", "gpu_memory_utilization", "max_num_seqs",
    "language_model_only", "enable_audio", "images_per_prompt", "port", "served_name", "api_key", "extra_args",
    "head_address", "node_address", "cluster_interface", "cluster_hca", "env", "allow_dev_mode",
    "native_env", "cluster_extra_env", "cluster_ray_health_check", "cluster_nodes", "host", "host_groups", "gateway",
    "gateway_port", "gateway_tls", "client_address", "topology", "open_api", "firewall", "allow_guarded",
)
# Interface variable (extra-vars / inventory) for each request key, for messages.
VARIABLES = {
    "model": "vllm_model", "drafter": "vllm_drafter", "profile": "vllm_profile", "gpu_name": "vllm_gpu_name",
    "node_count": "the vllm_cluster group", "node_index": "the vllm_cluster group", "image": "vllm_image",
    "release": "vllm_release", "executor": "vllm_executor", "objective": "vllm_objective", "runtime": "vllm_runtime",
    "max_model_len": "vllm_max_model_len", "max_num_batched_tokens": "vllm_max_num_batched_tokens",
    "gpu_memory_utilization": "vllm_gpu_memory_utilization", "max_num_seqs": "vllm_max_num_seqs",
    "language_model_only": "vllm_language_model_only", "enable_audio": "vllm_enable_audio",
    "images_per_prompt": "vllm_images_per_prompt", "port": "vllm_port", "served_name": "vllm_served_model_name",
    "api_key": "vllm_api_key", "extra_args": "vllm_extra_args", "head_address": "vllm_cluster_link_ip",
    "node_address": "vllm_cluster_link_ip", "cluster_interface": "vllm_cluster_interface",
    "cluster_hca": "vllm_cluster_hca", "env": "vllm_env", "allow_dev_mode": "vllm_allow_dev_mode",
    "native_env": "vllm_native_env", "cluster_extra_env": "vllm_cluster_extra_env",
    "cluster_ray_health_check": "vllm_cluster_ray_health_check", "cluster_nodes": "vllm_cluster_link_ip",
    "host": "inventory_hostname", "host_groups": "the vllm_single and vllm_cluster groups", "gateway": "vllm_gateway",
    "gateway_port": "vllm_gateway_port", "gateway_tls": "vllm_gateway_tls_certificate", "client_address": "ansible_host",
    "topology": "vllm_topology", "open_api": "vllm_open_api", "firewall": "vllm_firewall",
    "allow_guarded": "vllm_allow_guarded",
}
# vLLM's development mode: registers /reset_prefix_cache, /sleep, /collective_rpc, ... outside the API key.
DEV_MODE_ENV = "VLLM_SERVER_DEV_MODE"


class PlanError(Exception):
    """A refused plan. ``str(err)`` is the whole user-facing message."""

    def __init__(self, message, rule=None, variable=None, value=None):
        super(PlanError, self).__init__(message)
        self.message = message
        self.rule = rule
        self.variable = variable
        self.value = value


def refuse(rule, message, variable=None, value=None):
    raise PlanError("%s [rule: %s]" % (message, rule), rule=rule, variable=variable, value=value)


def check_request_keys(request):
    """A request names only keys the planner reads (a misspelt one would otherwise be ignored)."""
    unknown = sorted(set(request) - set(REQUEST_KEYS))
    if unknown:
        raise PlanError("unknown plan request keys: %s (valid: %s)" % (", ".join(unknown), ", ".join(REQUEST_KEYS)),
                        rule="request")


# --- input coercion ------------------------------------------------------------


def dev_mode_on(env):
    """True when ``env`` (a mapping) turns vLLM's development routes on."""
    value = (env or {}).get(DEV_MODE_ENV)
    return value is not None and str(value).strip().lower() not in ("", "0", "false", "no", "off")


def unset(value):
    return value is None or (isinstance(value, str) and value.strip() == "")


def as_int(request, key, minimum=None, maximum=None):
    value = request.get(key)
    if unset(value):
        return None
    variable = VARIABLES[key]
    if isinstance(value, bool):
        refuse("type", "%s must be an integer, got %r; set %s to a whole number" % (variable, value, variable), variable, value)
    try:
        if isinstance(value, float):
            if value != int(value):
                raise ValueError(value)
            number = int(value)
        else:
            number = int(str(value).strip().replace("_", ""))
    except (TypeError, ValueError):
        refuse("type", "%s must be an integer, got %r; set %s to a whole number" % (variable, value, variable), variable, value)
    if minimum is not None and number < minimum:
        refuse("range", "%s must be at least %d, got %d; set %s >= %d" % (variable, minimum, number, variable, minimum),
               variable, value)
    if maximum is not None and number > maximum:
        refuse("range", "%s must be at most %d, got %d; set %s <= %d" % (variable, maximum, number, variable, maximum),
               variable, value)
    return number


def as_text(request, key, example):
    """A value that is text by nature (an image reference, a release tag): a string, never a number or a list turned into
    one (YAML reads `vllm_release: 0.30` as the number 0.3)."""
    value = request.get(key)
    if unset(value):
        return None
    if not isinstance(value, str):
        variable = VARIABLES[key]
        refuse("type", "%s must be a string, got %r; set %s to a quoted value such as %s" % (variable, value, variable, example),
               variable, value)
    return value.strip()


def as_float(request, key):
    value = request.get(key)
    if unset(value):
        return None
    variable = VARIABLES[key]
    try:
        if isinstance(value, bool):
            raise ValueError(value)
        number = float(str(value).strip())
    except (TypeError, ValueError):
        refuse("type", "%s must be a number, got %r; set %s to a fraction such as 0.9" % (variable, value, variable),
               variable, value)
    return number


_TRUE = ("true", "yes", "on", "1", "y", "t")
_FALSE = ("false", "no", "off", "0", "n", "f")


def as_bool(request, key):
    value = request.get(key)
    if unset(value):
        return None
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    variable = VARIABLES[key]
    refuse("type", "%s must be true or false, got %r; set %s=true or %s=false" % (variable, value, variable, variable),
           variable, value)


def as_choice(request, key, choices):
    value = request.get(key)
    if unset(value):
        return None
    text = str(value).strip().lower()
    if text not in choices:
        variable = VARIABLES[key]
        refuse("choice", "unknown %s %r; set %s to one of: %s" % (key.replace("_", " "), value, variable, ", ".join(choices)),
               variable, value)
    return text


def arg_list(request):
    value = request.get("extra_args")
    if unset(value):
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                refuse("type", "vllm_extra_args is not a valid JSON list: %r; pass a list of strings" % value,
                       "vllm_extra_args", value)
        else:
            import shlex

            value = shlex.split(text)
    if not isinstance(value, (list, tuple)):
        refuse("type", "vllm_extra_args must be a list of strings, got %r; pass e.g. ['--enforce-eager']" % (value,),
               "vllm_extra_args", value)
    out = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            refuse("type", "vllm_extra_args must be a list of strings; item %r is not one" % (item,), "vllm_extra_args", item)
        out.append(str(item))
    return out


# The cluster link's device variables: (the shape of one name, what it names, an example, a list allowed). A Linux
# netdev name as the kernel takes it (1-15 characters, no '/', ':' or whitespace) narrowed to the characters interface
# names use in practice; an RDMA device name (ibv_devices) likewise.
LINK_DEVICES = {
    "cluster_interface": (re.compile(r"^[A-Za-z0-9_.-]{1,15}$"), "a network interface", "enp1s0f1np1", False),
    "cluster_hca": (re.compile(r"^[A-Za-z0-9_.-]{1,64}$"), "an RDMA device", "rocep1s0f1", True),
}


def as_link_address(value, variable, host=None):
    """A node's address on the cluster link as Ray (--node-ip-address), vLLM (VLLM_HOST_IP, --master-addr) and NCCL take
    it, and as preflight finds it on the link interface: an IPv4 address, never a name, a port, a prefix length or shell
    text. IPv6 is refused: the head's address is joined with a port unbracketed (Ray's --address, the weight copy's URL)
    and preflight checks the link's IPv4 address. Returns it as text."""
    text = value.strip() if isinstance(value, str) else value
    where = " for %s" % host if host else ""
    try:
        if not isinstance(text, str):
            raise ValueError(text)
        address = ipaddress.ip_address(text)
    except ValueError:
        refuse("link-address", "%s%s is %r, which is not an IP address; set it to the node's IPv4 address on the cluster "
               "link, such as 192.168.100.11 (no port, no prefix length, no host name)" % (variable, where, value),
               variable, value)
    if address.version != 4:
        refuse("link-address", "%s%s is %r, an IPv6 address: the cluster is planned over IPv4 (Ray's --address and the "
               "weight copy join the head's address with a port, and preflight checks the link's IPv4 address); set it to "
               "the node's IPv4 address on the cluster link" % (variable, where, value), variable, value)
    return text


def as_link_devices(value, key):
    """vllm_cluster_interface (one netdev) or vllm_cluster_hca (RDMA devices: a list or a comma-separated string), each
    name checked against its shape, so that none reaches an env file or a unit as something else. Returns the names."""
    shape, what, example, many = LINK_DEVICES[key]
    variable = VARIABLES[key]
    if isinstance(value, (list, tuple)) and many:
        items = list(value)
    elif isinstance(value, str):
        items = value.split(",") if many else [value]
    else:
        items = [value]
    names = []
    for item in items:
        name = item.strip() if isinstance(item, str) else item
        if name == "" and many and len(items) > 1:
            continue
        if not isinstance(name, str) or not shape.match(name) or name in (".", ".."):
            refuse("link-device", "%s has %r, which is not %s name; set it to the node's %s on the cluster link, such as "
                   "%s" % (variable, item, what, what.split(" ", 1)[1], example), variable, item)
        names.append(name)
    if not names:
        refuse("link-device", "%s is empty; set it to the node's %s, such as %s" % (variable, what.split(" ", 1)[1], example),
               variable, value)
    return names


def fmt(number):
    return "{:,}".format(number) if isinstance(number, int) else str(number)
