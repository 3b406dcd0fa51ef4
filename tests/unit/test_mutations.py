"""Mutation checks: each test that shows a failure is detected fails, alone, when that detection is removed.

For each detection — every refusal path of the planner (tests/unit/mutations.py finds them in the source: each
call of the refusal helper, each ``raise PlanError``, each refusal a ``*_refusal`` helper returns), the throughput
gate (and its ratio floor and its 8-stream check), the start-up failure diagnosis, the secret-name check, the
reading of flag spellings, the API-key character rule and the topology advice's layout warnings — one child pytest
run first runs every catching test as usual (each must pass), then each catching test once more, alone, in a
forked copy of the child with only its mutation applied: every one of those runs must fail. One run for all of
them, each test alone: a catcher that no longer catches cannot hide behind another that still does (a group run
with -x stopped at the first failure and never ran the rest).
"""
import json
import os
import subprocess
import sys

import mutations
import pytest

from conftest import REPO

UNIT = "tests/unit/plugins"
PLANNER = UNIT + "/module_utils/plan/test_planner.py::"
BAD_INPUT = PLANNER + "test_bad_input_is_refused_with_its_message[%d]"
DOCUMENTED = PLANNER + "test_documented_failures_are_refused[%d]"
CATCHERS_FILE = UNIT + "/module_utils/plan/test_refusal_catchers.py::"
MEMORY = UNIT + "/module_utils/plan/test_memory.py::"
GATE_TESTS = UNIT + "/module_utils/test_bench_metrics.py::"
R = mutations.REFUSAL_PREFIX

# Refusal path (mutations.refusal_sites()) -> the test that exists to catch its removal. Every path has one.
REFUSAL_CATCHERS = {
    R + "inputs.check_request_keys:request": [BAD_INPUT % 51],
    R + "model.resolve_profile:profile": [BAD_INPUT % 4],
    R + "model.resolve_profile:profile#3": [BAD_INPUT % 2],
    R + "model.resolve_model:model": [BAD_INPUT % 0],
    R + "model.resolve_model:stand-in": [BAD_INPUT % 45],
    R + "model.resolve_model:stand-in#2": [BAD_INPUT % 46],
    R + "cluster.check_groups:host-groups": [PLANNER + "test_a_host_in_both_groups_is_refused"],
    R + "cluster.check_link_addresses:cluster-link-ip": [PLANNER + "test_duplicate_link_addresses_are_refused"],
    R + "cluster.check_cluster_ports:cluster-port": [
        PLANNER + "test_api_port_inside_the_cluster_ranges_is_refused[12000-10002-19999 (Ray's worker ports)]"],
    R + "cluster.resolve_nodes:cluster": [BAD_INPUT % 49],
    R + "cluster.resolve_nodes:cluster#2": [DOCUMENTED % 19],
    R + "cluster.resolve_nodes:cluster#3": [DOCUMENTED % 18],
    R + "cluster.resolve_nodes:cluster#4": [BAD_INPUT % 48],
    R + "cluster.resolve_replicas:replicas": [PLANNER + "test_replicas_refuse_a_lone_host_and_shared_addresses"],
    R + "cluster.resolve_replicas:replicas-addresses": [
        PLANNER + "test_replicas_refuse_a_lone_host_and_shared_addresses"],
    R + "release.resolve_release:release": [BAD_INPUT % 40],
    R + "release.resolve_release:release#2": [BAD_INPUT % 39],
    R + "release.resolve_release:release#3": [BAD_INPUT % 42],
    R + "release.resolve_release:release#4": [BAD_INPUT % 41],
    R + "release.resolve_release:release#5": [BAD_INPUT % 43],
    # Not test_documented_failures_are_refused[6]: without this refusal v0.26.0's own defect refuses the same
    # request with the same words, so that case passes; the catcher asserts the rule.
    R + "release.resolve_release:multi-node-release": [
        CATCHERS_FILE + "test_a_cluster_on_a_release_before_the_multi_node_minimum_is_refused_by_that_rule"],
    R + "release.check_release_floors:release-floor": [
        PLANNER + "test_a_release_below_a_floor_is_refused_with_its_reason_and_source[v0.8.0]",
        PLANNER + "test_a_release_below_a_floor_is_refused_with_its_reason_and_source[mtp-on-v0.22.0]"],
    R + "release.resolve_runtime:runtime": [BAD_INPUT % 47],
    R + "release.resolve_runtime:runtime#2": [
        CATCHERS_FILE + "test_native_runtime_is_refused_for_a_release_without_a_pip_package"],
    R + "binding.bind_replica:replicas-gateway": [PLANNER + "test_replicas_refuse_the_gateway_bypass"],
    R + "binding.resolve_open_api:open-api-loopback": [PLANNER + "test_open_api_refusals[cluster-loopback]"],
    R + "binding.resolve_open_api:open-api-gateway": [PLANNER + "test_open_api_refusals[loopback-gateway]"],
    R + "binding.check_open_api:open-api": [
        PLANNER + "test_a_plan_without_a_key_is_refused_unless_it_says_how_it_may_serve[single]"],
    R + "drafter.drafter_refusal:drafter": [DOCUMENTED % 20],
    R + "drafter.drafter_refusal:profile-drafter": [DOCUMENTED % 5],
    R + "drafter.drafter_refusal:release-defect": [DOCUMENTED % 0],
    R + "drafter.resolve_drafter:refusal[1]": [
        PLANNER + "test_a_stand_in_without_a_generated_drafter_refuses_it[tiny-31b-mtp]"],
    R + "release.apply_release_defects:release-defect": [
        CATCHERS_FILE + "test_a_refusing_release_defect_refuses_without_the_multi_node_release_rule"],
    R + "inputs.as_int:type#2": [BAD_INPUT % 9],
    R + "inputs.as_int:range": [BAD_INPUT % 10],
    R + "inputs.as_int:range#2": [BAD_INPUT % 21],
    R + "inputs.as_text:type": [PLANNER + "test_text_inputs_are_not_stringified[release-number]"],
    R + "inputs.as_float:type": [BAD_INPUT % 16],
    R + "inputs.as_bool:type": [PLANNER + "test_a_gateway_value_that_is_not_a_bool_is_refused[maybe]"],
    R + "inputs.as_choice:choice": [PLANNER + "test_a_topology_that_is_not_a_choice_is_refused"],
    R + "inputs.arg_list:type": [BAD_INPUT % 38],
    R + "inputs.arg_list:type#2": [BAD_INPUT % 37],
    R + "inputs.arg_list:type#3": [BAD_INPUT % 36],
    R + "guards.check_extra_args:flags": [
        CATCHERS_FILE + "test_extra_args_are_refused_when_the_flag_list_cannot_be_read"],
    R + "guards.check_extra_args:attention-backend": [DOCUMENTED % 11],
    R + "guards.check_extra_args:extra-args-separator": [
        PLANNER + "test_a_key_hidden_in_one_item_or_after_a_separator_is_refused_without_echoing_it[after-separator]"],
    R + "guards.check_extra_args:extra-args-item": [
        PLANNER + "test_a_key_hidden_in_one_item_or_after_a_separator_is_refused_without_echoing_it[one-item]"],
    R + "guards.allowed_guarded:type": [PLANNER + "test_allow_guarded_names_only_what_the_catalog_guards[not-a-list]"],
    R + "guards.allowed_guarded:allow-guarded": [PLANNER + "test_allow_guarded_names_only_what_the_catalog_guards[unknown]"],
    R + "guards._guard:guarded": [
        PLANNER + "test_flags_that_load_code_or_widen_access_are_refused_unless_named[--trust-remote-code]",
        PLANNER + "test_every_environment_mapping_gets_the_same_guard[runtime-lora-cluster_extra_env]"],
    R + "guards.check_env:type": [PLANNER + "test_bad_user_env_is_refused[A=1-type]"],
    R + "guards.check_env:env-name": [PLANNER + "test_bad_user_env_is_refused[env2-env-name]"],
    R + "guards.check_env:type#2": [PLANNER + "test_bad_user_env_is_refused[env3-type]"],
    R + "guards.check_env:env-control": [
        PLANNER + "test_every_environment_mapping_gets_the_same_guard[newline-cluster_extra_env]"],
    R + "guards._refuse_secret_name:env-secret": [PLANNER + "test_bad_user_env_is_refused[env0-env-secret]"],
    R + "guards._check_dev_mode:dev-mode": [
        PLANNER + "test_dev_mode_from_the_catalog_is_refused_too",
        PLANNER + "test_every_environment_mapping_gets_the_same_guard[dev-mode-cluster_ray_health_check]"],
    R + "guards._refuse_flag:secret-flag": [BAD_INPUT % 31],
    R + "guards._refuse_flag:managed-flag": [BAD_INPUT % 30],
    R + "guards._refuse_flag:refused-flag": [PLANNER + "test_every_spelling_of_a_guarded_flag_is_refused[--config f.yaml]"],
    R + "guards._refuse_flag:dev-mode-flag": [PLANNER + "test_unguarded_routes_and_trace_logging_need_dev_mode[--grpc]"],
    R + "settings.max_model_len:max-model-len": [BAD_INPUT % 13],
    R + "settings.media:audio": [BAD_INPUT % 24],
    R + "settings.media:audio#2": [BAD_INPUT % 25],
    R + "settings.max_num_batched_tokens:mnbt-floor": [BAD_INPUT % 15],
    R + "settings.max_num_batched_tokens:mnbt-cap": [DOCUMENTED % 14],
    R + "settings.vision_fit:vision-fit": [PLANNER + "test_5090_31b_with_vision_at_the_encoder_floor_fits_9056_tokens"],
    R + "settings.gpu_memory_utilization:gpu-util": [BAD_INPUT % 17],
    # Not BAD_INPUT % 19 (0.79 with vision): without the cap the memory budget refuses it too, naming 0.78.
    R + "settings.gpu_memory_utilization:gpu-util-unified": [
        MEMORY + "test_the_measured_cap_holds_where_the_budget_would_allow_more"],
    R + "settings.endpoint:served-name": [
        PLANNER + "test_a_served_name_that_is_not_one_plain_name_is_refused[list]"],
    R + "settings.endpoint:served-name#2": [BAD_INPUT % 27],
    R + "settings.endpoint:served-name#3": [
        PLANNER + "test_a_served_name_that_is_not_one_plain_name_is_refused[flag]"],
    R + "settings.max_num_seqs:max-num-seqs": [PLANNER + "test_more_sequences_than_the_step_has_tokens_is_refused"],
    R + "memory.refuse_overshoot:memory-budget": [
        MEMORY + "test_memory_outside_the_pool_that_overshoots_the_host_is_refused_with_the_utilization_that_fits",
        MEMORY + "test_host_memory_no_utilization_can_make_room_for_names_the_flag"],
    R + "memory.memory_budget:memory-weights": [
        MEMORY + "test_a_pool_too_small_for_the_weights_is_refused_naming_what_to_change"],
    R + "memory._flag_number:memory-flag": [MEMORY + "test_a_memory_flag_the_budget_cannot_read_is_refused[cache-text]"],
    R + "inputs.as_link_address:link-address": [PLANNER + "test_a_link_address_that_is_not_an_ip_is_refused[spark-01]"],
    R + "inputs.as_link_address:link-address#2": [PLANNER + "test_an_ipv6_link_address_is_refused_with_the_reason"],
    R + "inputs.as_link_devices:link-device": [
        PLANNER + "test_link_device_names_are_checked_for_shape[interface-metacharacters]"],
    R + "inputs.as_link_devices:link-device#2": [
        PLANNER + "test_link_device_names_are_checked_for_shape[hca-empty]"],
    R + "settings._client_endpoint:gateway-port": [PLANNER + "test_the_plan_says_where_clients_reach_the_api"],
    R + "settings.api_key:api-key": [BAD_INPUT % 28],
    R + "settings.api_key:api-key-characters": [
        PLANNER + "test_api_key_characters_an_env_file_would_rewrite_are_refused[sk-nul\\x00-1234-NUL]"],
}
# Refusal paths whose removal the user cannot see: another path refuses the same input with the same message (rule,
# variable). No test can catch them; the named test runs under the mutation and must PASS, so should the other path
# ever say something else, this check fails and the path needs a catcher.
EQUIVALENT = {
    # A bool is refused before parsing; without it int("True") fails and the parse's refusal says the same.
    R + "inputs.as_int:type": BAD_INPUT % 11,
    # No profile and no GPU name: catalog.resolve_profile(None) raises "no hardware profile given; set vllm_profile
    # to one of: ..." and resolve_profile's next refusal carries it, rule and variable unchanged.
    R + "model.resolve_profile:profile#2": BAD_INPUT % 3,
}
# The other detections (mutations.MUTATIONS) -> their catchers. A node id without [params] means every case of it.
OTHER_CATCHERS = {
    "gate": [UNIT + "/modules/test_throughput.py::test_gate_fails_on_a_high_baseline_and_passes_on_a_low_one",
             GATE_TESTS + "test_gate"],
    "gate-ratio": [GATE_TESTS + "test_the_gate_floor_is_min_ratio_not_the_default",
                   UNIT + "/modules/test_throughput_gate.py::test_the_playbooks_pass_vllm_throughput_min_ratio_as_min_ratio"
                   "[0.8-verify.yml]",
                   UNIT + "/modules/test_throughput_gate.py::test_the_playbooks_pass_vllm_throughput_min_ratio_as_min_ratio"
                   "[string-0.6-bench.yml]"],
    "gate-8-stream": [GATE_TESTS + "test_the_gate_fails_on_the_8_stream_figure_alone"],
    "diagnosis": [UNIT + "/module_utils/test_diagnose.py::test_real_cpu_bad_flag_log",
                  UNIT + "/module_utils/test_diagnose.py::test_real_cpu_max_model_len_log",
                  UNIT + "/module_utils/test_diagnose.py::test_real_h200_failure_logs"],
    "secret-names": [PLANNER + "test_bad_user_env_is_refused[env0-env-secret]",
                     PLANNER + "test_bad_user_env_is_refused[env1-env-secret]",
                     PLANNER + "test_secret_looking_names_are_refused_in_every_user_env"],
    # The abbreviations vLLM's parser accepts; the other cases there are exact spellings, which the older guards
    # caught too.
    "flag-spellings": [PLANNER + "test_every_spelling_of_a_guarded_flag_is_refused[%s]" % case for case in (
        "--api-ke sk-x-12345678", "--api sk-x-12345678", "--hf-tok hf_x", "-t 4", "--tensor-parallel 4",
        "--max-model 512", "--conf f.yaml")],
    "key-characters": [PLANNER + "test_api_key_characters_an_env_file_would_rewrite_are_refused"],
    "topology": [UNIT + "/module_utils/test_topology.py::test_moe_stops_scaling_past_two_and_replicas_are_offered",
                 UNIT + "/module_utils/test_topology.py::test_e4b_runs_better_on_two_sparks_than_four",
                 UNIT + "/module_utils/test_topology.py::test_e2b_is_best_on_one_spark"],
}
CATCHERS = dict(REFUSAL_CATCHERS, **OTHER_CATCHERS)
for _name, _node in EQUIVALENT.items():
    CATCHERS[_name] = [_node]


def child_pytest(plan, tmp_dir):
    """One child pytest run of every catcher in `plan` ({mutation: [node ids]}); its results (mutations.py)."""
    plan_file, results_file = tmp_dir / "plan.json", tmp_dir / "results.json"
    plan_file.write_text(json.dumps(plan))
    path = [str(REPO / "tests" / "unit"), str(REPO / ".collections"), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), SPARKFLEET_MUTATION_PLAN=str(plan_file),
               SPARKFLEET_MUTATION_RESULTS=str(results_file),
               SPARKFLEET_TIMES_DIR=str(REPO / "tests" / "output" / "times-mutations"))
    env.pop("SPARKFLEET_MUTATION", None)
    nodes = sorted({node for nodes in plan.values() for node in nodes})
    # A function's node id runs all its cases: a case of it named as well would run twice.
    nodes = [n for n in nodes if "[" not in n or n.split("[", 1)[0] not in nodes]
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "mutations", "--rootdir", str(REPO),
           *nodes]
    run = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0 and results_file.exists(), "the catchers fail (or are missing) without any mutation:\n%s" % (
        run.stdout[-4000:] + run.stderr[-2000:])
    return json.loads(results_file.read_text())


@pytest.fixture(scope="module")
def results(request, tmp_path_factory):
    """The child run for the mutations this session selected (all of them in the unit tier)."""
    selected = {item.callspec.params["mutation"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec") and "mutation" in item.callspec.params}
    return child_pytest({name: CATCHERS[name] for name in sorted(selected)}, tmp_path_factory.mktemp("mutations"))


def outcomes(results, mutation):
    """{node id: outcome} of one mutation's catchers, each named node matched (a function's node by all its cases)."""
    got = results["mutants"].get(mutation, {})
    for spec in CATCHERS[mutation]:
        assert any(node == spec or node.split("[", 1)[0] == spec for node in got), (
            "%s: the catcher %s did not run (renamed or removed?)" % (mutation, spec))
    unmutated = {node: results["baseline"][node] for node in got}
    assert all(o["outcome"] == "passed" for o in unmutated.values()), (
        "%s: catchers that do not pass without the mutation prove nothing\n%s" % (mutation, json.dumps(unmutated, indent=1)))
    return got


def test_every_refusal_path_has_a_catcher_or_is_shown_equivalent():
    """The table above names exactly the refusal paths the source has: a new refusal needs its catcher here."""
    paths = set(mutations.refusal_sites())
    listed = set(REFUSAL_CATCHERS) | set(EQUIVALENT)
    assert not set(REFUSAL_CATCHERS) & set(EQUIVALENT)
    assert paths - listed == set(), "refusal paths without a catcher (add one to REFUSAL_CATCHERS)"
    assert listed - paths == set(), "catchers of refusal paths the source no longer has"
    assert all(REFUSAL_CATCHERS[name] for name in REFUSAL_CATCHERS)


@pytest.mark.parametrize("mutation", sorted(set(CATCHERS) - set(EQUIVALENT)))
def test_each_catcher_fails_alone_when_its_detection_is_removed(results, mutation):
    got = outcomes(results, mutation)
    survived = {node: o for node, o in got.items() if o["outcome"] != "failed"}
    assert not survived, "with %s removed these catchers, each run alone, do not fail: they do not detect it\n%s" % (
        mutation, json.dumps(survived, indent=1))


@pytest.mark.parametrize("mutation", sorted(EQUIVALENT))
def test_an_equivalent_refusal_path_is_covered_by_the_path_after_it(results, mutation):
    got = outcomes(results, mutation)
    assert [o["outcome"] for o in got.values()] == ["passed"], (
        "%s is no longer equivalent: without it the refusal changes; give it a catcher\n%s" % (
            mutation, json.dumps(got, indent=1)))
