# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: secrets
author:
  - sparkfleet.vllm contributors (@sparkfleet)
version_added: 2.0.0
short_description: Resolve the values of the secrets a plan names (the secrets contract)
description:
  - The one place where a secret name from the plan's C(secret_env) gets its value. C(VLLM_API_KEY) comes from
    the variable C(vllm_api_key), C(HF_TOKEN) and C(HUGGING_FACE_HUB_TOKEN) from C(vllm_hf_token); an unset or empty
    variable falls back to the controller's environment variable C(VLLM_API_KEY) or C(HF_TOKEN) (how AWX injects a
    credential). Set the variables from Ansible Vault.
  - Every runtime role (vllm_native, vllm_compose, vllm_cluster) and the weights download read their secrets
    through this lookup, so the plan, the env files and the checks agree on one value.
  - Use it only in tasks with C(no_log), templates written with C(no_log), or assertions on its C(missing) result.
options:
  _terms:
    description: Secret names (C(VLLM_API_KEY), C(HF_TOKEN), C(HUGGING_FACE_HUB_TOKEN)), or lists of them.
    type: list
    elements: raw
    required: false
  result:
    description:
      - V(values) returns one dict, name to value (V('') when there is none).
      - V(missing) returns one message per name without a value, naming the variable to set (no values in it).
    type: str
    default: values
    choices: [values, missing]
"""

EXAMPLES = r"""
- name: Refuse to start when a secret the plan names has no value
  ansible.builtin.assert:
    that: query('sparkfleet.vllm.secrets', vllm_plan.secret_env, result='missing') | length == 0
    fail_msg: "{{ query('sparkfleet.vllm.secrets', vllm_plan.secret_env, result='missing') | join(' ') }}"

- name: Write the 0600 env file
  ansible.builtin.copy:
    content: |
      {% for name, value in lookup('sparkfleet.vllm.secrets', vllm_plan.secret_env) | dictsort %}
      {{ name }}={{ value | sparkfleet.vllm.env_quote('systemd') }}
      {% endfor %}
    dest: /etc/example/secret.env
    mode: "0600"
  no_log: true
"""

RETURN = r"""
_raw:
  description: With O(result=values), one dict of name to value; with O(result=missing), the refusal messages.
  type: list
  elements: raw
"""

import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.sparkfleet.vllm.plugins.module_utils import secrets


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        try:
            names = secrets.flatten_names(terms)
            wanted = sorted({secrets.source_of(name)[0] for name in names})
        except secrets.SecretsError as exc:
            raise AnsibleLookupError(str(exc)) from exc
        settings = {}
        for variable in wanted:
            if variables and variable in variables:
                settings[variable] = self._templar.template(variables[variable])
        values = secrets.resolve(names, settings, os.environ)
        if self.get_option("result") == "missing":
            return secrets.missing_messages(values)
        return [values]
