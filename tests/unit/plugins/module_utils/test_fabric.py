"""fabric.py on a STAND-IN sysfs tree of a DGX Spark node (tests/unit/fixtures/sysfs-dgx-spark-standin,
built by make_tree.py from the kernel's real layout; no Spark was captured) and on the real
no-RoCE H200 host's answer; plus the fabric gate's probe, roles/vllm_cluster/files/nccl_allreduce_bench.py."""
import importlib.util
import json

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import fabric
from conftest import REPO

STANDIN = REPO / "tests/unit/fixtures/sysfs-dgx-spark-standin"
BENCH = REPO / "roles/vllm_cluster/files/nccl_allreduce_bench.py"


def standin_tree(tmp_path, node=1):
    spec = importlib.util.spec_from_file_location("make_tree", STANDIN / "make_tree.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(str(tmp_path), node)
    return str(tmp_path)


def standin_facts(root, link="enp1s0f1np1"):
    return fabric.build_facts(root, (STANDIN / "ip-addr.json").read_text(),
                              (STANDIN / "ibdev2netdev.txt").read_text(), link)


def test_committed_tree_equals_the_builder(tmp_path):
    built = standin_facts(standin_tree(tmp_path))
    assert standin_facts(str(STANDIN / "node1")) == built


def test_link_interface_facts():
    facts = standin_facts(str(STANDIN / "node1"))
    link = facts["link"]
    assert facts["rdma_present"] is True and facts["link_interface_exists"] is True
    assert link["up"] is True and link["mtu"] == 9000 and link["speed_mbps"] == 200000
    assert link["ipv4"] == ["192.168.100.11/24"]
    assert link["hca"] == ["rocep1s0f1"]
    assert link["roce_v2_gid_index"] == 3


def test_every_roce_device_maps_to_its_netdev():
    facts = standin_facts(str(STANDIN / "node1"))
    pairs = {p["device"]: p["netdev"] for p in facts["ibdev2netdev"]}
    for name, dev in facts["rdma_devices"].items():
        assert dev["netdevs"] == [pairs[name]]
        assert facts["netdevs"][pairs[name]]["rdma_devices"] == [name]
    port = facts["rdma_devices"]["rocep1s0f1"]["ports"]["1"]
    assert (port["state"], port["phys_state"], port["link_layer"]) == ("ACTIVE", "LinkUp", "Ethernet")
    down = facts["rdma_devices"]["rocep1s0f0"]["ports"]["1"]
    assert down["state"] == "DOWN" and down["roce_v2_gid_index"] is None
    assert facts["netdevs"]["enP7s7"]["rdma_devices"] == []


def test_link_down_and_missing(tmp_path):
    root = standin_tree(tmp_path, node=2)
    (tmp_path / "sys/class/net/enp1s0f1np1/operstate").write_text("down\n")
    (tmp_path / "sys/class/net/enp1s0f1np1/speed").unlink()
    facts = standin_facts(root)
    assert facts["link"]["up"] is False and facts["link"]["speed_mbps"] is None
    missing = standin_facts(root, link="enp9s0")
    assert missing["link_interface_exists"] is False and missing["link"] is None
    assert standin_facts(root, link=None)["link_interface_exists"] is None


def test_second_node_has_its_own_address(tmp_path):
    facts = fabric.build_facts(standin_tree(tmp_path, node=2), None, None, "enp1s0f1np1")
    gids = facts["rdma_devices"]["rocep1s0f1"]["ports"]["1"]["gids"]
    assert [g["ipv4"] for g in gids if g["ipv4"]] == ["192.168.100.12", "192.168.100.12"]
    assert facts["link"]["roce_v2_gid_index"] == 3 and facts["link"]["ipv4"] == []


def test_host_without_rdma_like_the_real_h200(tmp_path):
    """The real H200 host had an empty /sys/class/infiniband and eth0 at MTU 1400 (fabric_facts-module.json)."""
    device = json.loads((REPO / "tests/unit/fixtures/nvidia-h200-x2/fabric_facts-module.json").read_text())
    real = device["ansible_facts"]["sparkfleet_fabric"]
    (tmp_path / "sys/class/infiniband").mkdir(parents=True)
    for name, info in real["netdevs"].items():
        base = tmp_path / "sys/class/net" / name
        base.mkdir(parents=True)
        (base / "operstate").write_text(info["operstate"] + "\n")
        (base / "mtu").write_text("%d\n" % info["mtu"])
        (base / "address").write_text(info["mac"] + "\n")
        if info["carrier"] is not None:
            (base / "carrier").write_text("%d\n" % info["carrier"])
    (tmp_path / "sys/class/net/lo").mkdir()
    assert fabric.build_facts(str(tmp_path), None, None, "eth0") == real


def test_gid_and_command_parsers():
    assert fabric.gid_to_ipv4("0000:0000:0000:0000:0000:ffff:c0a8:640b") == "192.168.100.11"
    assert fabric.gid_to_ipv4("fe80:0000:0000:0000:4ebb:47ff:fe21:0001") is None
    assert fabric.parse_ibdev2netdev("mlx5_0 port 1 ==> ibp1s0 (Up)\nnoise\n") == [
        {"device": "mlx5_0", "port": 1, "netdev": "ibp1s0", "state": "Up"}]
    addrs = fabric.parse_ip_addr_json((STANDIN / "ip-addr.json").read_text())
    assert addrs == {"enP7s7": ["10.0.0.21/24"], "enp1s0f1np1": ["192.168.100.11/24"]}
    assert fabric.parse_ip_addr_json("") == {}


# --- the fabric gate's probe -------------------------------------------------

def load_bench():
    spec = importlib.util.spec_from_file_location("nccl_allreduce_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bus_bandwidth_is_nccl_tests_formula():
    bench = load_bench()
    assert bench.parse_size("64M") == 64 << 20 and bench.parse_size("1G") == 1 << 30 and bench.parse_size("512") == 512
    algbw, busbw = bench.bus_bandwidth(4 << 30, 0.0123877, 2)
    assert round(algbw, 1) == round(busbw, 1) == 346.7  # n=2: 2(n-1)/n = 1, the figure the H200 pair gave
    assert bench.bus_bandwidth(1e9, 1.0, 4)[1] == pytest.approx(1.5)
    recorded = json.loads((REPO / "tests/unit/fixtures/nvidia-h200-x2/nccl-allreduce-floor1.json").read_text())
    for row in recorded["results"]:
        algbw, busbw = bench.bus_bandwidth(row["size_bytes"], row["time_us"] / 1e6, recorded["world_size"])
        assert busbw == pytest.approx(row["busbw_gbps"], rel=2e-3)
