# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The options every module that talks to a vLLM server's HTTP API takes (wait_healthy, smoke, throughput): where,
which model, the key, and TLS.

Their argument specs repeat these (module_utils/health.py, modules/smoke.py,
modules/throughput.py, all with module_utils/openai_client.API_KEY_SPEC); the
modules are the members of the `api` action group in meta/runtime.yml, so
`module_defaults: group/sparkfleet.vllm.api:` sets these options once.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
options:
  url:
    description:
      - Base URL of the server, without C(/v1), as the host that sends the requests reaches it.
    type: str
    required: true
  model:
    description:
      - Served model name, the name clients put in the C(model) field.
    type: str
    required: true
  api_key:
    description:
      - API key, sent as a bearer token.
      - When omitted, the action plugin takes the secrets contract's key on the controller, C(vllm_api_key) (else the
        controller's C(VLLM_API_KEY)), so playbooks never pass it as a task argument, which task banners print.
    type: str
  validate_certs:
    description:
      - Check the server's TLS certificate when O(url) is C(https://) (vllm_gateway with a certificate), against the
        system's CAs or those in O(ca_path).
      - Set to V(false) only for a test certificate; the API key then goes to whoever answers.
    type: bool
    default: true
  ca_path:
    description:
      - PEM file with the CA certificate(s) that signed the server's certificate, for a private CA or a self-signed
        certificate, instead of the system's CAs.
    type: path
attributes:
  action_group:
    description: Use C(group/sparkfleet.vllm.api) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - sparkfleet.vllm.api
notes:
  - O(url) and O(model) can be set once for C(wait_healthy), C(smoke) and C(throughput) with
    C(module_defaults) and C(group/sparkfleet.vllm.api); a task's own arguments win. Leave O(api_key) out of
    it, the secrets contract already supplies the key. O(validate_certs) and O(ca_path) mean the same in all
    three and belong there too. Other options of the same name mean different things in
    each module (O(timeout) is the whole wait, one request, or one batch), so set them per module.
"""
