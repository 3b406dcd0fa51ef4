# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The secrets contract: where each secret the plan names comes from, and how it is written.

The plan lists secret *names* (``secret_env``); it never holds a value. Every
runtime renders exactly those names into its 0600 env file, with values from
one resolution on the controller:

* each name has one variable (``vllm_api_key``, ``vllm_hf_token``), which an
  operator sets from Ansible Vault or an AWX credential;
* an unset or empty variable falls back to the controller's environment
  variable of the same purpose (``VLLM_API_KEY``, ``HF_TOKEN``), which is how
  AWX injects a credential and how a shell user exports one.

A name without a value is an error before any host changes
(:func:`missing_messages`). The ``*_value`` functions quote a value for one
env-file format so that any printable character comes back unchanged.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# name in secret_env -> (variable that holds its value, controller environment variable it falls back to).
SECRET_SOURCES = {
    "VLLM_API_KEY": ("vllm_api_key", "VLLM_API_KEY"),
    "HF_TOKEN": ("vllm_hf_token", "HF_TOKEN"),
    "HUGGING_FACE_HUB_TOKEN": ("vllm_hf_token", "HF_TOKEN"),
}

_SHELL_SPECIAL = re.compile(r'([\\"`$])')


class SecretsError(ValueError):
    """A name the contract does not know."""


def flatten_names(terms):
    """Names from lookup terms: strings, lists of strings, or nothing."""
    names = []
    for term in terms or []:
        items = [term] if isinstance(term, str) else list(term or [])
        for item in items:
            if not isinstance(item, str):
                raise SecretsError("secret names must be strings, got %r" % (item,))
            if item not in names:
                names.append(item)
    return names


def source_of(name):
    try:
        return SECRET_SOURCES[name]
    except KeyError:
        raise SecretsError("%s is not a secret sparkfleet.vllm knows (known: %s)" % (name, ", ".join(sorted(SECRET_SOURCES)))) from None


def resolve(names, variables, environ):
    """{name: value} for each name: its variable when set and non-empty, else the controller's environment ('' if neither).

    ``variables`` maps variable names to their (already templated) values; ``environ`` is the controller's environment.
    """
    values = {}
    for name in names:
        variable, env_name = source_of(name)
        value = variables.get(variable)
        if value is None or value == "":
            value = environ.get(env_name, "")
        values[name] = "" if value is None else str(value)
    return values


def missing_messages(values):
    """One message per name without a value, naming what to set; empty when every name has one."""
    messages = []
    for name in sorted(values):
        if values[name]:
            continue
        variable, env_name = source_of(name)
        messages.append("%s in the plan's secret_env has no value: set %s (from a vault or an AWX credential) or export %s "
                        "on the controller." % (name, variable, env_name))
    return messages


def shell_value(value):
    """The value double-quoted for bash `source` and systemd EnvironmentFile=.

    Inside double quotes both undo a backslash before \\ " ` $ and keep every other character as it is, so one
    quoting serves both readers; nothing is expanded.
    """
    return '"%s"' % _SHELL_SPECIAL.sub(r"\\\1", value)


def compose_value(value):
    """The value double-quoted for a Compose env_file: backslash escapes \\ and ", and $$ stands for $ (interpolation)."""
    return '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$")


FORMATS = {"shell": shell_value, "systemd": shell_value, "compose": compose_value}


def env_file_lines(values, fmt):
    """NAME=<quoted value> lines, sorted by name, for the env-file format ``fmt`` (shell, systemd or compose)."""
    try:
        quote = FORMATS[fmt]
    except KeyError:
        raise SecretsError("unknown env-file format %r (known: %s)" % (fmt, ", ".join(sorted(FORMATS)))) from None
    return ["%s=%s" % (name, quote(values[name])) for name in sorted(values)]
