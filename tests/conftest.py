"""Shared test plumbing.

No silent skips in CI: `require()` skips a test locally when a prerequisite is
missing, but fails it with the reason when CI=true, so a tier can never pass
by having quietly run nothing.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
VENV_BIN = pathlib.Path(sys.executable).parent
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

# Import the collection's plugins as ansible_collections.sparkfleet.vllm.* straight from the checkout.
sys.path.insert(0, str(REPO / ".collections"))


def require(condition, what):
    """Skip (locally) or fail (in CI) when a prerequisite is missing."""
    if condition:
        return
    message = "missing prerequisite: %s" % what
    if IN_CI:
        pytest.fail(message + " (CI=true: a missing prerequisite fails its tier)", pytrace=False)
    else:
        pytest.skip(message + " (local run; with CI=true this fails)")


def tool(name):
    """Path of a command from the venv or PATH, or None."""
    candidate = VENV_BIN / name
    if candidate.exists():
        return str(candidate)
    return shutil.which(name)


FAILED_TASK = re.compile(r"^(?:fatal|failed): \[([^\]]+)\]")
TASK_LINE = re.compile(r"^TASK \[(.*)\] \**$")
MESSAGE = re.compile(r'"msg": "((?:[^"\\]|\\.)*)"')


def failed_tasks(stdout):
    """Each failed Ansible task in a play's output as 'task [host]: first words of its message'.

    A failing tier's summary prints only an assertion's first line; this puts the cause there."""
    found, task = [], None
    for line in stdout.splitlines():
        heading = TASK_LINE.match(line)
        if heading:
            task = heading.group(1)
            continue
        failed = FAILED_TASK.match(line)
        if failed:
            message = MESSAGE.search(line)
            found.append("%s [%s]: %s" % (task, failed.group(1), message.group(1)[:160] if message else line[:160]))
    return found


def run(cmd, timeout=600, check=True, **kwargs):
    """Run a command from the repo root; on failure the assertion shows its output, its first line the failed
    Ansible tasks (if any)."""
    kwargs.setdefault("cwd", REPO)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    if check:
        # A no_log task's failure shows no message on stdout ("censored"); the plan action's refusal and Ansible's
        # own errors reach stderr, so the first of those goes on the summary line too.
        errors = [line.strip()[:240] for line in proc.stderr.splitlines() if "ERROR" in line][:2]
        assert proc.returncode == 0, "exited %s: %s | %s | %s\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
            proc.returncode, " | ".join(failed_tasks(proc.stdout)) or "no failed task", " | ".join(errors) or "no error on stderr",
            " ".join(map(str, cmd)), proc.stdout[-8000:], proc.stderr[-8000:])
    return proc


def pytest_configure(config):
    """Every tier records its wall time, slowest tests and costliest fixtures (tests/timing.py)."""
    sys.path.insert(0, str(REPO / "tests"))
    import timing  # pylint: disable=import-outside-toplevel

    timing.register(config)


def keyless(request):
    """A planner request without an API key, served open (vllm_open_api=all) as every such plan was before a key
    became required, unless it names a key or its own vllm_open_api. The tests of that rule plan without it."""
    request = dict(request)
    if not request.get("api_key") and not request.get("open_api"):
        request["open_api"] = "all"
    return request


def without_processes(facts):
    """GPU facts as gpu_facts returned them on the device before it listed GPU processes and, on unified memory, the
    host's memory (the captures under tests/unit/fixtures/*/gpu_facts-*.json). The list itself must be empty there:
    the captures' <processes> is empty, nothing else ran on the device; and a discrete card has no host_memory."""
    assert facts["processes"] == [] and all(g["processes"] == [] for g in facts["gpus"]), facts["processes"]
    assert facts.get("host_memory") is None, facts["host_memory"]
    facts = {k: v for k, v in facts.items() if k not in ("processes", "host_memory")}
    facts["gpus"] = [{k: v for k, v in g.items() if k != "processes"} for g in facts["gpus"]]
    return facts
