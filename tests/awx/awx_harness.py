"""Plumbing for the AWX tier: render the job templates, answer their surveys
the way AWX does, and run a template's playbook through ansible-runner the way
an AWX job runs (private data dir, credential injected as environment
variables, jsonfile fact cache, awx_display callback).

What AWX itself does that this harness stands in for (named here so nobody
mistakes it for a real controller): the project sync (we run from the
checkout), the inventory import (we pass inventories/<name> directly), the
execution environment (we run in .venv) and the survey form (we take the
defaults AWX would apply, plus any answers a test gives explicitly).
"""
import json
import os
import pathlib
import subprocess
import sys
import uuid

REPO = pathlib.Path(__file__).resolve().parents[2]
VENV_BIN = pathlib.Path(sys.executable).parent
SCHEMA = pathlib.Path(__file__).with_name("survey_spec.schema.json")

# The env var names the credential type injects (awx/configure.yml).
SECRET_ENV = ("HF_TOKEN", "VLLM_API_KEY")


def ansible_env():
    env = dict(os.environ)
    env["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
    env["PATH"] = "%s:%s" % (VENV_BIN, env.get("PATH", ""))
    env.setdefault("ANSIBLE_NOCOLOR", "1")
    return env


def render_process(dest, secret_env=None, extra_vars=None):
    """Run awx/configure.yml in render mode into `dest`; return the finished process.

    The secrets come only from `secret_env` (the caller's environment's are dropped); `extra_vars`
    (a dict) overrides awx/vars/main.yml as -e does."""
    env = {k: v for k, v in ansible_env().items() if k not in SECRET_ENV}
    env.update(secret_env or {})
    cmd = [str(VENV_BIN / "ansible-playbook"), "awx/configure.yml", "--tags", "render",
           "-e", "awx_render_only=true", "-e", "awx_render_dir=%s" % dest]
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)


def render(dest, secret_env=None):
    """Run awx/configure.yml in render mode; return (job templates, objects, stdout).

    The workflows it renders beside them are read with read_workflows(dest)."""
    dest = pathlib.Path(dest)
    proc = render_process(dest, secret_env=secret_env)
    assert proc.returncode == 0, "render failed (%s)\n%s\n%s" % (proc.returncode, proc.stdout[-6000:], proc.stderr[-4000:])
    templates = json.loads((dest / "job_templates.json").read_text())
    objects = json.loads((dest / "objects.json").read_text())
    return templates, objects, proc.stdout + proc.stderr


def read_workflows(dest):
    """The workflow definitions render() wrote into `dest`."""
    return json.loads((pathlib.Path(dest) / "workflow_job_templates.json").read_text())


def short_name(template):
    """'sparkfleet vLLM / Verify & benchmark' -> 'Verify & benchmark'."""
    return template["name"].split(" / ", 1)[-1]


def _valid_answer(question, value):
    """AWX's per-question check (JobTemplate._survey_element_validation), enough for defaults."""
    qtype = question["type"]
    if value in ("", None):
        return False
    if qtype in ("multiplechoice",):
        return value in question["choices"]
    if qtype == "multiselect":
        return all(v in question["choices"] for v in value)
    if qtype == "integer" and (not isinstance(value, int) or isinstance(value, bool)):
        return False
    if qtype == "float" and not isinstance(value, (int, float)):
        return False
    if qtype in ("integer", "float"):
        low, high = question.get("min"), question.get("max")
        return (low is None or value >= low) and (high is None or value <= high)
    return isinstance(value, str)


def survey_defaults(spec):
    """The extra vars AWX adds for a survey nobody changed: each default that
    passes the question's own validation (an empty default adds nothing)."""
    answers = {}
    for question in (spec or {}).get("spec", []):
        if "default" in question and _valid_answer(question, question["default"]):
            answers[question["variable"]] = question["default"]
    return answers


def missing_required(spec, answers):
    return [q["variable"] for q in (spec or {}).get("spec", [])
            if q["required"] and q["variable"] not in answers]


def canaries():
    """Planted values for the credential's injectors; unique per session."""
    tag = uuid.uuid4().hex
    return {"HF_TOKEN": "hf_CANARYtoken%s" % tag, "VLLM_API_KEY": "sk-CANARYkey%s" % tag}


def run_playbook(private_data_dir, playbook, inventory, extravars, secret_env, timeout=900):
    """Run one job template's playbook as AWX would; return the runner."""
    import ansible_runner

    envvars = {
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "PATH": "%s:%s" % (VENV_BIN, os.environ.get("PATH", "")),
        # The worst case for leaks: every task's arguments in the banner.
        "ANSIBLE_DISPLAY_ARGS_TO_STDOUT": "True",
        "ANSIBLE_NOCOLOR": "1",
    }
    envvars.update(secret_env)
    return ansible_runner.run(
        private_data_dir=str(private_data_dir),
        project_dir=str(REPO),
        playbook=playbook,
        inventory=str(REPO / inventory),
        extravars=extravars,
        envvars=envvars,
        # As AWX launches jobs: nothing from env/ written to disk, facts cached as JSON files.
        suppress_env_files=True,
        fact_cache_type="jsonfile",
        quiet=True,
        timeout=timeout,
    )


def files_under(path):
    for item in sorted(pathlib.Path(path).rglob("*")):
        if item.is_file():
            yield item


def leaks(private_data_dir, secrets):
    """Every (file, secret name) where a secret value appears under the
    private data dir. ansible-runner's own launch record (artifacts/<id>/command)
    holds the environment it started ansible-playbook with; AWX stores that
    environment with credential values hidden. There the secret may appear only
    as the value of its own injected variable, which is checked and removed
    before the file is searched like every other."""
    found = []
    for item in files_under(private_data_dir):
        data = item.read_bytes()
        if item.name == "command" and item.parent.parent.name == "artifacts":
            record = json.loads(data)
            for name in secrets:
                if record.get("env", {}).get(name) == secrets[name]:
                    del record["env"][name]
            data = json.dumps(record).encode()
        for name, value in secrets.items():
            if value.encode() in data:
                found.append("%s: %s" % (item.relative_to(private_data_dir), name))
    return found


def task_events(runner):
    """(task name, host, event) for every per-host task result."""
    out = []
    for event in runner.events:
        if event.get("event", "").startswith("runner_on_") or event.get("event") == "runner_item_on_ok":
            data = event.get("event_data", {})
            out.append((data.get("task"), data.get("host"), event["event"], data))
    return out


def stats(runner):
    for event in runner.events:
        if event.get("event") == "playbook_on_stats":
            return event["event_data"]
    return None


def stdout_of(runner):
    return runner.stdout.read() if runner.stdout else ""
