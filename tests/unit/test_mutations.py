"""Mutation checks: the tests that show a failure is detected fail when the detection is removed.

For each detection — the throughput gate, the start-up failure diagnosis, the
planner's refusals, its secret-name check, its reading of flag spellings and
its API-key character rule, the topology advice's layout warnings — a child pytest run replaces it
with a version that detects nothing (tests/unit/mutations.py) and runs the
tests written to catch it. Every one of those runs must fail; a run without
the mutation must pass, so the failure is the mutation's doing.
"""
import os
import subprocess
import sys

import pytest

from conftest import REPO

UNIT = "tests/unit/plugins"
# mutation -> the tests that exist to catch it (node ids relative to the repository).
CATCHERS = {
    "gate": [UNIT + "/modules/test_throughput.py::test_gate_fails_on_a_high_baseline_and_passes_on_a_low_one",
             UNIT + "/modules/test_throughput.py::test_a_calibrated_gate_fails_when_every_measured_run_is_slower",
             UNIT + "/module_utils/test_bench_metrics.py::test_gate"],
    "diagnosis": [UNIT + "/module_utils/test_diagnose.py::test_real_cpu_bad_flag_log",
                  UNIT + "/module_utils/test_diagnose.py::test_real_cpu_max_model_len_log",
                  UNIT + "/module_utils/test_diagnose.py::test_real_h200_failure_logs"],
    "refusal": [UNIT + "/module_utils/test_planner.py::test_bad_input_is_refused_with_its_message",
                UNIT + "/module_utils/test_planner.py::test_5090_31b_with_vision_at_the_encoder_floor_fits_9056_tokens"],
    "secret-names": [UNIT + "/module_utils/test_planner.py::test_bad_user_env_is_refused",
                     UNIT + "/module_utils/test_planner.py::test_secret_looking_names_are_refused_in_every_user_env"],
    "flag-spellings": [UNIT + "/module_utils/test_planner.py::test_every_spelling_of_a_guarded_flag_is_refused"],
    "key-characters": [UNIT + "/module_utils/test_planner.py::test_api_key_characters_an_env_file_would_rewrite_are_refused"],
    "topology": [UNIT + "/module_utils/test_topology.py::test_moe_stops_scaling_past_two_and_replicas_are_offered",
                 UNIT + "/module_utils/test_topology.py::test_e4b_runs_better_on_two_sparks_than_four",
                 UNIT + "/module_utils/test_topology.py::test_e2b_is_best_on_one_spark"],
}


def child_pytest(node_ids, mutation=None):
    path = [str(REPO / "tests" / "unit"), str(REPO / ".collections"), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path),
               SPARKFLEET_TIMES_DIR=str(REPO / "tests" / "output" / "times-mutations"))
    env.pop("SPARKFLEET_MUTATION", None)
    if mutation:
        env["SPARKFLEET_MUTATION"] = mutation
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "mutations", "-x", *node_ids]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize("mutation", sorted(CATCHERS))
def test_detection_tests_fail_when_the_detection_is_removed(mutation):
    unmutated = child_pytest(CATCHERS[mutation])
    assert unmutated.returncode == 0, "the catching tests fail even without the mutation:\n" + unmutated.stdout[-3000:]
    mutated = child_pytest(CATCHERS[mutation], mutation)
    assert mutated.returncode == 1, "with %s removed the tests still pass (rc %s): they do not detect it\n%s" % (
        mutation, mutated.returncode, mutated.stdout[-3000:] + mutated.stderr[-2000:])
    assert "failed" in mutated.stdout.splitlines()[-1], mutated.stdout[-2000:]
