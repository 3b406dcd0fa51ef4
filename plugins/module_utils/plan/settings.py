# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The planner's serving settings, one step per setting.

Each step takes the plan's record (state.py) once the profile, model, nodes, release, runtime and drafter are
resolved, reads one setting from its request, falls back to the catalog's figure for this model on this profile,
refuses what cannot work (``inputs.refuse``, naming the variable and the fix) and records the setting with its
reasons and warnings. ``resolve`` runs them in ``STEPS``' order: later steps read what earlier ones set (vision
after --language-model-only, the batched-token floor after vision and audio).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.sparkfleet.vllm.plugins.module_utils import env_rules
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import inputs

_refuse, _unset, _fmt = inputs.refuse, inputs.unset, inputs.fmt
_as_int, _as_float, _as_bool, _as_arg_list = inputs.as_int, inputs.as_float, inputs.as_bool, inputs.arg_list


def language_model_only(state):
    """--language-model-only: required where the model fits only without its vision tower, else as requested."""
    multimodal_model = bool(state.model.get("vision"))
    lmo = _as_bool(state.request, "language_model_only")
    required_lmo = bool(state.model_rules.get("language_model_only"))
    if lmo is None:
        lmo = required_lmo
        if lmo:
            state.reason("--language-model-only: %s fits on %s only without the vision tower" % (state.model_name, state.profile_name))
    else:
        state.overridden.append("language_model_only")
        if lmo:
            state.reason("--language-model-only: requested (drops the vision encoder; image requests get a 400)")
    if lmo and not multimodal_model:
        state.warn("vllm_language_model_only has no effect: %s is text-only" % state.model_name)
        lmo = False
    state.language_model_only = lmo
    state.vision = multimodal_model and not lmo
    state.required_lmo = required_lmo


def max_model_len(state):
    """--max-model-len: the catalog's measured fit for this model (and drafter) on this profile, else the native context."""
    limit = int(state.model["max_context"])
    default_len = state.model_rules.get("max_model_len") or limit
    by_drafter = (state.model_rules.get("max_model_len_by_drafter") or {}).get(state.drafter)
    if by_drafter:
        default_len = by_drafter
    mml = _as_int(state.request, "max_model_len", minimum=1)
    if mml is None:
        mml = default_len
        if mml == limit:
            state.reason("--max-model-len %d: the full native context of %s" % (mml, state.model_name))
        else:
            state.reason("--max-model-len %d: what fits for %s%s on %s" % (
                mml, state.model_name, " + " + state.drafter if by_drafter else "", state.profile_name))
    else:
        state.overridden.append("max_model_len")
        if mml > limit:
            _refuse("max-model-len", "%s supports at most %d tokens of context; set vllm_max_model_len <= %d" % (
                state.model_name, limit, limit), "vllm_max_model_len", mml)
        if mml > default_len:
            state.warn("--max-model-len %d is above the %d measured for %s%s on %s: vLLM exits at startup if one full-length "
                       "request does not fit in the KV cache" % (
                           mml, default_len, state.model_name, " + " + state.drafter if by_drafter else "", state.profile_name))
        state.reason("--max-model-len %d: requested" % mml)
        compile_cache(state, "max_model_len", mml, default_len)
    state.max_model_len = mml


def compile_cache(state, setting, value, shipped):
    """A setting vLLM's compile cache is keyed on (the catalog's rules.compile_cache_settings), set to other than the
    shipped value: the next start compiles from scratch, and fails once more where the profile expects a failed first
    start. A profile that runs eager has no compile cache to invalidate."""
    if value == shipped or state.profile.get("enforce_eager"):
        return
    for entry in state.rules.get("compile_cache_settings") or []:
        if entry.get("setting") != setting:
            continue
        again = entry.get("first_start_failure") if state.model_rules.get("first_start_failure") else None
        state.warn("%s %s differs from the shipped %s: %s%s (the notes: \"%s\")" % (
            entry["flag"], value, shipped, " ".join(str(entry["effect"]).split()),
            "; on %s %s" % (state.profile_name, " ".join(str(again).split())) if again else "",
            " ".join(str(entry["notes"]).split())))


def media(state):
    """Images per prompt (0 without vision) and audio input, which needs the model's encoders."""
    images = _as_int(state.request, "images_per_prompt", minimum=1)
    if images is not None and not state.vision:
        state.warn("vllm_images_per_prompt is ignored: %s is served without vision" % state.model_name)
    if images is None:
        images = state.rules["images_per_prompt"]
    elif state.vision:
        state.overridden.append("images_per_prompt")
        if images > state.rules["images_per_prompt"]:
            state.warn("%d images per prompt is above the %d the baselines and load tests used" % (images, state.rules["images_per_prompt"]))
    state.images_per_prompt = images if state.vision else 0
    audio = _as_bool(state.request, "enable_audio")
    if audio and not state.model.get("audio"):
        audio_models = [k for k, v in state.catalog["models"].items() if v.get("audio")]
        _refuse("audio", "%s has no audio input (audio is supported by %s); set vllm_enable_audio=false" % (
            state.model_name, ", ".join(audio_models)), "vllm_enable_audio", True)
    if audio and state.language_model_only:
        _refuse("audio", "audio input needs the multimodal encoders, which --language-model-only drops; set "
                "vllm_enable_audio=false or vllm_language_model_only=false", "vllm_enable_audio", True)
    state.audio = bool(state.model.get("audio")) and not state.language_model_only if audio is None else bool(audio)


def max_num_batched_tokens(state):
    """--max-num-batched-tokens: the profile's (or model's) figure, never below a multimodal model's floor."""
    rules, profile = state.rules, state.profile
    default_mnbt = state.model_rules.get("max_num_batched_tokens") or profile["max_num_batched_tokens"]
    mnbt = _as_int(state.request, "max_num_batched_tokens", minimum=1)
    floor = rules["multimodal_min_num_batched_tokens"]
    if mnbt is None:
        if default_mnbt < floor and (state.vision or state.audio):
            default_mnbt = profile["max_num_batched_tokens"]  # the text-only setting does not apply with the encoder
        mnbt = default_mnbt
        if mnbt != rules["max_num_batched_tokens"]:
            state.reason("--max-num-batched-tokens %d: the %s setting for %s (the activation peak scales with it; "
                         "every GiB saved goes to the KV cache)" % (mnbt, state.profile_name, state.model_name))
        else:
            state.reason("--max-num-batched-tokens %d: swept on all five models; lower only trades p99 ITL for KV cache"
                         % mnbt)
    else:
        state.overridden.append("max_num_batched_tokens")
        if mnbt < floor and (state.vision or state.audio):
            _refuse("mnbt-floor", "--max-num-batched-tokens %d is below the %d floor of a multimodal Gemma 4 (vLLM refuses to "
                    "start: max_tokens_per_mm_item %d is larger than max_num_batched_tokens); set vllm_max_num_batched_tokens "
                    ">= %d, or vllm_language_model_only=true to drop the encoder" % (
                        mnbt, floor, rules["mm_item_tokens"], floor), "vllm_max_num_batched_tokens", mnbt)
        cap = profile.get("max_num_batched_tokens_max")
        if cap and mnbt > cap:
            _refuse("mnbt-cap", "--max-num-batched-tokens %d does not fit on %s: at 32768 the activation peak leaves 7.47 GiB "
                    "of KV against the 8.85 GiB one full-context request needs; set vllm_max_num_batched_tokens <= %d "
                    "(shipped: %d)" % (mnbt, state.profile_name, cap, default_mnbt), "vllm_max_num_batched_tokens", mnbt)
        trade = state.model_rules.get("mnbt_tradeoff")
        if trade and mnbt <= trade["max_num_batched_tokens"]:
            state.warn(_mnbt_tradeoff_text(state, trade, "at --max-num-batched-tokens %d" % mnbt)
                       + ": right for long-context batch work, wrong for interactive serving")
        elif mnbt < rules["max_num_batched_tokens"] and not profile.get("stand_in"):
            state.warn("--max-num-batched-tokens %d below 32768: when a prefill chunk fills the budget it stalls decoding "
                       "streams; p99 ITL measured 5-15x worse" % mnbt)
        state.reason("--max-num-batched-tokens %d: requested" % mnbt)
    state.mnbt = mnbt
    trade = state.model_rules.get("mnbt_tradeoff")
    if trade and mnbt > trade["max_num_batched_tokens"]:
        state.reason("long-context batch work on %s: vllm_max_num_batched_tokens=%d trades tail latency for memory (%s)"
                     % (state.profile_name, trade["max_num_batched_tokens"],
                        _mnbt_tradeoff_text(state, trade, "measured")))


def _mnbt_tradeoff_text(state, trade, where):
    """The notes' measured trade of a lower --max-num-batched-tokens for this model on this profile."""
    return ("%s %s on %s at %d-token prompts: %.1fx the KV cache, TTFT %+d%%, throughput %+d%% at %d streams, p99 ITL "
            "%d ms -> %d ms" % (state.model_name, where, state.profile_name, trade["prompt_tokens"], trade["kv_cache_ratio"],
                                trade["ttft_change_pct"], trade["throughput_change_pct"], trade["concurrency"],
                                trade["p99_itl_ms"][0], trade["p99_itl_ms"][1]))


def vision_fit(state):
    """A model that fits only without vision, served with it: the longest request its KV cache holds depends on
    --max-num-batched-tokens (the activation peak), so the catalog keeps one figure per measured setting."""
    fits = state.model_rules.get("vision_max_model_len_by_mnbt") or {}
    if not (state.required_lmo and not state.language_model_only and fits):
        return
    measured = sorted(int(k) for k in fits)
    # The figure of the nearest measured setting at or above this one (a larger budget leaves less KV).
    key = next((k for k in measured if k >= state.mnbt), measured[-1])
    vision_max = int(fits[key])
    if state.max_model_len > vision_max:
        lower = [k for k in measured if k < key]
        hint = (" With vllm_max_num_batched_tokens=%d it holds %s." % (lower[0], _fmt(int(fits[lower[0]])))) if lower else ""
        _refuse("vision-fit", "%s on %s fits only without vision: with the vision tower and --max-num-batched-tokens %d its KV "
                "cache holds one %s-token request; set vllm_language_model_only=true (or vllm_max_model_len <= %d).%s" % (
                    state.model_name, state.profile_name, key, _fmt(vision_max), vision_max, hint),
                "vllm_language_model_only", False)
    state.warn("%s on %s with vision: one request of at most %s tokens fits in the KV cache at --max-num-batched-tokens "
               "%d (the notes)" % (state.model_name, state.profile_name, _fmt(vision_max), key))


def gpu_memory_utilization(state):
    """--gpu-memory-utilization: the profile's fraction; unified memory has a hard ceiling."""
    rules, profile = state.rules, state.profile
    default_util = profile["gpu_memory_utilization"]
    util = _as_float(state.request, "gpu_memory_utilization")
    if util is None:
        util = default_util
        if profile.get("unified_memory"):
            state.reason("--gpu-memory-utilization %s: unified memory; higher fractions starve the host during KV "
                         "allocation%s" % (util, " (a per-node fraction)" if state.cluster else ""))
        elif profile.get("stand_in"):
            state.reason("--gpu-memory-utilization %s: on the CPU build this is the fraction of host RAM" % util)
        else:
            state.reason("--gpu-memory-utilization %s: leaves headroom for CUDA graph capture" % util)
    else:
        state.overridden.append("gpu_memory_utilization")
        if not 0 < util <= 1:
            _refuse("gpu-util", "--gpu-memory-utilization must be a fraction in (0, 1], got %s; set vllm_gpu_memory_utilization "
                    "to e.g. %s" % (util, default_util), "vllm_gpu_memory_utilization", util)
        if profile.get("unified_memory") and util > rules["unified_memory_max_utilization"]:
            cap = rules["unified_memory_max_utilization"]
            _refuse("gpu-util-unified", "%s has unified memory: --gpu-memory-utilization %s starves the host during KV-cache "
                    "allocation (0.92 needed a power cycle); set vllm_gpu_memory_utilization <= %s%s" % (
                        state.profile_name, util, cap, " (per node)" if state.cluster else ""),
                    "vllm_gpu_memory_utilization", util)
        if util > default_util:
            if profile.get("stand_in"):
                state.warn("--gpu-memory-utilization %s on the CPU build is a fraction of host RAM: only %s is measured "
                           "(0.92 was refused)" % (util, default_util))
            elif not profile.get("unified_memory"):
                state.warn("--gpu-memory-utilization %s is above %s: pushing it higher can OOM during CUDA graph capture "
                           "after the KV cache is allocated" % (util, default_util))
        state.reason("--gpu-memory-utilization %s: requested" % util)
    state.gpu_util = util


def max_num_seqs(state):
    """--max-num-seqs: the catalog's rule, else as requested."""
    seqs = _as_int(state.request, "max_num_seqs", minimum=1)
    if seqs is None:
        seqs = state.rules["max_num_seqs"]
        state.reason("--max-num-seqs %d: sized for a handful of concurrent clients" % seqs)
    else:
        state.overridden.append("max_num_seqs")
        state.reason("--max-num-seqs %d: requested" % seqs)
    if seqs > state.mnbt:
        # vLLM's SchedulerConfig refuses to start: every scheduled sequence takes at least one token of the step's budget.
        _refuse("max-num-seqs", "--max-num-seqs %d is above --max-num-batched-tokens %d: vLLM refuses to start "
                "(\"max_num_batched_tokens must be greater than or equal to max_num_seqs\"); set vllm_max_num_seqs <= %d, "
                "or raise vllm_max_num_batched_tokens" % (seqs, state.mnbt, state.mnbt), "vllm_max_num_seqs", seqs)
    state.max_num_seqs = seqs


def endpoint(state):
    """The port (the catalog default) and --served-model-name (the model's, else a name without whitespace)."""
    state.port = _as_int(state.request, "port", minimum=1, maximum=65535) or state.catalog["defaults"]["port"]
    served = state.request.get("served_name")
    if _unset(served):
        served = state.model["served_name"]
    else:
        if not isinstance(served, str):
            _refuse("served-name", "vllm_served_model_name must be one name (a string), got %r; set a name such as %s" % (
                served, state.model["served_name"]), "vllm_served_model_name", served)
        served = served.strip()
        if re.search(r"\s", served):
            _refuse("served-name", "vllm_served_model_name %r contains whitespace; set a name such as %s" % (
                served, state.model["served_name"]), "vllm_served_model_name", served)
        if served.startswith("-"):
            _refuse("served-name", "vllm_served_model_name %r starts with '-', which vLLM's argument parser would read as "
                    "a flag; set a name such as %s" % (served, state.model["served_name"]), "vllm_served_model_name", served)
        state.reason("--served-model-name %s: requested" % served)
    state.served_name = served


def client_endpoint(state):
    """Where clients (and verify.yml, bench.yml, status.yml) reach the API: vLLM's port, or with the gateway its port
    (vllm_gateway_port, else the catalog's defaults.gateway_port), over https when the gateway has a certificate; ``url``
    is the whole base URL at the host's management address (client_address: ansible_host, else the inventory name);
    ``open`` is vllm_open_api for a plan without a key (None: clients send the key)."""
    endpoint = _client_endpoint(state)
    address = str(state.request.get("client_address") or state.request.get("host") or "localhost").strip()
    if state.replicas is not None:
        # Every replica's clients go through the front's gateway.
        address = state.replicas["front_address"]
    if ":" in address and not address.startswith("["):
        address = "[%s]" % address  # an IPv6 literal
    endpoint["url"] = "%s://%s:%d" % (endpoint["scheme"], address, endpoint["port"])
    # How a plan without a key serves (vllm_open_api: loopback or all), else None: clients need the key.
    endpoint["open"] = state.open_api
    state.client_endpoint = endpoint


def _client_endpoint(state):
    if not state.gateway and state.replicas is None:
        return {"via": "vllm", "scheme": "http", "port": state.port}
    port = _as_int(state.request, "gateway_port", minimum=1, maximum=65535) or state.catalog["defaults"]["gateway_port"]
    if port == state.port:
        _refuse("gateway-port", "vllm_gateway_port %d is vLLM's port (vllm_port): nginx and vLLM cannot both listen there; "
                "set vllm_gateway_port to another port (clients use it), or vllm_port for vLLM's" % port,
                "vllm_gateway_port", port)
    tls = bool(_as_bool(state.request, "gateway_tls"))
    state.reason("clients reach the API through the gateway at %s://<host>:%d (vllm_gateway_port%s)" % (
        "https" if tls else "http", port, ", TLS with vllm_gateway_tls_certificate" if tls else ""))
    return {"via": "gateway", "scheme": "https" if tls else "http", "port": port}


def api_key(state):
    """The API key is checked and served through a secret, never the argv. A Hugging Face model's token is not the
    server's: the weights role downloads before any server starts (on a cluster, the head; the workers copy from it)
    with the token in a 0600 file only that download reads, and the server runs with the hub offline, so a file missing
    from the cache fails its start instead of starting a download."""
    key = state.request.get("api_key")
    if not _unset(key):
        if not isinstance(key, str) or re.search(r"\s", key) or len(key) < 8:
            _refuse("api-key", "vllm_api_key must be a string of at least 8 characters without whitespace; set a longer key "
                    "(its value is never shown)", "vllm_api_key")
        problems = env_rules.env_value_problems(key)
        if problems:
            _refuse("api-key-characters", "vllm_api_key has characters an env file or systemd would not carry unchanged: "
                    "%s; use only %s (its value is never shown)" % (", ".join(problems), env_rules.ENV_VALUE_ALLOWED_TEXT),
                    "vllm_api_key")
        state.secret_env.append("VLLM_API_KEY")
        state.reason("API key: served through the VLLM_API_KEY secret (kept out of argv, environment and logs)")
    if state.model.get("source") == "huggingface":
        state.env["HF_HUB_OFFLINE"] = "1"
        state.reason("HF_HUB_OFFLINE=1: the weights role puts the weights in the cache before the server starts; the "
                     "Hugging Face token reaches only that download, never the server")


def extra_args(state):
    """vllm_extra_args as a list (guards.check_extra_args refuses what they must not set)."""
    state.extra_args = _as_arg_list(state.request)
    if state.extra_args:
        state.overridden.append("extra_args")


STEPS = (language_model_only, max_model_len, media, max_num_batched_tokens, vision_fit, gpu_memory_utilization,
         max_num_seqs, endpoint, client_endpoint, api_key, extra_args)


def resolve(state):
    """Every serving setting, in order."""
    for step in STEPS:
        step(state)
