"""The GPU records: what ran on one NVIDIA H200 (or H100) through tests/harness/device/, captured under
tests/fixtures/h200/ (one folder a run or pass, a README in each; a dated record in docs/records/ quotes each,
and docs/gpu-proof.md summarises them). CI has no GPU.

Two kinds of test:

* Product code on the captures: today's planner, catalog, diagnosis, smoke-check choice, bench report and sweep
  prompt count must still give what ran there (one test each, as before).
* The records themselves, one parametrized test per kind of check over every record that has it: the rounds are
  complete and error-free and ran as designed, each summary line is recomputed from the raw rounds, the server ran
  pass 3's planned argv on the stated card, and each record quotes the recomputed figures.

Stand-ins, named as such (docs/gpu-proof.md): profile `h200_standin`, release `v0.25.0` and the models `tiny_h200`
and `tiny_gemma4_h200` live in the test catalog tests/harness/device/h200_catalog.py writes, never in
data/catalog.yml.
"""
import functools
import json
import pathlib
import re
import shlex
import statistics

import pytest
import yaml

from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_report as br
from ansible_collections.sparkfleet.vllm.plugins.module_utils import bench_run, diagnose, smoke
from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import planner
from conftest import SUMMARY_LINE, SUMMARY_LINE_COUNTS, keyless, load_h200_catalog_module, load_harness_module, paired_cell

catalog_validate = load_harness_module("catalog_validate.py")
REPO = pathlib.Path(__file__).resolve().parents[2]
H200 = REPO / "tests" / "fixtures" / "h200"
DEVICE = REPO / "tests" / "harness" / "device"
COLLECTION_RUN = H200 / "collection-run"
GEMMA4_RUN = H200 / "gemma4-run"
PASS8 = H200 / "gemma4-ratios-pass8"
RESULTS = {  # the bench results `sparkfleet.vllm.bench` wrote on the device, and the report beside each
    "collection-run standard": COLLECTION_RUN / "20261201T234909Z-standard-tiny.json",
    "collection-run sweep": COLLECTION_RUN / "20261201T234923Z-sweep-tiny.json",
    "gemma4-run standard": GEMMA4_RUN / "20261203T075753Z-standard-gemma-4-tiny.json",
    "gemma4-run sweep": GEMMA4_RUN / "20261203T075805Z-sweep-gemma-4-tiny.json",
}
GEMMA4_MODEL = "tiny_gemma4_h200"
RECORDS = REPO / "docs" / "records"
PASS2_RECORD = "2026-12-01-pass2-collection-path.md"
PASS3_RECORD = "2026-12-03-pass3-gemma4-oom-c8-probe.md"


@functools.cache
def read(path):
    return path.read_text()


@functools.cache
def jsonl(path):
    """A capture's JSON lines, read once (the tests only read them)."""
    return [json.loads(line) for line in read(path).splitlines() if line.strip()]


def extra(name):
    return json.loads(read(RESULTS[name]))[br.ADDITIONS_KEY]


def plan_h200(folder=GEMMA4_RUN):
    """The plan that served on the device (pass 3's, for every Gemma 4 pass)."""
    return json.loads(read(folder / "plan-h200.json"))


def healthy_after(folder):
    return re.search(r"healthy after ([\d.]+) s", read(folder / "summary.txt")).group(1)


# ---------------------------------------------------------------------------------------------------------------
# Product code on the captures
# ---------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def device_vars():
    return yaml.safe_load(read(DEVICE / "inventory" / "group_vars" / "all.yml"))


def test_the_test_catalog_is_valid_and_the_stand_ins_stay_out_of_the_collection(h200_catalog):
    assert catalog_validate.validate_catalog(h200_catalog) == []
    shipped = cat.load_catalog()
    assert "h200_standin" in h200_catalog["profiles"] and "h200_standin" not in shipped["profiles"]
    assert "tiny_h200" not in shipped["models"] and "v0.25.0" not in shipped["releases"]
    assert GEMMA4_MODEL not in shipped["models"]
    assert h200_catalog["profiles"]["h200_standin"]["stand_in"] is True
    assert h200_catalog["models"]["tiny_h200"]["stand_in"] is True
    model = h200_catalog["models"][GEMMA4_MODEL]
    assert model["stand_in"] is True and model["family"] == "gemma4" and model["source"] == "generate"
    assert model["generate"]["family"] == "gemma4" and model["generate"]["experts"] == 8
    # Gemma4ForCausalLM has no vision tower: no --limit-mm-per-prompt (the 26B-A4B it stands in for has vision)
    assert model["vision"] is False and shipped["models"]["26b-a4b"]["vision"] is True


def test_the_planner_still_plans_the_argv_that_ran_on_the_gpu(h200_catalog, device_vars):
    captured = plan_h200(COLLECTION_RUN)
    request = {"model": device_vars["vllm_model"], "profile": device_vars["vllm_profile"],
               "runtime": device_vars["vllm_runtime"], "gpu_memory_utilization": device_vars["vllm_gpu_memory_utilization"],
               "port": 8000}  # the plan role's inputs that the device inventory sets (port: its default)
    plan = planner.plan(h200_catalog, keyless(request))
    assert plan["argv"] == captured["argv"], "a planner change altered the argv that served on the H200"
    for key in ("release", "pip", "runtime", "served_name", "port", "profile", "secret_env"):
        assert plan[key] == captured[key], key
    # The one planned change since that run: a single node's gloo listeners on loopback (GLOO_SOCKET_IFNAME=lo, added
    # after the GPU run; it moves only where the worker's process groups listen).
    assert plan["env"] == dict(captured["env"], GLOO_SOCKET_IFNAME="lo"), "a planner change altered the H200 run's env"
    assert plan["expected"]["calibrate"] is True


def test_the_planner_still_plans_gemma4s_argv_that_ran(h200_catalog):
    captured = plan_h200()
    plan = planner.plan(h200_catalog, keyless({"model": GEMMA4_MODEL, "profile": "h200_standin", "runtime": "native",
                                               "gpu_memory_utilization": 0.5, "port": 8000}))
    assert plan["argv"] == captured["argv"], "a planner change altered the argv that served on the H200"
    for flag in ("--reasoning-parser", "--tool-call-parser"):
        assert plan["argv"][plan["argv"].index(flag) + 1] == "gemma4"
    assert "--enable-auto-tool-choice" in plan["argv"] and "--limit-mm-per-prompt" not in plan["argv"]
    assert captured["model"]["generate"] == h200_catalog["models"][GEMMA4_MODEL]["generate"]
    assert smoke.checks_for_plan(captured) == ["chat", "thinking", "tools"]


def test_the_first_start_without_ninja_on_path_died_in_the_sampler_warm_up():
    log = read(COLLECTION_RUN / "fail-ninja-not-on-path.log")
    assert "FileNotFoundError: [Errno 2] No such file or directory: 'ninja'" in log
    assert "warmup_kernels" in log and "top_k_mask_logits" in log
    verify = read(COLLECTION_RUN / "fail-ninja-not-on-path-verify.log")
    # What wait_healthy said on the device, before the catalog knew this line: only the generic failure.
    assert '"id": "engine_startup_failed"' in verify
    # The catalog now names the missing tool first (build_tool_missing), the generic failure after it.
    assert [d["id"] for d in diagnose.diagnose(log)] == ["build_tool_missing", "engine_startup_failed"]


@pytest.mark.parametrize("name", RESULTS)
def test_the_bench_report_renders_each_result_as_captured(name):
    result = json.loads(read(RESULTS[name]))
    assert br.markdown(result) == read(RESULTS[name].with_suffix(".md"))


def test_the_collection_runs_standard_result_has_what_the_report_and_the_gate_read():
    result = json.loads(read(RESULTS["collection-run standard"]))
    ext = result[br.ADDITIONS_KEY]
    assert ext["mode"] == "standard" and ext["output_tokens"] == 512
    assert result["failed"] == 0 and result["completed"] == 8
    assert len(ext["single_stream_runs"]) == 8 and all(r["success"] for r in ext["single_stream_runs"])
    assert ext["kv_cache_tokens"] == 4548864  # the engine log's "GPU KV cache size: 4,548,864 tokens"
    assert "GPU KV cache size: 4,548,864 tokens" in read(COLLECTION_RUN / "vllm-serve.log")
    gate = ext["gate"]
    assert gate["gated"] and gate["passed"] and ext["baseline"]["calibrated"]
    assert {c["metric"] for c in gate["checks"]} == {"single_stream_tok_s", "aggregate_8_tok_s"}


def test_the_collection_runs_sweep_result_has_one_cell_per_concurrency():
    ext = extra("collection-run sweep")
    assert ext["mode"] == "sweep"
    cells = ext["cells"]
    assert [(c["prompt_tokens"], c["concurrency"]) for c in cells] == [(1024, 1), (1024, 8), (1024, 64)]
    assert all(c["failed"] == 0 and c["completed"] == c["concurrency"] for c in cells)
    assert all(c["output_throughput"] > 0 for c in cells)


def test_the_gemma4_runs_standard_and_sweep_results_are_what_the_reports_show():
    standard = json.loads(read(RESULTS["gemma4-run standard"]))
    ext = standard[br.ADDITIONS_KEY]
    assert ext["output_tokens"] == 512 and standard["failed"] == 0
    assert ext["gate"]["passed"] and ext["baseline"]["calibrated"]
    assert ext["kv_cache_tokens"] == 72694530
    assert "GPU KV cache size: 72,694,530 tokens" in read(GEMMA4_RUN / "vllm-serve.log")
    cells = extra("gemma4-run sweep")["cells"]
    # vllm bench serve's semantics: 16, 16 and 128 prompts at concurrency 1, 8 and 64
    assert [(c["concurrency"], c["num_prompts"], c["completed"]) for c in cells] == [(1, 16, 16), (8, 16, 16), (64, 128, 128)]


RATIOS = H200 / "ratios"
RATIOS_TAGS = ("a", "b", "t1024")
# module figure -> vllm bench serve figure, the vllm run's max concurrency (the ratios capture, pass 1)
RATIOS_PAIRS = {"std_single": ("vb_chat_c1", 1), "std_single_old_def": ("vb_chat_c1", 1), "std_agg8": ("vb_chat_c8", 8),
                "std_agg64": ("vb_chat_c64", 64), "sweep_c1": ("vb_cmpl_c1", 1), "sweep_c8": ("vb_cmpl_c8", 8),
                "sweep_c64": ("vb_cmpl_c64", 64)}


@pytest.mark.parametrize("tag", RATIOS_TAGS)
def test_vllm_figures_are_vllm_bench_serve_saved_results_and_the_sweep_sends_bench_runs_prompt_count(tag):
    saved = jsonl(RATIOS / ("vllm-bench-results-%s.jsonl" % tag))
    assert all(s["failed"] == 0 and s["completed"] == s["num_prompts"] for s in saved)
    by_value = {round(s["output_throughput"], 6): s for s in saved}
    for row in jsonl(RATIOS / ("ratio-rounds-%s.jsonl" % tag)):
        for mine, (theirs, concurrency) in RATIOS_PAIRS.items():
            if theirs not in row:
                continue
            result = by_value[round(row[theirs], 6)]
            assert result["max_concurrency"] == concurrency
            assert result["backend"] == ("openai-chat" if theirs.startswith("vb_chat") else "openai")
            if mine.startswith("sweep"):
                # The same count the module's sweep sent in that round (vllm bench serve's --num-prompts).
                assert result["num_prompts"] == row["%s_prompts" % mine] == bench_run.sweep_prompt_count(concurrency)


def test_the_larger_stand_in_is_the_catalog_modules_spec_of_about_3_b_parameters():
    catalog = load_h200_catalog_module()
    logged = json.loads(re.search(r"large stand-in generating in the background: \S+, spec (\{.*\})",
                                  read(PASS8 / "summary.txt")).group(1))
    assert logged == catalog.GEMMA4_LARGE_SPEC
    assert 2.9e9 < catalog.parameters(catalog.GEMMA4_LARGE_SPEC) < 3.1e9
    assert catalog.parameters(catalog.GEMMA4_SPEC) < 3e6


# ---------------------------------------------------------------------------------------------------------------
# What the device ran: the launcher, the served environment, verify, and the harness that starts the rounds' server
# ---------------------------------------------------------------------------------------------------------------

def test_the_rendered_launchers_exec_the_planned_argv(device_vars):
    prefix = ["/opt/torch/.venv/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model"]
    for folder in (COLLECTION_RUN, GEMMA4_RUN):
        argv = shlex.split(read(folder / "rendered-launch").rstrip().splitlines()[-1])
        assert argv == prefix + plan_h200(folder)["argv"], folder.name
    assert device_vars["vllm_native_command_prefix"][1:] == prefix[1:]
    assert "start-stop-daemon" in read(COLLECTION_RUN / "rendered-control")
    log = read(GEMMA4_RUN / "vllm-serve.log")
    assert "Resolved architecture: Gemma4ForCausalLM" in log
    assert "'reasoning_parser': 'gemma4'" in log and "'tool_call_parser': 'gemma4'" in log
    assert "Using TRITON Unquantized MoE backend" in log


def test_the_served_environment_carries_the_kit_and_ninja():
    env = dict(line.split("=", 1) for line in read(COLLECTION_RUN / "rendered-serve.env").splitlines()
               if line and not line.startswith("#"))
    assert env["PYTHONPATH"] == "/tmp/site"
    assert env["HF_HUB_OFFLINE"] == "1"
    # flashinfer JIT-builds its sampler with the `ninja` of the interpreter's bin directory
    assert env["PATH"].split(":")[0] == "/opt/torch/.venv/bin"


@pytest.mark.parametrize("folder, smoke_line", [
    (COLLECTION_RUN, '"smoke: chat passed"'),
    # random weights: chat answered, the gemma4 reasoning parser returned reasoning, no tool call (declared miss)
    (GEMMA4_RUN, '"smoke: chat passed, thinking passed, tools expected_miss"'),
], ids=["collection-run", "gemma4-run"])
def test_verify_passed_health_and_smoke_within_the_wait(folder, smoke_line):
    verify = read(folder / "ansible-verify.log")
    assert re.search(r"^h200 +: ok=\d+ +changed=0 +unreachable=0 +failed=0", verify, re.M)
    assert smoke_line in verify
    healthy = float(re.search(r"healthy after ([\d.]+) s \(launcher", read(folder / "summary.txt")).group(1))
    waited = float(re.search(r"healthy after ([\d.]+) s\"", verify).group(1))
    assert 100 < waited <= healthy < 480  # vLLM 0.25.0's first start on this card; vllm_wait_timeout is 480


def test_the_paired_rounds_serve_the_stand_in_with_the_captured_argv():
    # gpu-ratios.sh MODEL=tiny_gemma4_h200 starts `--model` + this plan's argv, as the launcher does, and
    # generates the checkpoint from the same spec the test catalog gives the weights role.
    lib = read(DEVICE / "lib.sh")
    assert "GEMMA4_PLAN=%s\n" % (GEMMA4_RUN / "plan-h200.json").relative_to(REPO) in lib
    assert "GEMMA4_ID=%s\n" % plan_h200()["model"]["checkpoint"] in lib
    ratios = read(DEVICE / "gpu-ratios.sh")
    assert '["--model"] + json.load(open(sys.argv[1]))["argv"]' in ratios and '"$GEMMA4_PLAN"' in ratios


# ---------------------------------------------------------------------------------------------------------------
# The paired-rounds records: module figure / `vllm bench serve` figure, round by round
# ---------------------------------------------------------------------------------------------------------------

# module figure -> vllm bench serve figure, in the summaries' order (gemma4-ratios passes 4 and 6)
GEMMA4_PAIRS = {"std_single": "vb_chat_c1", "std_single_old_def": "vb_chat_c1", "std_agg8": "vb_chat_c8",
                "std_agg64": "vb_chat_c64", "sweep_c1": "vb_cmpl_c1", "sweep_c8": "vb_cmpl_c8", "sweep_c64": "vb_cmpl_c64"}
PASS7_PAIRS = {"std_agg8": "vb_chat_c8", "std_agg64": "vb_chat_c64", "sweep_c64": "vb_cmpl_c64"}
PASS6_CELLS = ("standard c1+c8", "standard c64", "sweep c1", "sweep c8", "sweep c64")


class Paired:
    """One paired-rounds record: its rounds, the summary the device printed, and which of its lines to recompute.

    pairs: (label, mine, theirs); with a label the summary line starting with it is read, without one every
    paired-ratio line of the summary is, in order (no line more, none less). counts: the summary adds "K of N
    rounds within" (pass 6 on). full: every round has every cell (each n is the round count). within: which cells
    came within ±5%, as measured. optional: a cell without values is absent from the summary too."""

    def __init__(self, folder, files, summary, pairs, n, numbered=True, header=None, counts=False, full=False,
                 within=None, optional=False, in_device_summary=False):
        self.folder, self.files, self.summary_file, self.pairs = H200 / folder, files, summary, pairs
        self.n, self.numbered, self.header, self.counts, self.full = n, numbered, header, counts, full
        self.within, self.optional, self.in_device_summary = within, optional, in_device_summary

    def rounds(self):
        return sorted((row for name in self.files for row in jsonl(self.folder / name)), key=lambda r: r["round"])

    def summary(self):
        return read(self.folder / self.summary_file)

    def ratios(self, mine, theirs):
        """Rounds that lack either side are left out, as gpu_bench.summarize leaves them out."""
        return [r[mine] / r[theirs] for r in self.rounds() if r.get(mine) and r.get(theirs)]

    def median(self, mine):
        return statistics.median(self.ratios(*next((m, t) for _l, m, t in self.pairs if m == mine)))


def unlabelled(pairs):
    return [(None, mine, theirs) for mine, theirs in pairs.items()]


PAIRED = {
    # the ratios capture (pass 1, tiny Llama): three `run` calls, 256-token runs a and b, 1024-token run t1024
    **{"ratios-%s" % tag: Paired("ratios", ("ratio-rounds-%s.jsonl" % tag,), "ratio-rounds-%s-summary.txt" % tag,
                                 [(None, m, t) for m, (t, _c) in RATIOS_PAIRS.items()], n=5, numbered=False,
                                 optional=True) for tag in RATIOS_TAGS},
    "collection-run": Paired(
        "collection-run", ("bench-rounds.jsonl",), "bench-rounds-summary.txt",
        [("standard single stream (module def)", "std_single", "vb_chat_c1"), ("standard 8 streams", "std_agg8", "vb_chat_c8")]
        + [("sweep with bench semantics c%d" % c, "semantic_c%d" % c, "vb_cmpl_c%d" % c) for c in (1, 8, 64)],
        n=4, header="; 4 rounds", full=True),  # the deadline left 4 of the 5 asked for: fewer than the issue's >= 5
    "c8-probe": Paired(
        "c8-probe", ("c8-probe.jsonl",), "c8-probe-summary.txt",
        [("standard c1: run_standard / vllm, module's prompts", "std_single", "vb_std_c1"),
         ("standard c8: run_standard / vllm, module's prompts", "std_agg8", "vb_std_c8"),
         ("standard c8: run_standard / vllm, random prompts (old pairing)", "std_agg8", "vb_rand_c8"),
         ("c8, same random prompts: module client / vllm", "m_rand_c8", "vb_rand_c8"),
         ("c8 prompt effect, vllm's client: module's / random", "vb_std_c8", "vb_rand_c8")],
        n=30, header="30 rounds, order rotating"),
    # As measured on 2026-12-03 (n=10): only standard c8 and c64 came within ±5%; the cause is not yet explained.
    "gemma4-ratios": Paired(
        "gemma4-ratios", ("ratio-rounds.jsonl",), "ratio-rounds-summary.txt", unlabelled(GEMMA4_PAIRS), n=10,
        header="; 10 rounds", full=True, in_device_summary=True,
        within={"std_single": False, "std_single_old_def": False, "std_agg8": True, "std_agg64": True,
                "sweep_c1": False, "sweep_c8": False, "sweep_c64": False}),
    # As measured on 2026-12-04 (n=8): standard c1 and sweep c1, c8 within ±5%; standard c8, c64 and sweep c64 not.
    "gemma4-ratios-pass6": Paired(
        "gemma4-ratios-pass6", ("ratio-rounds.jsonl", "ratio-rounds-b.jsonl", "ratio-rounds-c.jsonl"),
        "ratio-rounds-c-summary.txt", unlabelled(GEMMA4_PAIRS), n=8, header="; 8 rounds", counts=True, full=True,
        in_device_summary=True,
        within={"std_single": True, "std_single_old_def": True, "std_agg8": False, "std_agg64": False,
                "sweep_c1": True, "sweep_c8": True, "sweep_c64": False}),
    "gemma4-ratios-pass7": Paired(
        "gemma4-ratios-pass7", ("ratio-rounds.jsonl", "ratio-rounds-b.jsonl"), "ratio-rounds-b-summary.txt",
        unlabelled(PASS7_PAIRS), n=2, header="; 2 rounds; cells standard c8, standard c64, sweep c64", counts=True),
}


@pytest.mark.parametrize("name", PAIRED)
def test_the_rounds_are_complete_and_error_free(name):
    record = PAIRED[name]
    rows = record.rounds()
    if record.numbered or record.header:
        assert len(rows) == record.n, len(rows)
    else:
        assert len(rows) >= record.n, len(rows)  # at least five rounds a run
    if record.numbered:
        assert [r["round"] for r in rows] == list(range(1, record.n + 1))
    assert not any(r.get("errors") for r in rows)
    if record.header:
        assert record.header in record.summary().splitlines()[0]


def _design_gemma4_ratios(rows):
    assert [r["order"][0].rsplit(":", 1)[1] for r in rows] == ["module", "vllm"] * 5  # the first side alternates
    assert all((r["sweep_c1_prompts"], r["sweep_c8_prompts"], r["sweep_c64_prompts"]) == (16, 16, 128) for r in rows)


def _design_pass6(rows):
    # each cell warmed and measured A B B A; the first side alternates from cell to cell, 5 cells a round
    for row in rows:
        assert [o.rsplit(":", 1)[0] for o in row["order"]] == list(PASS6_CELLS)
        first = "m" if row["round"] % 2 else "v"
        other = "v" if first == "m" else "m"
        assert [o.rsplit(":", 1)[1] for o in row["order"]] == ([first + other * 2 + first, other + first * 2 + other] * 3)[:5]
        assert (row["sweep_c1_prompts"], row["sweep_c8_prompts"], row["sweep_c64_prompts"]) == (16, 64, 256)


def _design_pass7(rows):
    for row in rows:
        assert [o.rsplit(":", 1)[0] for o in row["order"]] == ["standard c8", "standard c64", "sweep c64"]
        assert row["sweep_c64_prompts"] == 512
    first = PAIRED["gemma4-ratios-pass7"].summary().splitlines()[0]
    assert "(standard c8: 2048, c64: 2048)" in first and "[16, 64, 512] prompts" in first


DESIGN = {"gemma4-ratios": _design_gemma4_ratios, "gemma4-ratios-pass6": _design_pass6,
          "gemma4-ratios-pass7": _design_pass7}


@pytest.mark.parametrize("name", DESIGN)
def test_the_rounds_ran_as_designed(name):
    DESIGN[name](PAIRED[name].rounds())


@pytest.mark.parametrize("name", PAIRED)
def test_the_summary_is_the_rounds_paired_ratios(name):
    """Each cell's median, min, max, n and within/OUTSIDE ±5% (and how many rounds were within), recomputed."""
    record = PAIRED[name]
    summary = record.summary()
    line = SUMMARY_LINE_COUNTS if record.counts else SUMMARY_LINE
    expected, found = [], []
    for label, mine, theirs in record.pairs:
        values = record.ratios(mine, theirs)
        if not values and record.optional:
            continue
        expected.append(paired_cell(values, counts=record.counts))
        if label is not None:
            found.append(line.search(next(x for x in summary.splitlines() if x.startswith(label))).groups())
    if record.pairs[0][0] is None:
        found = line.findall(summary)
    assert found == expected
    if record.full:
        assert all(cell[3] == str(record.n) for cell in found)
    if record.within is not None:
        assert {mine: cell[4] == "within" for (_l, mine, _t), cell in zip(record.pairs, found)} == record.within
    if record.in_device_summary:
        assert summary in read(record.folder / "summary.txt")


REPEAT_LABELS = ("standard 8 streams (c8)", "standard 64 streams (c64)", "sweep c64 (512 prompts)")


@pytest.mark.parametrize("name", ["gemma4-ratios-pass6", "gemma4-ratios-pass7"])
def test_each_side_ran_twice_a_round_and_the_repeat_figures_are_the_rounds_own(name):
    """Each side's figure is the mean of its two runs; the per-round ratios and run 2 / run 1 spreads shown are
    the rounds' own."""
    record = PAIRED[name]
    rows, summary = record.rounds(), record.summary()
    pairs = {mine: theirs for _l, mine, theirs in record.pairs}
    for row in rows:
        for key in list(pairs) + sorted(set(pairs.values())):
            runs = row[key + "_runs"]
            assert len(runs) == 2 and all(v > 0 for v in runs)
            assert abs(row[key] - sum(runs) / 2) < 1e-9 * row[key]
    if name == "gemma4-ratios-pass6":
        # The device read the earlier calls' files as `ls` listed them (b before the first), so its per-round lines
        # are in that order; gpu_ratios.py now sorts them by round. The values are compared as a set of rounds.
        lines = {line.split(" per-round ratios: ")[0].strip(): line.split(" per-round ratios: ")[1].split()
                 for line in summary.splitlines() if " per-round ratios: " in line}
        assert len(lines) == len(pairs)
        for shown, mine in zip(lines.values(), pairs):
            assert sorted(shown) == sorted("%.3f" % v for v in record.ratios(mine, pairs[mine]))
        spread = "\n".join(line for line in summary.splitlines() if "repeat spread:" in line)
        row = re.search(r"sweep c1 \(16 prompts\) +repeat spread: module run2/run1 median ([0-9.]+)", spread)
        assert row.group(1) == "%.3f" % statistics.median(r["sweep_c1_runs"][1] / r["sweep_c1_runs"][0] for r in rows)
    else:
        spread = {line.split(" repeat spread: ")[0].strip(): line for line in summary.splitlines()
                  if " repeat spread: " in line}
        for label, mine in zip(REPEAT_LABELS, pairs):
            for side, key in (("module", mine), ("vllm", pairs[mine])):
                values = [r[key + "_runs"][1] / r[key + "_runs"][0] for r in rows]
                shown = re.search(side + r" run2/run1 median ([0-9.]+) \(min ([0-9.]+) max ([0-9.]+)\)", spread[label])
                assert shown.groups() == ("%.3f" % statistics.median(values), "%.3f" % min(values), "%.3f" % max(values))


def test_the_module_and_vllm_time_an_8_stream_batch_alike():
    rows = PAIRED["c8-probe"].rounds()
    # Same definition on both sides: the batch's duration is its requests' span (nothing outside it) ...
    for key in ("std_agg8", "vb_std_c8", "m_rand_c8", "vb_rand_c8"):
        outside = statistics.median(r[key + "_timing"]["outside_span_ms"] for r in rows)
        assert outside < 1.0, key
    # ... and the module starts its 8 streams closer together than vLLM's client, with the earlier first token.
    spread = {k: statistics.median(r[k + "_timing"]["start_spread_ms"] for r in rows) for k in ("std_agg8", "vb_std_c8")}
    ttft = {k: statistics.median(r[k + "_timing"]["ttft_mean_ms"] for r in rows) for k in ("std_agg8", "vb_std_c8")}
    assert spread["std_agg8"] < spread["vb_std_c8"] and ttft["std_agg8"] < ttft["vb_std_c8"]


# ---------------------------------------------------------------------------------------------------------------
# Pass 8: each side's own drift, per cell one side 5 times in a row then the other, on two models (no pairs)
# ---------------------------------------------------------------------------------------------------------------

# model -> its drift files: the first call's (or the second's) cells, then the third call's sweep c64
DRIFT_CALLS = {"tiny": ("drift-tiny.jsonl", "drift-tiny-c.jsonl"), "large": ("drift-large.jsonl", "drift-large-c.jsonl")}
DRIFT_CELLS = ("standard c1", "standard c8", "standard c64", "sweep c1", "sweep c8", "sweep c64")
DRIFT_KEYS = {"standard c1": ("std_single", "vb_chat_c1"), "standard c8": ("std_agg8", "vb_chat_c8"),
              "standard c64": ("std_agg64", "vb_chat_c64"), "sweep c1": ("sweep_c1", "vb_cmpl_c1"),
              "sweep c8": ("sweep_c8", "vb_cmpl_c8"), "sweep c64": ("sweep_c64", "vb_cmpl_c64")}
REPEATS = 5


def drift_runs(model, names=None):
    return [row for name in names or DRIFT_CALLS[model] for row in jsonl(PASS8 / name)]


def side_runs(model, cell, side):
    return [r for r in drift_runs(model) if r["cell"] == cell and r["side"] == side]


def values(model, cell, side):
    return [r["value"] for r in side_runs(model, cell, side)]


def cv(vals):
    return 100 * statistics.stdev(vals) / statistics.mean(vals)


def drift_summary_line(model, cell, side):
    """gpu_drift.py's summary line for one cell and side, recomputed from the runs."""
    rows = side_runs(model, cell, side)
    vals = [r["value"] for r in rows]
    use = "; ".join("%s %.2f" % (name, statistics.median(r[name + "_cpu_s"] / r["wall_s"] for r in rows))
                    for name in ("api", "engine", "client"))
    gpu = "; gpu util %.0f%%, sm %.0f-%.0f MHz" % (
        statistics.median(r["gpu_util"] for r in rows), min(r["sm_mhz"] for r in rows), max(r["sm_mhz"] for r in rows))
    return ("%-13s %-6s n=%d median %9.1f tok/s (min %.1f max %.1f) max/min %.3f cv %.1f%%; wall %.1f s; cpu/wall %s%s" % (
        cell, side, len(vals), statistics.median(vals), min(vals), max(vals), max(vals) / min(vals), cv(vals),
        statistics.median(r["wall_s"] for r in rows), use, gpu))


def block_ratio(model, cell):
    return statistics.median(values(model, cell, "module")) / statistics.median(values(model, cell, "vllm"))


def drift_table():
    """Pass 8's record's table: per cell and side, each model's median, max/min, CV and GPU utilization."""
    rows = []
    for cell in DRIFT_CELLS:
        for side in ("module", "vllm"):
            parts = [cell, side]
            for model in ("tiny", "large"):
                vals = values(model, cell, side)
                util = statistics.median(r["gpu_util"] for r in side_runs(model, cell, side))
                parts += ["{:,.0f}".format(statistics.median(vals)), "%.3f" % (max(vals) / min(vals)),
                          "%.1f%%" % cv(vals), "%.0f%%" % util]
            rows.append("| " + " | ".join(parts) + " |")
    return rows


def test_each_drift_cell_ran_one_side_five_times_in_a_row_then_the_other():
    for model in DRIFT_CALLS:
        for name in DRIFT_CALLS[model]:
            rows = drift_runs(model, [name])
            for cell in dict.fromkeys(r["cell"] for r in rows):
                block = [(r["side"], r["i"]) for r in rows if r["cell"] == cell]
                first = "module" if DRIFT_CELLS.index(cell) % 2 == 0 else "vllm"  # alternating from cell to cell
                other = "vllm" if first == "module" else "module"
                assert block == [(first, i) for i in range(1, REPEATS + 1)] + [(other, i) for i in range(1, REPEATS + 1)]
        assert sorted({r["cell"] for r in drift_runs(model)}) == sorted(DRIFT_CELLS)
        for r in drift_runs(model):
            assert r["model"] == model and r["key"] == DRIFT_KEYS[r["cell"]][r["side"] != "module"] and r["value"] > 0


def test_the_drift_summaries_are_the_runs_own():
    text = read(PASS8 / "summary.txt")
    for model in DRIFT_CALLS:
        for cell in DRIFT_CELLS:
            for side in ("module", "vllm"):
                assert drift_summary_line(model, cell, side) in text, (model, cell, side)
            assert "%-13s module median / vllm median %.3f (blocks, not pairs)" % (cell, block_ratio(model, cell)) in text


def test_what_the_drift_runs_show_as_measured():
    # The tiny stand-in keeps the GPU busy under 10% of the time in every cell: its steps wait on the CPU.
    assert all(statistics.median(r["gpu_util"] for r in side_runs("tiny", c, s)) < 10
               for c in DRIFT_CELLS for s in ("module", "vllm"))
    # The ~3 B stand-in keeps it busy 50-90% of each run in every cell but sweep c64 (there the runs' walls include
    # the prompts' preparation: 22% and 45%) ...
    assert all(50 <= statistics.median(r["gpu_util"] for r in side_runs("large", c, s)) <= 90
               for c in DRIFT_CELLS[:-1] for s in ("module", "vllm"))
    # ... but the drift did not fall well under 5%: per model, the median CV over the 12 cell-sides, and the worst.
    for model, (median_cv, worst) in {"tiny": ("5.6", "15.1"), "large": ("4.8", "15.2")}.items():
        cvs = [cv(values(model, c, s)) for c in DRIFT_CELLS for s in ("module", "vllm")]
        assert ("%.1f" % statistics.median(cvs), "%.1f" % max(cvs)) == (median_cv, worst)
    assert {r["sm_mhz"] for model in DRIFT_CALLS for r in drift_runs(model)} == {1980.0}  # no clock moved in any run


# ---------------------------------------------------------------------------------------------------------------
# The Gemma 4 passes' servers: pass 3's planned argv, how long each took to start, the card, the CPU pinning
# ---------------------------------------------------------------------------------------------------------------

def _large_argv():
    argv = ["--model"] + plan_h200()["argv"]
    argv[1], argv[argv.index("--served-model-name") + 1] = "sparkfleet/random-gemma4-moe-3b-h200", "gemma-4-3b-standin"
    return argv


STARTUP = ("Resolved architecture: Gemma4ForCausalLM", "Application startup complete.")
PINNED = [("python3", "0-7"), ("python3", "0-7"), ("VLLM::EngineCor", "0-7")]
SERVERS = {
    # folder: the healthy-after times its summary logged, lines of summary.txt (with how often each occurs, where
    # that matters), the server's process affinity (process names and CPUs; pass 8 per model) and its start-up
    # logs' lines. Every start logged `--model` + the plan's argv, as gpu-ratios.sh starts it.
    "gemma4-ratios": {"healthy": ["104.4"], "texts": {"settings: 256 output tokens, ignore_eos": None},
                      "logs": {"server-startup.log": STARTUP}},
    "gemma4-ratios-pass6": {
        "healthy": ["122.1"], "logs": {"server-startup.log": STARTUP}, "affinity": PINNED,
        "texts": {"server from the previous call still healthy: rounds only": 2,
                  "server (API process and engine core) on CPUs 0,1,2,3,4,5,6,7, clients on CPUs 8,9,10,11,12,13,14,15": None,
                  "rounds: taskset -c 8,9,10,11,12,13,14,15 gpu_ratios.py --repeats 2 --cell-warmup "
                  "--sweep-prompts 16,64,256 --c64-tokens 1024": 1,
                  "taskset -c 8,9,10,11,12,13,14,15 gpu_ratios.py": 3}},  # the first call and TAG b, c
    "gemma4-ratios-pass7": {
        "healthy": ["119.6"], "affinity": PINNED,
        "texts": {"NVIDIA H100 80GB HBM3": None, "vllm 0.25.0 torch 2.11.0+cu130": None,
                  "server from the previous call still healthy: rounds only": None}},
    "gemma4-ratios-pass8": {
        "healthy": ["155.5", "136.7", "94.9"],
        "texts": {"vllm 0.25.0 torch 2.11.0+cu130 NVIDIA H100 80GB HBM3": None,
                  "gpu: NVIDIA H100 80GB HBM3, 580.159.04, 1980 MHz, 2619 MHz, 700.00 W": None,
                  "Model loading took 5.63 GiB memory": None, "large stand-in generated in 66.8 s: 5.7G": None},
        "affinity": [(m, n, "0-7") for m in ("large", "tiny") for n in ("python3", "python3", "VLLM::EngineCor")],
        "logs": {"server-startup-large.log": ("Resolved architecture: Gemma4ForCausalLM", "Asynchronous scheduling is enabled.")}},
}


@pytest.mark.parametrize("name", SERVERS)
def test_the_passes_server_ran_pass_3s_planned_argv(name):
    folder, spec = H200 / name, SERVERS[name]
    text = read(folder / "summary.txt")
    planned = ["--model"] + plan_h200()["argv"]
    if name == "gemma4-ratios-pass8":
        starts = {m: shlex.split(a) for m, a in re.findall(r"\] start (tiny|large): (.*)", text)}
        assert starts == {"tiny": planned, "large": _large_argv()}
        assert re.findall(r"(tiny|large) healthy after", text) == ["tiny", "large", "tiny"]
        healthy = re.findall(r"(?:tiny|large) healthy after ([\d.]+) s", text)
    else:
        assert [shlex.split(a) for a in re.findall(r"server argv: (.*)", text)] == [planned]
        healthy = re.findall(r"healthy after ([\d.]+) s", text)
    assert healthy == spec["healthy"]
    for line, count in spec["texts"].items():
        assert (text.count(line) == count) if count else (line in text), line
    if "affinity" in spec:
        rows = [line.split() for line in read(folder / "server-affinity.txt").splitlines()]
        assert [tuple(f for f in row if not f.isdigit()) for row in rows] == spec["affinity"]
    for log, lines in spec.get("logs", {}).items():
        assert all(line in read(folder / log) for line in lines), log


# ---------------------------------------------------------------------------------------------------------------
# The docs quote the recomputed figures
# ---------------------------------------------------------------------------------------------------------------

def _run_figures(folder, standard, sweep):
    ext, cells = extra(standard), extra(sweep)["cells"]
    healthy = re.search(r"healthy after ([\d.]+) s \(launcher", read(folder / "summary.txt")).group(1)
    return ([healthy, "%.1f" % ext["single_stream_tok_s"], "{:,.1f}".format(ext["aggregate_8_tok_s"])]
            + ["{:,.1f}".format(c["output_throughput"]) for c in cells])


def _ratios_figures():
    """The 256-token runs a and b pooled (median, quartiles, range), and the 1024-token run (median, range, n)."""
    pooled = Paired("ratios", ("ratio-rounds-a.jsonl", "ratio-rounds-b.jsonl"), None, [], n=0)
    figures = []
    for mine, (theirs, _c) in RATIOS_PAIRS.items():
        vals = pooled.ratios(mine, theirs)
        quartiles = statistics.quantiles(vals, n=4)
        figures.append("%.3f (%.3f–%.3f, %.3f–%.3f)" % (statistics.median(vals), quartiles[0], quartiles[2], min(vals), max(vals)))
    for mine in ("std_single", "std_agg8"):
        vals = PAIRED["ratios-t1024"].ratios(mine, RATIOS_PAIRS[mine][0])
        figures.append("%.3f (%.3f–%.3f, n=%d)" % (statistics.median(vals), min(vals), max(vals), len(vals)))
    return figures


def _medians(name, leave_out=()):
    return ["%.3f" % PAIRED[name].median(mine) for _l, mine, _t in PAIRED[name].pairs if mine not in leave_out]


QUOTED = {  # capture folder -> the record (docs/records/) that quotes it, the figures it must carry
    "collection-run": (PASS2_RECORD, lambda: _run_figures(COLLECTION_RUN, "collection-run standard", "collection-run sweep")),
    "gemma4-run": (PASS3_RECORD, lambda: _run_figures(GEMMA4_RUN, "gemma4-run standard", "gemma4-run sweep")),
    "ratios": ("2026-12-02-ratios-module-vs-vllm-bench.md", _ratios_figures),
    "c8-probe": (PASS3_RECORD, lambda: _medians("c8-probe")),
    "gemma4-ratios": ("2026-12-03-pass4-gemma4-ratios-sampler-oom.md",
                      lambda: [healthy_after(H200 / "gemma4-ratios")] + _medians("gemma4-ratios", ("std_single_old_def",))),
    "gemma4-ratios-pass6": ("2026-12-04-pass6-pinned-ratios.md",
                            lambda: _medians("gemma4-ratios-pass6", ("std_single_old_def",))),
    "gemma4-ratios-pass7": ("2026-12-05-pass7-longer-windows.md", lambda: _medians("gemma4-ratios-pass7")),
    "gemma4-ratios-pass8": ("2026-12-05-pass8-drift.md", lambda: drift_table() + ["%.3f" % block_ratio(m, c) for m in DRIFT_CALLS
                                                                                  for c in DRIFT_CELLS]),
}


@pytest.mark.parametrize("name", QUOTED)
def test_each_record_quotes_its_captures_figures(name):
    record, figures = QUOTED[name]
    text = read(RECORDS / record)
    missing = [f for f in figures() if f not in text]
    assert not missing, "docs/records/%s lacks the %s figures %s" % (record, name, missing)
    assert "tests/fixtures/h200/%s" % name in text, "docs/records/%s does not name its captures" % record
    assert "(records/%s)" % record in read(REPO / "docs" / "gpu-proof.md"), "docs/gpu-proof.md does not link %s" % record
