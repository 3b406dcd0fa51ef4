"""The native runtime's role without a running server, with stand-ins: vLLM's CPU build's plan for the tiny
random Llama-shaped model (sparkfleet/tiny-random-llama as `tiny`) in place of Gemma 4 on a GPU, rendered by
playbooks/serve.yml (vllm_native) as a systemd unit into a scratch directory, and a plan the role refuses.

The running server is proven on the one native deployment the secrets canary makes (test_secrets_canary.py:
site.yml -i inventories/local with a vault): the deploy starts the plan's argv under start-stop-daemon or
systemd, whichever is PID 1 here; the API answers; a second serve.yml run and --check change nothing and keep the
process; status.yml reports it running and healthy; the secret is only in the 0600 file and the server's clean
environment; a changed plan restarts it exactly once; stop.yml stops it.
"""
import subprocess

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import planner
from conftest import DECOY_HF_TOKEN, FAKE_HF_TOKEN, ansible_env, ansible_playbook, keyless, native_vars, require, stand_in_plan, tool

# A one-Spark plan's memory guard (the planner's, on unified memory): the ceiling the host reserve leaves the server.
SPARK_GUARD = planner.plan(cat.load_catalog(None), keyless({"profile": "dgx_spark"}))["memory_guard"]


@pytest.mark.parametrize("guard", [None, SPARK_GUARD], ids=["no-guard", "spark-guard"])
def test_systemd_unit_renders_with_restart_policy_and_no_secrets(tmp_path, guard):
    """Where systemd is PID 1 the role writes a unit; render it here into a scratch directory. A plan with a memory
    guard (unified memory) puts its ceiling on the unit; the stand-in's plan has none, and its unit no Memory line."""
    (tmp_path / "units").mkdir()  # /etc/systemd/system exists on a systemd host
    plan = dict(stand_in_plan(), memory_guard=guard)
    extra = native_vars(plan, vllm_native_service_manager="systemd",
                        vllm_native_service_name="vllm-serve-unit-test",
                        vllm_native_config_dir=str(tmp_path / "etc"), vllm_native_unit_dir=str(tmp_path / "units"),
                        vllm_native_log_file=str(tmp_path / "log/serve.log"))
    ansible_playbook("playbooks/serve.yml", extra, env=ansible_env(HF_TOKEN=DECOY_HF_TOKEN),
                     args=["--tags", "vllm_native_configure"])
    unit = (tmp_path / "units/vllm-serve-unit-test.service").read_text()
    assert "ExecStart=%s" % (tmp_path / "etc/launch") in unit
    assert "Restart=on-failure" in unit
    assert "StartLimitBurst=3" in unit and "StartLimitIntervalSec=600" in unit
    assert "Environment=" not in unit and FAKE_HF_TOKEN not in unit and DECOY_HF_TOKEN not in unit
    guarded = [line for line in unit.splitlines() if line.startswith(("Memory", "OOMPolicy"))]
    if guard:
        assert guarded == ["MemoryMax=%d" % guard["memory_max_bytes"], "MemorySwapMax=0", "OOMPolicy=stop"], unit
    else:
        assert guarded == [], unit
    recorder = tmp_path / "etc/memory-guard-record"
    assert "ExecStopPost=-%s %s" % (recorder, tmp_path / "log/serve.log") in unit and recorder.stat().st_mode & 0o111, unit
    launcher = (tmp_path / "etc/launch").read_text()
    assert "tee -a" in launcher  # journal and file both get the log under systemd
    assert FAKE_HF_TOKEN in (tmp_path / "etc/secret.env").read_text()
    assert DECOY_HF_TOKEN not in (tmp_path / "etc/secret.env").read_text()
    assert not (tmp_path / "etc/control").exists()
    analyze = tool("systemd-analyze")
    require(analyze, "systemd-analyze (Debian's systemd package) to verify the rendered unit")
    proc = subprocess.run([analyze, "verify", "--man=no", str(tmp_path / "units/vllm-serve-unit-test.service")],
                          capture_output=True, text=True, check=False)
    problems = [line for line in (proc.stdout + proc.stderr).splitlines()
                if "vllm-serve-unit-test.service" in line and "Command" not in line
                and "executable" not in line.lower() and "not found" not in line.lower()]
    assert not problems, proc.stdout + proc.stderr


def test_role_refuses_a_memory_ceiling_systemd_would_not_read():
    failed = ansible_playbook("playbooks/serve.yml", native_vars(stand_in_plan(), vllm_native_memory_max="12GB"),
                              check=False, args=["--tags", "vllm_native_run"])
    assert failed.returncode != 0
    assert "vllm_native_memory_max is '12GB', which is not a memory size" in " ".join(failed.stdout.split()), failed.stdout[-2000:]


def test_role_refuses_a_plan_without_argv():
    plan = stand_in_plan()
    plan["argv"] = []
    failed = ansible_playbook("playbooks/serve.yml", native_vars(plan), check=False, args=["--tags", "vllm_native_run"])
    assert failed.returncode != 0
    assert "argv is a non-empty list" in failed.stdout
