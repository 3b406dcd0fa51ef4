"""Bad input, end to end: every case runs the real ansible-playbook and must be refused
with a message that names the variable and the fix, before anything changes.

Each case runs `site.yml` (a host is involved) or `playbooks/plan.yml` (no host is
needed: the planner runs on the controller) against a shipped inventory or a
temporary one written here, with one bad value. A case passes when

  * ansible-playbook exits non-zero,
  * the output (stdout + stderr, whitespace-normalised) carries every expected
    fragment: the variable's name and the fix the message proposes,
  * the PLAY RECAP reports changed=0 for every host and no task printed
    `changed:` (the run stopped before its first change), and
  * for site.yml on inventories/local: no file under the native runtime's paths
    (unit, env files, pid files, launcher, the stand-in model's cache) changed
    its hash or mtime, and a server that was running keeps its PID.

Stand-ins, named as such: inventories/local is this machine without a GPU
(profile `cpu` = vLLM's CPU build, its model a generated tiny random Gemma 4 in
place of Gemma 4 NVFP4, LOCAL_MODEL below); the two-node "local pair" inventory makes this machine two
cluster nodes with a catalog copy that lets the cpu stand-in form clusters
(tests/cluster/sim_catalog.py, the cluster simulation's catalog).

Controller-side output is turned off where it would blur "no change": the plan
role's JSON plan file (plan_write_files=false; the plan is still computed and
set as a fact) is a controller file, not a host change, but the recap would
count it. Cases on inventories/local use their own service name and port
(vllm-serve-badinput, 18410) so that a case the roles failed to refuse can never
restart the demo's server on port 8000; runs on the local pair limit the host
and cluster plays to no host (host_hosts / cluster_group), while the plan and preflight
keep the pair as vllm_cluster, so a missed refusal ends the run after preflight
instead of installing Docker here.

Model, drafter, profile, objective and runtime names are matched
case-insensitively by design (the planner lower-cases them): `31B` and `MTP`
are accepted (test_case_insensitive_names_are_accepted), not refused.

PENDING_CASES lists refusals the roles do not make today and that this suite's
owner cannot fix in files it owns; set SPARKFLEET_BAD_INPUT_PENDING=1 to run
them too (they fail until their owner fixes them).
"""
import collections
import concurrent.futures
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from conftest import REPO, require, tool

RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
LOCAL_SERVICE = "vllm-serve-badinput"
LOCAL_PORT = 18410
CASE_TIMEOUT_S = 180
# A node without iputils-ping, stood in for on this machine: a PATH whose one directory mirrors the system's tool
# directories, ping left out (no_ping_path() fills it; the local connection and every other tool still work).
NO_PING_BIN = REPO / "tests" / "output" / "bad-input-no-ping-bin"
WORKERS = 3
# inventories/local's model (what `make demo` serves), as the catalog describes it: the stand-in cases' refusals name it.
LOCAL_MODEL_NAME = yaml.safe_load((REPO / "inventories/local/group_vars/all.yml").read_text())["vllm_model"]
LOCAL_MODEL = yaml.safe_load((REPO / "data/catalog.yml").read_text())["models"][LOCAL_MODEL_NAME]
# The native runtime's files on inventories/local: the demo's default service and this suite's own.
NATIVE_PATHS = [
    "/etc/sparkfleet/vllm-serve", "/etc/systemd/system/vllm-serve.service", "/run/vllm-serve.pid",
    "/etc/sparkfleet/%s" % LOCAL_SERVICE, "/etc/systemd/system/%s.service" % LOCAL_SERVICE, "/run/%s.pid" % LOCAL_SERVICE,
    "/var/log/sparkfleet/%s.log" % LOCAL_SERVICE,
    "/var/lib/vllm/.cache/huggingface/hub/models--sparkfleet--tiny-random-llama",
    "/var/lib/vllm/.cache/huggingface/hub/models--%s" % LOCAL_MODEL["checkpoint"].replace("/", "--"),
]
PID_FILES = ["/run/vllm-serve.pid", "/run/%s.pid" % LOCAL_SERVICE]

Case = collections.namedtuple("Case", "id playbook inventory extra expect env")


def case(case_id, playbook, inventory, extra, *expect, env=None):
    return Case(case_id, playbook, inventory, extra, expect, env or {})


def plan(case_id, inventory, extra, *expect):
    return case(case_id, "playbooks/plan.yml", inventory, extra, *expect)


def site(case_id, inventory, extra, *expect, env=None):
    return case(case_id, "site.yml", inventory, extra, *expect, env=env)


# fmt: off
CASES = [
    # --- model and drafter -------------------------------------------------------------------------------
    plan("model-unknown", "spark1", {"vllm_model": "gemma-5"}, "unknown model 'gemma-5'", "set vllm_model to one of"),
    plan("model-typo", "rtx_pro_6000", {"vllm_model": "26b"}, "unknown model '26b'", "set vllm_model to one of: 31b, 26b-a4b"),
    site("model-gemma-on-cpu-standin", "local", {"vllm_model": "31b"},
         "31b is a Gemma 4 NVFP4 checkpoint", "set vllm_model to one of: tiny"),
    plan("model-standin-on-gpu", "rtx_pro_6000", {"vllm_model": "tiny"},
         "tiny is a stand-in model", "set vllm_model to one of: 31b"),
    plan("drafter-unknown", "spark1", {"vllm_drafter": "eagle3"}, "unknown drafter 'eagle3'",
         "set vllm_drafter to one of: none, mtp, dflash, auto"),
    plan("drafter-not-for-model", "rtx_pro_6000", {"vllm_model": "e2b", "vllm_drafter": "dflash"},
         "e2b has no dflash drafter", "set vllm_drafter to one of: none, mtp"),
    # The local default (tiny-26b-a4b) has its generated MTP drafter; the dense 31B's stand-in has none.
    site("drafter-on-standin", "local", {"vllm_model": "tiny-31b", "vllm_drafter": "mtp"}, "tiny-31b has no mtp drafter",
         "set vllm_drafter to one of: none"),
    plan("drafter-release-cannot-start", "spark4", {"vllm_drafter": "mtp"},
         "cannot start on vLLM v0.30.0", "expert", "vllm_drafter"),
    # A tag the catalog has never seen takes the defects of the range it falls in: v0.28.0 lies after v0.27.0 and
    # before v0.29.0, which fixed the 12b assistant's CUDA graph capture (planner.resolve_release).
    plan("drafter-12b-mtp-on-unknown-tag-in-defect-range", "rtx_pro_6000",
         {"vllm_model": "12b", "vllm_drafter": "mtp", "vllm_image": "vllm/vllm-openai:v0.28.0"},
         "12b + mtp on rtx_pro_6000 cannot start on vLLM v0.28.0", "trips CUDA graph capture",
         "set vllm_image=vllm/vllm-openai:v0.29.0 (or later), or vllm_drafter=dflash"),
    plan("objective-unknown", "rtx_pro_6000", {"vllm_drafter": "auto", "vllm_objective": "fastest"},
         "unknown objective 'fastest'", "set vllm_objective to one of: interactive, throughput"),
    plan("profile-unknown", "spark1", {"vllm_profile": "h100"}, "vllm_profile", "h100"),
    plan("runtime-unknown", "rtx_pro_6000", {"vllm_runtime": "podman"}, "unknown runtime 'podman'",
         "set vllm_runtime to one of: compose, native"),
    plan("executor-unknown", "spark2", {"vllm_executor": "slurm"}, "unknown executor 'slurm'",
         "set vllm_executor to one of: ray, mp"),
    # --- context, batch, memory -------------------------------------------------------------------------
    plan("context-above-model-max", "rtx_pro_6000", {"vllm_model": "31b", "vllm_max_model_len": 300000},
         "31b supports at most 262144 tokens", "set vllm_max_model_len <= 262144"),
    site("context-above-standin-max", "local", {"vllm_max_model_len": LOCAL_MODEL["max_context"] * 2},
         "%s supports at most %d tokens" % (LOCAL_MODEL_NAME, LOCAL_MODEL["max_context"]),
         "set vllm_max_model_len <= %d" % LOCAL_MODEL["max_context"]),
    plan("context-zero", "spark1", {"vllm_max_model_len": 0}, "vllm_max_model_len must be at least 1", "set vllm_max_model_len >= 1"),
    plan("batched-tokens-below-multimodal-floor", "rtx_pro_6000", {"vllm_model": "31b", "vllm_max_num_batched_tokens": 2048},
         "below the 4096 floor of a multimodal Gemma 4", "set vllm_max_num_batched_tokens >= 4096",
         "vllm_language_model_only=true"),
    plan("batched-tokens-below-floor-audio", "spark1", {"vllm_model": "e4b", "vllm_max_num_batched_tokens": 1024},
         "below the 4096 floor", "set vllm_max_num_batched_tokens >= 4096"),
    plan("batched-tokens-above-5090-cap", "rtx5090", {"vllm_max_num_batched_tokens": 32768},
         "does not fit on rtx_5090", "set vllm_max_num_batched_tokens <= 16384"),
    plan("gpu-util-above-one", "rtx_pro_6000", {"vllm_gpu_memory_utilization": 1.5},
         "must be a fraction in (0, 1], got 1.5", "set vllm_gpu_memory_utilization to e.g. 0.92"),
    plan("gpu-util-zero", "rtx_pro_6000", {"vllm_gpu_memory_utilization": 0},
         "must be a fraction in (0, 1], got 0.0", "set vllm_gpu_memory_utilization"),
    site("gpu-util-negative-standin", "local", {"vllm_gpu_memory_utilization": -0.2},
         "must be a fraction in (0, 1], got -0.2", "set vllm_gpu_memory_utilization to e.g. 0.2"),
    plan("gpu-util-above-unified-cap", "spark1", {"vllm_gpu_memory_utilization": 0.9},
         "dgx_spark has unified memory", "set vllm_gpu_memory_utilization <= 0.78"),
    plan("gpu-util-above-unified-cap-cluster", "spark4", {"vllm_gpu_memory_utilization": 0.85},
         "dgx_spark has unified memory", "set vllm_gpu_memory_utilization <= 0.78 (per node)"),
    plan("vision-does-not-fit-5090", "rtx5090", {"vllm_model": "31b", "vllm_language_model_only": False},
         "fits only without vision", "set vllm_language_model_only=true"),
    plan("vision-does-not-fit-5090-at-the-encoder-floor", "rtx5090",
         {"vllm_model": "31b", "vllm_language_model_only": False, "vllm_max_num_batched_tokens": 4096,
          "vllm_max_model_len": 9057},
         "one 9,056-token request", "vllm_max_model_len <= 9056"),
    plan("max-num-seqs-zero", "rtx_pro_6000", {"vllm_max_num_seqs": 0}, "vllm_max_num_seqs must be at least 1",
         "set vllm_max_num_seqs >= 1"),
    plan("images-per-prompt-zero", "rtx_pro_6000", {"vllm_images_per_prompt": 0}, "vllm_images_per_prompt must be at least 1",
         "set vllm_images_per_prompt >= 1"),
    plan("audio-on-text-model", "rtx_pro_6000", {"vllm_model": "31b", "vllm_enable_audio": True},
         "31b has no audio input", "set vllm_enable_audio=false"),
    plan("audio-without-encoders", "spark1", {"vllm_model": "e4b", "vllm_enable_audio": True, "vllm_language_model_only": True},
         "--language-model-only drops", "set vllm_enable_audio=false or vllm_language_model_only=false"),
    plan("language-model-only-not-bool", "rtx_pro_6000", {"vllm_language_model_only": "maybe"},
         "argument 'plan_language_model_only'", "bool"),
    # --- clusters ---------------------------------------------------------------------------------------
    plan("cluster-group-of-3", "triple", {}, "the vllm_cluster group has 3 hosts", "list 2 or 4 hosts in it"),
    plan("cluster-on-single-node-profile", "pro_pair", {}, "clusters are documented only for dgx_spark",
         "use a single-node inventory (group vllm_single)"),
    plan("tensor-parallel-size-in-extra-args", "spark4", {"vllm_extra_args": ["--tensor-parallel-size", "2"]},
         "vllm_extra_args must not set --tensor-parallel-size", "the size of the vllm_cluster group"),
    plan("node-rank-in-extra-args", "spark2", {"vllm_executor": "mp", "vllm_extra_args": ["--node-rank=1"]},
         "vllm_extra_args must not set --node-rank", "drop --node-rank from vllm_extra_args"),
    plan("release-older-than-multi-node", "spark2", {"vllm_image": "vllm/vllm-openai:v0.26.0"},
         "multi-node needs vLLM v0.27.0 or later", "set vllm_image=vllm/vllm-openai:v0.30.0"),
    site("link-interface-missing", "local_pair", {"vllm_cluster_interface": "sfnolink0"},
         "preflight_link_interface is 'sfnolink0', which does not exist", "Fix: set preflight_link_interface"),
    # --- endpoint and secrets ---------------------------------------------------------------------------
    site("api-key-too-short", "local", {"vllm_api_key": "short"},
         "vllm_api_key must be a string of at least 8 characters", "set a longer key"),
    plan("api-key-with-whitespace", "spark1", {"vllm_api_key": "has a space in it"},
         "vllm_api_key must be a string of at least 8 characters without whitespace", "set a longer key"),
    site("port-zero", "local", {"vllm_port": 0}, "vllm_port must be at least 1", "set vllm_port >= 1"),
    site("port-above-65535", "local", {"vllm_port": 70000}, "vllm_port must be at most 65535", "set vllm_port <= 65535"),
    plan("port-negative", "spark1", {"vllm_port": -8000}, "vllm_port must be at least 1", "set vllm_port >= 1"),
    plan("served-name-with-whitespace", "rtx_pro_6000", {"vllm_served_model_name": "my gemma"},
         "vllm_served_model_name 'my gemma' contains whitespace", "set a name such as"),
    # --- releases -----------------------------------------------------------------------------------------
    plan("release-not-a-version", "rtx_pro_6000", {"vllm_release": "banana"}, "is not a vLLM release",
         "set vllm_release to one of"),
    plan("image-tag-not-a-version", "rtx_pro_6000", {"vllm_image": "vllm/vllm-openai:latest"},
         "cannot tell the vLLM release from the image", "set vllm_release, e.g. vllm_release=v0.30.0"),
    plan("release-contradicts-image", "rtx_pro_6000", {"vllm_image": "vllm/vllm-openai:v0.30.0", "vllm_release": "v0.29.0"},
         "vllm_release v0.29.0 contradicts the image tag", "set only one of vllm_image and vllm_release"),
    plan("release-measurements-only", "rtx_pro_6000", {"vllm_release": "v0.25.1"},
         "in the catalog for its measurements only", "set vllm_release to one of"),
    plan("cpu-release-on-gpu-profile", "rtx_pro_6000", {"vllm_release": "cpu-0.32.0"},
         "does not run on the rtx_pro_6000 profile", "set vllm_release=v0.30.0"),
    # --- extra args that duplicate planned flags ---------------------------------------------------------
    site("extra-args-duplicate-port", "local", {"vllm_extra_args": ["--port=9000"]},
         "vllm_extra_args must not set --port", "the planner sets it from vllm_port"),
    plan("extra-args-duplicate-max-model-len", "rtx_pro_6000", {"vllm_extra_args": ["--max-model-len", "4096"]},
         "vllm_extra_args must not set --max-model-len", "the planner sets it from vllm_max_model_len"),
    plan("extra-args-api-key-on-argv", "rtx_pro_6000", {"vllm_extra_args": ["--api-key", "sk-on-the-command-line"]},
         "vllm_extra_args must not set --api-key", "vllm_api_key"),
    plan("extra-args-duplicate-speculative-config", "rtx_pro_6000", {"vllm_extra_args": ["--speculative-config", "{}"]},
         "vllm_extra_args must not set --speculative-config", "the planner sets it from vllm_drafter"),
    plan("extra-args-kv-cache-dtype", "spark1", {"vllm_extra_args": ["--kv-cache-dtype=auto"]},
         "vllm_extra_args must not set --kv-cache-dtype", "drop --kv-cache-dtype from vllm_extra_args"),
    plan("extra-args-flash-attention", "rtx_pro_6000", {"vllm_extra_args": ["--attention-backend", "FLASH_ATTN"]},
         "--attention-backend FLASH_ATTN cannot start Gemma 4", "remove it from vllm_extra_args"),
    plan("extra-args-not-a-list", "rtx_pro_6000", {"vllm_extra_args": "[--enforce-eager"},
         "vllm_extra_args is not a valid JSON list", "pass a list of strings"),
    # --- role variables (argument_specs) and host checks, on this machine before any change -------------
    site("preflight-arg-type", "local", {"preflight_image_gib": "lots"},
         "argument 'preflight_image_gib'", "unable to convert to float"),
    site("weights-arg-type", "local", {"weights_download_max_workers": "many"},
         "argument 'weights_download_max_workers'", "unable to convert to int"),
    site("disk-too-small-for-weights-and-images", "local", {"preflight_image_gib": 100000},
         "need 100010.0 GiB", "preflight_image_gib", "Fix: free space there or point preflight_hf_cache_path"),
    site("unsupported-os", "local", {"preflight_supported_os": {"Ubuntu": ["24.04"]}},
         "which is not in preflight_supported_os", "Fix: use Ubuntu 22.04/24.04",
         "preflight_allow_unsupported_os: true"),
    site("standin-ram-too-small", "local", {"preflight_cpu_min_ram_mib": 100000000},
         "is below preflight_cpu_min_ram_mib", "Fix: give the host more memory or lower preflight_cpu_min_ram_mib"),
    # Fixed since: the catalog marks the Gemma checkpoints gated (the notes require a token), the plan role
    # hands raw values to the planner (which names vllm_* and the fix), and vllm_native refuses dev mode.
    site("hf-token-missing-for-download", "local",
         {"vllm_model": "tiny", "preflight_model": "31b", "preflight_weights_gib": 1, "vllm_serve_hosts": "sparkfleet_no_host"},
         "HF_TOKEN", "preflight_hf_token"),
    plan("port-not-a-number-names-vllm-port", "spark1", {"vllm_port": "http"}, "vllm_port", "set vllm_port"),
    site("dev-mode-in-production", "local", {"vllm_native_env": {"VLLM_SERVER_DEV_MODE": "1"}},
         "VLLM_SERVER_DEV_MODE", "vllm_native_env", "vllm_native_allow_dev_mode=true"),
    site("unreachable-head-address", "local_pair", {"head_link_ip": "192.0.2.250"},
         "vllm_cluster_link_ip is '192.0.2.250'", "Fix: set vllm_cluster_link_ip for node-a"),
    # The ping check failing to run (rc 2 "No such file" on older ansible-core, "Error executing command." on 2.19)
    # must read as a missing tool, not as an unreachable link.
    site("no-ping-command-on-a-node", "local_pair", {}, "node-a has no ping command",
         "Fix: install it (apt-get install iputils-ping", env={"PATH": str(NO_PING_BIN)}),
    # --- server environment (vllm_env, read by the planner for every runtime) ------------------------------
    plan("dev-mode-in-vllm-env", "spark4", {"vllm_env": {"VLLM_SERVER_DEV_MODE": "1"}},
         "VLLM_SERVER_DEV_MODE=1 would register vLLM's development routes", "remove it from vllm_env",
         "vllm_allow_dev_mode=true"),
    site("dev-mode-in-vllm-env-standin", "local", {"vllm_env": {"VLLM_SERVER_DEV_MODE": "true"}},
         "VLLM_SERVER_DEV_MODE=true", "remove it from vllm_env"),
    plan("secret-in-vllm-env", "rtx_pro_6000", {"vllm_env": {"HF_TOKEN": "hf_in_plain_sight"}},
         "vllm_env carries HF_TOKEN", "set vllm_api_key (or HF_TOKEN in the controller's environment) instead"),
    plan("vllm-env-bad-name", "rtx5090", {"vllm_env": {"NCCL DEBUG": "INFO"}},
         "vllm_env has 'NCCL DEBUG'", "use letters, digits and underscores"),
    # --- guards read flags and env names the way vLLM does (issue 13): every bypass spelling ----------------
    plan("guard-api-key-underscore", "rtx_pro_6000", {"vllm_extra_args": ["--api_key", "sk-bad-input-0001"]},
         "vllm_extra_args must not set --api-key (given as --api_key)", "set vllm_api_key instead"),
    plan("guard-api-key-equals", "rtx_pro_6000", {"vllm_extra_args": ["--api-key=sk-bad-input-0002"]},
         "vllm_extra_args must not set --api-key: it carries a credential", "set vllm_api_key instead"),
    plan("guard-api-key-abbreviated", "rtx_pro_6000", {"vllm_extra_args": ["--api-ke", "sk-bad-input-0003"]},
         "vllm_extra_args must not set --api-key (given as --api-ke)", "drop --api-ke from vllm_extra_args"),
    plan("guard-hf-token-underscore-equals", "spark1", {"vllm_extra_args": ["--hf_token=hf_bad_input_0004"]},
         "vllm_extra_args must not set --hf-token (given as --hf_token)", "set HF_TOKEN in the controller's environment"),
    plan("guard-tensor-parallel-alias", "spark2", {"vllm_extra_args": ["-tp", "4"]},
         "vllm_extra_args must not set --tensor-parallel-size (given as -tp)", "the size of the vllm_cluster group"),
    plan("guard-tensor-parallel-underscore-equals", "spark4", {"vllm_extra_args": ["--tensor_parallel_size=4"]},
         "vllm_extra_args must not set --tensor-parallel-size (given as --tensor_parallel_size)",
         "drop --tensor_parallel_size from vllm_extra_args"),
    plan("guard-speculative-config-dotted-alias", "rtx_pro_6000", {"vllm_extra_args": ["-sc.model", "x/y"]},
         "vllm_extra_args must not set --speculative-config (given as -sc.model)", "the planner sets it from vllm_drafter"),
    plan("guard-config-file", "rtx_pro_6000", {"vllm_extra_args": ["--config", "f.yaml"]},
         "vllm_extra_args must not set --config", "pass each flag in vllm_extra_args instead"),
    plan("guard-profiler-config", "rtx_pro_6000",
         {"vllm_extra_args": ["--profiler-config", '{"profiler": "torch", "torch_profiler_dir": "/tmp/p"}']},
         "vllm_extra_args must not set --profiler-config", "registers /start_profile and /stop_profile",
         "vllm_allow_dev_mode=true"),
    plan("guard-profiler-config-dotted-underscore", "spark1", {"vllm_extra_args": ["--profiler_config.profiler", "torch"]},
         "must not set --profiler-config (given as --profiler_config.profiler)", "vllm_allow_dev_mode=true"),
    plan("guard-uvicorn-trace", "rtx_pro_6000", {"vllm_extra_args": ["--uvicorn-log-level", "trace"]},
         "vllm_extra_args must not set --uvicorn-log-level trace", "remove it from vllm_extra_args", "vllm_allow_dev_mode=true"),
    plan("guard-uvicorn-trace-abbreviated", "rtx_pro_6000", {"vllm_extra_args": ["--uvicorn_log=trace"]},
         "must not set --uvicorn-log-level (given as --uvicorn_log) trace", "vllm_allow_dev_mode=true"),
    plan("guard-grpc-without-key", "rtx_pro_6000", {"vllm_extra_args": ["--grpc"]},
         "vllm_extra_args must not set --grpc", "checks no API key", "vllm_allow_dev_mode=true"),
    plan("guard-secret-name-in-vllm-env", "rtx_pro_6000", {"vllm_env": {"OPENAI_API_KEY": "sk-bad-input-0005"}},
         "vllm_env carries OPENAI_API_KEY, a secret-looking name (*_KEY", "remove it from vllm_env"),
    plan("guard-secret-name-in-native-env", "local", {"vllm_native_env": {"GITHUB_TOKEN": "ghp_bad_input_0006"}},
         "vllm_native_env carries GITHUB_TOKEN, a secret-looking name (*TOKEN*", "remove it from vllm_native_env"),
    plan("guard-ray-auth-off-in-cluster-env", "spark2", {"vllm_cluster_extra_env": {"RAY_AUTH_MODE": "disabled"}},
         "vllm_cluster_extra_env carries RAY_AUTH_MODE", "Ray's token authentication is set only by vllm_cluster_ray_auth"),
    plan("guard-password-in-cluster-env", "spark4", {"vllm_cluster_extra_env": {"DB_PASSWORD": "bad-input-0007"}},
         "vllm_cluster_extra_env carries DB_PASSWORD", "remove it from vllm_cluster_extra_env"),
    plan("guard-ray-auth-in-health-check", "spark2", {"vllm_cluster_ray_health_check": {"RAY_AUTH_MODE": "disabled"}},
         "vllm_cluster_ray_health_check carries RAY_AUTH_MODE", "vllm_cluster_ray_auth"),
    plan("guard-cluster-link-ip-duplicate", "spark2", {"vllm_cluster_link_ip": "192.0.2.101"},
         "vllm_cluster_link_ip 192.0.2.101 is set for both spark-01 and spark-02",
         "set vllm_cluster_link_ip on each host of the vllm_cluster group"),
    plan("guard-api-port-in-ray-worker-range", "spark2", {"vllm_port": 12000},
         "vllm_port 12000 is inside the cluster's pinned port range 10002-19999 (Ray's worker ports)", "set vllm_port outside"),
    plan("guard-api-port-on-master-port", "spark4", {"vllm_executor": "mp", "vllm_port": 29501},
         "vllm_port 29501 is inside the cluster's pinned port range 29500-29510", "set vllm_port outside"),
    plan("replicas-without-the-gateway", "spark2", {"vllm_topology": "replicas", "vllm_gateway": False},
         "vllm_gateway=false leaves nothing in front of the replicas", "unset vllm_gateway"),
    plan("gateway-not-a-bool", "local", {"vllm_gateway": "maybe"},
         "vllm_gateway must be true or false, got 'maybe'", "set vllm_gateway=true or vllm_gateway=false"),
    plan("gateway-port-is-vllms", "rtx_pro_6000", {"vllm_gateway": True, "vllm_gateway_port": 8000},
         "vllm_gateway_port 8000 is vLLM's port (vllm_port)", "set vllm_gateway_port to another port"),
    plan("gateway-port-not-a-port", "rtx_pro_6000", {"vllm_gateway": True, "vllm_gateway_port": "https"},
         "vllm_gateway_port", "https"),
    plan("guard-host-in-both-groups", "both_groups", {}, "host spark-01 is listed in both vllm_single and vllm_cluster",
         "remove spark-01 from one of the two groups"),
    plan("guard-api-key-non-ascii", "spark1", {"vllm_api_key": "sk-caf\u00e9-input-0008"},
         "vllm_api_key has characters an env file or systemd would not carry unchanged: U+00E9",
         "use only printable ASCII without whitespace"),
]

# Refusals the roles do not make today; their fixes live in files this suite's owner does not own.
# SPARKFLEET_BAD_INPUT_PENDING=1 runs them (they fail until fixed). Owners: see docs/reliability.md.
PENDING_CASES = [
]
# fmt: on
ACTIVE = CASES + PENDING_CASES if os.environ.get("SPARKFLEET_BAD_INPUT_PENDING") == "1" else CASES

# Accepted by design (names are case-insensitive): (id, inventory, extra vars, what the plan must show).
ACCEPTED = [
    ("model-upper-case-31B", "rtx_pro_6000", {"vllm_model": "31B"}, "31b on rtx_pro_6000"),
    ("drafter-upper-case-MTP", "rtx5090", {"vllm_drafter": "MTP"}, "26b-a4b + mtp on rtx_5090"),
    ("profile-mixed-case", "spark1", {"vllm_profile": "DGX_Spark"}, "26b-a4b on dgx_spark"),
]


def default_interface():
    """The interface of the default route: stands in for the cluster link on the local pair."""
    for line in pathlib.Path("/proc/net/route").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) > 1 and fields[1] == "00000000":
            return fields[0]
    return "eth0"


def interface_address(name):
    """First IPv4 address of ``name``: both nodes of the local pair advertise it as their cluster address."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", name], capture_output=True, text=True, check=False).stdout
    for field in out.split():
        if "/" in field and field[0].isdigit():
            return field.split("/")[0]
    raise AssertionError("the local pair needs an IPv4 address on %s (ip -4 addr show dev %s: %r)" % (name, name, out))


def no_ping_path():
    """NO_PING_BIN: a link to every program in the system's tool directories except ping (the first of a name wins,
    as on PATH)."""
    shutil.rmtree(NO_PING_BIN, ignore_errors=True)
    NO_PING_BIN.mkdir(parents=True)
    for directory in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        for program in sorted(pathlib.Path(directory).glob("*")) if os.path.isdir(directory) else []:
            link = NO_PING_BIN / program.name
            if not program.name.startswith("ping") and not os.path.lexists(link):
                link.symlink_to(program)


def write_inventories(root):
    """Temporary inventories: a 3-node Spark group, a 2-node RTX PRO cluster, this machine as a 2-node cluster."""
    sys.path.insert(0, str(REPO / "tests" / "cluster"))
    import sim_catalog  # the cluster simulation's catalog: data/catalog.yml + a cpu cluster stand-in
    import yaml

    catalog = root / "catalog-sim.yml"
    catalog.write_text(yaml.safe_dump(sim_catalog.sim_catalog(), sort_keys=False))

    def spark_hosts(count):
        return {"spark-%02d" % i: {"ansible_host": "192.0.2.%d" % (10 + i), "vllm_cluster_link_ip": "192.0.2.%d" % (100 + i)}
                for i in range(1, count + 1)}

    inventories = {
        "triple": {"all": {"children": {"vllm_cluster": {"hosts": spark_hosts(3), "vars": {"vllm_profile": "dgx_spark"}}}}},
        "pro_pair": {"all": {"children": {"vllm_cluster": {"hosts": spark_hosts(2), "vars": {"vllm_profile": "rtx_pro_6000"}}}}},
        "both_groups": {"all": {"vars": {"vllm_profile": "dgx_spark"}, "children": {
            "vllm_cluster": {"hosts": spark_hosts(2)}, "vllm_single": {"hosts": {"spark-01": {}}}}}},
        "local_pair": {"all": {
            "vars": {
                "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                "vllm_profile": "cpu", "vllm_model": "tiny", "vllm_runtime": "native", "vllm_executor": "mp",
                "plan_catalog_path": str(catalog), "vllm_cluster_interface": default_interface(),
                "vllm_cluster_hca": "standin-no-roce", "preflight_link_interface": "{{ vllm_cluster_interface }}",
                "preflight_require_rdma": False, "head_link_ip": interface_address(default_interface()),
            },
            "children": {"vllm_cluster": {"hosts": {
                "node-a": {"vllm_cluster_link_ip": "{{ head_link_ip }}"},
                "node-b": {"vllm_cluster_link_ip": interface_address(default_interface())},
            }}},
        }},
    }
    paths = {}
    for name, content in inventories.items():
        path = root / ("%s.yml" % name)
        path.write_text(yaml.safe_dump(content, sort_keys=False))
        paths[name] = path
    return paths


def snapshot():
    """Hash, mtime and size of every file under the native runtime's paths; pid files' processes."""
    state = {}
    for base in NATIVE_PATHS:
        path = pathlib.Path(base)
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else ([path] if path.exists() else [])
        for item in files:
            st = item.stat()
            state[str(item)] = (hashlib.sha256(item.read_bytes()).hexdigest(), st.st_mtime_ns, st.st_size)
        if path.is_dir():
            state[str(path) + "/"] = path.stat().st_mtime_ns
    for pid_file in PID_FILES:
        try:
            pid = int(pathlib.Path(pid_file).read_text().strip())
            state["pid:" + pid_file] = (pid, pathlib.Path("/proc/%d" % pid).exists())
        except (OSError, ValueError):
            state["pid:" + pid_file] = None
    return state


def normalise(text):
    """One line, single spaces, YAML's doubled quotes undone: messages wrap in the default callback."""
    return re.sub(r"\s+", " ", text).replace("''", "'")


def run_case(item, inventories):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "VLLM_API_KEY")}
    env.update(item.env)
    env.update(PATH="%s:%s" % (pathlib.Path(tool("ansible-playbook")).parent, env.get("PATH", "")),
               ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    extra = {"plan_write_files": False}
    inventory = str(inventories[item.inventory]) if item.inventory in inventories else str(REPO / "inventories" / item.inventory)
    if item.inventory == "local":
        extra.update(vllm_native_service_name=LOCAL_SERVICE, vllm_port=LOCAL_PORT)
    if item.inventory == "local_pair":
        # Host set-up and the cluster plays match no host (cluster_group names no group); the plan and preflight
        # still take the pair as the cluster vllm_cluster, so their cluster checks run and must refuse.
        extra.update(host_hosts="sparkfleet_no_host", cluster_group="sparkfleet_no_host",
                     plan_hosts="vllm_cluster", preflight_hosts="vllm_cluster",
                     plan_cluster_group="vllm_cluster", preflight_cluster_group="vllm_cluster")
    extra.update(item.extra)
    cmd = [tool("ansible-playbook"), str(REPO / item.playbook), "-i", inventory, "-e", json.dumps(extra)]
    before = snapshot() if item.inventory == "local" else None
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=CASE_TIMEOUT_S,
                              check=False)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out, err = "timeout", exc.stdout or "", exc.stderr or ""
        out, err = (out.decode() if isinstance(out, bytes) else out), (err.decode() if isinstance(err, bytes) else err)
    elapsed = time.monotonic() - started
    after = snapshot() if item.inventory == "local" else None
    return {"rc": rc, "stdout": out, "stderr": err, "elapsed": elapsed, "before": before, "after": after, "cmd": cmd}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, request):
    """Run every case once (three at a time), report the count and the time in the terminal summary."""
    require(tool("ansible-playbook"), "ansible-playbook (run `make venv`)")
    inventories = write_inventories(tmp_path_factory.mktemp("bad-input-inventories"))
    no_ping_path()
    # Only the cases this session selected (-k): a run of a few must not run every playbook.
    chosen = {i.callspec.params["item"].id for i in request.session.items
              if hasattr(i, "callspec") and "item" in i.callspec.params}
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = {item.id: pool.submit(run_case, item, inventories) for item in ACTIVE if item.id in chosen}
        results = {key: future.result() for key, future in futures.items()}
    total = time.monotonic() - started
    request.config.pluginmanager.register(_Summary(len(futures), len(PENDING_CASES), total), "sparkfleet-bad-input-summary")
    # A case the roles failed to refuse may have started this suite's own server: stop it.
    if pathlib.Path("/run/%s.pid" % LOCAL_SERVICE).exists():
        subprocess.run([tool("ansible-playbook"), str(REPO / "playbooks/stop.yml"), "-i", str(REPO / "inventories/local"),
                        "-e", json.dumps({"vllm_native_service_name": LOCAL_SERVICE})], cwd=REPO, capture_output=True, check=False,
                       timeout=300, env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg")))
    return results


class _Summary:
    def __init__(self, count, pending, seconds):
        self.count, self.pending, self.seconds = count, pending, seconds

    def pytest_terminal_summary(self, terminalreporter):
        terminalreporter.write_line("bad-input cases: %d (run in %.0f s; %d more listed in PENDING_CASES for their owners)" % (
            self.count, self.seconds, self.pending if len(ACTIVE) == len(CASES) else 0))


def describe(result):
    return "%s\nexit %s after %.1f s\n--- stdout (tail) ---\n%s\n--- stderr (tail) ---\n%s" % (
        " ".join(result["cmd"]), result["rc"], result["elapsed"], result["stdout"][-5000:], result["stderr"][-3000:])


def changed_tasks(stdout):
    names, current = [], None
    for line in stdout.splitlines():
        if line.startswith("TASK ["):
            current = line[6:line.rfind("]")]
        elif line.startswith("changed:"):
            names.append(current)
    return names


@pytest.mark.parametrize("item", ACTIVE, ids=[c.id for c in ACTIVE])
def test_bad_input_is_refused_before_any_change(item, outcomes):
    result = outcomes[item.id]
    assert result["rc"] != "timeout", "not refused within %d s:\n%s" % (CASE_TIMEOUT_S, describe(result))
    assert result["rc"] != 0, "accepted instead of refused:\n" + describe(result)
    text = normalise(result["stdout"] + "\n" + result["stderr"])
    missing = [fragment for fragment in item.expect if normalise(fragment) not in text]
    assert not missing, "the refusal does not say %s:\n%s" % (missing, describe(result))
    recaps = RECAP.findall(result["stdout"])
    assert recaps, "no PLAY RECAP:\n" + describe(result)
    changed = {host: int(n) for host, _ok, n, _unreachable, _failed in recaps if int(n)}
    assert not changed, "hosts changed before the refusal: %s (tasks %s)\n%s" % (
        changed, changed_tasks(result["stdout"]), describe(result))
    assert not changed_tasks(result["stdout"]), describe(result)
    assert any(int(failed) for _h, _ok, _c, _u, failed in recaps), "refused without a failed host:\n" + describe(result)
    if result["before"] is not None:
        differ = sorted(k for k in set(result["before"]) | set(result["after"])
                        if result["before"].get(k) != result["after"].get(k))
        assert not differ, "native runtime files or processes changed: %s" % differ


@pytest.mark.parametrize("case_id,inventory,extra,shown", ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_case_insensitive_names_are_accepted(case_id, inventory, extra, shown, tmp_path):
    """Names are matched case-insensitively by design: a wrong case is normalised, not refused."""
    require(tool("ansible-playbook"), "ansible-playbook (run `make venv`)")
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH="%s:%s" % (pathlib.Path(tool("ansible-playbook")).parent, os.environ.get("PATH", "")))
    cmd = [tool("ansible-playbook"), "playbooks/plan.yml", "-i", "inventories/%s" % inventory,
           "-e", json.dumps(dict(extra, plan_dir=str(tmp_path)))]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert shown in normalise(proc.stdout), proc.stdout[-3000:]


def test_suite_has_at_least_40_cases():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    assert len(CASES) >= 40, "the issue asks for at least 40 bad-input cases, found %d" % len(CASES)
    sys.stderr.write("bad-input cases: %d\n" % len(CASES))
