"""ray_status: Ray's node table judged against the inventory.

Fixtures are real `ray.nodes()` outputs captured from the simulated four-node
cluster (Ray 2.60.0, CPU resources only: the containers stand in for Sparks,
so GPU counts are 0 there and the GPU check is exercised by editing a copy).
"""
import copy
import json
import pathlib

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import ray_status

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "ray_status"
SIM = ["172.29.47.11", "172.29.47.12", "172.29.47.13", "172.29.47.14"]
NAMES = {ip: "sim-%d" % (i + 1) for i, ip in enumerate(SIM)}


def load(name):
    return (FIXTURES / name).read_text()


def test_all_alive_is_whole():
    nodes = ray_status.parse_nodes(load("sim4-ray-2.60.0-all-alive.json"))
    assert sorted(n["ip"] for n in nodes) == SIM
    assert [n["ip"] for n in nodes if n["is_head"]] == ["172.29.47.11"]
    assert all(n["cpus"] == 1.0 and n["gpus"] == 0.0 for n in nodes)
    verdict = ray_status.evaluate(nodes, SIM, NAMES)
    assert verdict["ok"] and verdict["failed_nodes"] == []
    assert verdict["message"] == "all 4 nodes ALIVE on their link addresses"


def test_stopped_worker_is_named():
    nodes = ray_status.parse_nodes(load("sim4-ray-2.60.0-sim-2-stopped.json"))
    verdict = ray_status.evaluate(nodes, SIM, NAMES)
    assert not verdict["ok"]
    assert verdict["dead"] == ["172.29.47.12"]
    assert verdict["failed_nodes"] == ["sim-2"]
    assert "DEAD in Ray: sim-2 (172.29.47.12)" in verdict["message"]


def test_node_missing_from_table_is_named():
    nodes = [n for n in ray_status.parse_nodes(load("sim4-ray-2.60.0-all-alive.json")) if n["ip"] != "172.29.47.14"]
    verdict = ray_status.evaluate(nodes, SIM, NAMES)
    assert verdict["missing"] == ["172.29.47.14"]
    assert "not joined on its link address: sim-4 (172.29.47.14)" in verdict["message"]


def test_node_on_the_wrong_address_is_missing_and_reported():
    raw = json.loads(load("sim4-ray-2.60.0-all-alive.json"))
    for entry in raw:
        if entry["NodeManagerAddress"] == "172.29.47.13":
            entry["NodeManagerAddress"] = "192.168.1.13"  # joined over the management network, not the link
    verdict = ray_status.evaluate(ray_status.parse_nodes(json.dumps(raw)), SIM, NAMES)
    assert not verdict["ok"]
    assert verdict["failed_nodes"] == ["sim-3"]
    assert verdict["unexpected"] == ["192.168.1.13"]
    assert "outside the cluster link" in verdict["message"]


def test_gpu_minimum():
    raw = json.loads(load("sim4-ray-2.60.0-all-alive.json"))
    with_gpus = copy.deepcopy(raw)
    for entry in with_gpus:
        entry["Resources"]["GPU"] = 1.0
    assert ray_status.evaluate(ray_status.parse_nodes(json.dumps(with_gpus)), SIM, NAMES, min_gpus=1)["ok"]
    with_gpus[0]["Resources"].pop("GPU")
    short_ip = with_gpus[0]["NodeManagerAddress"]
    verdict = ray_status.evaluate(ray_status.parse_nodes(json.dumps(with_gpus)), SIM, NAMES, min_gpus=1)
    assert verdict["short_of_gpus"] == [short_ip]
    assert verdict["failed_nodes"] == [NAMES[short_ip]]


def test_restarted_node_counts_once_alive():
    # Ray keeps the DEAD entry of a node's earlier run beside the ALIVE one of its restart.
    raw = json.loads(load("sim4-ray-2.60.0-sim-2-stopped.json")) + [
        dict(json.loads(load("sim4-ray-2.60.0-all-alive.json"))[3], NodeID="restarted")]
    assert raw[-1]["NodeManagerAddress"] == "172.29.47.12" and raw[-1]["Alive"]
    assert ray_status.evaluate(ray_status.parse_nodes(json.dumps(raw)), SIM, NAMES)["ok"]


def test_state_api_shape():
    table = [{"node_id": "a", "node_ip": "10.0.0.1", "state": "ALIVE", "is_head_node": True, "node_name": "spark-01",
              "resources_total": {"CPU": 20.0, "GPU": 1.0}},
             {"node_id": "b", "node_ip": "10.0.0.2", "state": "DEAD", "is_head_node": False, "node_name": "spark-02",
              "resources_total": {"CPU": 20.0, "GPU": 1.0}}]
    nodes = ray_status.parse_nodes("some log line\n" + json.dumps(table))
    verdict = ray_status.evaluate(nodes, ["10.0.0.1", "10.0.0.2"], {"10.0.0.2": "spark-02"}, min_gpus=1)
    assert verdict["failed_nodes"] == ["spark-02"] and verdict["dead"] == ["10.0.0.2"]


@pytest.mark.parametrize("text, message", [
    ("", "no node table"),
    ("2026 WARNING gcs_client: Failed to connect", "no node table"),
    ("[{\"NodeID\": ", "not valid JSON"),
    ("[{\"foo\": 1}]", "unknown node entry shape"),
    ("[1]", "not an object"),
])
def test_bad_probe_output(text, message):
    with pytest.raises(ray_status.RayStatusError, match=message):
        ray_status.parse_nodes(text)
