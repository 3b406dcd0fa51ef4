#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: smoke
short_description: Named smoke checks against a vLLM OpenAI-compatible server
version_added: 1.0.0
description:
  - Sends one request per check (twenty for the accuracy set) and grades the answers. Checks are C(chat),
    C(thinking) (C(chat_template_kwargs.enable_thinking), reasoning must come back), C(tools) (an automatic
    tool call), C(vision) (a locally generated PNG as a C(data:) URI, image before text), C(audio) (a locally
    generated WAV, for the E-series when their audio input is enabled) and C(accuracy) (twenty short questions with
    unambiguous answers, including spelling "necessary" backwards).
  - Misses the notes record as the model's own are reported as C(expected_miss), not as failures; everything else
    fails the check with its request and response. Which misses a model has comes from the catalog
    (C(models.<short>.smoke_expected_misses) in C(data/catalog.yml)) through O(expected_misses); this module
    holds no table of its own.
  - A check the model cannot do is a failure, not a skip; choose the checks with O(checks).
  - With O(api_key), the C(auth) check always runs too. It proves the key is enforced, since a C(POST /v1/chat/completions)
    without a key and one with a wrong key must get HTTP 401, and one with O(api_key) must answer. An open server
    accepts any bearer token, so the other checks alone cannot tell whether the key reached the server.
author:
  - sparkfleet.vllm contributors (@sparkfleet)
options:
  checks:
    description:
      - Checks to run, in this order whatever order they are given in.
      - When omitted, the checks the O(plan) says the model and its flags can pass (C(chat) always; C(thinking) and
        C(tools) with a reasoning parser and auto tool choice; C(vision) for a vision model with its encoder;
        C(audio) when enabled; C(accuracy) for real models), or without a plan C(chat), C(thinking), C(tools),
        C(vision) and C(accuracy).
    type: list
    elements: str
    choices: [auth, chat, thinking, tools, vision, audio, accuracy]
  plan:
    description:
      - The deployment plan (the C(vllm_plan) fact). Picks the default checks, and its C(profile), C(drafter),
        C(node_count) and C(model.short) decide which O(expected_misses) conditions hold.
      - When O(expected_misses) is omitted, the plan's C(model.smoke_expected_misses) is used.
      - A stand-in's C(model.smoke_constrained_outputs) (random weights never think or call a tool) constrains
        the C(thinking) and C(tools) requests to one known Gemma 4 output each (C(structured_outputs) C(choice);
        thinking asked with C(enable_thinking) off), so the grade is of what the server's parsers make of it. Such
        a check's result carries C(constrained_output).
    type: dict
  audio:
    description: Add the C(audio) check (E-series with C("audio") in C(--limit-mm-per-prompt)).
    type: bool
    default: false
  expected_misses:
    description:
      - Known misses of the model per check, in the catalog's C(smoke_expected_misses) form, normally
        C("{{ vllm_plan.model.smoke_expected_misses | default({}) }}").
      - Each check maps to a list of miss ids (an accuracy question id, C(reads_llm), C(no_reasoning)), or of
        dicts with C(miss) and optional C(when) / C(unless) conditions (C(profiles), C(drafters), C(models),
        C(models_except), C(min_nodes), C(max_nodes), C(expert_parallel)) tested against O(plan). A condition on
        something the plan does not say does not hold.
      - Omitted and without O(plan), every miss fails its check.
    type: dict
  max_tokens:
    description: Token budget for the thinking and tool-call answers.
    type: int
    default: 512
  timeout:
    description: Seconds per request.
    type: float
    default: 120
  fail_on_failure:
    description: Fail the task when any check fails (expected misses never fail it).
    type: bool
    default: true
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
  - sparkfleet.vllm.http_api
attributes:
  check_mode:
    support: full
    details: In check mode no request is sent.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Read-only; never reports a change.
seealso:
  - module: sparkfleet.vllm.wait_healthy
  - module: sparkfleet.vllm.throughput
"""

EXAMPLES = r"""
- name: Smoke-test the deployed model
  sparkfleet.vllm.smoke:
    url: "http://{{ ansible_host }}:8000"
    model: "{{ vllm_plan.served_name }}"
    plan: "{{ vllm_plan }}"
    expected_misses: "{{ vllm_plan.model.smoke_expected_misses | default({}) }}"
  delegate_to: localhost

- name: Only chat and vision, recording failures without failing the play
  sparkfleet.vllm.smoke:
    url: http://127.0.0.1:8000
    model: gemma-4-e4b
    checks: [chat, vision, accuracy]
    audio: true
    expected_misses:
      vision: [reads_llm]
    fail_on_failure: false
"""

RETURN = r"""
checks:
  description: One entry per check, with C(status) C(passed), C(failed) or C(expected_miss), a C(reason), and for
    failures the request and response in C(details).
  returned: always
  type: list
  elements: dict
  sample: [{"name": "chat", "status": "passed", "reason": "", "miss": [], "details": []},
           {"name": "accuracy", "status": "expected_miss", "score": "19/20",
            "reason": "known miss of this model (notes): reverse_necessary: expected yrassecen, got 'yrasecen'"}]
counts:
  description: Number of checks per status.
  returned: always
  type: dict
  sample: {"passed": 4, "failed": 0, "expected_miss": 1}
failed_checks:
  description: Names of the checks that failed.
  returned: always
  type: list
  elements: str
  sample: []
"""

import functools

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.vllm.plugins.module_utils import openai_client as oc
from ansible_collections.sparkfleet.vllm.plugins.module_utils import smoke


def run_checks(url, model, names, api_key, max_tokens, timeout, misses, request=oc.request_json, constrained=None):
    results = []
    endpoint = oc.join_url(url, "/v1/chat/completions")
    for name in names:
        exchanges = []
        for label, body in smoke.build_requests(name, model, max_tokens, constrained):
            exchanges.append((label, body, request(endpoint, method="POST", body=body,
                                                   api_key=smoke.key_for(label, api_key), timeout=timeout)))
        result = smoke.grade(name, exchanges, misses)
        if (constrained or {}).get(name):
            result["constrained_output"] = constrained[name]
        results.append(result)
    return results


ARGUMENT_SPEC = dict(oc.api_argument_spec(), **{
    "checks": {"type": "list", "elements": "str", "choices": list(smoke.CHECKS)},
    "plan": {"type": "dict"},
    "audio": {"type": "bool", "default": False},
    "expected_misses": {"type": "dict"},
    "max_tokens": {"type": "int", "default": 512, "no_log": False},
    "timeout": {"type": "float", "default": 120},
    "fail_on_failure": {"type": "bool", "default": True},
})


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    wanted = p["checks"] or (smoke.checks_for_plan(p["plan"]) if p["plan"] else None)
    try:
        names = smoke.select_checks(wanted, p["audio"], bool(p["api_key"]))
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    try:
        misses = smoke.misses_for_plan(p["plan"], p["expected_misses"])
    except (ValueError, KeyError, TypeError) as exc:
        module.fail_json(msg="expected_misses is not in the catalog's smoke_expected_misses form: %s" % exc)
    if module.check_mode:
        module.exit_json(changed=False, checks=[], counts={}, failed_checks=[],
                         msg="check mode: would run %s" % ", ".join(names))
    results = run_checks(p["url"], p["model"], names, p["api_key"], p["max_tokens"], p["timeout"], misses,
                         request=functools.partial(oc.request_json, tls=oc.tls_options(p)),
                         constrained=smoke.constrained_outputs_for_plan(p["plan"]))
    counts, line = smoke.summary(results)
    failed = [r["name"] for r in results if r["status"] == "failed"]
    out = {"changed": False, "checks": results, "counts": counts, "failed_checks": failed, "msg": line}
    if failed and p["fail_on_failure"]:
        reasons = "; ".join(r["reason"][:400] for r in results if r["status"] == "failed")
        out["msg"] = "smoke checks failed (%s): %s" % (", ".join(failed), reasons)
        module.fail_json(**out)
    module.exit_json(**out)


if __name__ == "__main__":
    main()
