"""The driver branch the nvidia_driver role keeps is the branch preflight accepts.

nvidia_driver leaves a driver of at least nvidia_driver_min_branch in place; preflight refuses one below
preflight_driver_min_branch. Were the first lower, a host with a driver between the two would be kept by the
role and refused by preflight on every run, with no variable set by the operator to blame.
"""
import yaml

from conftest import REPO


def role_default(role, name):
    return yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())[name]


def spec_default(role, name):
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return specs["argument_specs"]["main"]["options"][name]["default"]


def test_driver_kept_is_driver_accepted():
    kept = role_default("nvidia_driver", "nvidia_driver_min_branch")
    accepted = role_default("preflight", "preflight_driver_min_branch")
    assert kept == accepted, (
        "nvidia_driver_min_branch %s != preflight_driver_min_branch %s: a driver between them is kept, then refused"
        % (kept, accepted))
    assert spec_default("nvidia_driver", "nvidia_driver_min_branch") == kept
    assert spec_default("preflight", "preflight_driver_min_branch") == accepted


def test_installed_branch_is_accepted():
    assert role_default("nvidia_driver", "nvidia_driver_branch") >= role_default("preflight", "preflight_driver_min_branch")
