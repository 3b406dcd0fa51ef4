"""Report output: PNG encoder, the sweep plot, Markdown summaries."""
import struct
import zlib

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_report as br
from ansible_collections.sparkfleet.vllm.plugins.module_utils import png


def decode_rgb(data):
    """Minimal PNG reader for filter-0 RGB images written by png.encode_png."""
    width, height = png.decode_png_size(data)
    pos, idat = 8, b""
    while pos < len(data):
        length = struct.unpack(">I", data[pos:pos + 4])[0]
        kind = data[pos + 4:pos + 8]
        chunk = data[pos + 8:pos + 8 + length]
        assert zlib.crc32(kind + chunk) & 0xFFFFFFFF == struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0]
        if kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = 1 + 3 * width
    return width, height, [raw[r * stride + 1:(r + 1) * stride] for r in range(height)]


def test_png_round_trip():
    canvas = png.Canvas(4, 3)
    canvas.set(1, 2, (10, 20, 30))
    width, height, rows = decode_rgb(canvas.to_png())
    assert (width, height) == (4, 3)
    assert tuple(rows[2][3:6]) == (10, 20, 30) and tuple(rows[0][0:3]) == (255, 255, 255)


def test_text_image_has_dark_pixels():
    _width, _height, rows = decode_rgb(png.text_image("vLLM"))
    assert any(b == 0 for row in rows for b in row)


CELLS = [
    {"prompt_tokens": p, "concurrency": c, "output_throughput": 100.0 * c / (p / 1024), "p99_itl_ms": 5.0 + c,
     "median_ttft_ms": 30.0, "p99_ttft_ms": 60.0, "mean_tpot_ms": 5.0, "failed": 0}
    for p in (1024, 8192) for c in (1, 8, 32, 64)
]


def test_sweep_plot_draws_one_coloured_line_per_prompt_length():
    width, height, rows = decode_rgb(br.sweep_plot(CELLS, "sweep test"))
    assert (width, height) == (900, 420)
    colours = {tuple(row[i:i + 3]) for row in rows for i in range(0, len(row), 3)}
    assert png.PALETTE[0] in colours and png.PALETTE[1] in colours and png.PALETTE[2] not in colours


def test_markdown_sweep_and_standard():
    sweep = {"model_id": "m", "date": "d", br.ADDITIONS_KEY: {"mode": "sweep", "url": "u", "output_tokens": 1024,
                                                              "cells": CELLS, "plot": "x.png", "notes": ["n1"]}}
    text = br.markdown(sweep)
    assert text.count("\n| 1,024 |") == 4 and "![sweep](x.png)" in text and "- n1" in text
    standard = {"model_id": "m", "median_ttft_ms": 1.0, "p99_itl_ms": 2.0, "failed": 0,
                br.ADDITIONS_KEY: {"mode": "standard", "single_stream_tok_s": 555.0, "aggregate_8_tok_s": 1499.0,
                                   "single_stream_runs": [{}] * 8, "kv_cache_tokens": 578304, "acceptance": None,
                                   "gate": {"message": "within baseline: x"}}}
    text = br.markdown(standard)
    assert "555.0 tok/s" in text and "1,499.0 tok/s" in text and "578,304 tokens" in text and "Gate: within" in text


def test_result_basename():
    assert br.result_basename("sweep", "gemma-4-26b/a4b", "20261003T101500Z") == "20261003T101500Z-sweep-gemma-4-26b-a4b"


def test_markdown_standard_shows_the_bandwidth_ceiling():
    extra = {"mode": "standard", "single_stream_tok_s": 56.3, "aggregate_8_tok_s": 417.0, "single_stream_runs": [{}] * 8,
             "gate": {"message": "within baseline: x"},
             "ceiling": {"decode_tok_s": 102.7, "basis": "1.79 TB/s / (31B parameters x 0.562 bytes, NVFP4)",
                         "single_stream_fraction": 0.5482}}
    text = br.markdown({"model_id": "m", br.ADDITIONS_KEY: extra})
    assert "| Memory-bandwidth ceiling, one stream | 102.7 tok/s (1.79 TB/s / (31B parameters x 0.562 bytes, NVFP4)); " \
           "measured 55% of it |" in text
    del extra["ceiling"]
    assert "ceiling" not in br.markdown({"model_id": "m", br.ADDITIONS_KEY: extra})


@pytest.mark.parametrize("extra,label", [
    ({"single_stream_duration_s": 4.2}, "Single-stream decode (one after another, 2 prompts) | 480.0 tok/s"),
    ({}, "Single-stream decode (mean of 2 prompts) | 480.0 tok/s"),  # a result written before the change
])
def test_standard_report_names_the_single_stream_definition(extra, label):
    result = {"model_id": "m", br.ADDITIONS_KEY: dict(extra, mode="standard", single_stream_tok_s=480.0,
                                                      single_stream_runs=[{}, {}], aggregate_8_tok_s=1.0, notes=[])}
    assert label in br.markdown(result)


@pytest.mark.parametrize("counts,text", [
    ((16, 16, 128), "per shape 16/128 requests with at most the concurrency in flight"),
    ((None, None), "all requests at once"),  # cells of a result written before num_prompts
])
def test_sweep_report_says_how_many_requests_a_shape_sent(counts, text):
    cells = []
    for conc, count in zip((1, 8, 64), counts):
        cell = {"prompt_tokens": 64, "concurrency": conc, "output_throughput": 1.0, "median_ttft_ms": 1.0,
                "p99_ttft_ms": 1.0, "mean_tpot_ms": 1.0, "p99_itl_ms": 1.0}
        if count:
            cell["num_prompts"] = count
        cells.append(cell)
    result = {"model_id": "m", br.ADDITIONS_KEY: {"mode": "sweep", "cells": cells, "notes": []}}
    assert text in br.markdown(result)
