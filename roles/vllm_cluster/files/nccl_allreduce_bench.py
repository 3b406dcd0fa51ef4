# -*- coding: utf-8 -*-
# Copyright (c) 2026 sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""All-reduce bus bandwidth across ranks with torch.distributed, the fabric gate's probe.

Start one process per GPU with torchrun (or any launcher that sets the env://
variables RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and LOCAL_RANK), on one
node or several:

    torchrun --nnodes 2 --node-rank 0 --nproc-per-node 1 \
        --master-addr 192.168.100.10 --master-port 29511 \
        nccl_allreduce_bench.py --min-busbw-gbps 10

Bus bandwidth is computed as nccl-tests does for all-reduce:
algbw = bytes / time, busbw = algbw * 2 (n - 1) / n. Rank 0 prints one JSON
document; every rank exits 0 when the busbw at the largest size reaches
--min-busbw-gbps, 1 when it does not, 2 when the reduced values are wrong.
`--backend gloo` runs the same measurement on CPUs (tests use it).
"""

import argparse
import json
import os
import socket
import sys
import time

# NVLink multicast (NVLS) can take shared multi-GPU hosts out of service; the
# Spark fabric never uses it, so keep it off unless the caller says otherwise.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    """``64M`` -> 67108864 bytes."""
    text = text.strip().upper().rstrip("B")
    unit = text[-1] if text and text[-1] in _UNITS else ""
    number = text[:-1] if unit else text
    return int(float(number) * _UNITS[unit])


def bus_bandwidth(size_bytes, seconds, world_size):
    """(algbw, busbw) in GB/s (10^9 bytes) for one all-reduce of size_bytes taking seconds."""
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * 2.0 * (world_size - 1) / world_size


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--backend", choices=("nccl", "gloo"), default="nccl",
                        help="nccl on GPUs (default), gloo on CPUs")
    parser.add_argument("--sizes", default="1M,16M,64M,256M,1G",
                        help="comma-separated message sizes in bytes, K/M/G suffixes allowed")
    parser.add_argument("--iters", type=int, default=20, help="timed all-reduces per size")
    parser.add_argument("--warmup", type=int, default=5, help="untimed all-reduces per size")
    parser.add_argument("--min-busbw-gbps", type=float, default=0.0,
                        help="exit 1 when busbw at the largest size is below this (GB/s)")
    parser.add_argument("--output", help="also write the JSON document to this file (rank 0)")
    parser.add_argument("--timeout-s", type=int, default=300, help="rendezvous and collective timeout")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    import datetime

    import torch
    import torch.distributed as dist

    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if args.backend == "nccl":
        if not torch.cuda.is_available():
            print(json.dumps({"error": "--backend nccl needs CUDA; torch sees no GPU"}))
            return 3
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend=args.backend, init_method="env://",
                            timeout=datetime.timedelta(seconds=args.timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    results = []
    correct = True
    expected = world * (world + 1) / 2.0
    for size in sizes:
        count = max(1, size // 4)
        buf = torch.empty(count, dtype=torch.float32, device=device)
        buf.fill_(rank + 1.0)
        dist.all_reduce(buf)
        sync()
        # Small integers sum exactly in float32, so any difference is a transport fault.
        if not bool((buf == expected).all()):
            correct = False
        for _dummy in range(args.warmup):
            dist.all_reduce(buf)
        sync()
        dist.barrier()
        start = time.perf_counter()
        for _dummy in range(args.iters):
            dist.all_reduce(buf)
        sync()
        elapsed = (time.perf_counter() - start) / args.iters
        # The slowest rank decides the collective's time.
        slowest = torch.tensor([elapsed], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        elapsed = float(slowest.item())
        algbw, busbw = bus_bandwidth(count * 4, elapsed, world)
        results.append({"size_bytes": count * 4, "time_us": round(elapsed * 1e6, 1),
                        "algbw_gbps": round(algbw, 3), "busbw_gbps": round(busbw, 3)})
        del buf

    hosts = [None] * world
    dist.all_gather_object(hosts, socket.gethostname())
    busbw = results[-1]["busbw_gbps"] if results else 0.0
    passed = correct and busbw >= args.min_busbw_gbps
    if rank == 0:
        nccl_version = None
        if args.backend == "nccl":
            try:
                nccl_version = ".".join(str(v) for v in torch.cuda.nccl.version())
            except (AttributeError, RuntimeError):
                nccl_version = None
        report = {
            "backend": args.backend,
            "world_size": world,
            "hosts": sorted(set(hosts)),
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "dtype": "float32",
            "iters": args.iters,
            "torch_version": torch.__version__,
            "nccl_version": nccl_version,
            "nvls_enabled": os.environ.get("NCCL_NVLS_ENABLE"),
            "results": results,
            "busbw_gbps": busbw,
            "peak_busbw_gbps": max((r["busbw_gbps"] for r in results), default=0.0),
            "min_busbw_gbps": args.min_busbw_gbps,
            "correct": correct,
            "passed": passed,
        }
        text = json.dumps(report, indent=2)
        print(text)
        if args.output:
            with open(args.output, "w") as handle:
                handle.write(text + "\n")
        if not correct:
            print("all-reduce returned wrong values: the transport is broken", file=sys.stderr)
        elif not passed:
            print("bus bandwidth %.2f GB/s at %d bytes is below the floor %.2f GB/s (--min-busbw-gbps)"
                  % (busbw, results[-1]["size_bytes"], args.min_busbw_gbps), file=sys.stderr)
    dist.barrier()
    dist.destroy_process_group()
    if not correct:
        return 2
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
