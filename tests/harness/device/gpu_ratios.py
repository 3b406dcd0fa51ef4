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

Pass 6 (--repeats 2 --cell-warmup): every cell is warmed by one short run of each side, then measured as
A B B A (A alternating from cell to cell), each side's figure the mean of its two runs; the runs themselves are
kept (KEY_runs), so the spread of a side against itself (run 2 / run 1) shows the device's own noise beside
the pair's. --sweep-prompts and --c64-tokens make the short cells longer; --previous adds the rounds of an
earlier call (same server) to the summary.

Pass 7 (--c8-tokens): the standard c8 pair is one batch of 8 requests, about 0.7 s at 256 tokens on the H200, too
short a window to read both sides alike; --c8-tokens splits it from c1 ("standard c1", "standard c8") and gives
the c8 pair its own output length, the module's run_standard with a single-stream phase of one prompt (its
figure is not used there) and the batch of 8. --only takes several prefixes, comma-separated, `_` for a space.
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
CONCURRENCY = (1, 8, 64)


def pairs(client, run, tokens, prompt_tokens, seed, sweep_prompts=None, c64_tokens=None, c8_tokens=None):
    """(name, module thunk, vllm thunk); each module thunk returns {figure: value}.

    sweep_prompts: {concurrency: prompts per sweep cell} (default bench_run.sweep_prompt_count's); c64_tokens:
    output tokens of the standard c64 pair (default tokens); c8_tokens: the standard c8 pair apart from c1, with
    this output length (default: c1 and c8 from one run_standard call, as the module makes them).
    """
    sweep_prompts = sweep_prompts or {c: bench_run.sweep_prompt_count(c) for c in CONCURRENCY}
    wide_tokens = c64_tokens or tokens

    def standard(streams):
        def go():
            out_tokens = wide_tokens if streams == 64 else tokens
            extra = bench_run.run_standard(client, out_tokens, warmup=0, streams=streams)["sparkfleet"]
            assert not extra["failures"], extra["failures"][:3]
            fig = {"std_agg%d" % streams: extra["aggregate_8_tok_s"]}
            if streams == 8:
                runs = extra["single_stream_runs"]
                fig.update(std_single=extra["single_stream_tok_s"],
                           std_single_old_def=extra["single_stream_mean_request_tok_s"],
                           # the c1 figure broken down: tokens, the run's wall clock, the requests' own time
                           std_single_tokens=sum(r["output_tokens"] for r in runs), std_single_requests=len(runs),
                           std_single_dur_s=extra["single_stream_duration_s"],
                           std_single_e2el_ms=1000 * sum(r["latency_s"] for r in runs) / len(runs),
                           std_single_ttft_ms=sum(r["ttft_ms"] for r in runs) / len(runs))
            return fig
        return go

    def sweep(conc):
        def go():
            result = bench_run.run_sweep(client, concurrency=(conc,), prompt_tokens=(prompt_tokens,),
                                         output_tokens=tokens, warmup=0, seed=seed, num_prompts=sweep_prompts[conc])
            cell = result["sparkfleet"]["cells"][0]
            assert not cell["failed"], cell["errors"]
            return {"sweep_c%d" % conc: cell["output_throughput"], "sweep_c%d_prompts" % conc: cell["num_prompts"],
                    "sweep_prefix_cache_reset": result["sparkfleet"]["prefix_cache_reset"]}
        return go

    def vb(backend, conc, count, input_len, key, out_tokens=tokens):
        def go():
            fig = {key: run(backend, conc, count, input_len, out_tokens, seed)}
            if conc == 1 and run.last:  # the same breakdown as the module's c1 figure, from the saved result
                last = run.last
                fig.update({key + "_tokens": last.get("total_output_tokens"), key + "_requests": count,
                            key + "_dur_s": last.get("duration"),
                            key + "_e2el_ms": last.get("mean_e2el_ms"), key + "_ttft_ms": last.get("mean_ttft_ms")})
            return fig
        return go

    def standard_c1_c8():
        return dict(vb("openai-chat", 1, 8, 24, "vb_chat_c1")(), **vb("openai-chat", 8, 8, 24, "vb_chat_c8")())

    def standard_c1():
        fig = standard(8)()
        fig.pop("std_agg8")  # the short batch's figure: the "standard c8" pair measures c8
        return fig

    def standard_c8():
        extra = bench_run.run_standard(client, c8_tokens, warmup=0, streams=8,
                                       prompts=bench_run.STANDARD_PROMPTS[:1])["sparkfleet"]
        assert not extra["failures"], extra["failures"][:3]
        return {"std_agg8": extra["aggregate_8_tok_s"]}

    if c8_tokens:
        out = [("standard c1", standard_c1, vb("openai-chat", 1, 8, 24, "vb_chat_c1")),
               ("standard c8", standard_c8, vb("openai-chat", 8, 8, 24, "vb_chat_c8", c8_tokens))]
    else:
        out = [("standard c1+c8", standard(8), standard_c1_c8)]
    out.append(("standard c64", standard(64), vb("openai-chat", 64, 64, 24, "vb_chat_c64", wide_tokens)))
    for conc in CONCURRENCY:
        out.append(("sweep c%d" % conc, sweep(conc),
                    vb("openai", conc, sweep_prompts[conc], prompt_tokens, "vb_cmpl_c%d" % conc)))
    return out


RATIOS = [("standard single stream (c1)", "std_single", "vb_chat_c1"),
          ("standard single stream, old definition", "std_single_old_def", "vb_chat_c1"),
          ("standard 8 streams (c8)", "std_agg8", "vb_chat_c8"),
          ("standard 64 streams (c64)", "std_agg64", "vb_chat_c64")]


def sweep_ratios(sweep_prompts):
    return [("sweep c%d (%d prompts)" % (c, sweep_prompts[c]), "sweep_c%d" % c, "vb_cmpl_c%d" % c)
            for c in CONCURRENCY]


RATIO_KEYS = {mine for _l, mine, _t in RATIOS} | {theirs for _l, _m, theirs in RATIOS}
RATIO_KEYS |= {"sweep_c%d" % c for c in CONCURRENCY} | {"vb_cmpl_c%d" % c for c in CONCURRENCY}


def merge_runs(runs):
    """One side's figures over its repeated runs of a cell: numbers averaged, the ratio figures' runs kept."""
    fig = {}
    for key in runs[0]:
        values = [r[key] for r in runs if key in r]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values) and values:
            fig[key] = sum(values) / len(values)
            if key in RATIO_KEYS:
                fig[key + "_runs"] = values
        else:
            fig[key] = values[-1]
    return fig


def repeat_spread(rounds, pairs_):
    """Per cell, each side against itself: run 2 / run 1 within a round (the device's noise, no pairing)."""
    lines = []
    for label, mine, theirs in pairs_:
        parts = []
        for side, key in (("module", mine), ("vllm", theirs)):
            spread = [r[key + "_runs"][1] / r[key + "_runs"][0] for r in rounds
                      if len(r.get(key + "_runs") or []) >= 2 and r[key + "_runs"][0]]
            if spread:
                parts.append("%s run2/run1 median %.3f (min %.3f max %.3f)" % (
                    side, statistics.median(spread), min(spread), max(spread)))
        if parts:
            lines.append("%-40s repeat spread: %s" % (label, "; ".join(parts)))
    return lines


def per_round(rounds, pairs_):
    """Per cell, every round's paired ratio in round order."""
    return ["%-40s per-round ratios: %s" % (label, " ".join(
        "%.3f" % (r[mine] / r[theirs]) for r in rounds if r.get(mine) and r.get(theirs)))
        for label, mine, theirs in pairs_]


def gaps_ms(row, side):
    """The run's wall clock less its requests' own time: the gaps between back-to-back requests, in ms."""
    return 1000 * row[side + "_dur_s"] - row.get(side + "_requests", 8) * row[side + "_e2el_ms"]


def breakdown(rounds, mine="std_single", theirs="vb_chat_c1"):
    """The c1 ratio as (tokens ratio) x (duration ratio), and where each side's run time goes, medians over rounds.

    Both sides' c1 figure is output tokens over the run's wall clock; a gap between them is either a different
    token count, longer requests (e2el, ttft) or longer gaps between requests (duration - requests x e2el).
    """
    rows = [r for r in rounds if r.get(mine + "_tokens") and r.get(theirs + "_tokens")]
    if not rows:
        return []

    def med(key, side=None):
        return statistics.median(key(r) if callable(key) else r[(side or mine) + key] for r in rows)

    return ["standard c1 breakdown (medians, n=%d): tokens module %d vllm %d; duration module %.3f s vllm %.3f s "
            "(vllm/module %.3f); mean e2el module %.1f vllm %.1f ms; mean ttft module %.1f vllm %.1f ms; gaps "
            "(duration - requests x e2el) module %.1f vllm %.1f ms" % (
                len(rows), med("_tokens"), med("_tokens", theirs), med("_dur_s"), med("_dur_s", theirs),
                med(lambda r: r[theirs + "_dur_s"] / r[mine + "_dur_s"]), med("_e2el_ms"), med("_e2el_ms", theirs),
                med("_ttft_ms"), med("_ttft_ms", theirs),
                med(lambda r: gaps_ms(r, mine)), med(lambda r: gaps_ms(r, theirs)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    gpu_bench.add_common_arguments(parser, rounds=6)
    parser.add_argument("--only", default="", help="run only the pairs whose name starts with this (e.g. 'standard c1')")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each side per cell: 2 measures A B B A")
    parser.add_argument("--cell-warmup", action="store_true", help="one short unrecorded run of each side per cell")
    parser.add_argument("--sweep-prompts", default="", help="prompts per sweep cell at 1,8,64 streams (e.g. 16,64,256)")
    parser.add_argument("--c64-tokens", type=int, default=0, help="output tokens of the standard c64 pair")
    parser.add_argument("--c8-tokens", type=int, default=0, help="output tokens of a standard c8 pair apart from c1")
    parser.add_argument("--previous", nargs="*", default=[], help="round files of earlier calls, for the summary")
    args = parser.parse_args()
    sweep_prompts = ({c: int(n) for c, n in zip(CONCURRENCY, args.sweep_prompts.split(","))} if args.sweep_prompts
                     else {c: bench_run.sweep_prompt_count(c) for c in CONCURRENCY})
    previous = sorted((json.loads(line) for path in args.previous
                       for line in pathlib.Path(path).read_text().splitlines() if line.strip()),
                      key=lambda fig: fig["round"])  # in round order, whatever order the files came in
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

    only = tuple(prefix.replace("_", " ") for prefix in args.only.split(","))
    every = pairs(client, run, args.tokens, args.prompt_tokens, 0, sweep_prompts, args.c64_tokens, args.c8_tokens)
    cells = [name for name, _m, _v in every if name.startswith(only)]
    flip[0] = len(previous) * len(cells)  # a later call goes on alternating where the earlier one stopped
    warm_tokens = 32

    def one_round(round_no):
        round_no += len(previous)
        fig = {"round": round_no + 1, "order": [], "loadavg": pathlib.Path("/proc/loadavg").read_text().split()[:3]}
        measured = pairs(client, run, args.tokens, args.prompt_tokens, round_no, sweep_prompts, args.c64_tokens,
                         args.c8_tokens)
        warm = pairs(client, run, warm_tokens, args.prompt_tokens, 1000 + round_no,
                     {c: max(c, 2) for c in CONCURRENCY}, warm_tokens, warm_tokens if args.c8_tokens else None)
        for (name, module_side, vllm_side), (_n, module_warm, vllm_warm) in zip(measured, warm):
            if name not in cells:
                continue
            sides = [("module", module_side), ("vllm", vllm_side)]
            if flip[0] % 2:
                sides.reverse()
            flip[0] += 1
            order = sides + sides[::-1] * (args.repeats > 1) + sides * (args.repeats > 2)
            order = order[:2 * args.repeats]
            fig["order"].append("%s:%s" % (name, "".join(side[0] for side, _t in order)))
            try:
                if args.cell_warmup:
                    module_warm(), vllm_warm()
            except Exception:  # noqa: BLE001 - a failed warm-up shows again in the measured runs
                print("%s warm-up: %s" % (name, traceback.format_exc()[-400:]), flush=True)
            runs = {"module": [], "vllm": []}
            for side, thunk in order:
                try:
                    runs[side].append(thunk())
                except Exception:  # noqa: BLE001 - record it and go on
                    fig.setdefault("errors", []).append("%s %s: %s" % (name, side, traceback.format_exc()[-1200:]))
                    print(fig["errors"][-1], flush=True)
            for side_runs in runs.values():
                if side_runs:
                    fig.update(merge_runs(side_runs))
        return fig

    shown = {"round", "round_s"} | RATIO_KEYS
    rounds = previous + gpu_bench.run_rounds(args, one_round, lambda fig: gpu_bench.rounded(fig, shown))
    ratios = RATIOS + sweep_ratios(sweep_prompts)
    lines = ["settings: %d output tokens (standard c8: %d, c64: %d), ignore_eos, temperature 0; sweep prompts %d "
             "tokens, %s prompts at concurrency %s; %s; %d rounds; cells %s" % (
                 args.tokens, args.c8_tokens or args.tokens, args.c64_tokens or args.tokens, args.prompt_tokens,
                 [sweep_prompts[c] for c in CONCURRENCY], list(CONCURRENCY),
                 "pairs back to back, first side alternating" if args.repeats == 1 else
                 "each cell %s, %d runs a side, A B B A with A alternating" % (
                     "warmed by a %d-token run of each side" % warm_tokens if args.cell_warmup else "not warmed",
                     args.repeats), len(rounds), ", ".join(cells))]
    if previous:
        lines.append("rounds 1-%d from %s (an earlier call, same server)" % (len(previous), " ".join(args.previous)))
    lines += gpu_bench.summarize(rounds, ratios, width=40)
    lines += per_round(rounds, ratios)
    lines += repeat_spread(rounds, ratios)
    lines += breakdown(rounds)
    gpu_bench.write_summary(args.out, lines)


if __name__ == "__main__":
    main()
