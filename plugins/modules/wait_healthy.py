# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
# Documentation only: sparkfleet.vllm.wait_healthy is an action plugin (plugins/action/wait_healthy.py) that
# probes HTTP from the controller and checks the process and log on the target; the options are
# plugins/module_utils/health.py's ARGUMENT_SPEC and the waiting logic is health.Waiter.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: wait_healthy
short_description: Wait until a vLLM server answers, or explain why it never will
version_added: 1.0.0
description:
  - Polls C(/health), then C(/v1/models) until it lists O(model), then sends one 1-token completion; O(api_key)
    goes with the last two. A refused connection means the server is still starting. Returns the elapsed time
    and the last phase reached.
  - Fails fast, not at the timeout, when the service, start-stop-daemon process or container has exited, or the
    engine log shows a known fatal signature (multimodal token-budget floor, context above the model's maximum,
    KV cache smaller than one request, FlashAttention unsupported, the expert-parallel drafter defect, the MTP
    reduction-dim mismatch, out of memory, a refused 401/403 download, the v0.26 multi-node RPC timeout, a rejected
    command-line flag), and explains the failure.
  - The action plugin polls HTTP from the controller, so O(url) is the address the controller reaches the server
    at, and runs the process and log checks on the target; at least every 30 seconds it prints the phase, the
    weights downloaded so far and the elapsed time.
author:
  - sparkfleet.vllm contributors (@sparkfleet)
options:
  timeout:
    description: Seconds to wait before giving up.
    type: int
    default: 600
  interval:
    description: Seconds between polls.
    type: float
    default: 3.0
  progress_interval:
    description: Seconds between progress lines (capped at 30).
    type: int
    default: 20
  service:
    description: systemd unit running the server (native runtime). Its log is read from the journal.
    type: str
  pidfile:
    description: Pidfile of a server run under start-stop-daemon (native runtime without systemd).
    type: path
  container:
    description: Docker container running the server (container runtime). Its log is read with C(docker logs).
    type: str
  log_path:
    description: Engine log file on the target; read instead of the journal or C(docker logs) when given.
    type: path
  weights_path:
    description: Directory on the target whose size shows download progress, for example the model's
      C(~/.cache/huggingface/hub/models--ORG--NAME).
    type: path
  request_timeout:
    description: Seconds per HTTP probe.
    type: float
    default: 10.0
  expected_failures:
    description:
      - Diagnosis ids (the catalog's C(diagnostics)) that a first start is expected to end in, once; playbooks pass
        the plan's RV(sparkfleet.vllm.plan#module:plan.expected_start_failures).
      - The first such failure is waited through (a progress line says so) while the restart policy starts the
        server again; the same failure after the restart, or no process for O(restart_grace) seconds, fails.
    type: list
    elements: str
    default: []
  restart_grace:
    description: Seconds without a running process that an expected first-start failure may take to restart.
    type: float
    default: 120.0
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
  - sparkfleet.vllm.http_api
attributes:
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller.
    support: full
    details: The action plugin polls from the controller and checks the server host through C(ansible.builtin.command).
  check_mode:
    support: partial
    details: Nothing is started in check mode, so there is nothing to wait for; the task returns at once, unchanged.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Read-only; never reports a change.
notes:
  - Do not C(delegate_to) this task; the action plugin already sends the HTTP probes from the controller, and the
    process and log checks must run on the server host.
  - Only one of O(service), O(pidfile) and O(container) can be given.
seealso:
  - module: sparkfleet.vllm.smoke
  - module: sparkfleet.vllm.throughput
"""

EXAMPLES = r"""
- name: Wait for the compose-run server
  sparkfleet.vllm.wait_healthy:
    url: "http://{{ ansible_host }}:8000"
    model: "{{ vllm_plan.served_name }}"
    container: vllm
    weights_path: /root/.cache/huggingface/hub/models--unsloth--gemma-4-26B-A4B-it-NVFP4

- name: Wait for the native server under systemd, with an API key
  sparkfleet.vllm.wait_healthy:
    url: http://127.0.0.1:8000
    model: tiny
    service: vllm
    api_key: "{{ vllm_api_key }}"
    timeout: 900
  no_log: false
"""

RETURN = r"""
phase:
  description: Last phase reached, one of C(starting), C(health), C(models), C(ready).
  returned: always
  type: str
  sample: ready
elapsed:
  description: Seconds waited.
  returned: always
  type: float
  sample: 45.2
diagnosis:
  description: The known fatal signature found in the engine log, with its explanation.
  returned: when one was found
  type: dict
  sample: {"id": "context_exceeds_model_max", "title": "--max-model-len is longer than the model's maximum context",
           "explanation": "...", "line": "Value error, User-specified max_model_len (8192) is greater than ..."}
progress:
  description: The progress lines shown while waiting.
  returned: always
  type: list
  elements: str
log_tail:
  description: The last engine log lines, on failure.
  returned: failure
  type: str
served:
  description: Model names C(/v1/models) listed.
  returned: always
  type: list
  elements: str
  sample: [tiny]
"""
