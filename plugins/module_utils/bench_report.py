# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Throughput reports: result file names, the Markdown summary and the sweep plot (PNG).

The JSON itself is assembled by the module from `bench_metrics` output; its
top-level keys follow `vllm bench serve --save-result` and everything this
collection adds lives under `sparkfleet`.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.sparkfleet.vllm.plugins.module_utils import png

ADDITIONS_KEY = "sparkfleet"


def slug(text):
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-") or "model"


def result_basename(mode, model, stamp):
    """One file per run: <stamp>-<mode>-<model>; stamp like 20261003T101500Z."""
    return "%s-%s-%s" % (stamp, mode, slug(model))


def _fmt(value, digits=1):
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return ("{:,.%df}" % digits).format(value)
    if isinstance(value, int):
        return "{:,}".format(value)
    return str(value)


def markdown_standard(result):
    extra = result[ADDITIONS_KEY]
    lines = ["# Throughput (standard) - %s" % result.get("model_id", ""), "",
             "%s, %s; greedy, %s generated tokens per request, ignore_eos." % (
                 result.get("date", ""), extra.get("url", ""), _fmt(extra.get("output_tokens"))), "",
             "| Measure | Value |", "|---|---|",
             # Results written before single stream followed vllm bench serve (no duration recorded) keep their label.
             "| Single-stream decode (%s %d prompts) | %s tok/s |" % (
                 "mean of" if extra.get("single_stream_duration_s") is None else "one after another,",
                 len(extra.get("single_stream_runs", [])), _fmt(extra.get("single_stream_tok_s"))),
             "| Aggregate decode, %d streams | %s tok/s |" % (
                 extra.get("aggregate_streams", 8), _fmt(extra.get("aggregate_8_tok_s"))),
             "| Median TTFT (8 streams) | %s ms |" % _fmt(result.get("median_ttft_ms")),
             "| p99 ITL (8 streams) | %s ms |" % _fmt(result.get("p99_itl_ms")),
             "| KV cache capacity | %s tokens |" % _fmt(extra.get("kv_cache_tokens")),
             "| Speculative-decoding acceptance | %s |" % (
                 "%.1f%%" % (100 * extra["acceptance"]["acceptance_rate"]) if extra.get("acceptance") else "n/a"),
             "| Failed requests | %s |" % _fmt(result.get("failed", 0))]
    if extra.get("ceiling"):
        lines.append("| Memory-bandwidth ceiling, one stream | %s tok/s (%s); measured %.0f%% of it |" % (
            _fmt(extra["ceiling"]["decode_tok_s"]), extra["ceiling"].get("basis", ""),
            100 * extra["ceiling"]["single_stream_fraction"]))
    lines.append("")
    lines += _gate_lines(extra.get("gate"))
    lines += _notes(extra)
    return "\n".join(lines) + "\n"


def markdown_sweep(result):
    extra = result[ADDITIONS_KEY]
    cells = extra.get("cells", [])
    lines = ["# Throughput sweep - %s" % result.get("model_id", ""), "",
             "%s, %s; random prompts, %s output tokens, ignore_eos, %s." % (
                 result.get("date", ""), extra.get("url", ""), _fmt(extra.get("output_tokens")),
                 "all requests at once" if not cells or "num_prompts" not in cells[0] else
                 "per shape %s requests with at most the concurrency in flight" % "/".join(
                     str(n) for n in sorted({c["num_prompts"] for c in cells}))), "",
             "| Prompt tokens | Concurrency | Output tok/s | Median TTFT ms | p99 TTFT ms | Mean TPOT ms | "
             "p99 ITL ms | Failed |", "|---|---|---|---|---|---|---|---|"]
    for cell in cells:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            _fmt(cell["prompt_tokens"]), cell["concurrency"], _fmt(cell["output_throughput"]),
            _fmt(cell["median_ttft_ms"]), _fmt(cell["p99_ttft_ms"]), _fmt(cell["mean_tpot_ms"], 2),
            _fmt(cell["p99_itl_ms"]), cell.get("failed", 0)))
    lines.append("")
    if extra.get("ceiling"):
        lines += ["Memory-bandwidth ceiling, one stream: %s tok/s (%s); single-stream cells at %s of it." % (
            _fmt(extra["ceiling"]["decode_tok_s"]), extra["ceiling"].get("basis", ""), ", ".join(
                "%.0f%% (%s-token prompts)" % (100 * cell["ceiling_fraction"], _fmt(cell["prompt_tokens"]))
                for cell in cells if "ceiling_fraction" in cell)), ""]
    if extra.get("plot"):
        lines += ["![sweep](%s)" % extra["plot"], ""]
    lines += _notes(extra)
    return "\n".join(lines) + "\n"


def markdown_load(result):
    extra = result[ADDITIONS_KEY]
    lines = ["# Load test - %s" % result.get("model_id", ""), "", "| Burst | Requests | Failed | Duration s |",
             "|---|---|---|---|"]
    for burst in extra.get("bursts", []):
        lines.append("| %s | %d | %d | %s |" % (
            burst["name"], burst["requests"], burst["failed"], _fmt(burst["duration"], 1)))
    lines += ["", "GPU memory peak: %s" % (
        "%s MiB" % _fmt(extra["gpu_memory_peak_mib"]) if extra.get("gpu_memory_peak_mib") is not None
        else "not sampled (%s)" % extra.get("gpu_memory_note", "no nvidia-smi")), ""]
    failures = [e for b in extra.get("bursts", []) for e in b.get("errors", [])]
    if failures:
        lines += ["## Failed requests", ""] + ["- %s" % e for e in failures[:50]] + [""]
    lines += _notes(extra)
    return "\n".join(lines) + "\n"


def _gate_lines(gate):
    if not gate:
        return []
    return ["Gate: %s" % gate["message"], ""]


def _notes(extra):
    notes = extra.get("notes") or []
    return (["Notes:", ""] + ["- %s" % n for n in notes] + [""]) if notes else []


def markdown(result):
    mode = result[ADDITIONS_KEY]["mode"]
    return {"standard": markdown_standard, "sweep": markdown_sweep, "load": markdown_load}[mode](result)


# --------------------------------------------------------------------------- plot


def _nice_max(value):
    if value <= 0:
        return 1.0
    magnitude = 10 ** len(str(int(value))) / 10.0
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude:
            return step * magnitude
    return 10 * magnitude  # pragma: no cover


def _panel(canvas, left, top, width, height, title, xs, series, ykey):
    """One chart: x = concurrency (log-spaced positions), one line per prompt length."""
    canvas.rect(left, top, left + width, top + height, png.WHITE)
    canvas.line(left, top + height, left + width, top + height, png.BLACK)
    canvas.line(left, top, left, top + height, png.BLACK)
    canvas.text(left, top - 14, title, png.BLACK)
    ymax = _nice_max(max([p[ykey] for points in series.values() for p in points] or [1.0]))
    for i in range(5):
        y = top + height - int(height * i / 4)
        canvas.line(left - 3, y, left + width, y, png.GREY if i else png.BLACK)
        label = _fmt(ymax * i / 4, 0)
        canvas.text(left - 6 - png.Canvas.text_width(label), y - 3, label)
    positions = {x: left + int(width * (i + 0.5) / len(xs)) for i, x in enumerate(xs)}
    for x, px in positions.items():
        canvas.line(px, top + height, px, top + height + 3, png.BLACK)
        canvas.text(px - png.Canvas.text_width(str(x)) // 2, top + height + 6, str(x))
    for index, (_name, points) in enumerate(sorted(series.items())):
        color = png.PALETTE[index % len(png.PALETTE)]
        coords = [(positions[p["concurrency"]], top + height - height * p[ykey] / ymax) for p in points]
        for a, b in zip(coords, coords[1:]):
            canvas.line(a[0], a[1], b[0], b[1], color, 2)
        for cx, cy in coords:
            canvas.rect(int(cx) - 2, int(cy) - 2, int(cx) + 2, int(cy) + 2, color)


def sweep_plot(cells, title="SWEEP"):
    """PNG bytes: output tok/s and p99 ITL against concurrency, one line per prompt length."""
    xs = sorted({c["concurrency"] for c in cells})
    series = {}
    for cell in sorted(cells, key=lambda c: (c["prompt_tokens"], c["concurrency"])):
        series.setdefault(cell["prompt_tokens"], []).append(cell)
    width, height = 900, 420
    canvas = png.Canvas(width, height)
    canvas.text(20, 10, title.upper()[:80], png.BLACK, 2)
    _panel(canvas, 70, 60, 340, 300, "OUTPUT TOK/S", xs, series, "output_throughput")
    _panel(canvas, 520, 60, 340, 300, "P99 ITL MS", xs, series, "p99_itl_ms")
    canvas.text(380, 385, "CONCURRENCY", png.BLACK)
    legend_x = 20
    for index, prompt_tokens in enumerate(sorted(series)):
        color = png.PALETTE[index % len(png.PALETTE)]
        label = "%s TOKEN PROMPTS" % prompt_tokens
        canvas.rect(legend_x, 402, legend_x + 10, 410, color)
        canvas.text(legend_x + 14, 403, label)
        legend_x += 30 + png.Canvas.text_width(label)
    return canvas.to_png()
