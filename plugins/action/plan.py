# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin for sparkfleet.vllm.plan: plans on the controller, never contacts the host.

The documentation lives in plugins/modules/plan.py; the logic in
plugins/module_utils/plan/ (planner.py). This file only gathers the request (task
arguments plus the host's place in the ``vllm_cluster`` group) and reports.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import tempfile

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import planner, summary

display = Display()

# Task arguments that are not planner request keys.
OWN_ARGS = ("catalog_path", "cluster_group", "plan_dir", "write")


def plan_json(plan):
    """The plan file's exact content."""
    return json.dumps(plan, indent=2, sort_keys=True) + "\n"


def write_plan_file(path, content, check_mode=False):
    """Write ``content`` to ``path`` atomically (0644, directory 0755) unless it is already there.

    Returns True when the file changed (or would change, in check mode).
    """
    try:
        with open(path) as handle:
            if handle.read() == content:
                return False
    except (IOError, OSError):
        pass
    if check_mode:
        return True
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(prefix=".plan-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(content)
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    except Exception:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return True


def _hostvar(hostvars, host, name):
    try:
        value = hostvars[host].get(name)
    except (KeyError, AttributeError, TypeError):
        return None
    return None if value in (None, "") else value


def _client_address(hostvars, name):
    """Where clients (verify.yml, bench.yml, status.yml, a replica's gateway) reach a host: its management address,
    as Ansible does."""
    return _hostvar(hostvars, name, "ansible_host") or name


def cluster_request(task_vars, group="vllm_cluster"):
    """Node count, index and addresses of this host from its inventory group (pure; unit-tested)."""
    host = task_vars.get("inventory_hostname")
    members = list((task_vars.get("groups") or {}).get(group) or [])
    if host not in members:
        return {"node_count": 1, "node_index": 0}
    hostvars = task_vars.get("hostvars") or {}
    head = members[0]

    def address(name):
        return _hostvar(hostvars, name, "vllm_cluster_link_ip") or _hostvar(hostvars, name, "ansible_host") or name

    def machine(name):
        if _hostvar(hostvars, name, "ansible_connection") == "local":
            return "the controller"
        return _client_address(hostvars, name)

    return {
        "node_count": len(members),
        "node_index": members.index(host),
        "head_address": address(head),
        "node_address": address(host),
        "cluster_nodes": [{"host": name, "address": address(name), "machine": machine(name), "client": _client_address(hostvars, name)}
                          for name in members],
    }


def group_request(task_vars, group="vllm_cluster"):
    """This host's name and which of vllm_single and the cluster group list it (pure; unit-tested)."""
    host = task_vars.get("inventory_hostname")
    groups = task_vars.get("groups") or {}
    listed = [name for name in (planner.SINGLE_GROUP, group) if host in (groups.get(name) or [])]
    return {"host": host, "host_groups": listed, "client_address": _client_address(task_vars.get("hostvars") or {}, host)}


def _as_bool(value):
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on", "y", "t")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        result["changed"] = False
        args = dict(self._task.args)
        unknown = sorted(set(args) - set(planner.REQUEST_KEYS) - set(OWN_ARGS))
        if unknown:
            result.update(failed=True, msg="unsupported parameters for sparkfleet.vllm.plan: %s (supported: %s)" % (
                ", ".join(unknown), ", ".join(sorted(planner.REQUEST_KEYS + OWN_ARGS))))
            return result
        host = task_vars.get("inventory_hostname", "localhost")
        request = {k: v for k, v in args.items() if k in planner.REQUEST_KEYS}
        derived = cluster_request(task_vars, args.get("cluster_group") or "vllm_cluster")
        derived.update(group_request(task_vars, args.get("cluster_group") or "vllm_cluster"))
        for key, value in derived.items():
            if request.get(key) in (None, ""):
                request[key] = value
        try:
            catalog = cat.load_catalog(args.get("catalog_path") or None)
            plan = planner.plan(catalog, request)
        except (cat.CatalogError, planner.PlanError) as exc:
            message = "plan refused for %s: %s" % (host, exc)
            # The default callback prints failures on stdout; a refusal must reach stderr too.
            display.error(message)
            result.update(failed=True, msg=message, refused=True, rule=getattr(exc, "rule", "catalog"))
            return result
        result["plan"] = plan
        result["summary"] = summary.summarize(plan, host)
        if args.get("plan_dir"):
            path = os.path.join(os.path.abspath(os.path.expanduser(str(args["plan_dir"]))), "%s.json" % host)
            result["plan_file"] = path
            if _as_bool(args.get("write", False)):
                try:
                    result["changed"] = write_plan_file(path, plan_json(plan), check_mode=bool(self._task.check_mode))
                except (IOError, OSError) as exc:
                    result.update(failed=True, msg="cannot write the plan to %s: %s" % (path, exc))
                    return result
        result["msg"] = "%s: %s" % (host, result["summary"][0])
        return result
