"""bench_run's modes against a fake client: what each figure counts and how many requests a sweep shape sends."""
import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_run
from ansible_collections.sparkfleet.vllm.plugins.module_utils import openai_client as oc


class FakeResponse:
    def __init__(self, body=None, text=""):
        self.ok, self.body, self.text = True, body, text

    def summary(self, _limit=200):
        return "200"


class FakeServer:
    """Every request takes `latency` seconds and yields `tokens` tokens; `gap` seconds pass between requests of
    a sequential run. Records each stream call's (number of payloads, concurrency)."""

    def __init__(self, tokens=100, latency=1.0, gap=0.1):
        self.tokens, self.latency, self.gap = tokens, latency, gap
        self.calls = []

    def stream(self, _url, payloads, concurrency=None, **_kw):
        payloads = list(payloads)
        conc = concurrency or len(payloads)
        self.calls.append((len(payloads), conc))
        outputs = []
        for index, payload in enumerate(payloads):
            o = oc.StreamOutput(index)
            o.success, o.output_tokens, o.latency, o.ttft = True, self.tokens, self.latency, 0.01
            o.prompt_len = len(payload["prompt"]) if isinstance(payload.get("prompt"), list) else 8
            outputs.append(o)
        waves = -(-len(payloads) // conc)
        return outputs, waves * self.latency + (waves - 1) * self.gap

    def request(self, url, method="GET", body=None, **_kw):
        if url.endswith("/tokenize"):
            return FakeResponse({"tokens": list(range(len(body["prompt"].split())))})
        return FakeResponse({}, "")


def client_for(server):
    return bench_run.Client("http://fake:8000", "fake", stream=server.stream, request=server.request)


@pytest.mark.parametrize("tokens,latency,gap,prompts", [
    (100, 1.0, 0.1, 8),
    (256, 0.5, 0.02, 8),
    (32, 0.2, 0.0, 3),
])
def test_single_stream_is_one_sequential_run_over_its_wall_clock(tokens, latency, gap, prompts):
    server = FakeServer(tokens, latency, gap)
    result = bench_run.run_standard(client_for(server), output_tokens=tokens, warmup=0, streams=8,
                                    prompts=bench_run.STANDARD_PROMPTS[:prompts])
    extra = result["sparkfleet"]
    # One call of `prompts` requests at concurrency 1 (vllm bench serve --num-prompts 8 --max-concurrency 1),
    # then the 8-stream batch.
    assert server.calls == [(prompts, 1), (8, 8)]
    wall = prompts * latency + (prompts - 1) * gap
    assert extra["single_stream_duration_s"] == pytest.approx(wall, abs=1e-4)
    assert extra["single_stream_tok_s"] == pytest.approx(prompts * tokens / wall, rel=1e-4)
    assert extra["single_stream_mean_request_tok_s"] == pytest.approx(tokens / latency, rel=1e-4)
    assert extra["aggregate_8_tok_s"] == pytest.approx(8 * tokens / latency, rel=1e-4)
    assert len(extra["single_stream_runs"]) == prompts


@pytest.mark.parametrize("concurrency,num_prompts,expected", [
    (1, 0, 16), (8, 0, 16), (32, 0, 64), (64, 0, 128),   # automatic: max(16, 2 x concurrency)
    (1, 4, 4), (64, 200, 200), (8, 3, 3),                 # as given, even below the concurrency
])
def test_sweep_prompt_count(concurrency, num_prompts, expected):
    assert bench_run.sweep_prompt_count(concurrency, num_prompts) == expected


@pytest.mark.parametrize("concurrency,num_prompts", [(0, 0), (-1, 4), (8, -2)])
def test_sweep_prompt_count_refuses_nonsense(concurrency, num_prompts):
    with pytest.raises(ValueError):
        bench_run.sweep_prompt_count(concurrency, num_prompts)


@pytest.mark.parametrize("concurrency,num_prompts,calls", [
    ((1, 8, 64), 0, [(16, 1), (16, 8), (128, 64)]),
    ((1, 4), 4, [(4, 1), (4, 4)]),
])
def test_sweep_cells_send_num_prompts_at_most_concurrency_at_once(concurrency, num_prompts, calls):
    server = FakeServer(tokens=64, latency=1.0, gap=0.0)
    result = bench_run.run_sweep(client_for(server), concurrency=concurrency, prompt_tokens=(32,), output_tokens=64,
                                 warmup=0, num_prompts=num_prompts)
    assert server.calls == calls
    cells = result["sparkfleet"]["cells"]
    assert [(c["num_prompts"], c["concurrency"]) for c in cells] == calls
    for cell, (count, conc) in zip(cells, calls):
        waves = -(-count // conc)
        assert cell["total_output_tokens"] == 64 * count and cell["total_input_tokens"] == 32 * count
        assert cell["output_throughput"] == pytest.approx(64 * count / waves)
    top = max(cells, key=lambda c: c["output_throughput"])
    assert result["num_prompts"] == top["num_prompts"] and result["max_concurrency"] == top["concurrency"]
