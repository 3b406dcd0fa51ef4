# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure parsing of ``nvidia-smi`` output into GPU facts and a hardware profile.

Nothing here runs a command or reads a file: the ``gpu_facts`` module collects
the text and these functions turn it into facts, so unit tests can feed real
captured outputs (tests/unit/fixtures/<gpu>/).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import csv
import re
import xml.etree.ElementTree as ET

# The fields asked of `nvidia-smi --query-gpu`. `compute_cap` needs driver 510+.
QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "driver_version",
    "memory.total",
    "memory.used",
    "memory.free",
    "compute_cap",
    "power.limit",
    "persistence_mode",
    "mig.mode.current",
)

# What nvidia-smi prints when a value does not exist on this GPU; GB10 (unified
# memory) prints these for every framebuffer figure.
_NOT_AVAILABLE = ("[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "")

# Addressing modes that mean the GPU shares the host's memory (GB10 reports ATS).
_UNIFIED_ADDRESSING = ("ats", "hmm")

# Compute capability major -> architecture name, for messages.
_ARCHITECTURES = {
    6: "Pascal",
    7: "Volta/Turing",
    8: "Ampere/Ada Lovelace",
    9: "Hopper",
    10: "Blackwell",
    11: "Blackwell",
    12: "Blackwell",
}
_ARCH_BY_CAP = {"7.5": "Turing", "8.9": "Ada Lovelace", "7.0": "Volta", "7.2": "Volta"}

# Majors with FP4 tensor cores (NVFP4): datacenter Blackwell 10.x, Thor 11.x, GeForce/RTX/GB10 12.x.
FP4_MAJORS = (10, 11, 12)

# Used only when the caller passes no profile table (the role always passes the catalog's `profiles:`): a module
# runs on the host, where the catalog file is not. The catalog is the source of truth: a unit test keeps this copy
# equal to the catalog's patterns, capabilities and memory kind (test_gpu.py::test_builtin_profiles_are_the_catalogs).
DEFAULT_PROFILES = {
    "rtx_pro_6000": {
        "gpu_name_patterns": ["RTX PRO 6000"],
        "compute_capabilities": ["12.0"],
        "unified_memory": False,
    },
    "rtx_5090": {
        "gpu_name_patterns": ["RTX 5090"],
        "compute_capabilities": ["12.0"],
        "unified_memory": False,
    },
    "dgx_spark": {
        "gpu_name_patterns": ["GB10"],
        "compute_capabilities": ["12.1"],
        "unified_memory": True,
    },
}


def not_available(value):
    """True when nvidia-smi reported no value (``[N/A]``, ``[Not Supported]`` ...)."""
    return value is None or str(value).strip().lower() in _NOT_AVAILABLE


def _header_key(header):
    """``memory.total [MiB]`` -> ``memory.total``."""
    return re.sub(r"\s*\[.*\]\s*$", "", header.strip()).strip()


def _number(value, cast=float):
    """Leading number of ``143771 MiB`` / ``700.00 W``; None when not available."""
    if not_available(value):
        return None
    match = re.match(r"\s*(-?\d+(?:\.\d+)?)", str(value))
    if not match:
        return None
    return cast(float(match.group(1))) if cast is int else cast(match.group(1))


def _text(value):
    return None if not_available(value) else str(value).strip()


def parse_query_csv(text):
    """Parse ``nvidia-smi --query-gpu=... --format=csv`` (header line included).

    Returns one dict per GPU, keyed by the query field names (units dropped from
    the header). Values stay strings here; see ``normalise_gpu``.
    """
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return []
    reader = csv.reader(lines, skipinitialspace=True)
    rows = list(reader)
    header = [_header_key(h) for h in rows[0]]
    if "name" not in header and "index" not in header:
        raise ValueError("nvidia-smi CSV has no header line: %r" % lines[0][:120])
    gpus = []
    for row in rows[1:]:
        if not row:
            continue
        gpus.append(dict(zip(header, [cell.strip() for cell in row])))
    return gpus


def parse_query_xml(text):
    """Parse ``nvidia-smi -q -x``: driver/CUDA versions and per-GPU extras.

    Returns ``{"driver_version", "cuda_version", "gpus": {pci_bus_id: {...}}}``
    where each GPU carries ``architecture``, ``addressing_mode`` and
    ``memory_total`` as printed.
    """
    result = {"driver_version": None, "cuda_version": None, "gpus": {}}
    if not text or not text.strip():
        return result
    # nvidia-smi prints a DOCTYPE pointing at a DTD file; ElementTree ignores it.
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError:
        return result
    result["driver_version"] = _text(root.findtext("driver_version"))
    result["cuda_version"] = _text(root.findtext("cuda_version"))
    for gpu in root.findall("gpu"):
        bus_id = gpu.get("id") or gpu.findtext("pci/pci_bus_id") or ""
        result["gpus"][bus_id.lower()] = {
            "name": _text(gpu.findtext("product_name")),
            "architecture": _text(gpu.findtext("product_architecture")),
            "addressing_mode": _text(gpu.findtext("addressing_mode")),
            "memory_total": gpu.findtext("fb_memory_usage/total"),
            "processes": [_process(info) for info in gpu.findall("processes/process_info")],
        }
    return result


def _process(info):
    """One ``<process_info>`` entry: who holds GPU memory (``used_memory`` is printed as "20998 MiB")."""
    return {"pid": _number(info.findtext("pid"), int), "name": _text(info.findtext("process_name")),
            "type": _text(info.findtext("type")), "used_memory_mib": _number(info.findtext("used_memory"), int)}


def parse_proc_driver_version(text):
    """Parse ``/proc/driver/nvidia/version``: version and open/proprietary module."""
    if not text:
        return {"driver_version": None, "kernel_module": None}
    match = re.search(r"NVRM version:\s*(.*?)\s+(\d+\.\d+(?:\.\d+)?)\s", text + " ")
    if not match:
        return {"driver_version": None, "kernel_module": None}
    flavour = "open" if "open kernel module" in match.group(1).lower() else "proprietary"
    return {"driver_version": match.group(2), "kernel_module": flavour}


def architecture(compute_capability):
    """Architecture name for a compute capability string such as ``9.0``."""
    if not compute_capability:
        return "unknown"
    if compute_capability in _ARCH_BY_CAP:
        return _ARCH_BY_CAP[compute_capability]
    try:
        major = int(str(compute_capability).split(".", maxsplit=1)[0])
    except ValueError:
        return "unknown"
    return _ARCHITECTURES.get(major, "unknown")


def driver_branch(version):
    """``580.159.04`` -> 580 (the branch the driver roles compare)."""
    if not version:
        return None
    match = re.match(r"\s*(\d+)", str(version))
    return int(match.group(1)) if match else None


def normalise_gpu(raw, xml_gpu=None):
    """Turn one CSV row (plus its ``-q -x`` entry, if any) into a typed GPU fact."""
    xml_gpu = xml_gpu or {}
    memory_total = _number(raw.get("memory.total"), int)
    addressing = (xml_gpu.get("addressing_mode") or "").lower()
    unified = memory_total is None or addressing in _UNIFIED_ADDRESSING
    cap = _text(raw.get("compute_cap"))
    return {
        "index": _number(raw.get("index"), int),
        "name": _text(raw.get("name")) or xml_gpu.get("name"),
        "uuid": _text(raw.get("uuid")),
        "pci_bus_id": _text(raw.get("pci.bus_id")),
        "compute_capability": cap,
        "architecture": xml_gpu.get("architecture") or architecture(cap),
        "memory_total_mib": memory_total,
        "memory_used_mib": _number(raw.get("memory.used"), int),
        "memory_free_mib": _number(raw.get("memory.free"), int),
        "unified_memory": unified,
        "power_limit_w": _number(raw.get("power.limit")),
        "persistence_mode": _text(raw.get("persistence_mode")),
        "mig_mode": _text(raw.get("mig.mode.current")),
        # Other workloads on the card (from -q -x): vLLM sizes its share against the whole card's memory.
        "processes": list(xml_gpu.get("processes") or []),
    }


def _as_list(value):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


def _profile_patterns(spec):
    """Name patterns of one profile; accepts the catalog's spellings."""
    for key in ("gpu_name_patterns", "gpu_names", "match", "nvidia_smi_names", "gpu_name"):
        if key in spec:
            return _as_list(spec[key])
    return []


def _profile_caps(spec):
    for key in ("compute_capabilities", "compute_capability", "compute_caps"):
        if key in spec:
            return _as_list(spec[key])
    return []


def _profile_matches(spec, gpu, capability_known=True):
    patterns = _profile_patterns(spec)
    if not patterns:
        return False
    name = gpu.get("name") or ""
    if not any(re.search(p, name, re.IGNORECASE) for p in patterns):
        return False
    caps = _profile_caps(spec)
    if not capability_known and gpu.get("compute_capability") is None:
        return True
    return not caps or (gpu.get("compute_capability") in caps)


def profile_for(gpu, profiles, capability_known=True):
    """The one GPU-to-profile rule: the first profile (by name) whose name patterns match ``gpu['name']`` and,
    when the GPU's compute capability is known, whose capabilities include it. ``capability_known=False``
    lets a caller that has only the name (the planner's ``vllm_gpu_name``) match on the name alone."""
    for name, spec in sorted((profiles or {}).items()):
        if isinstance(spec, dict) and _profile_matches(spec, gpu, capability_known):
            return name
    return None


def match_profile(gpus, profiles=None):
    """Pick the hardware profile for these GPUs.

    ``profiles`` maps a profile name to ``{gpu_name_patterns, compute_capabilities}``
    (the catalog's ``profiles:``); profiles without name patterns (the ``cpu``
    stand-in) never match a GPU. Returns ``(profile, reason)``: profile is a
    name, or ``None`` with ``reason`` saying why not, one line.
    """
    profiles = DEFAULT_PROFILES if profiles is None else profiles
    if not gpus:
        return None, "no NVIDIA GPU found (nvidia-smi listed none)"
    matched = []
    for gpu in gpus:
        name = profile_for(gpu, profiles)
        if name is None:
            return None, unsupported_reason(gpu, profiles)
        matched.append(name)
    if len(set(matched)) > 1:
        return None, "mixed GPUs on one host (%s) match different profiles (%s); use one kind per host" % (
            ", ".join(sorted({g.get("name") or "?" for g in gpus})), ", ".join(sorted(set(matched))))
    return matched[0], "%d x %s (compute capability %s) matches profile %s" % (
        len(gpus), gpus[0].get("name"), gpus[0].get("compute_capability"), matched[0])


def unsupported_reason(gpu, profiles=None):
    """One line saying why this GPU fits no profile (Hopper: no FP4 tensor cores)."""
    profiles = DEFAULT_PROFILES if profiles is None else profiles
    name = gpu.get("name") or "unknown GPU"
    cap = gpu.get("compute_capability")
    arch = architecture(cap)
    known = ", ".join(sorted(n for n, s in profiles.items() if isinstance(s, dict) and _profile_patterns(s)))
    try:
        major = int(str(cap).split(".", maxsplit=1)[0])
    except (TypeError, ValueError):
        major = None
    if major is None:
        return "%s reports no compute capability (driver older than 510?); cannot tell whether it is Blackwell" % name
    if major not in FP4_MAJORS:
        return ("%s is compute capability %s (%s); NVFP4 needs Blackwell's FP4 tensor cores (10.x/12.x)"
                % (name, cap, arch))
    return ("%s is compute capability %s (%s) but matches no hardware profile in the catalog (known: %s)"
            % (name, cap, arch, known or "none"))


def build_facts(query_csv, query_xml=None, proc_version=None, profiles=None):
    """Facts from captured outputs; the module's whole logic minus running commands."""
    xml_info = parse_query_xml(query_xml) if query_xml else {"driver_version": None, "cuda_version": None, "gpus": {}}
    proc = parse_proc_driver_version(proc_version)
    raws = parse_query_csv(query_csv)
    gpus = []
    for raw in raws:
        bus = (raw.get("pci.bus_id") or "").lower()
        gpus.append(normalise_gpu(raw, xml_info["gpus"].get(bus)))
    driver = next((r.get("driver_version") for r in raws if not not_available(r.get("driver_version"))), None)
    driver = driver or xml_info["driver_version"] or proc["driver_version"]
    profile, reason = match_profile(gpus, profiles)
    return {
        "gpu_present": bool(gpus),
        "count": len(gpus),
        "names": [g["name"] for g in gpus],
        "gpus": gpus,
        "compute_capabilities": sorted({g["compute_capability"] for g in gpus if g["compute_capability"]}),
        "architectures": sorted({g["architecture"] for g in gpus if g["architecture"]}),
        "memory_total_mib": [g["memory_total_mib"] for g in gpus],
        "unified_memory": any(g["unified_memory"] for g in gpus),
        "driver_version": driver,
        "driver_branch": driver_branch(driver),
        "kernel_module": proc["kernel_module"],
        "cuda_version": xml_info["cuda_version"],
        "profile": profile,
        "profile_supported": profile is not None,
        "profile_reason": reason if profile else "unsupported: %s" % reason,
        "processes": [dict(p, gpu=g["index"]) for g in gpus for p in g["processes"]],
        # Filled by the module on unified memory (module_utils/host_memory.py reads /proc there).
        "host_memory": None,
    }


def absent_facts(reason, proc_version=None):
    """Facts for a host where nvidia-smi is missing or cannot talk to the driver."""
    proc = parse_proc_driver_version(proc_version)
    return {
        "gpu_present": False,
        "count": 0,
        "names": [],
        "gpus": [],
        "compute_capabilities": [],
        "architectures": [],
        "memory_total_mib": [],
        "unified_memory": False,
        "driver_version": proc["driver_version"],
        "driver_branch": driver_branch(proc["driver_version"]),
        "kernel_module": proc["kernel_module"],
        "cuda_version": None,
        "profile": None,
        "profile_supported": False,
        "profile_reason": "unsupported: %s" % reason,
        "processes": [],
        "host_memory": None,
    }
