# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The three throughput modes (standard, sweep, load) as plain functions.

Everything that touches the network goes through a `Client` (HTTP helpers
plus the streaming runner), so tests can drive the modes against the fast
token source or a fake.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import random
import time

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_metrics as bm
from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_report as br
from ansible_collections.sparkfleet.vllm.plugins.module_utils import openai_client as oc
from ansible_collections.sparkfleet.vllm.plugins.module_utils import png

# The notes' method: eight fixed prompts, technical and prose mixed, because
# speculative decoding drafts predictable text far better than narrative.
STANDARD_PROMPTS = (
    "Write a Python function that parses an ISO 8601 timestamp without external libraries, with tests.",
    "Explain how a B-tree index speeds up range queries in a relational database, step by step.",
    "Write a bash script that rotates log files older than seven days and compresses them with gzip.",
    "Describe the TCP three-way handshake and what happens when a SYN packet is lost.",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Describe a walk through an autumn forest at dusk, focusing on sounds and smells.",
    "Tell the story of a small town baker who enters a national competition.",
    "Write a letter from a sailor to his sister describing his first winter at sea.",
)

FILLER_WORDS = (  # noqa: SIM905 - a word list reads better as prose
    "time year people way day man thing woman life child world school state family student group country "
    "problem hand part place case week company system program question work government number night point "
    "home water room mother area money story fact month lot right study book eye job word business issue "
    "side kind head house service friend father power hour game line end member law car city community name"
).split()


class Client:
    """Network access for the runners; `stream` is openai_client.run_streams by default."""

    def __init__(self, base_url, model, api_key=None, timeout=600.0, api="chat", stream=oc.run_streams,
                 request=oc.request_json):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = float(timeout)
        self.api = api
        self._stream = stream
        self._request = request

    def endpoint(self, api=None):
        return oc.join_url(self.base_url, "/v1/chat/completions" if (api or self.api) == "chat"
                           else "/v1/completions")

    def payload(self, prompt, max_tokens, api=None, ignore_eos=True, **extra):
        api = api or self.api
        body = {"model": self.model, "max_tokens": int(max_tokens), "temperature": 0, "stream": True,
                "stream_options": {"include_usage": True}, "ignore_eos": bool(ignore_eos)}
        if api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        body.update(extra)
        return body

    def stream(self, payloads, concurrency=None, api=None):
        return self._stream(self.endpoint(api), payloads, api_key=self.api_key, concurrency=concurrency,
                            timeout=self.timeout)

    def metrics(self):
        resp = self._request(oc.join_url(self.base_url, "/metrics"), api_key=self.api_key, timeout=30)
        return bm.parse_prometheus(resp.text) if resp.ok else {}

    def reset_prefix_cache(self):
        resp = self._request(oc.join_url(self.base_url, "/reset_prefix_cache"), method="POST",
                             api_key=self.api_key, timeout=60)
        return resp.ok, resp.summary(200)

    def tokenize(self, text):
        resp = self._request(oc.join_url(self.base_url, "/tokenize"), method="POST", api_key=self.api_key,
                             body={"model": self.model, "prompt": text, "add_special_tokens": False}, timeout=60)
        if resp.ok and isinstance(resp.body, dict) and isinstance(resp.body.get("tokens"), list):
            return resp.body["tokens"]
        return None


def _timestamp():
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def base_result(client, mode, output_tokens, notes=None):
    """Top-level keys of `vllm bench serve --save-result` that describe the run."""
    return {
        "date": time.strftime("%Y%m%d-%H%M%S", time.gmtime()),
        "backend": "openai-chat" if client.api == "chat" else "openai",
        "model_id": client.model,
        "tokenizer_id": client.model,
        "request_rate": "inf",
        "burstiness": 1.0,
        br.ADDITIONS_KEY: {"mode": mode, "url": client.base_url, "api": client.api, "output_tokens": output_tokens,
                           "notes": list(notes or []), "stamp": _timestamp()},
    }


def _server_side(client, before, after, extra):
    extra["acceptance"] = bm.spec_decode_acceptance(before, after)
    extra["kv_cache_tokens"] = bm.kv_cache_tokens(after) or bm.kv_cache_tokens(before)
    if not after:
        extra["notes"].append("/metrics not readable: no KV cache or acceptance figures")


def warm_up(client, count, streams=1, tokens=64):
    """`count` rounds of one short request, then one batch of `streams` concurrent ones.

    A fresh server pays for its first batch of each size (vLLM's CPU build compiles kernels then): measured
    on the stand-in, the first 8-stream batch after start ran at the single-stream rate (714 vs 3,077-3,858
    tok/s in the next runs). The concurrent round moves that cost out of the measurement.
    """
    for _round in range(int(count or 0)):
        client.stream([client.payload("Hello, please count to twenty.", tokens)], concurrency=1)
        if int(streams) > 1:
            client.stream([client.payload("Hello, please count to twenty.", tokens) for _request in range(int(streams))],
                          concurrency=int(streams))


def run_standard(client, output_tokens=1024, warmup=1, streams=8, prompts=STANDARD_PROMPTS):
    """Single stream and one batch of `streams` concurrent streams, each figure as `vllm bench serve` reports it.

    Single stream is `--num-prompts len(prompts) --max-concurrency 1`: the prompts one after another in one
    run, output tokens over the run's wall-clock duration (first request sent to last one finished). The
    aggregate is `--num-prompts streams --max-concurrency streams`, one batch all at once.
    """
    result = base_result(client, "standard", output_tokens)
    extra = result[br.ADDITIONS_KEY]
    warm_up(client, warmup, streams)
    before = client.metrics()
    single_outputs, single_duration = client.stream([client.payload(p, output_tokens) for p in prompts],
                                                    concurrency=1)
    single_runs = []
    failures = []
    for index, out in enumerate(single_outputs):
        if not out.success:
            failures.append("single-stream prompt %d: %s" % (index, out.error))
        single_runs.append({"prompt": index, "tok_s": round(bm.single_stream_rate(out), 3),
                            "output_tokens": bm.output_length(out)[0], "latency_s": round(out.latency, 4),
                            "ttft_ms": round(out.ttft * 1000, 3), "success": out.success, "error": out.error})
    batch_prompts = [prompts[i % len(prompts)] for i in range(streams)]
    outputs, duration = client.stream([client.payload(p, output_tokens) for p in batch_prompts],
                                      concurrency=streams)
    after = client.metrics()
    metrics = bm.calculate_metrics(outputs, duration)
    failures += ["%d-stream batch: %s" % (streams, e) for e in metrics["errors"] if e]
    usage_missing = metrics.pop("_usage_missing")
    result.update(metrics)
    result["num_prompts"] = streams
    result["max_concurrency"] = streams
    extra.update({
        "single_stream_tok_s": round(bm.sequential_throughput(single_outputs, single_duration), 3),
        "single_stream_duration_s": round(single_duration, 4),
        "single_stream_mean_request_tok_s": round(bm.mean_request_rate(single_outputs), 3),
        "aggregate_8_tok_s": round(metrics["output_throughput"], 3),
        "aggregate_streams": streams,
        "single_stream_runs": single_runs,
        "failures": failures,
    })
    if usage_missing or any(not r["output_tokens"] for r in single_runs):
        extra["notes"].append("the server sent no usage chunk for %d request(s): tokens counted as stream "
                              "events, a lower bound under speculative decoding" % usage_missing)
    _server_side(client, before, after, extra)
    return result


def random_prompt(client, prompt_tokens, rng):
    """A prompt of exactly prompt_tokens tokens (token ids via /tokenize) or, failing that, about as many words."""
    words = [rng.choice(FILLER_WORDS) for _word in range(int(prompt_tokens * 1.2) + 8)]
    text = " ".join(words)
    tokens = client.tokenize(text)
    if tokens:
        while len(tokens) < prompt_tokens:
            tokens = tokens + tokens
        return tokens[:prompt_tokens], True
    return " ".join(words[:prompt_tokens]), False


def sweep_prompt_count(concurrency, num_prompts=0):
    """Prompts one sweep cell sends: `num_prompts`, or with 0, max(16, 2 x concurrency).

    As `vllm bench serve --num-prompts N --max-concurrency C`: N requests with at most C in flight, so a
    1-stream cell is N requests one after another, not one request, and a wide cell runs two waves.
    """
    if int(concurrency) < 1:
        raise ValueError("concurrency must be at least 1, got %r" % (concurrency,))
    if num_prompts:
        if int(num_prompts) < 1:
            raise ValueError("num_prompts must be 0 (automatic) or at least 1, got %r" % (num_prompts,))
        return int(num_prompts)
    return max(16, 2 * int(concurrency))


def run_sweep(client, concurrency=(1, 8, 32, 64), prompt_tokens=(1024, 8192), output_tokens=1024, warmup=1,
              seed=0, num_prompts=0):
    """`vllm bench serve --dataset-name random --request-rate inf --ignore-eos` at every shape.

    Each cell is `--num-prompts sweep_prompt_count(c, num_prompts) --max-concurrency c`.
    """
    result = base_result(client, "sweep", output_tokens)
    extra = result[br.ADDITIONS_KEY]
    warm_up(client, warmup, max(concurrency))
    before = client.metrics()
    cells = []
    reset_state = None
    exact = True
    for length in prompt_tokens:
        for conc in concurrency:
            ok, detail = client.reset_prefix_cache()
            if reset_state is None:
                reset_state = ok
                if not ok:
                    extra["notes"].append(
                        "prefix cache NOT reset between shapes (POST /reset_prefix_cache: %s; start the server "
                        "with VLLM_SERVER_DEV_MODE=1 to allow it): later shapes may prefill from cached blocks, "
                        "inflating throughput and understating TTFT" % detail)
            rng = random.Random("%s-%s-%s" % (seed, length, conc))
            prompts = []
            for _request in range(sweep_prompt_count(conc, num_prompts)):
                prompt, is_exact = random_prompt(client, length, rng)
                exact = exact and is_exact
                prompts.append(prompt)
            api = "completions" if isinstance(prompts[0], list) else client.api
            payloads = [client.payload(p, output_tokens, api=api) for p in prompts]
            outputs, duration = client.stream(payloads, concurrency=conc, api=api)
            metrics = bm.calculate_metrics(outputs, duration)
            metrics.pop("_usage_missing")
            cell = {"prompt_tokens": length, "concurrency": conc, "num_prompts": len(prompts)}
            for key in ("output_throughput", "total_token_throughput", "request_throughput", "duration",
                        "completed", "failed", "total_input_tokens", "total_output_tokens", "median_ttft_ms",
                        "p99_ttft_ms", "mean_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
                        "mean_itl_ms", "median_itl_ms", "p99_itl_ms"):
                cell[key] = metrics[key]
            cell["errors"] = [e for e in metrics["errors"] if e][:10]
            cells.append(cell)
    after = client.metrics()
    extra["prefix_cache_reset"] = bool(reset_state)
    if not exact:
        extra["notes"].append("/tokenize unavailable: prompts are word counts, not exact token counts")
    extra["cells"] = cells
    # Top level: the largest cell, so the file still reads like one `vllm bench serve` result.
    if cells:
        top = max(cells, key=lambda c: c["output_throughput"])
        result.update({k: v for k, v in top.items() if k not in ("errors",)})
        result["max_concurrency"] = top["concurrency"]
        result["num_prompts"] = top["num_prompts"]
    result["failed"] = sum(c["failed"] for c in cells)
    _server_side(client, before, after, extra)
    return result


def _distinct_image(index, soft_tokens):
    """A locally drawn PNG, different per request so no encoder cache hides the work."""
    side = 224 if soft_tokens <= 280 else 672
    canvas = png.Canvas(side, side)
    rng = random.Random(index)
    for _shape in range(12):
        color = tuple(rng.randrange(256) for _channel in range(3))
        x, y = rng.randrange(side), rng.randrange(side)
        canvas.rect(x, y, x + rng.randrange(20, side // 2), y + rng.randrange(20, side // 2), color)
    canvas.text(10, 10, "IMAGE %d" % index, png.BLACK, 3)
    return "data:image/png;base64," + base64.b64encode(canvas.to_png()).decode("ascii")


def load_plan(max_model_len, image_limit=4, output_tokens=128, long_prompt_tokens=8192, long_concurrency=64,
              image_concurrency=16, max_soft_tokens=1120, near_full_count=2):
    """Burst shapes sized from the plan's context and image limits (the notes' 5090 load test)."""
    margin = output_tokens + 64
    bursts = [{"name": "long prompts", "kind": "text", "count": long_concurrency,
               "prompt_tokens": min(long_prompt_tokens, max(16, max_model_len - margin))}]
    if image_limit:
        bursts.append({"name": "multi-image prompts", "kind": "images", "count": image_concurrency,
                       "images": image_limit, "max_soft_tokens": max_soft_tokens})
    bursts.append({"name": "near-full context", "kind": "text", "count": near_full_count,
                   "prompt_tokens": max(16, int(max_model_len * 0.95) - margin)})
    return bursts


def run_load(client, bursts, output_tokens=128, sampler=None):
    """Each burst all at once; any failed request fails the run. sampler: object with start()/stop()->peak MiB."""
    result = base_result(client, "load", output_tokens)
    extra = result[br.ADDITIONS_KEY]
    before = client.metrics()
    rng = random.Random(0)
    done = []
    if sampler is not None:
        sampler.start()
    try:
        for burst in bursts:
            if burst["kind"] == "images":
                content = [{"type": "image_url", "image_url": {"url": _distinct_image(i * 10 + j,
                                                                                      burst["max_soft_tokens"])}}
                           for i in range(burst["count"]) for j in range(burst["images"])]
                payloads = []
                for i in range(burst["count"]):
                    parts = content[i * burst["images"]:(i + 1) * burst["images"]]
                    parts = parts + [{"type": "text", "text": "Describe these images in detail."}]
                    payloads.append(client.payload(parts, output_tokens, api="chat", mm_processor_kwargs={
                        "max_soft_tokens": burst["max_soft_tokens"]}))
                api = "chat"
            else:
                prompts = [random_prompt(client, burst["prompt_tokens"], rng)[0] for _request in range(burst["count"])]
                api = "completions" if isinstance(prompts[0], list) else client.api
                payloads = [client.payload(p, output_tokens, api=api) for p in prompts]
            outputs, duration = client.stream(payloads, concurrency=len(payloads), api=api)
            errors = ["%s #%d: %s" % (burst["name"], o.index, o.error) for o in outputs if not o.success]
            done.append({"name": burst["name"], "requests": len(outputs), "failed": len(errors),
                         "duration": round(duration, 3), "errors": errors,
                         "output_tokens": sum(bm.output_length(o)[0] for o in outputs if o.success),
                         "shape": {k: v for k, v in burst.items() if k not in ("name",)}})
    finally:
        peak = sampler.stop() if sampler is not None else None
    after = client.metrics()
    extra["bursts"] = done
    extra["gpu_memory_peak_mib"] = peak
    if peak is None:
        extra["gpu_memory_note"] = getattr(sampler, "note", "no GPU memory sampler (nvidia-smi not found)")
    result["completed"] = sum(b["requests"] - b["failed"] for b in done)
    result["failed"] = sum(b["failed"] for b in done)
    _server_side(client, before, after, extra)
    return result


class GpuMemorySampler:
    """Peak `nvidia-smi` memory.used (MiB, summed over GPUs) while bursts run, on the host the module runs on."""

    def __init__(self, run_command, nvidia_smi, interval=0.5):
        self.run_command = run_command  # callable(argv) -> (rc, stdout, stderr), e.g. AnsibleModule.run_command
        self.nvidia_smi = nvidia_smi
        self.interval = interval
        self.peak = None
        self.note = "" if nvidia_smi else "nvidia-smi not found on the host the module ran on"
        self._stop = None
        self._thread = None

    def sample(self):
        rc, out, _err = self.run_command([self.nvidia_smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits"])
        if rc != 0:
            return None
        values = [int(v.strip()) for v in out.splitlines() if v.strip().isdigit()]
        return sum(values) if values else None

    def start(self):
        if not self.nvidia_smi:
            return
        import threading

        self._stop = threading.Event()

        def loop():
            while not self._stop.is_set():
                value = self.sample()
                if value is not None and (self.peak is None or value > self.peak):
                    self.peak = value
                self._stop.wait(self.interval)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def stop(self):
        if self._thread is not None:
            self._stop.set()
            self._thread.join(10)
        return self.peak
