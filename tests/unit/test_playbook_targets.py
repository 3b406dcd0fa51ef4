"""Which hosts each play targets, and which plays escalate (docs/security.md, "Privilege escalation").

* No play targets `all` by default: single-node plays take vllm_single, cluster plays
  vllm_cluster, host set-up and the plan the union. Each keeps its override variable.
* On every shipped inventory, the new defaults pick exactly the hosts the old ones did
  (`all` for host set-up, preflight and the plan; `all:!vllm_cluster` for single-node plays).
* The plays that change a host say `become: true`; the read-only ones (plan, preflight,
  status, verify) do not escalate at play level.
"""
import re

import pytest
import yaml

from conftest import REPO

PLAYBOOKS = sorted((REPO / "playbooks").glob("*.yml"))
INVENTORIES = sorted(p for p in (REPO / "inventories").iterdir() if (p / "hosts.yml").exists())
DEFAULT = re.compile(r"^\{\{\s*(\w+)\s*\|\s*default\('([^']*)'\)\s*\}\}(\[0\])?$")
# The plays that take single nodes and a cluster together name the cluster through cluster_group, as the
# cluster plays do (-e cluster_group=<group> runs site.yml on a cluster made of another group).
UNION = re.compile(r"^\{\{\s*(\w+)\s*\|\s*default\('vllm_single:' ~ \(cluster_group \| default\('vllm_cluster'\)\)\)\s*\}\}$")


# The cluster's group, written once for every play (playbooks/vars/cluster_group.yml, loaded by vars_files):
# a hosts line that names it is read with the expression it stands for.
SHARED_GROUP = yaml.safe_load((REPO / "playbooks/vars/cluster_group.yml").read_text())["__cluster_group"]
SHARED_EXPR = SHARED_GROUP.strip("{} ")


# A play of cluster.yml narrowed to the group's hosts of one planned topology: the group the plan play sorts them into
# (group_by: sparkfleet_tensor_parallel or sparkfleet_replicas), intersected with the overridable target.
TOPOLOGY_GROUP = re.compile(r"(\[0\])?:&sparkfleet_(tensor_parallel|replicas)$")


def default_target(hosts):
    """(override variable, default pattern) of a play's hosts, or None when it has no overridable default."""
    hosts = TOPOLOGY_GROUP.sub("", hosts)
    hosts = re.sub(r"^\{\{\s*__cluster_group\s*\}\}", "{{ %s }}" % SHARED_EXPR, hosts)
    hosts = hosts.replace("__cluster_group", "(%s)" % SHARED_EXPR)
    union = UNION.match(hosts)
    if union:
        return union.group(1), "vllm_single:vllm_cluster"
    found = DEFAULT.match(hosts)
    return (found.group(1), found.group(2)) if found else None


# playbook -> (override variable, new default, the default before the change)
TARGETS = {
    "plan.yml": ("plan_hosts", "vllm_single:vllm_cluster", "all"),
    "host.yml": ("host_hosts", "vllm_single:vllm_cluster", "all"),
    "preflight.yml": ("preflight_hosts", "vllm_single:vllm_cluster", "all"),
    "serve.yml": ("vllm_serve_hosts", "vllm_single", "all:!vllm_cluster"),
    "stop.yml": ("vllm_serve_hosts", "vllm_single", "all:!vllm_cluster"),
    "status.yml": ("vllm_serve_hosts", "vllm_single", "all:!vllm_cluster"),
    "verify.yml": ("vllm_serve_hosts", "vllm_single", "all:!vllm_cluster"),
    "bench.yml": ("vllm_serve_hosts", "vllm_single", "all:!vllm_cluster"),
    "cluster.yml": ("cluster_group", "vllm_cluster", "vllm_cluster"),
    "cluster_status.yml": ("cluster_group", "vllm_cluster", "vllm_cluster"),
    "cluster_stop.yml": ("cluster_group", "vllm_cluster", "vllm_cluster"),
}
# (playbook, play name) of every play that changes a host: each escalates.
ESCALATING = {
    ("host.yml", "NVIDIA driver"),
    ("host.yml", "Admit new cluster members to a loaded firewall"),
    ("host.yml", "Docker and the NVIDIA Container Toolkit"),
    ("serve.yml", "Serve vLLM on single-node hosts"),
    ("stop.yml", "Stop vLLM on single-node hosts"),
    ("cluster.yml", "Run the cluster under systemd"),
    ("cluster.yml", "Put the API gateway in front of the head"),
    ("cluster_stop.yml", "Stop every replica's server"),
    ("cluster_stop.yml", "Stop vLLM on every rank"),
    ("cluster_stop.yml", "Stop Ray on every node"),
}


def plays(path):
    return [play for play in yaml.safe_load(path.read_text()) if "hosts" in play]


def every_play():
    return [(path.name, play) for path in PLAYBOOKS for play in plays(path)]


@pytest.mark.parametrize("name,play", every_play(), ids=lambda v: v if isinstance(v, str) else v.get("name"))
def test_no_play_targets_all_by_default(name, play):
    found = default_target(play["hosts"])
    assert found, "%s / %s: hosts %r is not `{{ <override> | default('<groups>') }}`" % (name, play["name"], play["hosts"])
    variable, default = found
    assert (variable, default) == TARGETS[name][:2], (name, play["name"], variable, default)
    assert "all" not in re.split(r"[:!&,]", default), default


@pytest.mark.parametrize("name,play", every_play(), ids=lambda v: v if isinstance(v, str) else v.get("name"))
def test_plays_that_change_hosts_escalate_and_only_they(name, play):
    if (name, play["name"]) in ESCALATING:
        assert play.get("become") is True, "%s / %s changes hosts and must say become: true" % (name, play["name"])
    else:
        assert "become" not in play, "%s / %s reads only and must not escalate at play level" % (name, play["name"])


def test_escalating_plays_exist():
    known = {(name, play["name"]) for name, play in every_play()}
    assert known >= ESCALATING, ESCALATING - known


@pytest.mark.parametrize("inventory", INVENTORIES, ids=lambda p: p.name)
def test_shipped_inventories_select_the_same_hosts(inventory):
    """The new default patterns pick what the old ones picked, on every shipped inventory."""
    from ansible.inventory.manager import InventoryManager  # noqa: PLC0415 - ansible is a test-only import
    from ansible.parsing.dataloader import DataLoader  # noqa: PLC0415

    manager = InventoryManager(loader=DataLoader(), sources=[str(inventory / "hosts.yml")])

    def hosts(pattern):
        return sorted(host.name for host in manager.get_hosts(pattern))

    for name, (_variable, new, old) in TARGETS.items():
        assert hosts(new) == hosts(old), "%s on %s: %s picks %s, before %s picked %s" % (
            name, inventory.name, new, hosts(new), old, hosts(old))
    # The override variables still narrow the plays: the shipped cluster sub-group of sim4.
    if inventory.name == "sim4":
        assert hosts("sim_pair") == ["sim-1", "sim-2"]
