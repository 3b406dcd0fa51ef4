"""The throughput gate's floor, vllm_throughput_min_ratio, from the playbooks' task arguments to the module's verdict.

The figures are fixed (bench_run.run_standard replaced by one that reports them, 85% of the baseline), so the
verdict depends on the floor alone: no server and no timing. The gate's own arithmetic is tested in
test_bench_metrics.py.
"""
import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from http_module_helpers import run_module

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_report as br
from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_run
from ansible_collections.sparkfleet.vllm.plugins.modules import throughput
from conftest import REPO

BASELINE = {"single_stream_tok_s": 100.0, "aggregate_8_tok_s": 400.0}
# 85% of the baseline on both figures: below the default floor (0.9), above 0.8.
MEASURED = {"single_stream_tok_s": 85.0, "aggregate_8_tok_s": 340.0}


@pytest.fixture()
def measures(monkeypatch):
    """The module's standard run reports MEASURED, sending nothing."""
    def run_standard(client, output_tokens, warmup, streams, **_kw):
        result = bench_run.base_result(client, "standard", output_tokens)
        result[br.ADDITIONS_KEY].update(MEASURED, aggregate_streams=streams, single_stream_runs=[], failures=[])
        return result
    monkeypatch.setattr(bench_run, "run_standard", run_standard)


def gate_args(**extra):
    return dict({"url": "http://127.0.0.1:9", "model": "fake", "output_tokens": 16, "baseline": BASELINE}, **extra)


def throughput_task(playbook):
    """The sparkfleet.vllm.throughput task's arguments in `playbook` (the one there)."""
    plays = yaml.safe_load((REPO / "playbooks" / playbook).read_text())
    tasks = [t for play in plays for t in play.get("tasks", []) if "sparkfleet.vllm.throughput" in t]
    assert len(tasks) == 1, tasks
    return tasks[0]["sparkfleet.vllm.throughput"]


@pytest.mark.parametrize("playbook", ["verify.yml", "bench.yml"])
@pytest.mark.parametrize("variables, floor", [
    pytest.param({}, 0.9, id="unset"),
    pytest.param({"vllm_throughput_min_ratio": 0.8}, 0.8, id="0.8"),
    pytest.param({"vllm_throughput_min_ratio": "0.6"}, 0.6, id="string-0.6"),
])
def test_the_playbooks_pass_vllm_throughput_min_ratio_as_min_ratio(measures, playbook, variables, floor):
    """The task's min_ratio rendered with the inventory's variable (or without it) is the floor the module gates at."""
    rendered = Templar(loader=DataLoader(), variables=variables).template(
        trust_as_template(throughput_task(playbook)["min_ratio"]))
    kind, res = run_module(throughput, gate_args(min_ratio=rendered))
    assert "floor %d%%" % round(100 * floor) in res["gate"]["message"], (playbook, rendered, res["gate"]["message"])
    assert (kind == "exit") == (floor <= 0.85), (playbook, rendered, kind)
