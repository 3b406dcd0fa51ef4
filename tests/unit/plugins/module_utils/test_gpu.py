"""gpu.py on captured nvidia-smi outputs.

Real captures: nvidia-h200 (one H200) and nvidia-h200-x2 (two H200s, taken by
tests/harness/device/capture.sh). Constructed, not captured (no such machine was
available): nvidia-gb10-constructed (DGX Spark, unified memory),
nvidia-rtx-pro-6000-constructed, nvidia-rtx-5090-constructed. See
tests/unit/fixtures/README.md.
"""
import json

import pytest
import yaml

from ansible_collections.sparkfleet.vllm.plugins.module_utils import gpu
from conftest import REPO, without_processes

FIXTURES = REPO / "tests/unit/fixtures"


def _read(name, filename):
    path = FIXTURES / name / filename
    return path.read_text() if path.exists() else None


def catalog_profiles():
    return yaml.safe_load((REPO / "data/catalog.yml").read_text())["profiles"]


# fixture dir -> what the capture shows (read off the files themselves)
CASES = {
    "nvidia-h200": {
        "count": 1, "name": "NVIDIA H200", "cap": "9.0", "mem": [143771], "unified": False,
        "driver": "580.159.04", "branch": 580, "cuda": "13.0", "module": "open", "profile": None,
        "reason": "NVIDIA H200 is compute capability 9.0 (Hopper); NVFP4 needs Blackwell's FP4 tensor cores"},
    "nvidia-h200-x2": {
        "count": 2, "name": "NVIDIA H200", "cap": "9.0", "mem": [143771, 143771], "unified": False,
        "driver": "580.159.04", "branch": 580, "cuda": "13.0", "module": "open", "profile": None,
        "reason": "(Hopper); NVFP4 needs Blackwell's FP4 tensor cores (10.x/12.x)"},
    "nvidia-gb10-constructed": {
        "count": 1, "name": "NVIDIA GB10", "cap": "12.1", "mem": [None], "unified": True,
        "driver": "580.95.05", "branch": 580, "cuda": "13.0", "module": "open",
        "profile": "dgx_spark", "reason": "matches profile dgx_spark"},
    "nvidia-rtx-pro-6000-constructed": {
        "count": 1, "name": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        "cap": "12.0", "mem": [97887], "unified": False, "driver": "580.95.05",
        "branch": 580, "cuda": None, "module": None, "profile": "rtx_pro_6000",
        "reason": "matches profile rtx_pro_6000"},
    "nvidia-rtx-5090-constructed": {
        "count": 1, "name": "NVIDIA GeForce RTX 5090", "cap": "12.0", "mem": [32607],
        "unified": False, "driver": "580.95.05", "branch": 580, "cuda": None, "module": None,
        "profile": "rtx_5090", "reason": "matches profile rtx_5090"},
}


def build(name, profiles):
    return gpu.build_facts(_read(name, "nvidia-smi-query.csv"), _read(name, "nvidia-smi-q.xml"),
                           _read(name, "proc-driver-nvidia-version.txt"), profiles)


@pytest.mark.parametrize("profiles_source", ["catalog", "builtin"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_facts_from_capture(name, profiles_source):
    want = CASES[name]
    facts = build(name, catalog_profiles() if profiles_source == "catalog" else None)
    assert facts["gpu_present"] is True
    assert facts["count"] == want["count"] == len(facts["gpus"])
    assert set(facts["names"]) == {want["name"]}
    assert facts["compute_capabilities"] == [want["cap"]]
    assert facts["memory_total_mib"] == want["mem"]
    assert facts["unified_memory"] is want["unified"]
    assert facts["driver_version"] == want["driver"]
    assert facts["driver_branch"] == want["branch"]
    assert facts["cuda_version"] == want["cuda"]
    assert facts["kernel_module"] == want["module"]
    assert facts["profile"] == want["profile"]
    assert facts["profile_supported"] is (want["profile"] is not None)
    assert want["reason"] in facts["profile_reason"]
    if want["profile"] is None:
        assert facts["profile_reason"].startswith("unsupported: ")


def test_indices_and_bus_ids_follow_the_capture():
    facts = build("nvidia-h200-x2", None)
    assert [g["index"] for g in facts["gpus"]] == [0, 1]
    assert [g["pci_bus_id"] for g in facts["gpus"]] == ["00000000:00:06.0", "00000000:00:07.0"]
    assert all(g["architecture"] == "Hopper" for g in facts["gpus"])


@pytest.mark.parametrize("name", ["nvidia-h200-x2"])
def test_local_parse_equals_what_the_module_returned_on_the_device(name):
    """The module ran on the real host (capture.sh); parsing the same capture here gives the same facts."""
    device = json.loads(_read(name, "gpu_facts-module.json"))["ansible_facts"]["sparkfleet_gpu"]
    profiles = json.loads(_read(name, "profiles.json"))["preflight_profiles"]
    assert without_processes(build(name, profiles)) == device
    builtin = json.loads(_read(name, "gpu_facts-builtin-profiles.json"))["ansible_facts"]["sparkfleet_gpu"]
    assert without_processes(build(name, None)) == builtin


def test_other_processes_on_the_card_are_listed_with_their_memory():
    """A real H200 while another process holds 20 GiB (tests/unit/fixtures/nvidia-h200-busy)."""
    busy = FIXTURES / "nvidia-h200-busy"
    csv = _read("nvidia-h200", "nvidia-smi-query.csv")
    facts = gpu.build_facts(csv, (busy / "nvidia-smi-q-with-process.xml").read_text(), None, None)
    # nvidia-smi --query-compute-apps printed the same process: "441, python3, 20998 MiB".
    assert "441, python3, 20998 MiB" in (busy / "nvidia-smi-compute-apps.csv").read_text()
    assert facts["processes"] == [{"pid": 441, "name": "python3", "type": "C", "used_memory_mib": 20998, "gpu": 0}]
    assert facts["gpus"][0]["processes"] == [{"pid": 441, "name": "python3", "type": "C", "used_memory_mib": 20998}]
    assert build("nvidia-h200", None)["processes"] == []


def test_unified_memory_csv_alone_is_enough():
    """Without -q -x, GB10's [N/A] memory still marks unified memory."""
    facts = gpu.build_facts(_read("nvidia-gb10-constructed", "nvidia-smi-query.csv"), None, None, None)
    assert facts["unified_memory"] is True
    assert facts["gpus"][0]["memory_total_mib"] is None
    assert facts["gpus"][0]["power_limit_w"] is None
    assert facts["profile"] == "dgx_spark"


def test_not_supported_spelling_is_not_available():
    csv = _read("nvidia-gb10-constructed", "nvidia-smi-query.csv").replace("[N/A]", "[Not Supported]")
    facts = gpu.build_facts(csv, None, None, None)
    assert facts["memory_total_mib"] == [None]
    assert facts["unified_memory"] is True


def test_cpu_stand_in_profile_never_matches_a_gpu():
    profiles = catalog_profiles()
    assert "cpu" in profiles
    for name in CASES:
        assert build(name, profiles)["profile"] != "cpu"


def test_blackwell_without_a_profile_says_so():
    csv = _read("nvidia-h200", "nvidia-smi-query.csv").replace("NVIDIA H200", "NVIDIA B200").replace(", 9.0,", ", 10.0,")
    facts = gpu.build_facts(csv, None, None, catalog_profiles())
    assert facts["profile"] is None
    assert "compute capability 10.0 (Blackwell) but matches no hardware profile" in facts["profile_reason"]


def test_mixed_gpus_are_refused():
    rtx = _read("nvidia-rtx-pro-6000-constructed", "nvidia-smi-query.csv").splitlines()
    five = _read("nvidia-rtx-5090-constructed", "nvidia-smi-query.csv").splitlines()[1].replace("0, NVIDIA", "1, NVIDIA")
    facts = gpu.build_facts("\n".join(rtx + [five]), None, None, catalog_profiles())
    assert facts["count"] == 2 and facts["profile"] is None
    assert "mixed GPUs" in facts["profile_reason"]


def test_proc_version_tells_open_from_proprietary():
    assert gpu.parse_proc_driver_version(_read("nvidia-h200", "proc-driver-nvidia-version.txt")) == {
        "driver_version": "580.159.04", "kernel_module": "open"}
    prop = _read("nvidia-rtx-5090-constructed", "proc-driver-nvidia-version-proprietary.txt")
    assert gpu.parse_proc_driver_version(prop) == {"driver_version": "550.127.05", "kernel_module": "proprietary"}


def test_absent_facts_and_no_header():
    facts = gpu.absent_facts("nvidia-smi not found")
    assert facts["gpu_present"] is False and facts["profile_reason"] == "unsupported: nvidia-smi not found"
    assert gpu.parse_query_csv("") == []
    with pytest.raises(ValueError):
        gpu.parse_query_csv("0, NVIDIA H200, 9.0\n")
    assert gpu.parse_query_xml("<not xml")["cuda_version"] is None


def test_query_fields_match_the_captures():
    """capture.sh and the module ask for the same fields the parser reads."""
    header = _read("nvidia-h200-x2", "nvidia-smi-query.csv").splitlines()[0]
    assert [gpu._header_key(h) for h in header.split(",")] == list(gpu.QUERY_FIELDS)
    script = (REPO / "tests/harness/device/capture.sh").read_text()
    assert "fields=" + ",".join(gpu.QUERY_FIELDS) in script


def test_builtin_profiles_are_the_catalogs():
    """DEFAULT_PROFILES (the fallback a module uses on a host, where the catalog file is not) is the catalog's
    GPU profiles, pattern for pattern: a profile added or changed in the catalog fails here until it is copied."""
    expected = {name: {"gpu_name_patterns": spec["gpu_name_patterns"], "compute_capabilities": spec["compute_capabilities"],
                       "unified_memory": bool(spec.get("unified_memory"))}
                for name, spec in catalog_profiles().items() if spec.get("gpu_name_patterns")}
    assert expected == gpu.DEFAULT_PROFILES


@pytest.mark.parametrize("name,cap,profile", [
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0", "rtx_pro_6000"),
    ("NVIDIA GeForce RTX 5090", "12.0", "rtx_5090"),
    ("NVIDIA GB10", "12.1", "dgx_spark"),
    ("NVIDIA GB10", "12.0", None),
    ("NVIDIA H200", "9.0", None),
])
def test_one_rule_for_facts_and_planner(name, cap, profile):
    """gpu_facts (name and capability) and the planner (vllm_gpu_name, capability when known) use one function."""
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat

    catalog = cat.load_catalog()
    assert gpu.profile_for({"name": name, "compute_capability": cap}, catalog["profiles"]) == profile
    assert cat.profile_from_gpu_name(catalog, name, cap) == profile
    if profile:
        assert cat.profile_from_gpu_name(catalog, name) == profile, "the name alone still matches"
