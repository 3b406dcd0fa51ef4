"""Every launch path runs the plan's whole command: its entrypoint, then its argv (issue 16).

* compose: the service's entrypoint is the plan's (not whatever ENTRYPOINT the image has), unless the operator
  overrides it with vllm_compose_entrypoint; its command is the plan's argv;
* cluster units (container mp, container Ray head, native): checked where they are rendered, in
  tests/unit/roles/test_cluster_units.py; the role refuses a serve unit for a plan that is not `vllm ...`;
* native: its command prefix runs vLLM's API server, which is `vllm serve`; the role refuses any other entrypoint
  (run here through its preflight).
"""
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from test_compose_v2_refusals import preflight

from conftest import REPO

PLAN = {"argv": ["google/gemma-4-31B-it", "--port", "8000"], "entrypoint": ["vllm", "serve"], "port": 8000,
        "image": "vllm/vllm-openai:v0.30.0"}


def compose_service(**overrides):
    loader = DataLoader()
    variables = {}
    for name in ("defaults/main.yml", "vars/main.yml"):
        variables.update(loader.load_from_file(str(REPO / "roles/vllm_compose" / name), trusted_as_template=True))
    variables.update(vllm_plan=PLAN, **overrides)
    templar = Templar(loader=loader, variables=variables)
    return {key: templar.template(trust_as_template("{{ __vllm_compose_service_full.%s }}" % key))
            for key in ("entrypoint", "command")}


def test_compose_runs_the_plans_entrypoint_and_argv():
    assert compose_service() == {"entrypoint": ["vllm", "serve"], "command": PLAN["argv"]}


def test_compose_entrypoint_override_replaces_only_the_entrypoint():
    override = ["/opt/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model"]
    assert compose_service(vllm_compose_entrypoint=override) == {"entrypoint": override, "command": PLAN["argv"]}


def test_native_refuses_a_plan_that_is_not_vllm_serve(tmp_path):
    """The role's preflight, run by ansible-playbook (-c local, asserts only): a Ray worker's plan is refused
    with the variable, its value and the fix, before anything is written."""
    worker = dict(PLAN, entrypoint=["ray", "start"], argv=["--address", "192.0.2.101:6379", "--block"])
    proc = preflight(tmp_path, "vllm_native", {"vllm_plan": worker})
    text = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, text[-3000:]
    for fragment in ("vllm_plan.entrypoint is ray start", "sparkfleet.vllm.vllm_cluster", "changed=0"):
        assert fragment in text, (fragment, text[-3000:])
