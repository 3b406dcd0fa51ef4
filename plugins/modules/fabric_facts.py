#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_facts
short_description: Read the RoCE fabric (RDMA devices, netdevs, link state, MTU, GID index)
version_added: 1.0.0
description:
  - Reads C(/sys/class/infiniband) and C(/sys/class/net) for RDMA devices, their ports' state and
    link layer, their network interfaces, MTU and operational state.
  - Adds IPv4 addresses from C(ip -j -4 addr show) and the device/netdev pairs from
    C(ibdev2netdev) when those commands exist.
  - For the cluster link interface, returns whether it exists and is up, its MTU and IPv4 addresses,
    the RDMA devices (HCAs) behind it and the RoCE v2 GID index to give C(NCCL_IB_GID_INDEX).
  - A host without RDMA devices gets C(rdma_present=false); the module does not fail there.
author:
  - sparkfleet.vllm contributors (@sparkfleet)
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
attributes:
  check_mode:
    support: full
    details: Read-only.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  link_interface:
    description:
      - The cluster link's network interface (on a DGX Spark, one of the ConnectX-7 ports such as
        C(enp1s0f1np1)). When omitted, C(link) is null.
    type: str
  root:
    description:
      - Directory to read C(sys/class/...) under. Only tests change it.
    type: path
    default: /
"""

EXAMPLES = r"""
- name: Read the fabric on every cluster node
  sparkfleet.vllm.fabric_facts:
    link_interface: enp1s0f1np1

- name: Show the RoCE v2 GID index NCCL should use
  ansible.builtin.debug:
    msg: "{{ ansible_facts['sparkfleet_fabric']['link']['roce_v2_gid_index'] }}"
"""

RETURN = r"""
ansible_facts:
  description: Fabric facts under C(sparkfleet_fabric).
  returned: always
  type: dict
  contains:
    sparkfleet_fabric:
      description: The facts.
      type: dict
      contains:
        rdma_present:
          description: Whether any RDMA device exists.
          type: bool
          sample: true
        rdma_devices:
          description: RDMA devices by name, each with C(netdevs), C(fw_ver) and C(ports) (state,
            phys_state, link_layer, rate, gids, roce_v2_gid_index).
          type: dict
        netdevs:
          description: Network interfaces by name (operstate, carrier, mtu, mac, speed_mbps, ipv4,
            rdma_devices).
          type: dict
        ibdev2netdev:
          description: Pairs printed by C(ibdev2netdev), empty when the tool is absent.
          type: list
          elements: dict
        link_interface:
          description: The interface asked for.
          type: str
          sample: enp1s0f1np1
        link_interface_exists:
          description: Whether it exists (null when none was asked for).
          type: bool
          sample: true
        link:
          description: The link interface's entry plus C(up), C(hca) and C(roce_v2_gid_index).
          type: dict
          sample:
            name: enp1s0f1np1
            operstate: up
            up: true
            mtu: 9000
            ipv4: ["192.168.100.10/24"]
            hca: ["rocep1s0f1"]
            roce_v2_gid_index: 3
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.vllm.plugins.module_utils import fabric


def _optional(module, name, args):
    path = module.get_bin_path(name)
    if not path:
        return None
    rc, out, dummy = module.run_command([path] + args)
    return out if rc == 0 else None


def main():
    module = AnsibleModule(
        argument_spec={
            "link_interface": {"type": "str"},
            "root": {"type": "path", "default": "/"},
        },
        supports_check_mode=True,
    )
    ip_json = _optional(module, "ip", ["-j", "-4", "addr", "show"])
    ibdev = _optional(module, "ibdev2netdev", [])
    try:
        facts = fabric.build_facts(module.params["root"], ip_json, ibdev, module.params["link_interface"])
    except ValueError as exc:
        module.fail_json(msg="could not read the fabric: %s" % exc)
    module.exit_json(changed=False, ansible_facts={"sparkfleet_fabric": facts})


if __name__ == "__main__":
    main()
