"""The collection's serving path on one NVIDIA H200: captures of tests/harness/device/gpu-collection-run.sh.

Stand-ins, named as such (docs/gpu-proof.md): profile `h200_standin` (an H200 in place of a Blackwell card),
model `tiny_h200` (a random Llama from the collection's generator in place of Gemma 4) and release `v0.25.0`
live in the test catalog tests/harness/device/h200_catalog.py writes, never in data/catalog.yml. CI has no
GPU: these tests hold today's planner, launcher template and report code to what ran there.
"""
import json
import pathlib
import re
import shlex

import pytest
import yaml

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_report as br
from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils import diagnose, planner
from conftest import load_harness_module

catalog_validate = load_harness_module("catalog_validate.py")
REPO = pathlib.Path(__file__).resolve().parents[2]
RUN = REPO / "tests" / "fixtures" / "h200" / "collection-run"
DEVICE = REPO / "tests" / "harness" / "device"
STANDARD = RUN / "20261201T234909Z-standard-tiny.json"
SWEEP = RUN / "20261201T234923Z-sweep-tiny.json"


@pytest.fixture(scope="module")
def device_vars():
    return yaml.safe_load((DEVICE / "inventory" / "group_vars" / "all.yml").read_text())


def _request(device_vars):
    """The plan role's inputs that the device inventory sets (port: its default, 8000)."""
    return {"model": device_vars["vllm_model"], "profile": device_vars["vllm_profile"],
            "runtime": device_vars["vllm_runtime"], "gpu_memory_utilization": device_vars["vllm_gpu_memory_utilization"],
            "port": 8000}


def test_the_test_catalog_is_valid_and_the_stand_in_stays_out_of_the_collection(h200_catalog):
    assert catalog_validate.validate_catalog(h200_catalog) == []
    shipped = cat.load_catalog()
    assert "h200_standin" in h200_catalog["profiles"] and "h200_standin" not in shipped["profiles"]
    assert "tiny_h200" not in shipped["models"] and "v0.25.0" not in shipped["releases"]
    assert h200_catalog["profiles"]["h200_standin"]["stand_in"] is True
    assert h200_catalog["models"]["tiny_h200"]["stand_in"] is True


def test_the_planner_still_plans_the_argv_that_ran_on_the_gpu(h200_catalog, device_vars, captured_plan):
    plan = planner.plan(h200_catalog, _request(device_vars))
    assert plan["argv"] == captured_plan["argv"], "a planner change altered the argv that served on the H200"
    for key in ("release", "pip", "runtime", "served_name", "port", "profile", "secret_env"):
        assert plan[key] == captured_plan[key], key
    # The one planned change since that run: a single node's gloo listeners on loopback (GLOO_SOCKET_IFNAME=lo, added
    # after the GPU run; it moves only where the worker's process groups listen).
    assert plan["env"] == dict(captured_plan["env"], GLOO_SOCKET_IFNAME="lo"), "a planner change altered the H200 run's env"
    assert plan["expected"]["calibrate"] is True


def test_the_rendered_launcher_execs_the_planned_argv(captured_plan, device_vars):
    launch = (RUN / "rendered-launch").read_text()
    exec_line = launch.rstrip().splitlines()[-1]
    argv = shlex.split(exec_line)
    prefix = ["/opt/torch/.venv/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model"]
    assert argv == prefix + captured_plan["argv"]
    assert device_vars["vllm_native_command_prefix"][1:] == prefix[1:]
    assert "start-stop-daemon" in (RUN / "rendered-control").read_text()


def test_the_served_environment_carries_the_kit_and_ninja():
    env = dict(line.split("=", 1) for line in (RUN / "rendered-serve.env").read_text().splitlines()
               if line and not line.startswith("#"))
    assert env["PYTHONPATH"] == "/tmp/site"
    assert env["HF_HUB_OFFLINE"] == "1"
    # flashinfer JIT-builds its sampler with the `ninja` of the interpreter's bin directory
    assert env["PATH"].split(":")[0] == "/opt/torch/.venv/bin"


def test_the_first_start_without_ninja_on_path_died_in_the_sampler_warm_up():
    log = (RUN / "fail-ninja-not-on-path.log").read_text()
    assert "FileNotFoundError: [Errno 2] No such file or directory: 'ninja'" in log
    assert "warmup_kernels" in log and "top_k_mask_logits" in log
    verify = (RUN / "fail-ninja-not-on-path-verify.log").read_text()
    # What wait_healthy said on the device, before the catalog knew this line: only the generic failure.
    assert '"id": "engine_startup_failed"' in verify
    # The catalog now names the missing tool first (build_tool_missing), the generic failure after it.
    assert [d["id"] for d in diagnose.diagnose(log)] == ["build_tool_missing", "engine_startup_failed"]


def test_verify_passed_health_smoke_and_the_calibrated_gate():
    verify = (RUN / "ansible-verify.log").read_text()
    assert re.search(r"^h200 +: ok=\d+ +changed=0 +unreachable=0 +failed=0", verify, re.M)
    assert '"smoke: chat passed"' in verify
    healthy = float(re.search(r"healthy after ([\d.]+) s \(launcher", (RUN / "summary.txt").read_text()).group(1))
    waited = float(re.search(r"healthy after ([\d.]+) s\"", verify).group(1))
    assert 100 < waited <= healthy < 480  # vLLM 0.25.0's first start on this card; vllm_wait_timeout is 480


def test_the_standard_result_has_what_the_report_and_the_gate_read():
    result = json.loads(STANDARD.read_text())
    extra = result[br.ADDITIONS_KEY]
    assert extra["mode"] == "standard" and extra["output_tokens"] == 512
    assert result["failed"] == 0 and result["completed"] == 8
    assert len(extra["single_stream_runs"]) == 8 and all(r["success"] for r in extra["single_stream_runs"])
    assert extra["kv_cache_tokens"] == 4548864  # the engine log's "GPU KV cache size: 4,548,864 tokens"
    assert "GPU KV cache size: 4,548,864 tokens" in (RUN / "vllm-serve.log").read_text()
    gate = extra["gate"]
    assert gate["gated"] and gate["passed"] and extra["baseline"]["calibrated"]
    assert {c["metric"] for c in gate["checks"]} == {"single_stream_tok_s", "aggregate_8_tok_s"}
    assert br.markdown(result) == (RUN / STANDARD.name.replace(".json", ".md")).read_text()


def test_the_sweep_result_has_one_cell_per_concurrency():
    result = json.loads(SWEEP.read_text())
    extra = result[br.ADDITIONS_KEY]
    assert extra["mode"] == "sweep"
    cells = extra["cells"]
    assert [(c["prompt_tokens"], c["concurrency"]) for c in cells] == [(1024, 1), (1024, 8), (1024, 64)]
    assert all(c["failed"] == 0 and c["completed"] == c["concurrency"] for c in cells)
    assert all(c["output_throughput"] > 0 for c in cells)
    assert br.markdown(result) == (RUN / SWEEP.name.replace(".json", ".md")).read_text()


PAIRED = [("standard single stream (module def)", "std_single", "vb_chat_c1"),
          ("standard 8 streams", "std_agg8", "vb_chat_c8")]
PAIRED += [("sweep with bench semantics c%d" % c, "semantic_c%d" % c, "vb_cmpl_c%d" % c) for c in (1, 8, 64)]


@pytest.mark.parametrize("label, mine, theirs", PAIRED)
def test_the_paired_ratio_medians_are_those_of_the_rounds(label, mine, theirs):
    rounds = [json.loads(line) for line in (RUN / "bench-rounds.jsonl").read_text().splitlines() if line]
    assert len(rounds) == 4  # the deadline left 4 of the 5 asked for: fewer than the issue's >= 5
    ratios = sorted(r[mine] / r[theirs] for r in rounds)
    median = (ratios[1] + ratios[2]) / 2
    line = next(x for x in (RUN / "bench-rounds-summary.txt").read_text().splitlines() if x.startswith(label))
    assert "paired ratio median %.3f (min %.3f max %.3f, n=4)" % (median, ratios[0], ratios[-1]) in line


def test_the_docs_quote_the_captured_figures():
    standard = json.loads(STANDARD.read_text())[br.ADDITIONS_KEY]
    cells = json.loads(SWEEP.read_text())[br.ADDITIONS_KEY]["cells"]
    healthy = re.search(r"healthy after ([\d.]+) s \(launcher", (RUN / "summary.txt").read_text()).group(1)
    figures = ["%.1f" % standard["single_stream_tok_s"], "{:,.1f}".format(standard["aggregate_8_tok_s"]), healthy]
    figures += ["{:,.1f}".format(c["output_throughput"]) for c in cells]
    for doc in ("gpu-proof.md", "verify-and-bench.md"):
        text = (REPO / "docs" / doc).read_text()
        missing = [f for f in figures if f not in text]
        assert not missing, "docs/%s lacks the captured figures %s" % (doc, missing)
