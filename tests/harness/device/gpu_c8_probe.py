"""Why the standard mode's 8-stream figure reads low against `vllm bench serve` (issue 18 item 3): a 2 x 2 probe.

Runs ON the device (from gpu-oom-and-c8.sh) against one healthy vLLM. The standard pair of gpu_ratios.py
differs in two ways at once: the client (the module's run_streams against vLLM's aiohttp client) and the
prompts (the module's eight fixed chat prompts against vLLM's random 24-token ones). Every round here runs
all four combinations, plus the module's own run_standard, back to back on one server, the order rotating
from round to round, so each factor's share of the gap can be read off paired ratios:

  std_single, std_agg8   bench_run.run_standard(streams=8, warmup=0): the module as verify.yml runs it
  m_rand_c8              the module's client (Client.stream) with vLLM's exact random prompts, 8 at once
  vb_rand_c1, vb_rand_c8 vllm bench serve --backend openai-chat --dataset-name random, 24 tokens, 8 prompts
  vb_std_c1, vb_std_c8   vllm bench serve --backend openai-chat --dataset-name custom: the module's eight
                         STANDARD_PROMPTS, --skip-chat-template (the server applies it, as for the module)

and, for every 8-stream batch, where its time went: mean and max TTFT, the spread of the request starts, the
mean decode time (latency - TTFT), and the batch's duration beyond its requests' own span (client overhead
before the first send and after the last token). All with --tokens output tokens, ignore_eos, temperature 0.
"""
import argparse
import json
import pathlib
import statistics
import sys
import time
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import gpu_bench  # noqa: E402  (imports vLLM before ansible; see its comment)

bench_run = gpu_bench.bench_run
bm = gpu_bench.bm


def timing(starts, ttfts, latencies, duration):
    """Where one batch's time went, in ms: TTFT mean/max, start spread, mean decode, duration beyond the span."""
    ends = [s + lat for s, lat in zip(starts, latencies)]
    return {"ttft_mean_ms": statistics.mean(ttfts) * 1000, "ttft_max_ms": max(ttfts) * 1000,
            "start_spread_ms": (max(starts) - min(starts)) * 1000,
            "decode_mean_ms": statistics.mean(lat - t for lat, t in zip(latencies, ttfts)) * 1000,
            "outside_span_ms": (duration - (max(ends) - min(starts))) * 1000, "duration_s": duration}


class VllmBench(gpu_bench.VllmBench):
    """vllm bench serve --backend openai-chat; each run's throughput plus its batch timing (--save-detailed)."""

    def __init__(self, url, model, tokenizer, workdir, prompts_file):
        super().__init__(url, model, tokenizer, workdir, extra=self.backend("openai-chat") + ["--save-detailed"])
        self.prompts_file = prompts_file

    def dataset(self, kind, tokens, seed):
        if kind == "random":
            return ["--dataset-name", "random", "--random-input-len", "24", "--random-output-len", str(tokens),
                    "--seed", str(seed)]
        return ["--dataset-name", "custom", "--dataset-path", str(self.prompts_file), "--custom-output-len",
                str(tokens), "--skip-chat-template", "--disable-shuffle", "--seed", str(seed)]

    def random_prompts(self, tokens, seed, count=8):
        """The exact prompt texts a `random` run with this seed sends."""
        from vllm.benchmarks.datasets import get_samples  # noqa: PLC0415
        from vllm.tokenizers import get_tokenizer  # noqa: PLC0415

        argv = self.common + self.dataset("random", tokens, seed) + ["--num-prompts", str(count)]
        args = self.parser.parse_args(argv)
        tokenizer = get_tokenizer(args.tokenizer, tokenizer_mode=args.tokenizer_mode)
        return [r.prompt for r in get_samples(args, tokenizer)]

    def run(self, kind, concurrency, tokens, seed, count=8):
        result = self.result(self.dataset(kind, tokens, seed), kind, concurrency, count)
        lat = [t + sum(itl) for t, itl in zip(result["ttfts"], result["itls"])]
        fig = {"tok_s": result["output_throughput"], "input_lens": result["input_lens"]}
        fig.update(timing(result["start_times"], result["ttfts"], lat, result["duration"]))
        return fig


def module_batch(client, prompts, tokens):
    outputs, duration = client.stream([client.payload(p, tokens) for p in prompts], concurrency=len(prompts))
    metrics = bm.calculate_metrics(outputs, duration)
    assert not metrics["failed"], [e for e in metrics["errors"] if e][:3]
    fig = {"tok_s": metrics["output_throughput"], "input_lens": [o.prompt_len for o in outputs]}
    fig.update(timing([o.start_time for o in outputs], [o.ttft for o in outputs], [o.latency for o in outputs],
                      duration))
    return fig


RATIOS = [
    ("standard c1: run_standard / vllm, module's prompts", "std_single", "vb_std_c1"),
    ("standard c1: run_standard / vllm, random prompts (old pairing)", "std_single", "vb_rand_c1"),
    ("standard c8: run_standard / vllm, module's prompts", "std_agg8", "vb_std_c8"),
    ("standard c8: run_standard / vllm, random prompts (old pairing)", "std_agg8", "vb_rand_c8"),
    ("c8, same random prompts: module client / vllm", "m_rand_c8", "vb_rand_c8"),
    ("c8 prompt effect, vllm's client: module's / random", "vb_std_c8", "vb_rand_c8"),
    ("c8 prompt effect, module's client: module's / random", "std_agg8", "m_rand_c8"),
]
TIMING_KEYS = ("ttft_mean_ms", "ttft_max_ms", "start_spread_ms", "decode_mean_ms", "outside_span_ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    gpu_bench.add_common_arguments(parser, rounds=20)
    args = parser.parse_args()
    workdir = pathlib.Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    prompts_file = workdir / "standard-prompts.jsonl"
    prompts_file.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in bench_run.STANDARD_PROMPTS))
    recorder = gpu_bench.Recorder()  # run_standard's batches, so its 8-stream batch's timing can be read too
    client = bench_run.Client(args.url, args.model, api="chat", stream=recorder)
    vb = VllmBench(args.url, args.model, args.tokenizer, workdir, prompts_file)
    t0 = time.time()
    gpu_bench.warm_up(client, args.tokens, lambda conc, count, tokens, seed: vb.run("random", conc, tokens, seed, count))
    random_prompts = vb.random_prompts(args.tokens, 0)
    print("warm-up %.1f s; random prompts: %s" % (time.time() - t0, json.dumps(random_prompts)[:300]), flush=True)

    def standard():
        recorder.batches.clear()
        extra = bench_run.run_standard(client, args.tokens, warmup=0, streams=8)["sparkfleet"]
        assert not extra["failures"], extra["failures"][:3]
        outputs, duration = recorder.batches[-1]
        batch = timing([o.start_time for o in outputs], [o.ttft for o in outputs], [o.latency for o in outputs],
                       duration)
        return {"std_single": extra["single_stream_tok_s"], "std_agg8": extra["aggregate_8_tok_s"],
                "std_agg8_timing": batch, "std_agg8_input_lens": [o.prompt_len for o in outputs]}

    def vllm(kind, conc):
        def go():
            fig = vb.run(kind, conc, args.tokens, 0)
            key = "vb_%s_c%d" % ("std" if kind == "custom" else "rand", conc)
            return {key: fig.pop("tok_s"), key + "_timing": fig}
        return go

    def module_random():
        fig = module_batch(client, random_prompts, args.tokens)
        return {"m_rand_c8": fig.pop("tok_s"), "m_rand_c8_timing": fig}

    steps = [("run_standard", standard), ("vb std c1", vllm("custom", 1)), ("vb std c8", vllm("custom", 8)),
             ("module random c8", module_random), ("vb random c1", vllm("random", 1)),
             ("vb random c8", vllm("random", 8))]

    def one_round(round_no):
        shift = round_no % len(steps)
        order = steps[shift:] + steps[:shift]
        if round_no % 2:
            order.reverse()
        fig = {"round": round_no + 1, "order": [name for name, _step in order]}
        for name, step in order:
            try:
                fig.update(step())
            except Exception:  # noqa: BLE001 - record it and go on
                fig.setdefault("errors", []).append("%s: %s" % (name, traceback.format_exc()[-1200:]))
                print(fig["errors"][-1], flush=True)
        return fig

    rounds = gpu_bench.run_rounds(args, one_round, lambda fig: gpu_bench.rounded(fig, "floats"))
    lines = ["settings: %d output tokens, ignore_eos, temperature 0; 8 prompts a batch; %d rounds, order rotating"
             % (args.tokens, len(rounds))]
    lines += gpu_bench.summarize(rounds, RATIOS, width=64)
    for key in ("std_agg8", "vb_std_c8", "m_rand_c8", "vb_rand_c8"):
        rows = [r[key + "_timing"] for r in rounds if key + "_timing" in r]
        if rows:
            lines.append("%-10s timing medians (ms): %s; input lens %s" % (key, ", ".join(
                "%s %.1f" % (t, statistics.median(row[t] for row in rows)) for t in TIMING_KEYS),
                next((r.get(key + "_input_lens") or r[key + "_timing"].get("input_lens")) for r in rounds
                     if key + "_timing" in r)))
    gpu_bench.write_summary(args.out, lines)


if __name__ == "__main__":
    main()
