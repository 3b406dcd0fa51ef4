#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Read NVIDIA GPU facts with nvidia-smi and match a hardware profile
version_added: 1.0.0
description:
  - Runs C(nvidia-smi --query-gpu=... --format=csv) and C(nvidia-smi -q -x) on the target and
    returns GPU names, count, compute capability, driver and CUDA versions and memory per GPU.
  - Unified-memory GPUs (GB10 in the DGX Spark) report no framebuffer size; they get
    C(memory_total_mib=null) and C(unified_memory=true) instead of a failure.
  - Matches the GPUs against the hardware profiles (normally the catalog's C(profiles:), passed by the
    C(preflight) role) and says which profile fits, or C(unsupported) with the reason, for example a
    Hopper GPU that lacks Blackwell's FP4 tensor cores.
  - A host without C(nvidia-smi), or whose driver does not answer, gets C(gpu_present=false) and a reason;
    the module does not fail there.
author:
  - sparkfleet.vllm contributors (@sparkfleet)
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
attributes:
  check_mode:
    support: full
    details: Read-only; runs the same commands in check mode.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  profiles:
    description:
      - Hardware profiles to match, a dict of profile name to a dict with C(gpu_name_patterns)
        (regular expressions searched in the GPU name, case-insensitive) and C(compute_capabilities)
        (list of strings such as C("12.0")).
      - Profiles without name patterns (the C(cpu) stand-in) never match a GPU.
      - When omitted, a minimal built-in table (rtx_pro_6000, rtx_5090, dgx_spark) is used; the
        C(preflight) role passes C(lookup('sparkfleet.vllm.catalog', 'profiles')) instead.
    type: dict
  nvidia_smi_path:
    description:
      - Path of C(nvidia-smi). When omitted it is searched on the PATH.
    type: path
  query_xml:
    description:
      - Also run C(nvidia-smi -q -x) for the CUDA version, architecture name and addressing mode.
    type: bool
    default: true
  proc_version_path:
    description:
      - The loaded driver's version file, read for the driver version and whether its kernel modules are the
        open ones (nvidia-smi cannot tell). Change it only to point at a test stand-in.
    type: path
    default: /proc/driver/nvidia/version
  proc_root:
    description:
      - Where the host's C(meminfo) and processes are read on a unified-memory GPU
        (RV(ansible_facts.sparkfleet_gpu.host_memory)). Change it only to point at a test stand-in.
    type: path
    default: /proc
notes:
  - Needs C(nvidia-smi) from driver 510 or later for C(compute_cap).
seealso:
  - module: sparkfleet.vllm.fabric_facts
"""

EXAMPLES = r"""
- name: Read GPU facts and match the catalog's profiles
  sparkfleet.vllm.gpu_facts:
    profiles: "{{ lookup('sparkfleet.vllm.catalog', 'profiles') }}"

- name: Refuse hosts without a supported GPU
  ansible.builtin.assert:
    that: ansible_facts['sparkfleet_gpu']['profile_supported']
    fail_msg: "{{ ansible_facts['sparkfleet_gpu']['profile_reason'] }}"
"""

RETURN = r"""
ansible_facts:
  description: GPU facts under C(sparkfleet_gpu).
  returned: always
  type: dict
  contains:
    sparkfleet_gpu:
      description: The facts.
      type: dict
      contains:
        gpu_present:
          description: Whether nvidia-smi listed at least one GPU.
          type: bool
          sample: true
        count:
          description: Number of GPUs.
          type: int
          sample: 1
        names:
          description: GPU names as nvidia-smi prints them.
          type: list
          elements: str
          sample: ["NVIDIA H200"]
        gpus:
          description: One dict per GPU (index, name, uuid, pci_bus_id, compute_capability, architecture,
            memory_total_mib, memory_used_mib, memory_free_mib, unified_memory, power_limit_w,
            persistence_mode, mig_mode).
          type: list
          elements: dict
        compute_capabilities:
          description: Distinct compute capabilities.
          type: list
          elements: str
          sample: ["9.0"]
        memory_total_mib:
          description: Framebuffer size per GPU in MiB; C(null) on unified memory.
          type: list
          elements: int
          sample: [143771]
        unified_memory:
          description: Whether a GPU shares host memory (no framebuffer size, or ATS addressing).
          type: bool
          sample: false
        driver_version:
          description: Driver version.
          type: str
          sample: "580.159.04"
        driver_branch:
          description: Driver major version.
          type: int
          sample: 580
        kernel_module:
          description: C(open) or C(proprietary), from /proc/driver/nvidia/version.
          type: str
          sample: open
        cuda_version:
          description: Highest CUDA version the driver supports.
          type: str
          sample: "13.0"
        profile:
          description: Matching hardware profile, or C(null).
          type: str
          sample: rtx_pro_6000
        profile_supported:
          description: Whether a profile matched.
          type: bool
          sample: false
        profile_reason:
          description: One line saying which profile matched, or C(unsupported:) and why not.
          type: str
          sample: "unsupported: NVIDIA H200 is compute capability 9.0 (Hopper); NVFP4 needs Blackwell's FP4
            tensor cores (10.x/12.x)"
        processes:
          description:
            - Processes holding GPU memory (from C(nvidia-smi -q -x)), each with C(pid), C(name), C(type),
              C(used_memory_mib) and the C(gpu) index; empty on an idle card or without the XML query.
            - Preflight warns when it is not empty, because vLLM sizes its share against the whole card.
          type: list
          elements: dict
          sample: [{"pid": 441, "name": "python3", "type": "C", "used_memory_mib": 20998, "gpu": 0}]
        host_memory:
          description:
            - On unified memory (the GPU's memory is the host's), the host's C(total_mib) and C(available_mib) from
              C(/proc/meminfo); C(vllm_mib), what vLLM processes already running hold (a re-run restarts them, so it
              counts as available); C(available_for_server_mib), the two summed; and C(holders), the five largest
              holders of memory (C(pid), C(name), C(mib) resident plus GPU memory, C(vllm)). C(null) on other hosts.
            - Preflight compares C(available_for_server_mib) with what the plan needs.
          type: dict
          sample: {"total_mib": 122502, "available_mib": 18210, "vllm_mib": 0, "available_for_server_mib": 18210,
                   "holders": [{"pid": 2210, "name": "python3", "mib": 96003, "vllm": false}]}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.vllm.plugins.module_utils import gpu as gpu_utils
from ansible_collections.sparkfleet.vllm.plugins.module_utils import host_memory


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def main():
    module = AnsibleModule(
        argument_spec={
            "profiles": {"type": "dict"},
            "nvidia_smi_path": {"type": "path"},
            "query_xml": {"type": "bool", "default": True},
            "proc_version_path": {"type": "path", "default": "/proc/driver/nvidia/version"},
            "proc_root": {"type": "path", "default": "/proc"},
        },
        supports_check_mode=True,
    )
    profiles = module.params["profiles"]
    proc_path = module.params["proc_version_path"]
    proc_version = _read(proc_path) if os.path.exists(proc_path) else None
    smi = module.params["nvidia_smi_path"] or module.get_bin_path("nvidia-smi")
    if not smi or not os.path.exists(smi):
        facts = gpu_utils.absent_facts("nvidia-smi not found (no NVIDIA driver installed?)", proc_version)
        module.exit_json(changed=False, ansible_facts={"sparkfleet_gpu": facts})

    query = "--query-gpu=%s" % ",".join(gpu_utils.QUERY_FIELDS)
    rc, out, err = module.run_command([smi, query, "--format=csv"])
    if rc != 0:
        reason = "nvidia-smi exited %d: %s" % (rc, (err or out).strip().splitlines()[0] if (err or out).strip() else "")
        facts = gpu_utils.absent_facts(reason, proc_version)
        module.exit_json(changed=False, ansible_facts={"sparkfleet_gpu": facts})

    xml_out = None
    if module.params["query_xml"]:
        xml_rc, xml_out, dummy = module.run_command([smi, "-q", "-x"])
        if xml_rc != 0:
            xml_out = None
    try:
        facts = gpu_utils.build_facts(out, xml_out, proc_version, profiles)
    except ValueError as exc:
        module.fail_json(msg="could not parse nvidia-smi output: %s" % exc, stdout=out)
    if facts["unified_memory"]:
        facts["host_memory"] = host_memory.read_host_memory(module.params["proc_root"], facts["processes"])
    module.exit_json(changed=False, ansible_facts={"sparkfleet_gpu": facts})


if __name__ == "__main__":
    main()
