"""A Gemma 4 model through the collection on one NVIDIA H200: captures of gpu-collection-run.sh, MODEL=tiny_gemma4_h200.

Stand-ins, named as such (docs/gpu-proof.md): profile `h200_standin`, release `v0.25.0` and model `tiny_gemma4_h200`
(a tiny random Gemma 4 MoE from the weights role's generator, family gemma4, in place of the 26B-A4B) live in the
test catalog tests/harness/device/h200_catalog.py writes, never in data/catalog.yml. CI has no GPU: these tests hold
the planner, the launcher and the reports to what ran there, and the docs to the captured figures.
"""
import json
import pathlib
import re
import shlex

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_report as br
from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils import planner, smoke
from conftest import load_harness_module

catalog_validate = load_harness_module("catalog_validate.py")
REPO = pathlib.Path(__file__).resolve().parents[2]
RUN = REPO / "tests" / "fixtures" / "h200" / "gemma4-run"
STANDARD = RUN / "20261203T075753Z-standard-gemma-4-tiny.json"
SWEEP = RUN / "20261203T075805Z-sweep-gemma-4-tiny.json"
MODEL = "tiny_gemma4_h200"


def test_the_gemma4_stand_in_is_in_the_test_catalog_only(h200_catalog):
    assert catalog_validate.validate_catalog(h200_catalog) == []
    assert MODEL not in cat.load_catalog()["models"]
    model = h200_catalog["models"][MODEL]
    assert model["stand_in"] is True and model["family"] == "gemma4" and model["source"] == "generate"
    assert model["generate"]["family"] == "gemma4" and model["generate"]["experts"] == 8
    # Gemma4ForCausalLM has no vision tower: no --limit-mm-per-prompt (the 26B-A4B it stands in for has vision)
    assert model["vision"] is False and cat.load_catalog()["models"]["26b-a4b"]["vision"] is True


def test_the_planner_still_plans_gemma4s_argv_that_ran(h200_catalog, captured_plan):
    plan = planner.plan(h200_catalog, {"model": MODEL, "profile": "h200_standin", "runtime": "native",
                                       "gpu_memory_utilization": 0.5, "port": 8000})
    assert plan["argv"] == captured_plan["argv"], "a planner change altered the argv that served on the H200"
    for flag in ("--reasoning-parser", "--tool-call-parser"):
        assert plan["argv"][plan["argv"].index(flag) + 1] == "gemma4"
    assert "--enable-auto-tool-choice" in plan["argv"] and "--limit-mm-per-prompt" not in plan["argv"]
    assert captured_plan["model"]["generate"] == h200_catalog["models"][MODEL]["generate"]
    assert smoke.checks_for_plan(captured_plan) == ["chat", "thinking", "tools"]


def test_the_paired_rounds_serve_the_stand_in_with_the_captured_argv(captured_plan):
    # gpu-ratios.sh MODEL=tiny_gemma4_h200 starts `--model` + this plan's argv, as the launcher does, and
    # generates the checkpoint from the same spec the test catalog gives the weights role.
    lib = (REPO / "tests" / "harness" / "device" / "lib.sh").read_text()
    assert "GEMMA4_PLAN=%s\n" % (RUN / "plan-h200.json").relative_to(REPO) in lib
    assert "GEMMA4_ID=%s\n" % captured_plan["model"]["checkpoint"] in lib
    ratios = (REPO / "tests" / "harness" / "device" / "gpu-ratios.sh").read_text()
    assert '["--model"] + json.load(open(sys.argv[1]))["argv"]' in ratios and '"$GEMMA4_PLAN"' in ratios


def test_the_launcher_execs_the_planned_argv_and_the_server_ran_gemma4(captured_plan):
    argv = shlex.split((RUN / "rendered-launch").read_text().rstrip().splitlines()[-1])
    assert argv[4:] == captured_plan["argv"]
    log = (RUN / "vllm-serve.log").read_text()
    assert "Resolved architecture: Gemma4ForCausalLM" in log
    assert "'reasoning_parser': 'gemma4'" in log and "'tool_call_parser': 'gemma4'" in log
    assert "Using TRITON Unquantized MoE backend" in log


def test_verify_passed_with_the_smoke_checks_the_plan_chose():
    verify = (RUN / "ansible-verify.log").read_text()
    assert re.search(r"^h200 +: ok=\d+ +changed=0 +unreachable=0 +failed=0", verify, re.M)
    # random weights: chat answered, the gemma4 reasoning parser returned reasoning, no tool call (declared miss)
    assert '"smoke: chat passed, thinking passed, tools expected_miss"' in verify
    summary = (RUN / "summary.txt").read_text()
    healthy = float(re.search(r"healthy after ([\d.]+) s \(launcher", summary).group(1))
    waited = float(re.search(r"healthy after ([\d.]+) s\"", verify).group(1))
    assert 100 < waited <= healthy < 480


def test_the_standard_and_sweep_results_are_what_the_reports_show():
    standard = json.loads(STANDARD.read_text())
    extra = standard[br.ADDITIONS_KEY]
    assert extra["output_tokens"] == 512 and standard["failed"] == 0
    assert extra["gate"]["passed"] and extra["baseline"]["calibrated"]
    assert extra["kv_cache_tokens"] == 72694530
    assert "GPU KV cache size: 72,694,530 tokens" in (RUN / "vllm-serve.log").read_text()
    assert br.markdown(standard) == (RUN / STANDARD.name.replace(".json", ".md")).read_text()
    sweep = json.loads(SWEEP.read_text())
    cells = sweep[br.ADDITIONS_KEY]["cells"]
    # vllm bench serve's semantics: 16, 16 and 128 prompts at concurrency 1, 8 and 64
    shapes = [(c["concurrency"], c["num_prompts"], c["completed"]) for c in cells]
    assert shapes == [(1, 16, 16), (8, 16, 16), (64, 128, 128)]
    assert br.markdown(sweep) == (RUN / SWEEP.name.replace(".json", ".md")).read_text()


def test_the_docs_quote_the_gemma4_figures():
    extra = json.loads(STANDARD.read_text())[br.ADDITIONS_KEY]
    cells = json.loads(SWEEP.read_text())[br.ADDITIONS_KEY]["cells"]
    healthy = re.search(r"healthy after ([\d.]+) s \(launcher", (RUN / "summary.txt").read_text()).group(1)
    figures = [healthy, "%.1f" % extra["single_stream_tok_s"], "{:,.1f}".format(extra["aggregate_8_tok_s"])]
    figures += ["{:,.1f}".format(c["output_throughput"]) for c in cells]
    for doc in ("gpu-proof.md", "verify-and-bench.md"):
        text = (REPO / "docs" / doc).read_text()
        missing = [f for f in figures if f not in text]
        assert not missing, "docs/%s lacks the captured figures %s" % (doc, missing)
