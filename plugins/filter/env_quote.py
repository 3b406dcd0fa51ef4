# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.vllm.plugins.module_utils import secrets


def env_quote(value, fmt="shell"):
    """Quote one env-file value for its reader: shell (bash source), systemd (EnvironmentFile=) or compose (env_file)."""
    try:
        return secrets.FORMATS[fmt]("" if value is None else str(value))
    except KeyError:
        raise AnsibleFilterError("env_quote: unknown format %r (known: %s)" % (fmt, ", ".join(sorted(secrets.FORMATS)))) from None


class FilterModule(object):
    def filters(self):
        return {"env_quote": env_quote}
