# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Throughput metrics, computed the way `vllm bench serve` computes them.

Pure functions over stream outputs (objects or dicts with vLLM's
RequestFuncOutput fields: success, ttft, itl, latency, output_tokens,
prompt_len, chunks, error). Field names of the result follow
`vllm bench serve --save-result`; percentiles use linear interpolation, which
is numpy's default, and std is the population standard deviation (numpy's
ddof=0).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

DEFAULT_PERCENTILES = (50, 90, 99)


def _get(output, name, default=None):
    if isinstance(output, dict):
        return output.get(name, default)
    return getattr(output, name, default)


def percentile(values, p):
    """numpy.percentile(values, p) with the default 'linear' method; 0 for an empty list (as vLLM does)."""
    data = sorted(values)
    if not data:
        return 0.0
    if len(data) == 1:
        return float(data[0])
    rank = (len(data) - 1) * (p / 100.0)
    low = int(math.floor(rank))
    high = min(low + 1, len(data) - 1)
    return float(data[low] + (data[high] - data[low]) * (rank - low))


def mean(values):
    values = list(values)
    return float(sum(values)) / len(values) if values else 0.0


def std(values):
    values = list(values)
    if not values:
        return 0.0
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


def percentile_label(p):
    return str(int(p)) if int(p) == p else str(p)


def output_length(output):
    """Tokens one request produced: usage.completion_tokens; without usage, the event count (a lower bound)."""
    tokens = _get(output, "output_tokens")
    if tokens:
        return int(tokens), True
    return int(_get(output, "chunks", 0) or 0), False


def calculate_metrics(outputs, duration, percentiles=DEFAULT_PERCENTILES):
    """Aggregate metrics over one batch; keys as in `vllm bench serve --save-result`."""
    ttfts, tpots, itls, e2els, input_lens, output_lens, errors = [], [], [], [], [], [], []
    completed = usage_missing = 0
    for output in outputs:
        if not _get(output, "success"):
            output_lens.append(0)
            input_lens.append(int(_get(output, "prompt_len", 0) or 0))
            errors.append(_get(output, "error", "") or "failed")
            continue
        length, from_usage = output_length(output)
        if not from_usage:
            usage_missing += 1
        output_lens.append(length)
        input_lens.append(int(_get(output, "prompt_len", 0) or 0))
        errors.append("")
        ttft, latency = float(_get(output, "ttft", 0.0)), float(_get(output, "latency", 0.0))
        if length > 1:
            tpots.append((latency - ttft) / (length - 1))
        itls.extend(_get(output, "itl", []) or [])
        ttfts.append(ttft)
        e2els.append(latency)
        completed += 1
    total_output = sum(output_lens)
    total_input = sum(n for n, e in zip(input_lens, errors) if not e)
    duration = float(duration) if duration else 0.0
    result = {
        "duration": duration,
        "completed": completed,
        "failed": len(output_lens) - completed,
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "request_throughput": completed / duration if duration else 0.0,
        "output_throughput": total_output / duration if duration else 0.0,
        "total_token_throughput": (total_input + total_output) / duration if duration else 0.0,
        "input_lens": input_lens,
        "output_lens": output_lens,
        "errors": errors,
    }
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        result["mean_%s_ms" % name] = mean(values) * 1000
        result["median_%s_ms" % name] = percentile(values, 50) * 1000
        result["std_%s_ms" % name] = std(values) * 1000
        for p in percentiles:
            result["p%s_%s_ms" % (percentile_label(p), name)] = percentile(values, p) * 1000
    result["_usage_missing"] = usage_missing
    return result


def single_stream_rate(output):
    """Decode rate of one request: completion tokens over its own latency (request sent to last token)."""
    length, _exact = output_length(output)
    latency = float(_get(output, "latency", 0.0) or 0.0)
    return length / latency if latency > 0 and _get(output, "success") else 0.0


def mean_request_rate(outputs):
    """Mean of single_stream_rate over the successful requests: the figure single-stream used to report.

    It differs from `vllm bench serve --max-concurrency 1` twice over: a mean of per-request rates is not the
    rate of their sum, and each latency leaves out the gaps between requests (connect, request parsing,
    the usage chunk and [DONE]), which vLLM's duration keeps. Kept in the result for comparison only.
    """
    rates = [single_stream_rate(o) for o in outputs if _get(o, "success")]
    return mean(rates)


def sequential_throughput(outputs, duration):
    """Output tokens over the wall-clock duration of a run of requests, as `vllm bench serve` divides them.

    `duration` runs from the first request sent to the last one finished (vLLM's benchmark_duration), so it
    includes every gap between requests; failed requests count no tokens but their time.
    """
    duration = float(duration or 0.0)
    if duration <= 0:
        return 0.0
    return sum(output_length(o)[0] for o in outputs if _get(o, "success")) / duration


# --------------------------------------------------------------------------- /metrics (Prometheus text)

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eE]+|NaN|[+-]Inf)(\s+\d+)?$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"


def parse_prometheus(text):
    """{metric name: [(labels dict, value), ...]} from Prometheus exposition text."""
    samples = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            continue
        name, labels, value = match.group(1), match.group(2) or "", match.group(3)
        try:
            number = float(value)
        except ValueError:
            continue
        samples.setdefault(name, []).append((dict(_LABEL.findall(labels)), number))
    return samples


def metric_total(samples, name):
    """Sum of a metric over all label sets, or None when the server does not expose it."""
    if name not in samples:
        return None
    return sum(value for _labels, value in samples[name])


def counter_delta(before, after, name):
    first, second = metric_total(before, name), metric_total(after, name)
    if first is None or second is None:
        return None
    return second - first


def spec_decode_acceptance(before, after):
    """Accepted / drafted tokens between two /metrics scrapes; None without speculative decoding."""
    accepted = counter_delta(before, after, ACCEPTED_TOKENS)
    drafted = counter_delta(before, after, DRAFT_TOKENS)
    if accepted is None or not drafted:
        return None
    return {"accepted_tokens": accepted, "draft_tokens": drafted, "acceptance_rate": accepted / drafted}


def kv_cache_tokens(samples):
    """KV cache capacity in tokens from vllm:cache_config_info, when exposed.

    Newer releases label it kv_cache_size_tokens; older ones only num_gpu_blocks and block_size.
    """
    for labels, _value in samples.get("vllm:cache_config_info", []):
        size_tokens = labels.get("kv_cache_size_tokens")
        if size_tokens and size_tokens.isdigit():
            return int(size_tokens)
        try:
            blocks, size = int(labels.get("num_gpu_blocks")), int(labels.get("block_size"))
        except (TypeError, ValueError):
            continue
        return blocks * size
    return None


# --------------------------------------------------------------------------- gate


def gate_figure(value):
    """The figure a gate compares with: a number, or the low end of a [low, high] range (catalog convention)."""
    if isinstance(value, (list, tuple)):
        return float(min(value))
    return float(value)


def gate(measured, expected, min_ratio=0.9):
    """Compare measured single-stream and 8-stream tok/s with a baseline.

    Returns {'gated': bool, 'passed': bool, 'checks': [...], 'message': str}.
    No baseline (None or no numbers) means measured and recorded, not gated.
    """
    checks = []
    for key in ("single_stream_tok_s", "aggregate_8_tok_s"):
        want = (expected or {}).get(key)
        got = (measured or {}).get(key)
        if not want or got is None:
            continue
        check = {"metric": key, "measured": round(float(got), 2), "expected": gate_figure(want)}
        if isinstance(want, (list, tuple)):
            check["expected_range"] = [float(v) for v in want]
        ratio = float(got) / check["expected"]
        check.update(ratio=round(ratio, 4), passed=ratio >= min_ratio)
        checks.append(check)
    if not checks:
        return {"gated": False, "passed": True, "checks": [],
                "message": "no baseline for this configuration: measured and recorded, not gated"}
    failed = [c for c in checks if not c["passed"]]
    parts = ["%s %.1f tok/s vs expected %s (%.0f%%%s, floor %.0f%%)" % (
        c["metric"], c["measured"], "%.1f-%.1f" % tuple(c["expected_range"]) if "expected_range" in c else "%.1f" % c["expected"],
        100 * c["ratio"], " of the low end" if "expected_range" in c else "", 100 * min_ratio) for c in checks]
    message = ("below baseline: " if failed else "within baseline: ") + "; ".join(parts)
    if (expected or {}).get("calibrated"):
        message += " (baseline calibrated on this machine in this run)"
    elif (expected or {}).get("source"):
        message += " [baseline: %s]" % expected["source"]
    return {"gated": True, "passed": not failed, "checks": checks, "message": message}


def ceiling_share(ceiling, single_stream_tok_s):
    """The plan's memory-bandwidth ceiling with the measured single-stream rate as a fraction of it (None without one)."""
    if not ceiling or not ceiling.get("decode_tok_s") or single_stream_tok_s is None:
        return None
    share = dict(ceiling)
    share["single_stream_fraction"] = round(float(single_stream_tok_s) / float(ceiling["decode_tok_s"]), 4)
    share["message"] = "single-stream decode at %.0f%% of the memory-bandwidth ceiling (%s tok/s: %s)" % (
        100 * share["single_stream_fraction"], ceiling["decode_tok_s"], ceiling.get("basis", "catalog"))
    return share


def sweep_ceiling_share(ceiling, cells):
    """A sweep's single-stream cells against the plan's memory-bandwidth ceiling (None without a ceiling or a c=1 cell).

    Each concurrency-1 cell gets its ``ceiling_fraction``; the share itself is the fastest such cell's, the figure
    that sits closest to the hardware's limit (longer prompts only lower it with their prefill).
    """
    single = [cell for cell in cells if cell.get("concurrency") == 1 and cell.get("output_throughput")]
    if not ceiling or not ceiling.get("decode_tok_s") or not single:
        return None
    for cell in single:
        cell["ceiling_fraction"] = round(float(cell["output_throughput"]) / float(ceiling["decode_tok_s"]), 4)
    best = max(single, key=lambda cell: cell["output_throughput"])
    share = ceiling_share(ceiling, best["output_throughput"])
    share["prompt_tokens"] = best["prompt_tokens"]
    share["message"] = share["message"].replace(
        "single-stream decode", "single-stream output (%s-token prompts)" % best["prompt_tokens"], 1)
    return share


def gated_figures(extra):
    """The two figures a gate compares, from a standard run's sparkfleet additions."""
    return {key: extra[key] for key in ("single_stream_tok_s", "aggregate_8_tok_s")}


def slower_figures(before, after):
    """Per gated figure, the slower of two calibrations (the one before a measured run and the one after it)."""
    return {key: min(float(before[key]), float(after[key])) for key in before}


def wants_calibration(baseline):
    """True for a stand-in baseline that names no figures and asks to be calibrated where it runs.

    A CPU stand-in's speed is a property of the machine under test, not of the collection: the catalog marks
    such rows ``calibrate: true`` instead of recording one machine's figures.
    """
    baseline = baseline or {}
    figures = [baseline.get(key) for key in ("single_stream_tok_s", "aggregate_8_tok_s")]
    return bool(baseline.get("calibrate")) and not any(figures)


def calibrated_baseline(measured, output_tokens, source=None):
    """A gate baseline made from a calibration run (the same method and requests) on this machine."""
    baseline = {
        "single_stream_tok_s": round(float(measured["single_stream_tok_s"]), 3),
        "aggregate_8_tok_s": round(float(measured["aggregate_8_tok_s"]), 3),
        "calibrated": True,
        "calibration_output_tokens": int(output_tokens),
        "source": "calibrated on this machine in this run (standard method, %d output tokens per request)" % int(
            output_tokens),
    }
    if source:
        baseline["catalog_source"] = source
    return baseline
