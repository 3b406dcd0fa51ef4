"""Client capacity: can the throughput module's client ingest >= 20,000 tok/s over 64 streams on one core?

The notes' fastest cell is 4,247 tok/s across 64 streams (RTX PRO 6000,
26B-A4B, 1k prompts); the client must never be what limits a measurement, so
it has to take in several times that. This runs the stand-in token source
(tests/benchmarks/fast_token_source.py, not vLLM) in a separate process and
the collection's client (`openai_client.run_streams`, one thread) against it,
one token per event, and prints tokens per second of wall time and per second
of the client's own CPU time.

    .venv/bin/python tests/benchmarks/client_capacity.py [--streams 64] [--tokens 1024] [--min 20000]

Exit status 1 when the figure is below --min.
"""
import argparse
import os
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / ".collections"))

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_metrics, openai_client  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--min", type=float, default=20000.0, help="required tok/s")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    server = subprocess.Popen([sys.executable, str(HERE / "fast_token_source.py"), "0"], stdout=subprocess.PIPE,
                              text=True)
    try:
        port = int(server.stdout.readline().split()[-1])
        url = "http://127.0.0.1:%d/v1/completions" % port
        payload = {"model": "fake", "prompt": "hi", "max_tokens": args.tokens, "stream": True,
                   "stream_options": {"include_usage": True}, "ignore_eos": True}
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core for the client
        best = 0.0
        for attempt in range(args.rounds):
            cpu0 = time.process_time()
            outputs, duration = openai_client.run_streams(url, [payload] * args.streams, concurrency=args.streams)
            cpu = time.process_time() - cpu0
            metrics = bench_metrics.calculate_metrics(outputs, duration)
            failed = [o.error for o in outputs if not o.success]
            assert not failed, failed[:3]
            assert metrics["total_output_tokens"] == args.streams * args.tokens, metrics["total_output_tokens"]
            wall_rate = metrics["output_throughput"]
            cpu_rate = metrics["total_output_tokens"] / cpu if cpu else float("inf")
            best = max(best, wall_rate)
            print("round %d: %d streams x %d tokens in %.2f s wall, %.2f s client CPU: %.0f tok/s wall, "
                  "%.0f tok/s per client CPU-second, %d events" % (
                      attempt + 1, args.streams, args.tokens, duration, cpu, wall_rate, cpu_rate,
                      sum(o.chunks for o in outputs)))
    finally:
        server.terminate()
        server.wait(10)
    verdict = "meets" if best >= args.min else "BELOW"
    print("client capacity: %.0f tok/s across %d streams (best of %d) %s the %.0f tok/s requirement"
          % (best, args.streams, args.rounds, verdict, args.min))
    return 0 if best >= args.min else 1


if __name__ == "__main__":
    sys.exit(main())
