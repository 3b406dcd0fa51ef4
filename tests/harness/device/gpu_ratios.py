"""Paired ratios for issue 18 item 3: the throughput module's own modes against `vllm bench serve`, same server.

Runs ON the device (from gpu-ratios.sh) against one healthy vLLM. Unlike gpu_bench.py (which compared
definitions side by side, pairing whole rounds), every figure here is paired with its `vllm bench serve` run
back to back, and the side that goes first alternates from pair to pair, so a drift of the machine's speed
during a round (measured: up to 30% between two runs a few seconds apart) lands on both sides of a pair.

Pairs (module figure / vllm figure), output tokens --tokens, ignore_eos, temperature 0:
  standard c1   run_standard(streams=8).single_stream_tok_s    / openai-chat, 8 prompts, max concurrency 1
  standard c8   run_standard(streams=8).aggregate_8_tok_s      / openai-chat, 8 prompts, max concurrency 8
  standard c64  run_standard(streams=64).aggregate_8_tok_s     / openai-chat, 64 prompts, max concurrency 64
  sweep cN      run_sweep(concurrency=(N,)) cell output_throughput / openai (completions), random prompts of
                --prompt-tokens, sweep_prompt_count(N) prompts at max concurrency N (16, 16, 128)
The standard chat prompts are the module's eight fixed ones; vllm's are random, 24 tokens (about as long).
Also recorded: the single-stream figure under the old definition (mean of per-request rates) from the same
requests, so the definition's share of the gap is visible.
"""
import argparse
import pathlib
import sys
import time
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import gpu_bench  # noqa: E402  (imports vLLM before ansible; see its comment)

bench_run = gpu_bench.bench_run
CONCURRENCY = (1, 8, 64)


def pairs(client, run, tokens, prompt_tokens, seed):
    """(name, module thunk, vllm thunk); each module thunk returns {figure: value}."""
    def standard(streams):
        def go():
            extra = bench_run.run_standard(client, tokens, warmup=0, streams=streams)["sparkfleet"]
            assert not extra["failures"], extra["failures"][:3]
            fig = {"std_agg%d" % streams: extra["aggregate_8_tok_s"]}
            if streams == 8:
                fig.update(std_single=extra["single_stream_tok_s"],
                           std_single_old_def=extra["single_stream_mean_request_tok_s"])
            return fig
        return go

    def sweep(conc):
        def go():
            result = bench_run.run_sweep(client, concurrency=(conc,), prompt_tokens=(prompt_tokens,),
                                         output_tokens=tokens, warmup=0, seed=seed)
            cell = result["sparkfleet"]["cells"][0]
            assert not cell["failed"], cell["errors"]
            return {"sweep_c%d" % conc: cell["output_throughput"], "sweep_c%d_prompts" % conc: cell["num_prompts"],
                    "sweep_prefix_cache_reset": result["sparkfleet"]["prefix_cache_reset"]}
        return go

    def vb(backend, conc, count, input_len, key):
        return lambda: {key: run(backend, conc, count, input_len, tokens, seed)}

    def standard_c1_c8():
        return dict(vb("openai-chat", 1, 8, 24, "vb_chat_c1")(), **vb("openai-chat", 8, 8, 24, "vb_chat_c8")())

    out = [("standard c1+c8", standard(8), standard_c1_c8),
           ("standard c64", standard(64), vb("openai-chat", 64, 64, 24, "vb_chat_c64"))]
    for conc in CONCURRENCY:
        out.append(("sweep c%d" % conc, sweep(conc),
                    vb("openai", conc, bench_run.sweep_prompt_count(conc), prompt_tokens, "vb_cmpl_c%d" % conc)))
    return out


RATIOS = [("standard single stream (c1)", "std_single", "vb_chat_c1"),
          ("standard single stream, old definition", "std_single_old_def", "vb_chat_c1"),
          ("standard 8 streams (c8)", "std_agg8", "vb_chat_c8"),
          ("standard 64 streams (c64)", "std_agg64", "vb_chat_c64")]
RATIOS += [("sweep c%d (%d prompts)" % (c, bench_run.sweep_prompt_count(c)), "sweep_c%d" % c, "vb_cmpl_c%d" % c)
           for c in CONCURRENCY]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    gpu_bench.add_common_arguments(parser, rounds=6)
    parser.add_argument("--only", default="", help="run only the pairs whose name starts with this (e.g. 'standard c1')")
    args = parser.parse_args()
    workdir = pathlib.Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    client = bench_run.Client(args.url, args.model, api="chat")
    run = gpu_bench.vllm_bench_runner(args.url, args.model, args.tokenizer, workdir)
    t0 = time.time()

    def warm(conc, count, tokens, seed):
        return run("openai", conc, count, args.prompt_tokens, tokens, seed)

    gpu_bench.warm_up(client, args.tokens, warm)
    print("warm-up %.1f s" % (time.time() - t0), flush=True)
    flip = [0]  # the first side alternates from pair to pair, across rounds

    def one_round(round_no):
        fig = {"round": round_no + 1, "order": []}
        for name, module_side, vllm_side in pairs(client, run, args.tokens, args.prompt_tokens, round_no):
            if not name.startswith(args.only):
                continue
            sides = [("module", module_side), ("vllm", vllm_side)]
            if flip[0] % 2:
                sides.reverse()
            flip[0] += 1
            fig["order"].append("%s:%s" % (name, sides[0][0]))
            for side, thunk in sides:
                try:
                    fig.update(thunk())
                except Exception:  # noqa: BLE001 - record it and go on
                    fig.setdefault("errors", []).append("%s %s: %s" % (name, side, traceback.format_exc()[-1200:]))
                    print(fig["errors"][-1], flush=True)
        return fig

    rounds = gpu_bench.run_rounds(args, one_round, lambda fig: gpu_bench.rounded(fig, set(fig) - {"order"}))
    lines = ["settings: %d output tokens, ignore_eos, temperature 0; sweep prompts %d tokens, %s prompts at "
             "concurrency %s; pairs back to back, first side alternating; %d rounds" % (
                 args.tokens, args.prompt_tokens, [bench_run.sweep_prompt_count(c) for c in CONCURRENCY],
                 list(CONCURRENCY), len(rounds))]
    lines += gpu_bench.summarize(rounds, RATIOS, width=40)
    gpu_bench.write_summary(args.out, lines)


if __name__ == "__main__":
    main()
