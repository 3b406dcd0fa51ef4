# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of sparkfleet.vllm.throughput: the API key from the secrets contract, never from a task argument."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.sparkfleet.vllm.plugins.plugin_utils.api_key import KeyedAction


class ActionModule(KeyedAction):
    MODULE = "sparkfleet.vllm.throughput"
