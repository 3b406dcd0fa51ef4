# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read the RoCE fabric from sysfs: RDMA devices, their netdevs, link state, MTU, GIDs.

Every reader takes a ``root`` path (``/`` on a host) so unit tests point it at a
fake sysfs tree; the parsers of command output (``ibdev2netdev``, ``ip -j addr``)
take text. Nothing here runs a command.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re

IB_CLASS = "sys/class/infiniband"
NET_CLASS = "sys/class/net"
_ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def _read(path):
    """Stripped file content, or None when absent or unreadable (sysfs raises EINVAL on a down link's speed)."""
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except (IOError, OSError):
        return []


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _state_word(value):
    """``4: ACTIVE`` -> ``ACTIVE``; ``5: LinkUp`` -> ``LinkUp``."""
    if value is None:
        return None
    return value.split(":", 1)[-1].strip()


def gid_to_ipv4(gid):
    """``0000:0000:0000:0000:0000:ffff:c0a8:6401`` -> ``192.168.100.1``; None for non-IPv4-mapped GIDs."""
    groups = (gid or "").lower().split(":")
    if len(groups) != 8 or groups[:6] != ["0000"] * 5 + ["ffff"]:
        return None
    try:
        high, low = int(groups[6], 16), int(groups[7], 16)
    except ValueError:
        return None
    return "%d.%d.%d.%d" % (high >> 8, high & 255, low >> 8, low & 255)


def read_gids(port_path):
    """Non-empty GID table entries of one port: index, gid, type, netdev, ipv4."""
    entries = []
    for name in _listdir(os.path.join(port_path, "gids")):
        index = _int(name)
        if index is None:
            continue
        gid = _read(os.path.join(port_path, "gids", name))
        if not gid or gid == _ZERO_GID:
            continue
        entries.append({
            "index": index,
            "gid": gid,
            "type": _read(os.path.join(port_path, "gid_attrs", "types", name)),
            "netdev": _read(os.path.join(port_path, "gid_attrs", "ndevs", name)),
            "ipv4": gid_to_ipv4(gid),
        })
    return sorted(entries, key=lambda e: e["index"])


def roce_v2_gid_index(gids, netdev=None):
    """The GID index NCCL_IB_GID_INDEX wants: RoCE v2 with an IPv4-mapped address, on ``netdev`` if given."""
    for entry in gids:
        if (entry.get("type") or "").lower().replace(" ", "") != "rocev2" or not entry.get("ipv4"):
            continue
        if netdev and entry.get("netdev") and entry["netdev"] != netdev:
            continue
        return entry["index"]
    return None


def read_netdev(root, name):
    """One network interface from /sys/class/net: operstate, carrier, MTU, MAC, speed."""
    base = os.path.join(root, NET_CLASS, name)
    if not os.path.isdir(base):
        return None
    speed = _int(_read(os.path.join(base, "speed")))
    return {
        "name": name,
        "operstate": _read(os.path.join(base, "operstate")),
        "carrier": _int(_read(os.path.join(base, "carrier"))),
        "mtu": _int(_read(os.path.join(base, "mtu"))),
        "mac": _read(os.path.join(base, "address")),
        "speed_mbps": speed if speed is not None and speed > 0 else None,
        "ipv4": [],
        "rdma_devices": [],
    }


def read_rdma_devices(root):
    """RDMA devices under /sys/class/infiniband with their ports, netdevs and GIDs."""
    devices = {}
    for dev in _listdir(os.path.join(root, IB_CLASS)):
        base = os.path.join(root, IB_CLASS, dev)
        netdevs = _listdir(os.path.join(base, "device", "net"))
        ports = {}
        for port in _listdir(os.path.join(base, "ports")):
            port_path = os.path.join(base, "ports", port)
            gids = read_gids(port_path)
            ports[port] = {
                "state": _state_word(_read(os.path.join(port_path, "state"))),
                "phys_state": _state_word(_read(os.path.join(port_path, "phys_state"))),
                "link_layer": _read(os.path.join(port_path, "link_layer")),
                "rate": _read(os.path.join(port_path, "rate")),
                "gids": gids,
                "roce_v2_gid_index": roce_v2_gid_index(gids),
            }
        devices[dev] = {
            "name": dev,
            "netdevs": netdevs,
            "node_guid": _read(os.path.join(base, "node_guid")),
            "fw_ver": _read(os.path.join(base, "fw_ver")),
            "ports": ports,
        }
    return devices


def list_netdevs(root):
    return [n for n in _listdir(os.path.join(root, NET_CLASS)) if n != "lo"]


def parse_ibdev2netdev(text):
    """``mlx5_0 port 1 ==> enp1s0f0np0 (Up)`` lines -> list of dicts."""
    pairs = []
    for line in (text or "").splitlines():
        match = re.match(r"\s*(\S+)\s+port\s+(\d+)\s+==>\s+(\S+)\s+\((\w+)\)", line)
        if match:
            pairs.append({"device": match.group(1), "port": int(match.group(2)),
                          "netdev": match.group(3), "state": match.group(4)})
    return pairs


def parse_ip_addr_json(text):
    """``ip -j -4 addr show`` -> {ifname: [\"a.b.c.d/nn\", ...]}."""
    if not text or not text.strip():
        return {}
    result = {}
    for link in json.loads(text):
        addrs = ["%s/%s" % (a["local"], a["prefixlen"]) for a in link.get("addr_info", [])
                 if a.get("family") == "inet" and "local" in a]
        result[link.get("ifname")] = addrs
    return result


def build_facts(root, ip_addr_json=None, ibdev2netdev_text=None, link_interface=None):
    """Whole fabric picture; ``link_interface`` is the cluster link (e.g. enp1s0f1np1)."""
    devices = read_rdma_devices(root)
    addresses = parse_ip_addr_json(ip_addr_json)
    ibdev = parse_ibdev2netdev(ibdev2netdev_text)
    netdevs = {}
    for name in list_netdevs(root):
        info = read_netdev(root, name)
        if info is not None:
            info["ipv4"] = addresses.get(name, [])
            netdevs[name] = info
    for dev in devices.values():
        for net in dev["netdevs"]:
            if net in netdevs:
                netdevs[net]["rdma_devices"].append(dev["name"])
    # ibdev2netdev knows pairs that sysfs may hide (e.g. inside some containers).
    for pair in ibdev:
        if pair["netdev"] in netdevs and pair["device"] not in netdevs[pair["netdev"]]["rdma_devices"]:
            netdevs[pair["netdev"]]["rdma_devices"].append(pair["device"])
    link = None
    if link_interface:
        link = netdevs.get(link_interface)
        if link is not None:
            link = dict(link)
            link["hca"] = list(link["rdma_devices"])
            link["roce_v2_gid_index"] = None
            for dev in link["hca"]:
                for port in devices.get(dev, {}).get("ports", {}).values():
                    index = roce_v2_gid_index(port["gids"], link_interface)
                    if index is not None:
                        link["roce_v2_gid_index"] = index
                        break
                if link["roce_v2_gid_index"] is not None:
                    break
            link["up"] = link["operstate"] == "up"
    return {
        "rdma_present": bool(devices),
        "rdma_devices": devices,
        "netdevs": netdevs,
        "ibdev2netdev": ibdev,
        "link_interface": link_interface,
        "link_interface_exists": link is not None if link_interface else None,
        "link": link,
    }
