"""The sparkfleet.vllm.plan action plugin: request assembly from inventory, results, refusals.

It runs on the controller only; these tests build it with a stand-in task and
connection (mocks) and check it never uses the connection.
"""
import json
from unittest import mock

import pytest
from ansible.playbook.play_context import PlayContext

from ansible_collections.sparkfleet.vllm.plugins.action import plan as plan_action
from conftest import keyless


def _task(args, check_mode=False):
    task = mock.MagicMock()
    task.args = args
    task.async_val = 0
    task.check_mode = check_mode
    task.diff = False
    task.action = "sparkfleet.vllm.plan"
    return task


def _run(args, task_vars, check_mode=False):
    connection = mock.MagicMock()
    action = plan_action.ActionModule(_task(keyless(args), check_mode), connection, PlayContext(), loader=mock.MagicMock(),
                                      templar=mock.MagicMock(), shared_loader_obj=None)
    result = action.run(task_vars=task_vars)
    assert not connection.exec_command.called and not connection.put_file.called, "the planner must not touch the host"
    return result


def _cluster_vars(host, count=2):
    hosts = ["spark-0%d" % (i + 1) for i in range(count)]
    hostvars = {h: {"ansible_host": "192.0.2.1%d" % (i + 1), "vllm_cluster_link_ip": "192.0.2.10%d" % (i + 1)}
                for i, h in enumerate(hosts)}
    return {"inventory_hostname": host, "groups": {"all": hosts, "vllm_cluster": hosts}, "hostvars": hostvars}


def test_cluster_request_for_a_worker():
    request = plan_action.cluster_request(_cluster_vars("spark-02", 4))
    nodes = request.pop("cluster_nodes")
    assert request == {"node_count": 4, "node_index": 1, "head_address": "192.0.2.101", "node_address": "192.0.2.102"}
    assert nodes[1] == {"host": "spark-02", "address": "192.0.2.102", "machine": "192.0.2.12", "client": "192.0.2.12"}
    assert len(nodes) == 4


def test_cluster_nodes_on_the_controller_are_one_machine():
    """The simulation's local pair: two inventory hosts on the controller share its address by nature."""
    task_vars = _cluster_vars("spark-01")
    for host in task_vars["hostvars"].values():
        host.update(ansible_connection="local", vllm_cluster_link_ip="10.0.0.5")
        del host["ansible_host"]
    nodes = plan_action.cluster_request(task_vars)["cluster_nodes"]
    assert {n["machine"] for n in nodes} == {"the controller"} and {n["address"] for n in nodes} == {"10.0.0.5"}


def test_group_request_names_the_groups_that_list_the_host():
    task_vars = _cluster_vars("spark-01")
    assert plan_action.group_request(task_vars) == {"host": "spark-01", "host_groups": ["vllm_cluster"],
                                                    "client_address": "192.0.2.11"}
    task_vars["groups"]["vllm_single"] = ["spark-01"]
    assert plan_action.group_request(task_vars)["host_groups"] == ["vllm_single", "vllm_cluster"]


def test_clients_are_pointed_at_the_management_address():
    """The plan's endpoint.url uses the host's ansible_host (where Ansible and clients reach it), not the cluster
    link address; without ansible_host, the inventory name."""
    task_vars = _cluster_vars("spark-02")
    assert plan_action.group_request(task_vars)["client_address"] == "192.0.2.12"
    del task_vars["hostvars"]["spark-02"]["ansible_host"]
    assert plan_action.group_request(task_vars)["client_address"] == "spark-02"


def test_a_host_in_both_groups_is_refused_with_its_name():
    task_vars = _cluster_vars("spark-02")
    task_vars["groups"]["vllm_single"] = ["spark-02"]
    result = _run({"profile": "dgx_spark"}, task_vars)
    assert result["failed"] and result["rule"] == "host-groups"
    assert "host spark-02 is listed in both vllm_single and vllm_cluster" in result["msg"]


def test_duplicate_link_addresses_are_refused_with_both_hosts():
    task_vars = _cluster_vars("spark-01")
    task_vars["hostvars"]["spark-02"]["vllm_cluster_link_ip"] = "192.0.2.101"
    result = _run({"profile": "dgx_spark"}, task_vars)
    assert result["failed"] and result["rule"] == "cluster-link-ip"
    assert "vllm_cluster_link_ip 192.0.2.101 is set for both spark-01 and spark-02" in result["msg"]


def test_cluster_request_falls_back_to_ansible_host():
    task_vars = _cluster_vars("spark-01")
    for host in task_vars["hostvars"].values():
        del host["vllm_cluster_link_ip"]
    assert plan_action.cluster_request(task_vars)["head_address"] == "192.0.2.11"


def test_single_host_outside_the_cluster_group():
    task_vars = {"inventory_hostname": "rtx-pro-01", "groups": {"all": ["rtx-pro-01"], "vllm_single": ["rtx-pro-01"]}}
    assert plan_action.cluster_request(task_vars) == {"node_count": 1, "node_index": 0}


def test_plans_a_single_node(tmp_path):
    result = _run({"profile": "rtx_pro_6000", "model": "31B", "drafter": "dflash", "plan_dir": str(tmp_path), "port": ""},
                  {"inventory_hostname": "rtx-pro-01", "groups": {}})
    assert not result.get("failed") and result["changed"] is False
    assert result["plan"]["argv"][0] == "unsloth/gemma-4-31B-it-NVFP4"
    assert result["plan_file"] == str(tmp_path / "rtx-pro-01.json")
    assert result["summary"][0].startswith("rtx-pro-01: 31b + dflash on rtx_pro_6000")
    json.dumps(result["plan"])  # the plan is plain JSON


def test_check_mode_plans_the_same():
    args = {"profile": "rtx_5090"}
    task_vars = {"inventory_hostname": "x", "groups": {}}
    assert _run(args, task_vars, check_mode=True)["plan"] == _run(args, task_vars)["plan"]


def test_cluster_roles_come_from_the_inventory_group():
    head = _run({"profile": "dgx_spark", "executor": "mp"}, _cluster_vars("spark-01"))["plan"]
    worker = _run({"profile": "dgx_spark", "executor": "mp"}, _cluster_vars("spark-02"))["plan"]
    assert (head["node_role"], worker["node_role"]) == ("head", "worker")
    assert "--headless" in worker["argv"] and worker["env"]["VLLM_HOST_IP"] == "192.0.2.102"
    assert head["argv"][head["argv"].index("--master-addr") + 1] == "192.0.2.101"


def test_explicit_node_count_overrides_the_group():
    result = _run({"profile": "dgx_spark", "node_count": 1}, _cluster_vars("spark-01"))
    assert result["plan"]["node_role"] == "single"


def test_refusal_fails_with_the_reason_on_stderr(capsys):
    result = _run({"profile": "rtx_pro_6000", "model": "e4b", "max_model_len": 262144}, {"inventory_hostname": "h"})
    assert result["failed"] is True and result["refused"] is True and result["rule"] == "max-model-len"
    assert "plan refused for h: e4b supports at most 131072 tokens of context" in result["msg"]
    assert "e4b supports at most 131072" in capsys.readouterr().err


def test_unknown_argument_is_refused():
    result = _run({"profile": "rtx_pro_6000", "modle": "31b"}, {"inventory_hostname": "h"})
    assert result["failed"] is True and "unsupported parameters for sparkfleet.vllm.plan: modle" in result["msg"]


def test_bad_catalog_path_is_reported():
    result = _run({"profile": "rtx_pro_6000", "catalog_path": "/nonexistent/catalog.yml"}, {"inventory_hostname": "h"})
    assert result["failed"] is True and "catalog not found" in result["msg"]


@pytest.mark.parametrize("key", ["api_key"])
def test_secret_never_in_the_result(key):
    result = _run({"profile": "rtx_pro_6000", key: "sk-0123456789abcdef"}, {"inventory_hostname": "h"})
    assert "sk-0123456789abcdef" not in json.dumps(result)
    assert "VLLM_API_KEY" in result["plan"]["secret_env"]


def test_writes_the_plan_file_once(tmp_path):
    args = {"profile": "rtx_pro_6000", "plan_dir": str(tmp_path / "plans"), "write": True}
    task_vars = {"inventory_hostname": "rtx-pro-01"}
    first = _run(args, task_vars)
    path = tmp_path / "plans" / "rtx-pro-01.json"
    assert first["changed"] is True and json.loads(path.read_text()) == first["plan"]
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert _run(args, task_vars)["changed"] is False, "an unchanged plan is not rewritten"


def test_check_mode_writes_no_file(tmp_path):
    result = _run({"profile": "rtx_pro_6000", "plan_dir": str(tmp_path / "plans"), "write": True},
                  {"inventory_hostname": "h"}, check_mode=True)
    assert result["changed"] is True and not (tmp_path / "plans").exists()


def test_refused_plan_writes_no_file(tmp_path):
    result = _run({"profile": "rtx_pro_6000", "model": "nope", "plan_dir": str(tmp_path), "write": True},
                  {"inventory_hostname": "h"})
    assert result["failed"] is True and list(tmp_path.iterdir()) == []
