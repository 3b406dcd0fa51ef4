# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import inputs


def dev_mode_on(env):
    """The planner's rule, for the runtime roles' last-line checks: does this env turn vLLM's dev routes on?"""
    if env is None:
        return False
    if not isinstance(env, dict):
        raise AnsibleFilterError("dev_mode_on: expected a mapping of environment variables, got %s" % type(env).__name__)
    return inputs.dev_mode_on(env)


class FilterModule(object):
    def filters(self):
        return {"dev_mode_on": dev_mode_on}
