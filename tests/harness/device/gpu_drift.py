"""Drift for issue 18 item 3 (pass 8): each side of every cell run N times in a row on one server, no pairing.

Runs ON the device (from gpu-drift.sh) against one healthy vLLM. Passes 4, 6 and 7 paired the module with
`vllm bench serve` and found that the same side, run twice back to back, can differ by up to 25%. A paired ratio
cannot be steadier than its two sides, so this measures each side's own run-to-run spread first: per cell, one
short warm-up run of each side, then side A --repeats times in a row, then side B as many times (A alternating
from cell to cell). The cells and both sides' figures are gpu_ratios.py's (pairs(), with --c8-tokens, so
standard c1 and c8 are apart); every run uses the same request shape, the seed changing from run to run.

Beside each run's figure it records where the time went, to test whether a decode step is bound by the CPU or
the GPU: the run's wall clock; CPU seconds of the server's API process(es) and of its engine core (from
/proc/PID/stat, the processes of --server-pgid) and of this client process; and the GPU's mean utilization, SM
and memory clocks, power and temperature over the run (nvidia-smi sampling every 200 ms in the background).

  gpu_drift.py --url http://127.0.0.1:8000 --model NAME --tokenizer SNAPSHOT --label tiny --repeats 5 \
      --tokens 256 --c8-tokens 1024 --c64-tokens 512 --sweep-prompts 8,64,256 --server-pgid PGID \
      --out drift-tiny.jsonl --workdir vb      # -> drift-tiny.jsonl (one line a run), drift-tiny-summary.txt

Summary, per cell and side: n, median, min, max, max/min, coefficient of variation (sample standard deviation /
mean), the ratio of the two sides' medians (not a paired ratio: the runs are a block apart), and the medians of
GPU utilization, SM clock and the processes' CPU use (CPU seconds / wall seconds).
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import threading
import time
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import gpu_bench  # noqa: E402  (imports vLLM before ansible; see its comment)
import gpu_ratios  # noqa: E402

bench_run = gpu_bench.bench_run
# cell (gpu_ratios.pairs' name with --c8-tokens), the module's figure, vllm bench serve's figure
CELLS = [("standard c1", "std_single", "vb_chat_c1"), ("standard c8", "std_agg8", "vb_chat_c8"),
         ("standard c64", "std_agg64", "vb_chat_c64"), ("sweep c1", "sweep_c1", "vb_cmpl_c1"),
         ("sweep c8", "sweep_c8", "vb_cmpl_c8"), ("sweep c64", "sweep_c64", "vb_cmpl_c64")]
GPU_FIELDS = ("gpu_util", "sm_mhz", "mem_mhz", "power_w", "temp_c")
TICK = os.sysconf("SC_CLK_TCK")


class GpuSampler:
    """nvidia-smi every 200 ms in the background; window(t0, t1) is the mean of each field over that span."""

    def __init__(self):
        self.samples = []
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=utilization.gpu,clocks.sm,clocks.mem,power.draw,temperature.gpu",
                 "--format=csv,noheader,nounits", "-lms", "200"], stdout=subprocess.PIPE, text=True)
        except OSError:
            self.proc = None
            return
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.samples.append((time.time(), [float(v) for v in line.split(",")]))
            except ValueError:
                continue

    def window(self, start, end):
        rows = [values for stamp, values in self.samples if start <= stamp <= end]
        if not rows:
            return {}
        fig = {name: round(sum(r[i] for r in rows) / len(rows), 1) for i, name in enumerate(GPU_FIELDS)}
        fig["gpu_samples"] = len(rows)
        return fig

    def stop(self):
        if self.proc:
            self.proc.terminate()


def server_cpu(pgid):
    """CPU seconds (user + system) of the processes of group pgid: the engine core's and the rest's (API)."""
    out = {"api": 0.0, "engine": 0.0}
    if not pgid:
        return out
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as handle:
                stat = handle.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        rest = stat[stat.rindex(")") + 2:].split()
        if int(rest[2]) != pgid:
            continue
        out["engine" if comm.startswith("VLLM::Engine") else "api"] += (int(rest[11]) + int(rest[12])) / TICK
    return out


def timed(thunk, key, sampler, pgid):
    """Run one side once: its figure under key and where the run's time went."""
    cpu0, own0, start = server_cpu(pgid), time.process_time(), time.time()
    fig = thunk()
    end, own1, cpu1 = time.time(), time.process_time(), server_cpu(pgid)
    wall = end - start
    row = {"value": fig[key], "t0": round(start, 3), "wall_s": round(wall, 3),
           "api_cpu_s": round(cpu1["api"] - cpu0["api"], 2), "engine_cpu_s": round(cpu1["engine"] - cpu0["engine"], 2),
           "client_cpu_s": round(own1 - own0, 2)}
    row.update(sampler.window(start, end))
    return row


def spread(values):
    """n, median, min, max, max/min, coefficient of variation in per cent."""
    mean = statistics.mean(values)
    cv = 100 * statistics.stdev(values) / mean if len(values) > 1 else 0.0
    return len(values), statistics.median(values), min(values), max(values), max(values) / min(values), cv


def summary_lines(label, runs, settings):
    lines = ["drift %s: %s" % (label, settings)]
    for cell, _mine, _theirs in CELLS:
        medians = {}
        for side in ("module", "vllm"):
            rows = [r for r in runs if r["cell"] == cell and r["side"] == side]
            if not rows:
                continue
            n, med, low, high, max_min, cv = spread([r["value"] for r in rows])
            medians[side] = med
            use = "; ".join("%s %.2f" % (name, statistics.median(r[name + "_cpu_s"] / r["wall_s"] for r in rows))
                            for name in ("api", "engine", "client"))
            gpu = ""
            if all("gpu_util" in r for r in rows):
                gpu = "; gpu util %.0f%%, sm %.0f-%.0f MHz" % (
                    statistics.median(r["gpu_util"] for r in rows), min(r["sm_mhz"] for r in rows),
                    max(r["sm_mhz"] for r in rows))
            lines.append("%-13s %-6s n=%d median %9.1f tok/s (min %.1f max %.1f) max/min %.3f cv %.1f%%; "
                         "wall %.1f s; cpu/wall %s%s" % (cell, side, n, med, low, high, max_min, cv,
                                                         statistics.median(r["wall_s"] for r in rows), use, gpu))
        if len(medians) == 2:
            lines.append("%-13s module median / vllm median %.3f (blocks, not pairs)" % (
                cell, medians["module"] / medians["vllm"]))
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    gpu_bench.add_common_arguments(parser, rounds=1)
    parser.add_argument("--label", required=True, help="the model's name in the summary (tiny, large)")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each side in a row, per cell")
    parser.add_argument("--only", default="", help="cells whose name starts with one of these (comma-separated, _ a space)")
    parser.add_argument("--sweep-prompts", default="8,64,256", help="prompts per sweep cell at 1,8,64 streams")
    parser.add_argument("--c64-tokens", type=int, default=512, help="output tokens of the standard c64 cell")
    parser.add_argument("--c8-tokens", type=int, default=1024, help="output tokens of the standard c8 cell")
    parser.add_argument("--server-pgid", type=int, default=0, help="the server's process group (its CPU seconds)")
    args = parser.parse_args()
    sweep_prompts = {c: int(n) for c, n in zip(gpu_ratios.CONCURRENCY, args.sweep_prompts.split(","))}
    workdir = pathlib.Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    client = bench_run.Client(args.url, args.model, api="chat")
    run = gpu_bench.vllm_bench_runner(args.url, args.model, args.tokenizer, workdir)
    sampler = GpuSampler()
    t0 = time.time()

    def warm(conc, count, tokens, seed):
        return run("openai", conc, count, args.prompt_tokens, tokens, seed)

    gpu_bench.warm_up(client, args.tokens, warm)
    print("warm-up %.1f s" % (time.time() - t0), flush=True)
    only = tuple(prefix.replace("_", " ") for prefix in args.only.split(","))
    keys = {cell: (mine, theirs) for cell, mine, theirs in CELLS}
    warm_pairs = {name: (m, v) for name, m, v in gpu_ratios.pairs(
        client, run, 32, args.prompt_tokens, 999, {c: max(c, 2) for c in gpu_ratios.CONCURRENCY}, 32, 32)}
    runs, errors, last = [], [], 0.0
    settings = ("%d output tokens (standard c8: %d, c64: %d), ignore_eos, temperature 0; sweep prompts %d tokens, "
                "%s prompts at concurrency %s; each cell warmed by a 32-token run of each side, then %d runs of one "
                "side in a row and %d of the other, the first side alternating from cell to cell" % (
                    args.tokens, args.c8_tokens, args.c64_tokens, args.prompt_tokens,
                    [sweep_prompts[c] for c in gpu_ratios.CONCURRENCY], list(gpu_ratios.CONCURRENCY), args.repeats,
                    args.repeats))
    with open(args.out, "w") as sink:
        for index, (cell, _mine, _theirs) in enumerate(CELLS):
            if not cell.startswith(only):
                continue
            started = time.time()
            if args.deadline and runs and started + last > args.deadline:
                print("deadline: stopping before %s" % cell, flush=True)
                break
            order = ["module", "vllm"] if index % 2 == 0 else ["vllm", "module"]
            try:
                warm_pairs[cell][0](), warm_pairs[cell][1]()
            except Exception:  # noqa: BLE001 - a failed warm-up shows again in the measured runs
                print("%s warm-up: %s" % (cell, traceback.format_exc()[-400:]), flush=True)
            for side in order:
                for i in range(args.repeats):
                    measured = {name: (m, v) for name, m, v in gpu_ratios.pairs(
                        client, run, args.tokens, args.prompt_tokens, 100 + i, sweep_prompts, args.c64_tokens,
                        args.c8_tokens)}
                    thunk = measured[cell][0 if side == "module" else 1]
                    key = keys[cell][0 if side == "module" else 1]
                    try:
                        row = timed(thunk, key, sampler, args.server_pgid)
                    except Exception:  # noqa: BLE001 - record it and go on
                        errors.append("%s %s %d: %s" % (cell, side, i, traceback.format_exc()[-800:]))
                        print(errors[-1], flush=True)
                        continue
                    row = dict({"model": args.label, "cell": cell, "side": side, "i": i + 1, "key": key}, **row)
                    runs.append(row)
                    sink.write(json.dumps(row) + "\n")
                    sink.flush()
                    print(json.dumps(row), flush=True)
            last = time.time() - started
    sampler.stop()
    lines = summary_lines(args.label, runs, settings)
    if errors:
        lines.append("errors: %d (see the log)" % len(errors))
    gpu_bench.write_summary(args.out, lines)


if __name__ == "__main__":
    main()
