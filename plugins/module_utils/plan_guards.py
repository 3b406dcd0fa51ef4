# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The planner's guards on what a user adds around the plan: vllm_extra_args and the extra environments.

Each takes the planner's state (``planner._Planner``) and refuses with ``plan_inputs.refuse`` (naming the variable,
the value and the fix) what would carry a credential, override a flag the planner manages, or open routes the API key
does not guard; the rest is recorded with a warning or a reason.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.sparkfleet.vllm.plugins.module_utils import env_rules, plan_inputs, vllm_flags

_refuse, _unset, _as_bool = plan_inputs.refuse, plan_inputs.unset, plan_inputs.as_bool
VARIABLES, DEV_MODE_ENV, dev_mode_on = plan_inputs.VARIABLES, plan_inputs.DEV_MODE_ENV, plan_inputs.dev_mode_on
# Environments the planner only checks by name (the runtime roles merge them over the plan's env).
ROLE_ENV_KEYS = ("native_env", "cluster_extra_env", "cluster_ray_health_check")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# --- vllm_extra_args -------------------------------------------------------------


def check_extra_args(planner):
    """Refuse what vllm_extra_args must not set, in every spelling vLLM's parser accepts (vllm_flags.py)."""
    args = planner.extra_args
    if not args:
        return
    try:
        flags = vllm_flags.load_flags()
    except vllm_flags.FlagsError as exc:
        _refuse("flags", "cannot check vllm_extra_args: %s" % exc, "vllm_extra_args")
    rules = planner.rules
    managed = rules.get("managed_flags") or {}
    secret = dict((rules.get("secret_flags") or {}))
    for dest in flags.get("sensitive_dests") or []:
        spelling = "--" + dest.replace("_", "-")
        secret.setdefault(vllm_flags.canonical_of(spelling, flags) or spelling, "drop it")
    refused = rules.get("refused_flags") or {}
    dev_flags = rules.get("dev_mode_flags") or {}
    warn_flags = rules.get("warn_flags") or {}
    refused_backends = [b.lower() for b in rules.get("refused_attention_backends") or []]
    allow_dev = _as_bool(planner.request, "allow_dev_mode")
    version = "%s %s" % ((flags.get("vllm") or {}).get("distribution", "vllm"), (flags.get("vllm") or {}).get("version", "?"))
    for flag in vllm_flags.normalise(args, flags):
        # An ambiguous prefix stops vLLM, but another release may resolve it: any guarded meaning is refused.
        for name in flag.candidates:
            _refuse_flag(planner, flag, name, managed, secret, refused, dev_flags, allow_dev)
        if not flag.candidates:
            planner.warn("%s in vllm_extra_args is not an option of %s's vllm serve (data/vllm_serve_flags.yml): vLLM "
                         "exits with \"unrecognized arguments\" unless this release has it" % (flag.given, version))
        elif flag.canonical is None:
            planner.warn("%s in vllm_extra_args is ambiguous (it could mean %s): vLLM exits with \"ambiguous option\"; "
                         "spell the option out" % (flag.given, ", ".join(flag.candidates)))
        if flag.canonical in ("--attention-backend", "--attention-config"):
            named = [b for b in refused_backends if re.search(r"\b%s\b" % re.escape(b), flag.value, re.IGNORECASE)]
            if named:
                _refuse("attention-backend", "--attention-backend %s cannot start Gemma 4 here: FlashAttention supports "
                        "neither the fp8 KV cache nor Gemma 4's multimodal PrefixLM attention, and FA3/FA4 are not built "
                        "for sm_120/sm_121; remove it from vllm_extra_args (vLLM falls back to TRITON_ATTN by itself)"
                        % flag.value, "vllm_extra_args", flag.given)
        if flag.canonical in warn_flags:
            planner.warn("%s in vllm_extra_args: %s" % (flag.canonical, " ".join(warn_flags[flag.canonical].split())))
    planner.reason("extra args appended as given: %s" % " ".join(args))


def _refuse_flag(planner, flag, name, managed, secret, refused, dev_flags, allow_dev):
    spelled = name if flag.given.split("=", 1)[0] == name else "%s (given as %s)" % (name, flag.given.split("=", 1)[0])
    if name in secret:
        # Never echo the value: it is the secret.
        _refuse("secret-flag", "vllm_extra_args must not set %s: it carries a credential, which on the command line "
                "lands in the plan file, the printed plan, rendered files and ps; %s, and drop %s from "
                "vllm_extra_args" % (spelled, " ".join(str(secret[name]).split()), flag.given.split("=", 1)[0]),
                "vllm_extra_args", name)
    if name in managed:
        _refuse("managed-flag", "vllm_extra_args must not set %s: the planner sets it from %s; set that instead and "
                "drop %s from vllm_extra_args" % (spelled, managed[name], flag.given.split("=", 1)[0]),
                "vllm_extra_args", flag.given)
    if name in refused:
        _refuse("refused-flag", "vllm_extra_args must not set %s: it %s" % (spelled, " ".join(str(refused[name]).split())),
                "vllm_extra_args", flag.given)
    rule = dev_flags.get(name)
    if rule is None:
        return
    values = [str(v).lower() for v in rule.get("values") or []]
    if values and (flag.canonical != name or flag.value.strip().lower() not in values):
        return
    shown = "%s %s" % (spelled, flag.value) if values else spelled
    why = " ".join(str(rule.get("why", "")).split())
    if not allow_dev:
        _refuse("dev-mode-flag", "vllm_extra_args must not set %s: it %s; remove it from vllm_extra_args. Only a "
                "development host off any shared network may force it with vllm_allow_dev_mode=true" % (shown, why),
                "vllm_extra_args", flag.given)
    planner.warn("%s in vllm_extra_args (vllm_allow_dev_mode): it %s; keep the port off any shared network" % (shown, why))


# --- the user's environments -----------------------------------------------------


def check_env_names(planner, key):
    """The mapping under request ``key`` (a user's extra environment), its names checked; {} when unset."""
    variable = VARIABLES[key]
    env = planner.request.get(key)
    if _unset(env) or env == {}:
        return {}
    if not isinstance(env, dict):
        _refuse("type", "%s must be a mapping of NAME: value, got %r; set %s: {NAME: value}" % (variable, env, variable),
                variable, env)
    for name in sorted(env, key=str):
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            _refuse("env-name", "%s has %r, which is not an environment variable name; use letters, digits and "
                    "underscores" % (variable, name), variable, name)
        pattern = env_rules.secret_name_rule(name)
        if pattern is None:
            continue
        if pattern == "RAY_AUTH_*":
            fix = ("Ray's token authentication is set only by vllm_cluster_ray_auth (true: RAY_AUTH_MODE=token with a "
                   "generated token in the 0600 secret env file)")
        else:
            fix = ("set vllm_api_key (or HF_TOKEN in the controller's environment) instead: secrets reach the server "
                   "only through the 0600 secret file")
        _refuse("env-secret", "%s carries %s, a secret-looking name (%s; refused in every user environment: %s), "
                "which would land in a readable env file and the plan; remove it from %s; %s" % (
                    variable, name, pattern, env_rules.SECRET_NAME_PATTERNS, variable, fix), variable, name)
    return env


def check_role_envs(planner):
    """vllm_native_env, vllm_cluster_extra_env, vllm_cluster_ray_health_check: refused names, before any host changes."""
    for key in ROLE_ENV_KEYS:
        check_env_names(planner, key)


def apply_user_env(planner):
    """Merge vllm_env over the planned env, then refuse development mode unless it is forced."""
    env = check_env_names(planner, "env")
    for key, value in sorted(env.items()):
        if isinstance(value, (dict, list)):
            _refuse("type", "vllm_env.%s must be a string or number, got %r" % (key, value), "vllm_env", value)
        text = ("1" if value else "0") if isinstance(value, bool) else ("" if value is None else str(value))
        if key in planner.env and planner.env[key] != text:
            planner.warn("vllm_env overrides the planned %s=%s with %s" % (key, planner.env[key], text))
        planner.env[key] = text
    if dev_mode_on(planner.env):
        if not _as_bool(planner.request, "allow_dev_mode"):
            _refuse("dev-mode", "%s=%s would register vLLM's development routes (/reset_prefix_cache, /sleep, "
                    "/collective_rpc, ...), which the API key does not guard; remove it from vllm_env. Only a "
                    "benchmark host that resets the prefix cache between sweep shapes may force it with "
                    "vllm_allow_dev_mode=true" % (DEV_MODE_ENV, planner.env[DEV_MODE_ENV]), "vllm_env",
                    planner.env[DEV_MODE_ENV])
        planner.warn("%s is on (vllm_allow_dev_mode): vLLM's development routes answer without the API key; keep "
                     "the port off any shared network" % DEV_MODE_ENV)
