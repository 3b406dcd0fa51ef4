# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The secrets contract's API key for the controller-side modules (wait_healthy, smoke, throughput).

Playbooks never pass the key as a task argument: task arguments are printed in
task banners (ANSIBLE_DISPLAY_ARGS_TO_STDOUT, so AWX job events), even for a
no_log option. The action plugins resolve it here instead, on the controller,
from the same place every runtime took it (module_utils/secrets.py:
vllm_api_key, else the controller's VLLM_API_KEY), and hand it to the module
as an argument its spec marks no_log.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.plugins.action import ActionBase

from ansible_collections.sparkfleet.vllm.plugins.module_utils import secrets

NAME = "VLLM_API_KEY"


def resolve(templar, task_vars):
    """The API key the runtime wrote ('' when none is set)."""
    variable = secrets.source_of(NAME)[0]
    settings = {}
    if variable in (task_vars or {}):
        settings[variable] = templar.template(task_vars[variable])
    return secrets.resolve([NAME], settings, os.environ)[NAME]


def module_args(task_args, templar, task_vars):
    """The task's arguments with api_key filled from the contract when the task gives none."""
    args = dict(task_args)
    if not args.get("api_key"):
        key = resolve(templar, task_vars)
        if key:
            args["api_key"] = key
        else:
            args.pop("api_key", None)
    return args


class KeyedAction(ActionBase):
    """Runs MODULE on the host the task targets with api_key from the contract (module_args above)."""

    TRANSFERS_FILES = False
    MODULE = None

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(KeyedAction, self).run(tmp, task_vars)
        del tmp
        args = module_args(self._task.args, self._templar, task_vars)
        result.update(self._execute_module(module_name=self.MODULE, module_args=args, task_vars=task_vars))
        return result
