"""Every job template, run the way AWX runs it: its playbook through
ansible_runner.run() in a private data dir, the survey's default answers as
extra vars, the credential's injectors as environment variables (planted
canary values), a jsonfile fact cache, ANSIBLE_DISPLAY_ARGS_TO_STDOUT=True.

Against inventories/local, the local default: vLLM's CPU build and the tiny
random model stand in for a Blackwell GPU and Gemma 4 (the native runtime
starts a real server here). One server serves the whole sequence: Deploy,
Verify & benchmark, Status, Swap model, Stop. It listens on HARNESS_PORT, not
8000, so a demo left running does not collide with it.
"""
import datetime
import hashlib
import json
import pathlib
import socket
import subprocess
import time

import pytest
from awx_harness import REPO, ansible_env, canaries, leaks, missing_required, render, run_playbook, short_name, stats, stdout_of, survey_defaults, task_events

from canary import http_status
from conftest import require, tool

INVENTORY = "inventories/local"
HARNESS_PORT = 18100
ORDER = ("Deploy", "Verify & benchmark", "Status", "Swap model", "Stop")
# Whether a template changes the hosts when it runs in this order: read-only
# templates must report nothing changed; the others must report a change.
CHANGES = {"Deploy": True, "Verify & benchmark": False, "Status": False, "Swap model": True, "Stop": True}
# Tasks each template must have run (exact names, from the playbooks and roles).
EXPECTED_TASKS = {
    "Deploy": ["Plan the vLLM serve invocation and write <plan_dir>/<inventory_hostname>.json on the controller", "Start the server",
               "Record the configuration the server now runs with"],
    "Verify & benchmark": ["Wait until the server is healthy", "Run the smoke checks",
                           "Measure standard throughput and compare it with the catalog baseline",
                           "Show the verification summary", "Run the throughput benchmark", "Show the benchmark summary"],
    "Status": ["Read the native server's state", "Ask /health", "Ask /v1/models", "Show the status"],
    "Swap model": ["Plan the vLLM serve invocation and write <plan_dir>/<inventory_hostname>.json on the controller", "Render the launcher", "Start the server",
                   "Record the configuration the server now runs with"],
    # The local default runs the native server under start-stop-daemon (no systemd on this machine).
    "Stop": ["Check the service manager's files exist", "Ask whether the server is running",
             "Stop the server (start-stop-daemon)", "Forget the configuration the stopped server ran with"],
}
# Not survey answers: the harness's own settings, the same for every job. The
# server runs from .venv-vllm (vLLM's CPU build, the stand-in for a GPU image)
# under its own service name and port, so a demo left running is untouched.
HARNESS_VARS = {
    "vllm_port": HARNESS_PORT,
    "vllm_native_venv": str(REPO / ".venv-vllm"),
    "vllm_native_manage_venv": False,
    "vllm_native_service_name": "sparkfleet-awx-test",
    # The checkout (and .venv-vllm in it) is not readable by a service account.
    "vllm_native_user": "root",
    "vllm_native_group": "root",
    # Shorter answers for the benchmark job (its playbook's default is the notes' 1,024 tokens): the CPU stand-in's
    # standard run then takes seconds, not a minute, and still sends the same requests through the same module.
    "vllm_bench_output_tokens": 128,
    # The documented bypass: the injected key would put the API gateway (nginx) in front by default, on this machine
    # with no systemd, beside the serve lane's tests; the harness checks vLLM's own port. The gateway default is proven
    # in tests/integration/test_gateway_routes.py.
    "vllm_gateway": False,
    # vLLM then binds every address, which turns the firewall on by default: not on this machine, the CI runner, whose
    # own firewall is not this tier's to change (the plan warns "FIREWALL OFF"). The default is proven on the operator
    # host (tests/integration/test_operator_host.py) and the simulated cluster.
    "vllm_firewall": False,
}
# The Deploy job's 0600 secret file (the native role's, for HARNESS_VARS' service name): its checksums must appear in no
# job's artifacts (events, stdout, the fact cache), where a short key could be recovered from them by trying candidates.
SECRET_FILE = pathlib.Path("/etc/sparkfleet/%s/secret.env" % HARNESS_VARS["vllm_native_service_name"])
# What the Swap model run changes besides the model: the context length, so
# the swap has something to restart for even though the CPU stand-in has one model.
SWAP_MAX_MODEL_LEN = 2048


def local_hostvars():
    proc = subprocess.run([tool("ansible-inventory"), "-i", INVENTORY, "--list"], cwd=REPO, env=ansible_env(),
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout).get("_meta", {}).get("hostvars", {})


def port_open(port, host="127.0.0.1"):
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, port)) == 0


def harness_status(path, api_key=None):
    return http_status("http://127.0.0.1:%d%s" % (HARNESS_PORT, path), api_key)


def wait_healthy(seconds):
    """Swap model's playbook returns once the server is started; give it the
    CPU stand-in's start-up time (~45 s alone; over 3 min measured on a busy 2-core machine) before asking it anything."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if port_open(HARNESS_PORT) and harness_status("/health") == 200:
            return True
        time.sleep(3)
    return False


class Job:
    def __init__(self, name, template, private_data_dir, extravars, runner, seconds, api_status):
        self.name, self.template, self.dir = name, template, private_data_dir
        self.extravars, self.runner, self.seconds = extravars, runner, seconds
        self.api_status = api_status

    def failed_tasks(self):
        """'task: first line of its message' for every failed or unreachable task (CI shows one line)."""
        out = []
        for task, _host, event, data in task_events(self.runner):
            if event in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
                msg = str(data.get("res", {}).get("msg", "")).strip()
                out.append("%s: %s" % (task, msg.splitlines()[0][:400] if msg else "(no message)"))
        return out

    def describe(self):
        return "%s (%s, %.0f s): status %s rc %s; failed: %s\n%s" % (
            self.name, self.template["playbook"], self.seconds, self.runner.status, self.runner.rc,
            " | ".join(self.failed_tasks()) or "no task", stdout_of(self.runner)[-6000:])


@pytest.fixture(scope="module")
def sequence(tmp_path_factory):
    for name in ("ansible-playbook", "ansible-inventory"):
        require(tool(name), "%s (run `make venv`)" % name)
    require((REPO / ".venv-vllm/bin/python").exists(), ".venv-vllm with vLLM's CPU build (tests/harness/vllm-cpu-env.sh)")
    require((REPO / INVENTORY).exists(), INVENTORY)
    assert not port_open(HARNESS_PORT), "port %d is taken: a server from an earlier run is still up" % HARNESS_PORT
    job_templates, _objects, _output = render(tmp_path_factory.mktemp("render"))
    by_name = {short_name(t): t for t in job_templates}
    hostvars = local_hostvars()
    assert hostvars, "inventories/local has no hosts"
    local_model = next(iter(hostvars.values())).get("vllm_model")
    secrets = canaries()
    jobs, digests = {}, {}
    try:
        for name in ORDER:
            template = by_name[name]
            extravars = survey_defaults(template["survey_spec"])
            if name == "Swap model":
                # The answers a user gives in the launch form: the inventory's own
                # model (the only one the CPU stand-in serves) at a shorter context.
                extravars.update({"vllm_model": local_model, "vllm_max_model_len": SWAP_MAX_MODEL_LEN})
            assert not missing_required(template["survey_spec"], extravars), name
            extravars.update(HARNESS_VARS)
            private = tmp_path_factory.mktemp("job-" + name.split()[0].lower())
            started = time.monotonic()
            runner = run_playbook(private, template["playbook"], INVENTORY, extravars, secrets)
            api_status = None
            if name in ("Deploy", "Swap model") and wait_healthy(300):
                api_status = {"without key": harness_status("/v1/models"),
                              "with key": harness_status("/v1/models", secrets["VLLM_API_KEY"])}
            jobs[name] = Job(name, template, private, extravars, runner, time.monotonic() - started, api_status)
            if name == "Deploy" and SECRET_FILE.exists():
                written = SECRET_FILE.read_bytes()
                digests = {"sha1 of secret.env": hashlib.sha1(written).hexdigest(),  # noqa: S324 - stat's default
                           "sha256 of secret.env": hashlib.sha256(written).hexdigest()}
    finally:
        if port_open(HARNESS_PORT) and ("Stop" not in jobs or jobs["Stop"].runner.status != "successful"):
            # Leave no server behind whatever failed above.
            run_playbook(tmp_path_factory.mktemp("cleanup"), by_name["Stop"]["playbook"], INVENTORY,
                         dict(HARNESS_VARS), secrets)
    return jobs, secrets, digests


@pytest.mark.parametrize("name", ORDER)
def test_job_succeeds(sequence, name):
    job = sequence[0][name]
    assert job.runner.status == "successful" and job.runner.rc == 0, job.describe()
    summary = stats(job.runner)
    assert summary is not None, "no playbook_on_stats event"
    assert not summary.get("failures") and not summary.get("dark"), summary
    assert summary.get("ok"), "no host ran a task: %s" % summary


@pytest.mark.parametrize("name", ORDER)
def test_job_changes_only_what_it_should(sequence, name):
    job = sequence[0][name]
    changed = sum((stats(job.runner) or {}).get("changed", {}).values())
    if CHANGES[name]:
        assert changed > 0, "%s reported no change\n%s" % (name, job.describe())
    else:
        assert changed == 0, "%s is read-only but changed %d\n%s" % (name, changed, job.describe())


@pytest.mark.parametrize("name", ORDER)
def test_job_runs_expected_tasks(sequence, name):
    job = sequence[0][name]
    names = {task for task, _host, event, _data in task_events(job.runner) if event in ("runner_on_ok", "runner_on_skipped")}
    missing = [task for task in EXPECTED_TASKS[name] if task not in names]
    assert not missing, "%s did not run %s; failed: %s; ran %s" % (
        name, missing, " | ".join(job.failed_tasks()) or "no task", sorted(filter(None, names)))
    # Every task is named (house style) and ran on an inventory host or the controller.
    unnamed = [data.get("task_action") for task, _host, _event, data in task_events(job.runner) if not task]
    assert not unnamed, "unnamed tasks: %s" % unnamed


@pytest.mark.parametrize("name", ORDER)
def test_no_secret_in_any_artifact(sequence, name):
    job = sequence[0][name]
    secrets = sequence[1]
    digests = sequence[2]
    assert digests, "the Deploy job wrote no %s" % SECRET_FILE
    found = leaks(job.dir, dict(secrets, **digests))
    assert not found, "%s leaked: %s" % (name, found)
    # As AWX launches jobs: no env/ files holding the injected values.
    assert not (pathlib.Path(job.dir) / "env/envvars").exists()


@pytest.mark.parametrize("name", ORDER)
def test_artifacts_are_the_full_record(sequence, name):
    """The leak scan means something: job events and stdout were written, task
    arguments were displayed, and the fact cache was on."""
    job = sequence[0][name]
    artifacts = pathlib.Path(job.runner.config.artifact_dir)
    assert (artifacts / "stdout").stat().st_size > 0
    assert len(list((artifacts / "job_events").glob("*.json"))) > 3
    banners = [e.get("stdout", "") for e in job.runner.events if e.get("event") == "playbook_on_task_start"]
    assert any("=" in line.split("]", 1)[0] for b in banners for line in b.splitlines() if "TASK [" in line), (
        "no task banner shows its arguments: ANSIBLE_DISPLAY_ARGS_TO_STDOUT was not in effect")
    assert job.runner.config.env.get("ANSIBLE_CACHE_PLUGIN") == "jsonfile"


def test_fact_cache_holds_the_gathered_facts(sequence):
    job = sequence[0]["Deploy"]
    cache = pathlib.Path(job.runner.config.fact_cache)
    cached = [p for p in cache.glob("*") if p.is_file()]
    assert cached, "Deploy cached no facts in %s" % cache


def test_api_key_reached_the_server_and_nothing_else(sequence):
    """The injected VLLM_API_KEY is the key the server enforces: proof the
    canary travelled the whole way, so its absence from the artifacts means something."""
    for name in ("Deploy", "Swap model"):
        job = sequence[0][name]
        assert job.api_status == {"without key": 401, "with key": 200}, "%s: %s" % (name, job.api_status)


def test_stop_leaves_the_port_closed(sequence):
    assert not port_open(HARNESS_PORT)


def test_runtime_is_reported_per_job(sequence):
    """Times are measured and printed, not gated (the machine is shared); a job that ran nothing still fails."""
    jobs = sequence[0]
    print("AWX runner tier: " + ", ".join("%s %.0f s" % (n, j.seconds) for n, j in jobs.items()))
    # Each printed time covers its job: ansible-runner's own stamps, from playbook_on_start to playbook_on_stats,
    # fall within it (1 s for clock resolution). A job that ran no task has no runner_on_ok event and fails here
    # (stats() alone cannot: its dict is truthy even when every count in it is empty).
    for name, job in jobs.items():
        stamps = {e["event"]: datetime.datetime.fromisoformat(e["created"]) for e in job.runner.events
                  if e.get("event") in ("playbook_on_start", "playbook_on_stats")}
        span = (stamps["playbook_on_stats"] - stamps["playbook_on_start"]).total_seconds() if len(stamps) == 2 else None
        ran = sum(1 for e in job.runner.events if e.get("event") == "runner_on_ok")
        assert ran and span is not None and 0 < span <= job.seconds + 1, (
            "%s: %d tasks ok, playbook span %s s, measured %.1f s" % (name, ran, span, job.seconds))
