# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The planner's guards on what a user adds around the plan: vllm_extra_args and the extra environments.

Each takes the plan's record (state.py) and refuses with ``inputs.refuse`` (naming the variable,
the value and the fix) what would carry a credential, override a flag the planner manages, or open routes the API key
does not guard; the rest is recorded with a warning or a reason.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.sparkfleet.vllm.plugins.module_utils import env_rules, vllm_flags
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import inputs

_refuse, _unset, _as_bool = inputs.refuse, inputs.unset, inputs.as_bool
VARIABLES, DEV_MODE_ENV, dev_mode_on = inputs.VARIABLES, inputs.DEV_MODE_ENV, inputs.dev_mode_on
# Environments the runtime roles merge over the plan's env; the planner checks them as it checks vllm_env.
ROLE_ENV_KEYS = ("native_env", "cluster_extra_env", "cluster_ray_health_check")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A control character (newline, carriage return, NUL, ...) ends a line in every env file and unit a value lands in:
# in a systemd unit the rest of the value would be read as a directive of its own (an injected ExecStartPre=).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_OFF = ("", "0", "false", "no", "off")


# --- what the catalog guards (rules.guarded), and what vllm_allow_guarded lets through ---------------------------


def allowed_guarded(state):
    """The names vllm_allow_guarded lets through, each checked against the catalog's rules.guarded."""
    value = state.request.get("allow_guarded")
    if _unset(value) or value == []:
        return set()
    if isinstance(value, str):
        value = [item.strip() for item in value.split(",") if item.strip()]
    if not isinstance(value, (list, tuple)):
        _refuse("type", "vllm_allow_guarded must be a list of flag or environment variable names, got %r; set e.g. "
                "vllm_allow_guarded: ['--trust-remote-code']" % (value,), "vllm_allow_guarded", value)
    guarded = state.rules.get("guarded") or {}
    unknown = [str(item) for item in value if str(item) not in guarded]
    if unknown:
        _refuse("allow-guarded", "vllm_allow_guarded names %s, which the catalog does not guard (rules.guarded: %s); "
                "remove it from vllm_allow_guarded" % (", ".join(unknown), ", ".join(guarded)),
                "vllm_allow_guarded", unknown[0])
    return {str(item) for item in value}


def resolve_allowed(state):
    """What vllm_allow_guarded lets through; the routes of those it lets through are added as their guards pass."""
    state.allowed_guarded, state.allowed_routes = allowed_guarded(state), []


def _guarded_on(rule, value):
    """Whether ``value`` (a flag's value, or an environment variable's) is one the rule guards."""
    values = [str(v).lower() for v in rule.get("values") or []]
    if values:
        return any(v in str(value).lower() for v in values)
    return True


def _guard(state, name, shown, variable, why_given):
    """Refuse ``name`` (a guarded flag or env name) unless vllm_allow_guarded names it; then warn."""
    rule = (state.rules.get("guarded") or {})[name]
    why = " ".join(str(rule["why"]).split())
    if name not in state.allowed_guarded:
        _refuse("guarded", "%s sets %s: it %s; remove it from %s, or name %s in vllm_allow_guarded to let it through "
                "on purpose" % (variable, shown, why, variable, name), variable, why_given)
    state.warn("%s in %s (vllm_allow_guarded): it %s" % (shown, variable, why))
    state.allowed_routes.extend(r for r in rule.get("routes") or [] if r not in state.allowed_routes)


def refused_routes(state):
    """The /v1 routes of guarded settings this plan does not allow: the gateway answers them with 404."""
    routes = []
    for rule in (state.rules.get("guarded") or {}).values():
        routes.extend(r for r in rule.get("routes") or [] if r not in state.allowed_routes and r not in routes)
    return routes


# --- vllm_extra_args -------------------------------------------------------------


def check_extra_args(state):
    """Refuse what vllm_extra_args must not set, in every spelling vLLM's parser accepts (vllm_flags.py)."""
    args = state.extra_args
    if not args:
        return
    for index, item in enumerate(args):
        if item == "--":
            _refuse("extra-args-separator", "vllm_extra_args has a bare -- (item %d): vLLM's parser would take every item "
                    "after it as a positional argument, which none of the planner's checks reads; remove it and give "
                    "each option as its own item" % index, "vllm_extra_args", item)
        option = item.split("=", 1)[0]
        if item.startswith("-") and re.search(r"\s", option):
            # Never echo past the first word: what follows may be a secret.
            _refuse("extra-args-item", "vllm_extra_args item %d begins with %s and holds whitespace: vLLM's parser reads "
                    "an item as one word, so the option and its value would not be read as given and the planner's "
                    "checks would not see them; give the option and its value as two items (['%s', 'value']) or as "
                    "%s=value" % (index, option.split()[0], option.split()[0], option.split()[0]),
                    "vllm_extra_args", option.split()[0])
    try:
        flags = vllm_flags.load_flags()
    except vllm_flags.FlagsError as exc:
        _refuse("flags", "cannot check vllm_extra_args: %s" % exc, "vllm_extra_args")
    rules = state.rules
    managed = rules.get("managed_flags") or {}
    secret = dict((rules.get("secret_flags") or {}))
    for dest in flags.get("sensitive_dests") or []:
        spelling = "--" + dest.replace("_", "-")
        secret.setdefault(vllm_flags.canonical_of(spelling, flags) or spelling, "drop it")
    # The catalog's refusals for every machine, and the profile's own (a flag that crashes on that hardware).
    refused = dict(rules.get("refused_flags") or {}, **(state.profile.get("refused_flags") or {}))
    dev_flags = rules.get("dev_mode_flags") or {}
    warn_flags = rules.get("warn_flags") or {}
    refused_backends = [b.lower() for b in rules.get("refused_attention_backends") or []]
    allow_dev = _as_bool(state.request, "allow_dev_mode")
    version = "%s %s" % ((flags.get("vllm") or {}).get("distribution", "vllm"), (flags.get("vllm") or {}).get("version", "?"))
    for flag in vllm_flags.normalise(args, flags):
        # An ambiguous prefix stops vLLM, but another release may resolve it: any guarded meaning is refused.
        for name in flag.candidates:
            _refuse_flag(state, flag, name, managed, secret, refused, dev_flags, allow_dev)
        if not flag.candidates:
            state.warn("%s in vllm_extra_args is not an option of %s's vllm serve (data/vllm_serve_flags.yml): vLLM "
                       "exits with \"unrecognized arguments\" unless this release has it" % (flag.given, version))
        elif flag.canonical is None:
            state.warn("%s in vllm_extra_args is ambiguous (it could mean %s): vLLM exits with \"ambiguous option\"; "
                       "spell the option out" % (flag.given, ", ".join(flag.candidates)))
        if flag.canonical in ("--attention-backend", "--attention-config"):
            named = [b for b in refused_backends if re.search(r"\b%s\b" % re.escape(b), flag.value, re.IGNORECASE)]
            if named:
                _refuse("attention-backend", "--attention-backend %s cannot start Gemma 4 here: FlashAttention supports "
                        "neither the fp8 KV cache nor Gemma 4's multimodal PrefixLM attention, and FA3/FA4 are not built "
                        "for sm_120/sm_121; remove it from vllm_extra_args (vLLM falls back to TRITON_ATTN by itself)"
                        % flag.value, "vllm_extra_args", flag.given)
        if flag.canonical in warn_flags:
            state.warn("%s in vllm_extra_args: %s" % (flag.canonical, " ".join(warn_flags[flag.canonical].split())))
    state.reason("extra args appended as given: %s" % " ".join(args))


def _refuse_flag(state, flag, name, managed, secret, refused, dev_flags, allow_dev):
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
    if name in (state.rules.get("guarded") or {}) and _guarded_on(state.rules["guarded"][name], flag.value):
        _guard(state, name, spelled if name == flag.canonical else spelled, "vllm_extra_args", flag.given.split("=", 1)[0])
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
    state.warn("%s in vllm_extra_args (vllm_allow_dev_mode): it %s; keep the port off any shared network" % (shown, why))


# --- the user's environments -----------------------------------------------------


def check_env(state, key):
    """The mapping under request ``key`` (one of the user's environments), checked; {} when unset. Every mapping gets
    the same checks: names, secret-looking names, control characters in names and values, values that are not
    scalars, development mode (refused unless vllm_allow_dev_mode; vllm_env is checked after its merge, in
    apply_user_env, where the catalog's env joins it) and the catalog's guarded variables (refused unless
    vllm_allow_guarded names them)."""
    variable = VARIABLES[key]
    env = state.request.get(key)
    if _unset(env) or env == {}:
        return {}
    if not isinstance(env, dict):
        _refuse("type", "%s must be a mapping of NAME: value, got %r; set %s: {NAME: value}" % (variable, env, variable),
                variable, env)
    guarded = state.rules.get("guarded") or {}
    for name in sorted(env, key=str):
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            _refuse("env-name", "%s has %r, which is not an environment variable name; use letters, digits and "
                    "underscores" % (variable, name), variable, name)
        pattern = env_rules.secret_name_rule(name)
        if pattern is not None:
            _refuse_secret_name(variable, name, pattern)
        value = env[name]
        if isinstance(value, (dict, list)):
            _refuse("type", "%s.%s must be a string or number, got %r" % (variable, name, value), variable, value)
        text = _env_text(value)
        control = _CONTROL.search(text)
        if control:
            _refuse("env-control", "%s.%s holds a %s: an env file or unit would end the value there and read the rest "
                    "as a line of its own; remove it from the value" % (
                        variable, name, env_rules.describe_character(control.group(0))), variable, name)
        if key != "env" and name == DEV_MODE_ENV and dev_mode_on({name: text}):
            _check_dev_mode(state, variable, text)
        if name in guarded and text.strip().lower() not in _OFF and _guarded_on(guarded[name], text):
            _guard(state, name, "%s=%s" % (name, text), variable, name)
    return env


def _env_text(value):
    return ("1" if value else "0") if isinstance(value, bool) else ("" if value is None else str(value))


def _refuse_secret_name(variable, name, pattern):
    if pattern == "RAY_AUTH_*":
        fix = ("Ray's token authentication is set only by vllm_cluster_ray_auth (true: RAY_AUTH_MODE=token with a "
               "generated token in the 0600 secret env file)")
    else:
        fix = ("set vllm_api_key (or HF_TOKEN in the controller's environment) instead: secrets reach the server "
               "only through the 0600 secret file")
    _refuse("env-secret", "%s carries %s, a secret-looking name (%s; refused in every user environment: %s), "
            "which would land in a readable env file and the plan; remove it from %s; %s" % (
                variable, name, pattern, env_rules.SECRET_NAME_PATTERNS, variable, fix), variable, name)


def _check_dev_mode(state, variable, value):
    if not _as_bool(state.request, "allow_dev_mode"):
        _refuse("dev-mode", "%s=%s would register vLLM's development routes (/reset_prefix_cache, /sleep, "
                "/collective_rpc, ...), which the API key does not guard; remove it from %s. Only a benchmark host "
                "that resets the prefix cache between sweep shapes may force it with vllm_allow_dev_mode=true" % (
                    DEV_MODE_ENV, value, variable), variable, value)
    state.warn("%s is on (%s, vllm_allow_dev_mode): vLLM's development routes answer without the API key; keep "
               "the port off any shared network" % (DEV_MODE_ENV, variable))


def check_role_envs(state):
    """vllm_native_env, vllm_cluster_extra_env, vllm_cluster_ray_health_check: the same checks as vllm_env, before
    any host changes."""
    for key in ROLE_ENV_KEYS:
        check_env(state, key)


def apply_user_env(state):
    """Merge vllm_env over the planned env, then refuse development mode unless it is forced."""
    env = check_env(state, "env")
    for key, value in sorted(env.items()):
        text = _env_text(value)
        if key in state.env and state.env[key] != text:
            state.warn("vllm_env overrides the planned %s=%s with %s" % (key, state.env[key], text))
        state.env[key] = text
    if dev_mode_on(state.env):
        _check_dev_mode(state, "vllm_env", state.env[DEV_MODE_ENV])
