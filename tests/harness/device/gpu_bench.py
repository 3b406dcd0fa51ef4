"""Paired rounds on the GPU host: the collection's throughput code against `vllm bench serve`, same server.

Runs ON the device (from gpu-run.sh) against one healthy vLLM. Each round runs both sides back to back, the
first side alternating between rounds. Sides and what each figure is:

module side (the collection's own code: plugins/module_utils/bench_run.py through .collections):
  std_single        run_standard's single_stream_tok_s (since issue 18 item 3: the 8 prompts in one run at
                    concurrency 1, tokens over its wall clock; before: mean over 8 of tokens_i / latency_i)
  std_single_sum    the same 8 outputs, sum(tokens) / sum(latency)           (ratio of sums, no gaps)
  std_single_wall   the same 8 outputs, sum(tokens) / (last end - first start) (vllm bench's definition)
  std_agg8          run_standard's aggregate_8_tok_s (one batch of 8)
  sweep_cN          run_sweep's cell output_throughput at concurrency N (N requests, all at once)
  semantic_cN       the module's client (Client.stream = openai_client.run_streams) with vllm bench serve's
                    semantics: NUM_PROMPTS[N] prompts at max concurrency N, bench_metrics.calculate_metrics
vllm side (vllm.benchmarks.serve.main in this process, so no import cost per call):
  vb_chat_c1/c8     --backend openai-chat, 8 prompts, random input 24 tokens (compare_vllm_bench.py's setup)
  vb_cmpl_cN        --backend openai (/v1/completions), NUM_PROMPTS[N] prompts, random input PROMPT tokens

Writes one JSON line per round to --out and a summary (paired ratios, median, min-max) at the end.
"""
import argparse
import contextlib
import importlib
import json
import pathlib
import random
import statistics
import sys
import time
import traceback

REPO = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / ".collections"))

# vLLM (and torch._dynamo, which it pulls in) before ansible: importing ansible.module_utils replaces
# sys.intern with a patch object, and torch._dynamo's polyfills then refuse to load ("substitute_in_graph
# expects a function but got <class '...SysInternPatch'>"), so `vllm bench serve` cannot start after it.
for _early in ("torch._dynamo", "vllm.benchmarks.serve"):
    with contextlib.suppress(ImportError):  # not on the device (a dry run elsewhere)
        importlib.import_module(_early)

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_metrics as bm  # noqa: E402
from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_run  # noqa: E402
from ansible_collections.sparkfleet.vllm.plugins.module_utils import openai_client as oc  # noqa: E402

CONCURRENCY = (1, 8, 64)
NUM_PROMPTS = {1: 16, 8: 16, 64: 128}


class Recorder:
    """A Client stream that keeps every batch's outputs, so run_standard's own outputs can be re-read."""

    def __init__(self):
        self.batches = []

    def __call__(self, url, payloads, **kwargs):
        outputs, duration = oc.run_streams(url, payloads, **kwargs)
        self.batches.append((outputs, duration))
        return outputs, duration


class VllmBench:
    """vllm bench serve in this process (no import cost per call): each run's saved result file, read back."""

    def __init__(self, url, model, tokenizer, workdir, extra=()):
        from vllm.benchmarks.serve import add_cli_args, main  # noqa: PLC0415 - only on the device
        from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: PLC0415

        self.parser = FlexibleArgumentParser()
        add_cli_args(self.parser)
        self.main = main
        self.common = ["--base-url", url, "--model", model, "--tokenizer", str(tokenizer), "--ignore-eos",
                       "--temperature", "0", "--num-warmups", "0", "--disable-tqdm", "--save-result",
                       "--percentile-metrics", "ttft,tpot,itl,e2el",
                       "--result-dir", str(workdir)] + list(extra)
        self.workdir = workdir
        self.counter = 0

    @staticmethod
    def backend(backend):
        endpoint = "/v1/chat/completions" if backend == "openai-chat" else "/v1/completions"
        return ["--backend", backend, "--endpoint", endpoint]

    def result(self, argv, label, concurrency, num_prompts):
        """Run with argv (dataset and backend) at max concurrency; the saved result, every prompt completed."""
        self.counter += 1
        name = "vb-%s-c%d-%03d.json" % (label, concurrency, self.counter)
        returned = self.main(self.parser.parse_args(self.common + argv + [
            "--num-prompts", str(num_prompts), "--max-concurrency", str(concurrency), "--result-filename", name]))
        try:
            with open(self.workdir / name) as handle:
                result = json.load(handle)
        except OSError:
            result = returned
        assert result["completed"] == num_prompts, result.get("errors", [])[:3]
        return result


def vllm_bench_runner(url, model, tokenizer, workdir):
    """run(backend, concurrency, num_prompts, input_len, tokens, seed) -> vllm bench serve's output tok/s."""
    bench = VllmBench(url, model, tokenizer, workdir)

    def run(backend, concurrency, num_prompts, input_len, tokens, seed):
        argv = bench.backend(backend) + ["--dataset-name", "random", "--random-input-len", str(input_len),
                                         "--random-output-len", str(tokens), "--seed", str(seed)]
        result = bench.result(argv, backend, concurrency, num_prompts)
        run.last = result  # the whole saved result, for callers that break the figure down (gpu_ratios.py)
        return result["output_throughput"]

    run.last = None
    return run


def warm_up(client, tokens, vllm_random_run):
    """Both sides share one warmed server: the module's warm-up at 64 streams, then one vllm bench run at 64.

    vllm_random_run(concurrency, num_prompts, output_tokens, seed) runs `vllm bench serve` on random prompts.
    """
    bench_run.warm_up(client, 2, streams=64, tokens=tokens)
    vllm_random_run(64, 64, 32, 999)


def run_rounds(args, one_round, shown, stop=None):
    """Rounds until --rounds or until the next would end past --deadline; one JSON line each to --out.

    one_round(round_no) returns the round's figures; shown(fig) what its progress line prints; stop(fig), when
    true, ends the rounds before that round is written.
    """
    rounds, last = [], 0.0
    with open(args.out, "w") as sink:
        for round_no in range(args.rounds):
            started = time.time()
            if rounds and args.deadline and started + last > args.deadline:
                print("deadline: stopping after %d rounds" % len(rounds), flush=True)
                break
            fig = one_round(round_no)
            last = time.time() - started
            fig["round_s"] = round(last, 1)
            rounds.append(fig)
            if stop and stop(fig):
                break
            sink.write(json.dumps(fig) + "\n")
            sink.flush()
            print("round %d (%.1f s): %s" % (round_no + 1, last, json.dumps(shown(fig))), flush=True)
    return rounds


def rounded(fig, keys=None):
    """fig's figures rounded to 0.1 for a progress line: keys (default all); only floats when keys is 'floats'."""
    if keys == "floats":
        return {k: round(v, 1) for k, v in fig.items() if isinstance(v, float)}
    return {k: round(v, 1) if isinstance(v, float) else v for k, v in fig.items() if keys is None or k in keys}


def write_summary(out, lines):
    """Print the summary lines and write them beside --out (NAME.jsonl -> NAME-summary.txt)."""
    print("\n".join(lines), flush=True)
    with open(out.replace(".jsonl", "") + "-summary.txt", "w") as handle:
        handle.write("\n".join(lines) + "\n")


def module_side(client, recorder, tokens, prompt_tokens, seed):
    fig = {}
    recorder.batches.clear()
    std = bench_run.run_standard(client, tokens, warmup=0)
    extra = std["sparkfleet"]
    assert not extra["failures"], extra["failures"]
    fig["std_single"] = extra["single_stream_tok_s"]
    fig["std_agg8"] = extra["aggregate_8_tok_s"]
    singles = recorder.batches[0][0]  # run_standard streams the 8 single-stream prompts as one run
    toks = sum(bm.output_length(o)[0] for o in singles)
    fig["std_single_sum"] = toks / sum(o.latency for o in singles)
    fig["std_single_wall"] = toks / (max(o.start_time + o.latency for o in singles) - min(o.start_time for o in singles))
    fig["std_single_ttft_ms"] = statistics.mean(o.ttft for o in singles) * 1000
    sweep = bench_run.run_sweep(client, concurrency=CONCURRENCY, prompt_tokens=(prompt_tokens,),
                                output_tokens=tokens, warmup=0, seed=seed)
    for cell in sweep["sparkfleet"]["cells"]:
        assert not cell["failed"], cell["errors"]
        fig["sweep_c%d" % cell["concurrency"]] = cell["output_throughput"]
    fig["sweep_prefix_cache_reset"] = sweep["sparkfleet"]["prefix_cache_reset"]
    for conc in CONCURRENCY:
        rng = random.Random("%s-semantic-%s" % (seed, conc))
        prompts = [bench_run.random_prompt(client, prompt_tokens, rng)[0] for _i in range(NUM_PROMPTS[conc])]
        api = "completions" if isinstance(prompts[0], list) else client.api
        outputs, duration = client.stream([client.payload(p, tokens, api=api) for p in prompts], concurrency=conc,
                                          api=api)
        metrics = bm.calculate_metrics(outputs, duration)
        assert not metrics["failed"], [e for e in metrics["errors"] if e][:3]
        fig["semantic_c%d" % conc] = metrics["output_throughput"]
    return fig


def vllm_side(run, tokens, prompt_tokens, seed):
    fig = {"vb_chat_c1": run("openai-chat", 1, 8, 24, tokens, seed),
           "vb_chat_c8": run("openai-chat", 8, 8, 24, tokens, seed)}
    for conc in CONCURRENCY:
        fig["vb_cmpl_c%d" % conc] = run("openai", conc, NUM_PROMPTS[conc], prompt_tokens, tokens, seed)
    return fig


PAIRS = [("standard single stream (module def)", "std_single", "vb_chat_c1"),
         ("standard single stream, ratio of sums", "std_single_sum", "vb_chat_c1"),
         ("standard single stream, vllm bench def (wall)", "std_single_wall", "vb_chat_c1"),
         ("standard 8 streams", "std_agg8", "vb_chat_c8")]
PAIRS += [("sweep as-is c%d (N=c requests)" % c, "sweep_c%d" % c, "vb_cmpl_c%d" % c) for c in CONCURRENCY]
PAIRS += [("sweep with bench semantics c%d (N=%d)" % (c, NUM_PROMPTS[c]), "semantic_c%d" % c, "vb_cmpl_c%d" % c)
          for c in CONCURRENCY]


def summarize(rounds, pairs=None, tolerance=0.05, width=48):
    """One line per (label, module key, vllm key) pair: both medians and the paired ratio's median and range."""
    lines = []
    for label, mine, theirs in PAIRS if pairs is None else pairs:
        ratios = [r[mine] / r[theirs] for r in rounds if r.get(mine) and r.get(theirs)]
        if not ratios:
            continue
        med = statistics.median(ratios)
        lines.append("%-*s module median %9.1f, vllm median %9.1f tok/s; paired ratio median %.3f (min %.3f max %.3f, "
                     "n=%d) %s" % (width, label, statistics.median(r[mine] for r in rounds if r.get(mine)),
                                   statistics.median(r[theirs] for r in rounds if r.get(theirs)), med, min(ratios),
                                   max(ratios), len(ratios), "within" if abs(med - 1) <= tolerance else "OUTSIDE"))
        lines[-1] += "; %d of %d rounds within" % (sum(abs(x - 1) <= tolerance for x in ratios), len(ratios))
    return lines


def add_common_arguments(parser, rounds):
    """The arguments gpu_bench.py and gpu_ratios.py share: the server, the request shape, rounds and outputs."""
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--deadline", type=float, default=0, help="epoch seconds: start no round that would end later")
    parser.add_argument("--out", required=True)
    parser.add_argument("--workdir", required=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser, rounds=5)
    args = parser.parse_args()
    workdir = pathlib.Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    recorder = Recorder()
    client = bench_run.Client(args.url, args.model, api="chat", stream=recorder)
    run = vllm_bench_runner(args.url, args.model, args.tokenizer, workdir)
    t0 = time.time()

    def warm(conc, count, tokens, seed):
        return run("openai", conc, count, args.prompt_tokens, tokens, seed)

    warm_up(client, args.tokens, warm)
    print("warm-up %.1f s" % (time.time() - t0), flush=True)

    def one_round(round_no):
        fig = {"round": round_no + 1, "first": "module" if round_no % 2 == 0 else "vllm"}
        order = ("module", "vllm") if round_no % 2 == 0 else ("vllm", "module")
        for side in order:
            try:
                if side == "module":
                    fig.update(module_side(client, recorder, args.tokens, args.prompt_tokens, round_no))
                else:
                    fig.update(vllm_side(run, args.tokens, args.prompt_tokens, round_no))
            except Exception:  # noqa: BLE001 - record it and go on with the other side
                fig.setdefault("errors", []).append(traceback.format_exc()[-1500:])
                print(fig["errors"][-1], flush=True)
        return fig

    def both_sides_failed(fig):
        if len(fig.get("errors", [])) == 2:
            print("both sides failed: stopping", flush=True)
            return True
        return False

    rounds = run_rounds(args, one_round, rounded, stop=both_sides_failed)
    lines = ["settings: %d output tokens, ignore_eos, temperature 0; sweep/bench prompts %d tokens; prompts per "
             "concurrency %s; %d rounds" % (args.tokens, args.prompt_tokens, NUM_PROMPTS, len(rounds))]
    write_summary(args.out, lines + summarize(rounds))


if __name__ == "__main__":
    main()
