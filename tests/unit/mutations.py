"""Mutations of the collection's detection code, for tests/unit/test_mutations.py.

Loaded as a pytest plugin (`-p mutations`) in a child pytest run with
SPARKFLEET_MUTATION=<name>: it replaces one detection with a version that
detects nothing, before any test runs. The tests that exist to show the
detection works must then fail; if they still pass, they prove nothing.
"""
import os

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_metrics, diagnose, env_rules, planner, topology, vllm_flags


def _gate_always_passes(measured, expected, min_ratio=0.9):
    result = ORIGINALS["gate"](measured, expected, min_ratio)
    for check in result["checks"]:
        check["passed"] = True
    return dict(result, passed=True)


def _no_diagnosis(*_args, **_kwargs):
    return []


def _refuse_nothing(*_args, **_kwargs):
    return None


def _exact_spellings_only(name, options, _allow_abbrev):
    """The guards before issue 13: a flag counts only when spelled exactly (no prefixes, no glued values)."""
    return ([options[name]] if name in options else []), None


def _every_character_allowed(_value):
    return []


def _every_layout_pays_off(*_args, **_kwargs):
    return []


ORIGINALS = {"gate": bench_metrics.gate}
# name -> (object, attribute, replacement): each removes one detection.
MUTATIONS = {
    "gate": (bench_metrics, "gate", _gate_always_passes),
    "diagnosis": (diagnose, "diagnose", _no_diagnosis),
    "refusal": (planner, "_refuse", _refuse_nothing),
    "secret-names": (env_rules, "SECRET_NAME_RULES", ()),
    "flag-spellings": (vllm_flags, "_resolve", _exact_spellings_only),
    "key-characters": (env_rules, "env_value_problems", _every_character_allowed),
    "topology": (topology, "_layout_warnings", _every_layout_pays_off),
}


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    name = os.environ.get("SPARKFLEET_MUTATION")
    if not name:
        return
    target, attribute, replacement = MUTATIONS[name]
    setattr(target, attribute, replacement)
    config.sparkfleet_mutation = name
