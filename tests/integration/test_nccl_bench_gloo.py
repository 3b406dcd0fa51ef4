"""The fabric gate's all-reduce probe, run for real with two local processes over gloo.

NCCL needs GPUs; gloo runs the same script, the same collective and the same
bus-bandwidth arithmetic on the CPU (torch from the vLLM CPU environment).
The NCCL figure itself was measured on a two-H200 host (tests/unit/fixtures/nvidia-h200-x2/).
"""
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, require

BENCH = REPO / "roles/vllm_cluster/files/nccl_allreduce_bench.py"


def torch_python():
    for candidate in (REPO / ".venv-vllm/bin/python", sys.executable):
        if os.path.exists(candidate):
            proc = subprocess.run([str(candidate), "-c", "import torch.distributed"], capture_output=True,
                                  check=False)
            if proc.returncode == 0:
                return str(candidate)
    return None


@pytest.mark.parametrize("floor,rc", [(0.0, 0), (1e6, 1)])
def test_gloo_two_processes(tmp_path, floor, rc):
    python = torch_python()
    require(python, "a Python with torch (.venv-vllm) to run the all-reduce probe with gloo")
    out = tmp_path / "report.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         str(BENCH), "--backend", "gloo", "--sizes", "64K,1M", "--iters", "3", "--warmup", "1",
         "--min-busbw-gbps", str(floor), "--output", str(out)],
        capture_output=True, text=True, timeout=180, env=env, cwd=str(tmp_path), check=False)
    assert proc.returncode == rc, proc.stdout[-2000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["world_size"] == 2 and report["correct"] is True and report["passed"] is (rc == 0)
    assert [r["size_bytes"] for r in report["results"]] == [64 << 10, 1 << 20]
    assert report["busbw_gbps"] == report["results"][-1]["busbw_gbps"] > 0
    if rc:
        assert "below the floor" in proc.stderr
