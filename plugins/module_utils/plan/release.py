# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The vLLM release a plan runs: the tag (vllm_release or the image's), the runtime that installs it, the catalog's
release floors and the release's known defects. Each step takes the plan's record (state.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog_conditions
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import inputs

_refuse, _as_choice = inputs.refuse, inputs.as_choice

RUNTIMES = ("compose", "native")


# --- release defects -------------------------------------------------------------


def defect_applies(defect, context):
    try:
        return catalog_conditions.conditions_hold(defect.get("when"), context)
    except catalog_conditions.ConditionError as exc:
        # A defect's condition is catalog data: the plan action reports a bad one as the catalog's error.
        raise cat.CatalogError(str(exc)) from exc


def refusing_defects(release, context):
    """The refusing defects of a release entry (a catalog one, or an unknown tag's placed entry) that apply."""
    return [d for d in (release or {}).get("defects") or [] if d.get("action") == "refuse" and defect_applies(d, context)]


def working_release(catalog, context):
    """Newest plannable release where no refusing defect applies to this configuration, or None."""
    minimum = catalog["rules"]["min_release_multi_node"] if context["node_count"] > 1 else None
    candidates = []
    for key, entry in catalog["releases"].items():
        if not entry.get("plannable") or entry.get("stand_in"):
            continue
        if minimum and not cat.release_at_least(key, minimum):
            continue
        if refusing_defects(entry, context):
            continue
        candidates.append(key)
    candidates.sort(key=cat.version_tuple, reverse=True)
    return candidates[0] if candidates else None


def context(state, drafter):
    """What the catalog's ``when`` conditions (defects, floors) read of this plan, with ``drafter`` as its drafter."""
    return {"node_count": state.node_count, "expert_parallel": state.expert_parallel, "drafter": drafter,
            "model": state.model_name, "profile": state.profile_name}


def plannable(catalog):
    keys = [k for k, v in catalog["releases"].items() if v.get("plannable")]
    return sorted(keys, key=lambda k: (bool(catalog["releases"][k].get("stand_in")), cat.version_tuple(k)))


# --- the steps -------------------------------------------------------------------


def resolve_release(state):
    """The release: vllm_release, else the image's tag, else the one the catalog pins for the profile."""
    image = inputs.as_text(state.request, "image", '"vllm/vllm-openai:v0.30.0"')
    given = inputs.as_text(state.request, "release", '"v0.30.0"')
    from_image = cat.release_from_image(image)
    if given:
        key = cat.release_key(state.catalog, given) or (given if given.startswith("v") else "v" + given)
        if from_image and cat.version_tuple(from_image) != cat.version_tuple(key):
            _refuse("release", "vllm_release %s contradicts the image tag %s (%s); set only one of vllm_image and vllm_release" % (
                given, image, from_image), "vllm_release", given)
        how = "vllm_release"
    elif image:
        if not from_image:
            _refuse("release", "cannot tell the vLLM release from the image %r (its tag is not a version); set vllm_release, "
                    "e.g. vllm_release=%s" % (image, state.profile["default_release"]), "vllm_image", image)
        key = cat.release_key(state.catalog, from_image) or from_image
        how = "the image tag"
    else:
        key = state.profile.get("default_release") or state.catalog["defaults"]["release"]
        how = None
    if cat.version_tuple(key) is None:
        _refuse("release", "%r is not a vLLM release; set vllm_release to one of: %s" % (key, ", ".join(plannable(state.catalog))),
                "vllm_release", key)
    state.release_name = cat.release_key(state.catalog, key) or key
    state.release = state.catalog["releases"].get(state.release_name)
    if state.release is None:
        below = cat.release_below(state.catalog, state.release_name, state.profile.get("stand_in"))
        inherited = list((state.catalog["releases"][below].get("defects") or []) if below else [])
        placed = ("it is placed after %s, whose known defects apply until the catalog records this release" % below
                  if below else "no known release precedes it, so no known defect applies")
        state.warn("vLLM %s is not in the catalog: %s; it has no baselines, so nothing is gated against it; the catalog "
                   "knows %s" % (state.release_name, placed, ", ".join(plannable(state.catalog))))
        state.release = {"version": state.release_name.lstrip("v"), "image": "vllm/vllm-openai:%s" % state.release_name,
                         "plannable": True, "defects": inherited, "placed_after": below}
    elif not state.release.get("plannable"):
        _refuse("release", "vLLM %s is in the catalog for its measurements only; set vllm_release to one of: %s" % (
            state.release_name, ", ".join(plannable(state.catalog))), "vllm_release", state.release_name)
    if bool(state.release.get("stand_in")) != bool(state.profile.get("stand_in")):
        wanted = state.profile["default_release"]
        _refuse("release", "vLLM %s does not run on the %s profile (it needs %s); set vllm_release=%s or leave it unset" % (
            state.release_name, state.profile_name, wanted, wanted), "vllm_release", state.release_name)
    state.image = image or state.release.get("image")
    if how:
        state.reason("vLLM %s: from %s" % (state.release_name, how))
    else:
        state.reason("vLLM %s: the release the catalog pins for %s" % (state.release_name, state.profile_name))
    if state.cluster:
        minimum = state.rules["min_release_multi_node"]
        if not cat.release_at_least(state.release_name, minimum):
            _refuse("multi-node-release", "multi-node needs vLLM %s or later: %s's shared-memory message queue can lose a "
                    "wakeup across nodes and the engine dies with \"RPC call to sample_tokens timed out\"; set "
                    "vllm_image=vllm/vllm-openai:%s (or later)" % (minimum, state.release_name, state.catalog["defaults"]["release"]),
                    "vllm_image", state.release_name)


def check_release_floors(state):
    """The catalog's rules.release_floors: a release older than a floor that applies (Gemma 4 itself, its MTP
    drafter, published security advisories) is refused with the floor's reason and source. A stand-in release
    (the CPU build) is not a Gemma 4 release: no floor applies to it."""
    if state.release.get("stand_in"):
        return
    conditions = context(state, state.drafter)
    for floor in state.rules.get("release_floors") or []:
        if cat.release_at_least(state.release_name, floor["release"]) or not defect_applies(floor, conditions):
            continue
        _refuse("release-floor", "vLLM %s is older than %s, the floor %s: %s (%s); set vllm_image=vllm/vllm-openai:%s "
                "or a later release, or unset vllm_image and vllm_release for the catalog's %s" % (
                    state.release_name, floor["release"], floor["id"], " ".join(floor["why"].split()),
                    " ".join(floor["source"].split()), state.catalog["defaults"]["release"],
                    state.profile.get("default_release") or state.catalog["defaults"]["release"]),
                "vllm_image", state.release_name)


def resolve_runtime(state):
    """compose (the release's image) or native (its pip package): vllm_runtime, else the profile's, else the catalog's."""
    state.runtime = _as_choice(state.request, "runtime", RUNTIMES) or state.profile.get("default_runtime") or \
        state.catalog["defaults"]["runtime"]
    if state.runtime == "compose" and not state.image:
        _refuse("runtime", "vLLM %s has no container image in the catalog; set vllm_runtime=native" % state.release_name,
                "vllm_runtime", state.runtime)
    if state.runtime == "native" and not state.release.get("pip") and not state.profile.get("stand_in"):
        _refuse("runtime", "vLLM %s has no pip package in the catalog; set vllm_runtime=compose" % state.release_name,
                "vllm_runtime", state.runtime)


def apply_release_defects(state):
    """The release's known defects that apply here: refuse, set their environment, or warn."""
    for defect in (state.release.get("defects") or []):
        if not defect_applies(defect, context(state, state.drafter)):
            continue
        action = defect.get("action")
        summary = " ".join(defect.get("summary", "").split())
        if action == "refuse":  # already refused in resolve_drafter for drafter defects; this covers the rest
            fix = defect.get("fix") or "see the catalog's releases section"
            _refuse("release-defect:%s" % defect["id"], "vLLM %s cannot run this: %s; %s" % (state.release_name, summary, fix),
                    "vllm_image", state.release_name)
        elif action == "env":
            for key, value in (defect.get("env") or {}).items():
                state.env[key] = str(value)
                state.reason("%s=%s: vLLM %s needs it (%s)" % (key, value, state.release_name, defect["id"]))
        elif action == "warn":
            state.warn("vLLM %s: %s" % (state.release_name, summary))
