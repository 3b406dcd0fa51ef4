# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of sparkfleet.vllm.wait_healthy.

HTTP probes go from the controller (where the playbook's later modules also
connect from); the process and log checks run on the server host through
ansible.builtin.command; progress is printed through Ansible's display so the
operator is never left with a silent ten-minute pause. The fatal log
signatures come from the catalog's `diagnostics` table, read here on the
controller where the catalog lives.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils import diagnose as diag
from ansible_collections.sparkfleet.vllm.plugins.module_utils import health
from ansible_collections.sparkfleet.vllm.plugins.module_utils import openai_client as oc
from ansible_collections.sparkfleet.vllm.plugins.plugin_utils import api_key

display = Display()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = True

    def _remote(self, argv, task_vars):
        """Run argv on the target; (rc, stdout, stderr)."""
        res = self._execute_module(module_name="ansible.builtin.command", module_args={"argv": argv},
                                   task_vars=task_vars, wrap_async=False)
        if res.get("skipped"):
            return 0, "", ""
        return res.get("rc", 1 if res.get("failed") else 0), res.get("stdout", ""), \
            res.get("stderr", "") or (res.get("msg", "") if res.get("failed") and "rc" not in res else "")

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        validation, args = self.validate_argument_spec(argument_spec=health.ARGUMENT_SPEC,
                                                       mutually_exclusive=health.MUTUALLY_EXCLUSIVE)
        if not self._task.args.get("api_key"):  # never a task argument in the playbooks: the secrets contract's key
            args["api_key"] = api_key.resolve(self._templar, task_vars) or None
        if self._task.check_mode:
            result.update(changed=False, skipped=True, msg="check mode: not waiting", phase="starting", elapsed=0.0,
                          progress=[], served=[])
            return result
        try:
            signatures = diag.load_signatures(cat.load_catalog())
        except cat.CatalogError as exc:
            result.update(failed=True, changed=False, msg="wait_healthy cannot read the fatal log signatures: %s" % exc)
            return result
        host = task_vars.get("inventory_hostname", "")
        since = time.time()
        offset = 0
        if args["log_path"]:
            rc, out = self._remote(health.log_offset_command(args["log_path"]), task_vars)[:2]
            offset = int(out.strip() or 0) if rc == 0 and out.strip().isdigit() else 0
        kind, check_argv = health.process_check(args["service"], args["pidfile"], args["container"])
        log_argv = health.log_command(args["service"], args["container"], args["log_path"], since, offset)
        name = args["service"] or args["pidfile"] or args["container"] or ""

        def process_state():
            if not kind:
                return None
            rc, out, err = self._remote(check_argv, task_vars)
            return health.parse_process_check(kind, rc, out, err, name)

        def read_log():
            if not log_argv:
                return ""
            rc, out, err = self._remote(log_argv, task_vars)
            return "\n".join(part for part in (out, err) if part)

        def weights_bytes():
            argv = health.weights_size_command(args["weights_path"])
            return health.parse_du(*self._remote(argv, task_vars)[:2]) if argv else None

        def emit(line):
            display.display("%s: %s" % (host, line))

        request = functools.partial(oc.request_json, tls=oc.tls_options(args))
        waiter = health.Waiter(
            lambda: health.probe(args["url"], args["model"], args["api_key"], args["request_timeout"], request=request),
            timeout=args["timeout"], interval=args["interval"], progress_every=args["progress_interval"],
            process_state=process_state, read_log=read_log, weights_bytes=weights_bytes, emit=emit,
            signatures=signatures, expected_failures=args["expected_failures"], restart_grace=args["restart_grace"])
        outcome = waiter.run()
        ok = outcome.pop("ok")
        result.update(outcome)
        result["changed"] = False
        if not ok:
            result["failed"] = True
        return result
