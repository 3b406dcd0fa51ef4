# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The planner's first steps: the hardware profile and the model, each a step over the plan's record (state.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import inputs

_refuse, _unset = inputs.refuse, inputs.unset


def resolve_profile(state):
    """The hardware profile: vllm_profile, else the one the GPU's name matches."""
    name = state.request.get("profile")
    if _unset(name):
        name = cat.profile_from_gpu_name(state.catalog, state.request.get("gpu_name"))
        if name is None:
            if not _unset(state.request.get("gpu_name")):
                _refuse("profile", "GPU %r matches no hardware profile; set vllm_profile to one of: %s" % (
                    state.request["gpu_name"], ", ".join(state.catalog["profiles"])), "vllm_profile")
            _refuse("profile", "no hardware profile given; set vllm_profile to one of: %s" % ", ".join(state.catalog["profiles"]),
                    "vllm_profile")
        state.reason("profile %s: detected from the GPU name %r" % (name, state.request.get("gpu_name")))
    try:
        state.profile_name = cat.resolve_profile(state.catalog, name)
    except cat.CatalogError as exc:
        _refuse("profile", str(exc), "vllm_profile", name)
    state.profile = state.catalog["profiles"][state.profile_name]


def resolve_model(state):
    """The model (the profile's default when unset), its rules on this profile, and the model whose flags it takes."""
    name = state.request.get("model")
    if _unset(name):
        name = state.profile.get("default_model") or state.catalog["defaults"]["model"]
        state.reason("model %s: the catalog default for %s" % (name, state.profile_name))
    try:
        state.model_name = cat.resolve_model(state.catalog, name)
    except cat.CatalogError as exc:
        _refuse("model", str(exc), "vllm_model", name)
    state.model = state.catalog["models"][state.model_name]
    state.model_rules = (state.profile.get("models") or {}).get(state.model_name) or {}
    # A stand-in for a Gemma 4 model takes its serving flags (parsers, expert parallelism) from the real one.
    state.real_name = state.model.get("stands_in_for")
    state.flag_model = state.catalog["models"][state.real_name] if state.real_name else state.model
    if bool(state.model.get("stand_in")) != bool(state.profile.get("stand_in")):
        if state.profile.get("stand_in"):
            stand_ins = [k for k, v in state.catalog["models"].items() if v.get("stand_in")]
            _refuse("stand-in", "%s is a Gemma 4 NVFP4 checkpoint, which needs Blackwell FP4 tensor cores; the %s profile "
                    "is a stand-in without a GPU; set vllm_model to one of: %s" % (
                        state.model_name, state.profile_name, ", ".join(stand_ins)), "vllm_model", state.model_name)
        real = [k for k, v in state.catalog["profiles"].items() if v.get("stand_in")]
        _refuse("stand-in", "%s is a stand-in model for the %s profile only; set vllm_model to one of: %s (or vllm_profile=%s)" % (
            state.model_name, ", ".join(real), ", ".join(cat.model_names(state.catalog, include_stand_ins=False)), real[0]),
            "vllm_model", state.model_name)


def profile_env(state):
    """The profile's own environment (the CPU stand-in's HF_HUB_OFFLINE, ...)."""
    for key, value in (state.profile.get("env") or {}).items():
        state.env[key] = str(value)
        if key == "HF_HUB_OFFLINE":
            state.reason("HF_HUB_OFFLINE=1: the stand-in model is generated locally, never downloaded")
