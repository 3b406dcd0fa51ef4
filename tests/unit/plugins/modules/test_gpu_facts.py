"""The gpu_facts module, fed real captured nvidia-smi output (nvidia-h200, nvidia-h200-x2) and
constructed GB10 output (nvidia-gb10-constructed: unified memory), with run_command patched."""
import json
import pathlib
from unittest import mock

import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.sparkfleet.vllm.plugins.modules import gpu_facts
from conftest import REPO, without_processes

FIXTURES = REPO / "tests/unit/fixtures"


class Exit(Exception):
    def __init__(self, kind, result):
        super().__init__(kind)
        self.kind, self.result = kind, result


def _exit_json(self, **kwargs):
    raise Exit("exit", kwargs)


def _fail_json(self, **kwargs):
    raise Exit("fail", kwargs)


def run_module(args, smi_dir=None, smi_path="/usr/bin/nvidia-smi", query_rc=0, query_err="", proc=None):
    calls = []

    def run_command(self, cmd, **kwargs):
        calls.append(cmd)
        if "-x" in cmd:
            xml = FIXTURES / smi_dir / "nvidia-smi-q.xml"
            return (0, xml.read_text(), "") if xml.exists() else (9, "", "no xml")
        if query_rc:
            return query_rc, "", query_err
        return 0, (FIXTURES / smi_dir / "nvidia-smi-query.csv").read_text(), ""

    real_exists = gpu_facts.os.path.exists

    def exists(path):
        if path == args.get("proc_version_path", "/proc/driver/nvidia/version"):
            return proc is not None
        if path == smi_path:
            return True
        return real_exists(path)

    with patch_module_args(args), \
            mock.patch.object(basic.AnsibleModule, "exit_json", _exit_json), \
            mock.patch.object(basic.AnsibleModule, "fail_json", _fail_json), \
            mock.patch.object(basic.AnsibleModule, "run_command", run_command), \
            mock.patch.object(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: smi_path), \
            mock.patch.object(gpu_facts.os.path, "exists", exists), \
            mock.patch.object(gpu_facts, "_read", lambda path: proc), pytest.raises(Exit) as info:
        gpu_facts.main()
    return info.value, calls


def profiles():
    return yaml.safe_load((REPO / "data/catalog.yml").read_text())["profiles"]


@pytest.mark.parametrize("check_mode", [False, True])
def test_h200_is_refused_as_not_blackwell(check_mode):
    args = {"profiles": profiles()}
    if check_mode:
        args["_ansible_check_mode"] = True
    proc = (FIXTURES / "nvidia-h200/proc-driver-nvidia-version.txt").read_text()
    outcome, calls = run_module(args, "nvidia-h200", proc=proc)
    assert outcome.kind == "exit" and outcome.result["changed"] is False
    facts = outcome.result["ansible_facts"]["sparkfleet_gpu"]
    assert facts["names"] == ["NVIDIA H200"] and facts["kernel_module"] == "open"
    assert facts["profile"] is None
    assert "Hopper" in facts["profile_reason"] and "FP4" in facts["profile_reason"]
    assert calls[0][1].startswith("--query-gpu=index,name,") and calls[0][2] == "--format=csv"
    assert calls[1][1:] == ["-q", "-x"]


def test_two_h200_match_the_device_run():
    """Same answer as the module gave on the real two-GPU host (gpu_facts-module.json)."""
    proc = (FIXTURES / "nvidia-h200-x2/proc-driver-nvidia-version.txt").read_text()
    table = json.loads((FIXTURES / "nvidia-h200-x2/profiles.json").read_text())["preflight_profiles"]
    outcome, dummy = run_module({"profiles": table}, "nvidia-h200-x2", proc=proc)
    device = json.loads((FIXTURES / "nvidia-h200-x2/gpu_facts-module.json").read_text())
    facts = outcome.result["ansible_facts"]
    assert {"sparkfleet_gpu": without_processes(facts["sparkfleet_gpu"])} == device["ansible_facts"]


def test_gb10_unified_memory_matches_dgx_spark():
    outcome, dummy = run_module({"profiles": profiles()}, "nvidia-gb10-constructed")
    facts = outcome.result["ansible_facts"]["sparkfleet_gpu"]
    assert facts["profile"] == "dgx_spark" and facts["unified_memory"] is True
    assert facts["memory_total_mib"] == [None] and facts["cuda_version"] == "13.0"
    # Unified memory: the module read this host's /proc as the GB10's memory (tests/unit/plugins/module_utils/
    # test_host_memory.py checks the parsing over captures).
    total = int(pathlib.Path("/proc/meminfo").read_text().split()[1]) // 1024
    assert facts["host_memory"]["total_mib"] == total and facts["host_memory"]["holders"], facts["host_memory"]


def test_without_xml_the_csv_still_answers():
    outcome, calls = run_module({"query_xml": False}, "nvidia-rtx-pro-6000-constructed")
    facts = outcome.result["ansible_facts"]["sparkfleet_gpu"]
    assert len(calls) == 1 and facts["profile"] == "rtx_pro_6000" and facts["cuda_version"] is None


def test_no_nvidia_smi_is_a_fact_not_a_crash():
    outcome, calls = run_module({}, smi_path=None)
    assert outcome.kind == "exit" and calls == []
    facts = outcome.result["ansible_facts"]["sparkfleet_gpu"]
    assert facts["gpu_present"] is False and "nvidia-smi not found" in facts["profile_reason"]


def test_driver_that_does_not_answer_is_a_fact_not_a_crash():
    err = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    outcome, dummy = run_module({}, "nvidia-h200", query_rc=9, query_err=err)
    facts = outcome.result["ansible_facts"]["sparkfleet_gpu"]
    assert outcome.kind == "exit" and facts["gpu_present"] is False
    assert "nvidia-smi exited 9: NVIDIA-SMI has failed" in facts["profile_reason"]


def test_a_version_file_elsewhere_is_read_through_proc_version_path(tmp_path):
    """nvidia_driver's Molecule stand-in keeps the real H200 capture of /proc/driver/nvidia/version in another
    path; the module reads it there (and no other), with no nvidia-smi on the host."""
    capture = (FIXTURES / "nvidia-h200" / "proc-driver-nvidia-version.txt").read_text()
    path = str(tmp_path / "proc-driver-nvidia-version")
    seen = []

    def read(name):
        seen.append(name)
        return capture

    with patch_module_args({"proc_version_path": path, "query_xml": False}), \
            mock.patch.object(basic.AnsibleModule, "exit_json", _exit_json), \
            mock.patch.object(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: None), \
            mock.patch.object(gpu_facts.os.path, "exists", lambda name: name == path), \
            mock.patch.object(gpu_facts, "_read", read), pytest.raises(Exit) as info:
        gpu_facts.main()
    facts = info.value.result["ansible_facts"]["sparkfleet_gpu"]
    assert seen == [path]
    assert not facts["gpu_present"] and facts["driver_branch"] == int(facts["driver_version"].split(".")[0])
    assert facts["kernel_module"] in ("open", "proprietary") and facts["driver_version"] in capture
