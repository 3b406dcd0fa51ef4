# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Readiness of a vLLM server: probe phases, the waiting loop, progress lines.

`Waiter` is transport-agnostic: it is given callables for the HTTP probe, the
process check, the log reader and the weights-size reader, so the action
plugin can run them on the target through Ansible while tests drive it with
fakes and a fake clock.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import time

from ansible_collections.sparkfleet.vllm.plugins.module_utils import diagnose as diag
from ansible_collections.sparkfleet.vllm.plugins.module_utils import openai_client as oc

# Phases in the order a starting server reaches them.
PHASES = ("starting", "health", "models", "ready")
PHASE_HELP = {
    "starting": "connection refused or no answer yet: the server is starting",
    "health": "/health answers 200: the engine is up",
    "models": "/v1/models lists the served name",
    "ready": "a 1-token completion succeeded",
}


# vLLM's API server logs its non-default arguments once per start: the line that splits a log into starts, so
# that a failure a restart policy recovers from is told apart from the same failure again after the restart.
START_MARKER = re.compile(r"non-default args:")


def split_starts(log_text):
    """The log cut into one piece per server start (the text before the first start belongs to the first)."""
    text = log_text or ""
    cuts = [m.start() for m in START_MARKER.finditer(text)]
    cuts = [0] + [c for c in cuts if c > 0]
    return [text[a:b] for a, b in zip(cuts, cuts[1:] + [len(text)])]


def failed_starts(log_text, diagnosis_id, signatures):
    """How many starts in the log ended in the diagnosis `diagnosis_id`."""
    return sum(1 for piece in split_starts(log_text)
               if any(d["id"] == diagnosis_id for d in diag.diagnose(piece, signatures)))


def phase_index(phase):
    return PHASES.index(phase) if phase in PHASES else -1


def probe(base_url, served_name, api_key=None, timeout=10.0, request=oc.request_json):
    """One pass over /health, /v1/models and a 1-token completion.

    Returns {'phase', 'detail', 'fatal', 'served': [...]}: `phase` is the last
    phase reached; `fatal` is set only for answers that waiting will not change
    (an API key the server rejects, a completion refused with a 4xx).
    """
    health = request(oc.join_url(base_url, "/health"), timeout=timeout)
    if health.status is None:
        return {"phase": "starting", "detail": health.error, "fatal": None, "served": []}
    if not health.ok:
        return {"phase": "starting", "detail": "/health: " + health.summary(300), "fatal": None, "served": []}
    models = request(oc.join_url(base_url, "/v1/models"), api_key=api_key, timeout=timeout)
    if models.status in (401, 403):
        return {"phase": "health", "detail": models.summary(300), "served": [],
                "fatal": "the server rejected the API key on /v1/models (%s)" % models.status}
    served = [m.get("id") for m in ((models.body or {}).get("data") or []) if isinstance(m, dict)] \
        if isinstance(models.body, dict) else []
    if not models.ok or served_name not in served:
        detail = models.summary(300) if not models.ok else "serves %s, waiting for %r" % (served, served_name)
        return {"phase": "health", "detail": detail, "fatal": None, "served": served}
    completion = request(oc.join_url(base_url, "/v1/completions"), method="POST", api_key=api_key,
                         timeout=max(timeout, 30.0),
                         body={"model": served_name, "prompt": "Hello", "max_tokens": 1, "temperature": 0})
    if completion.ok:
        return {"phase": "ready", "detail": "1-token completion in %.2f s" % completion.elapsed, "fatal": None,
                "served": served}
    fatal = None
    if completion.status in (401, 403):
        fatal = "the server rejected the API key on /v1/completions (%s)" % completion.status
    elif completion.status is not None and 400 <= completion.status < 500:
        fatal = "the 1-token completion was refused: %s" % completion.summary(500)
    return {"phase": "models", "detail": completion.summary(300), "fatal": fatal, "served": served}


_SHARDS = re.compile(r"Loading safetensors checkpoint shards:\s+(\d+)% Completed \| (\d+)/(\d+)")
_LOADED = re.compile(r"(Loading weights took [0-9.]+ seconds|Model loading took [0-9.]+ GiB[^\n]*)")
_DOWNLOAD = re.compile(r"(Downloading[^\n]{0,80}?\d+%[^\n]{0,60})")


def weights_from_log(log_text):
    """The latest weight-loading milestone the engine log shows, or ''."""
    text = log_text or ""
    for regex, fmt in ((_LOADED, "{0}"), (_SHARDS, "checkpoint shards {1}/{2} ({0}%)"), (_DOWNLOAD, "{0}")):
        matches = list(regex.finditer(text))
        if matches:
            last = matches[-1]
            groups = last.groups() if regex is _SHARDS else (last.group(1),)
            return fmt.format(*groups).strip()
    return ""


def human_bytes(count):
    if count is None:
        return "unknown"
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return ("%.0f %s" if unit == "B" else "%.2f %s") % (size, unit)
        size /= 1024
    return "%d B" % count  # pragma: no cover


def progress_line(phase, elapsed, weights_bytes=None, log_hint="", detail=""):
    """What the operator sees while waiting: phase, weights so far, elapsed."""
    parts = ["phase=%s" % phase, "elapsed=%ds" % int(elapsed)]
    if weights_bytes is not None:
        parts.append("weights in cache=%s" % human_bytes(weights_bytes))
    if log_hint:
        parts.append("log: %s" % log_hint)
    if detail and phase != "ready":
        parts.append("(%s)" % detail[:160])
    return "wait_healthy: " + " ".join(parts)


class Waiter:
    """Poll until ready, a fatal sign, or the timeout.

    probe()          -> dict from `probe`
    process_state()  -> None (not checked) or {'running': bool, 'detail': str}
    read_log()       -> str (recent engine log; '' when unknown)
    weights_bytes()  -> int or None
    emit(line)       -> shows a progress line to the operator
    """

    def __init__(self, probe, timeout=600, interval=2.0, progress_every=20, process_state=None, read_log=None,
                 weights_bytes=None, emit=None, signatures=diag.FATAL_SIGNATURES, clock=time.monotonic,
                 sleep=time.sleep, settle_after_exit=5.0, expected_failures=(), restart_grace=120.0):
        self.probe = probe
        self.timeout = float(timeout)
        self.interval = float(interval)
        self.progress_every = min(float(progress_every), 30.0)
        self.process_state = process_state or (lambda: None)
        self.read_log = read_log or (lambda: "")
        self.weights_bytes = weights_bytes or (lambda: None)
        self.emit = emit or (lambda line: None)
        self.signatures = signatures
        self.clock = clock
        self.sleep = sleep
        self.settle_after_exit = settle_after_exit
        # Diagnoses the plan expects once on a first start (the catalog's first_start_failure): the restart policy
        # brings the server back, so the first one is waited through, for up to restart_grace s of no process.
        self.expected_failures = tuple(expected_failures or ())
        self.restart_grace = float(restart_grace)
        self.tolerated = None
        self.progress = []

    def _result(self, ok, phase, started, message, diagnosis=None, last=None, log_text=""):
        return {
            "ok": ok, "phase": phase, "elapsed": round(self.clock() - started, 2), "msg": message,
            "diagnosis": diagnosis, "served": (last or {}).get("served", []),
            "detail": (last or {}).get("detail", ""), "progress": list(self.progress),
            "log_tail": "\n".join((log_text or "").splitlines()[-40:]) if not ok else "",
        }

    def run(self):
        started = self.clock()
        best = "starting"
        last_progress = None
        last = {}
        exited_at = None
        while True:
            last = self.probe()
            if phase_index(last["phase"]) > phase_index(best):
                best = last["phase"]
            now = self.clock()
            elapsed = now - started
            if last["phase"] == "ready":
                self._emit(best, elapsed, last, "")
                return self._result(True, "ready", started, "ready after %.1f s: %s" % (elapsed, last["detail"]),
                                    last=last)
            if last.get("fatal"):
                return self._result(False, best, started, last["fatal"], last=last)
            log_text = self.read_log() or ""
            diagnosis = diag.first_diagnosis(log_text, self.signatures)
            if diagnosis and diagnosis["id"] in self.expected_failures:
                if failed_starts(log_text, diagnosis["id"], self.signatures) > 1:
                    return self._result(False, best, started, "the expected first-start failure came back after the "
                                        "restart: " + diag.describe(diagnosis), diagnosis, last, log_text)
                diagnosis = self._tolerate(diagnosis, now, elapsed, log_text)
            state = self.process_state()
            restarting = (self.tolerated is not None and not diagnosis
                          and now - self.tolerated["at"] < self.restart_grace)
            if state is not None and not state.get("running") and restarting:
                exited_at = None  # the restart policy brings it back
            elif state is not None and not state.get("running"):
                # A process that just exited may still be flushing its last log lines: give it a moment. The generic
                # "engine failed to start" waits that moment too, for what names the cause after the exit (the unit's
                # ExecStopPost: the memory guard's record).
                exited_at = now if exited_at is None else exited_at
                specific = diagnosis and diagnosis["id"] != "engine_startup_failed"
                if specific or now - exited_at >= self.settle_after_exit:
                    message = "the server is not running (%s)" % state.get("detail", "exited")
                    if diagnosis:
                        message += ": " + diag.describe(diagnosis)
                    return self._result(False, best, started, message, diagnosis, last, log_text)
            elif diagnosis and diagnosis["id"] != "engine_startup_failed":
                return self._result(False, best, started, "fatal start-up error: " + diag.describe(diagnosis),
                                    diagnosis, last, log_text)
            if last_progress is None or now - last_progress >= self.progress_every:
                self._emit(best, elapsed, last, log_text)
                last_progress = now
            if elapsed >= self.timeout:
                reason = "not ready after %d s (timeout)" % int(self.timeout)
                if best == "models":
                    # /health and /v1/models can answer 200 while the engine cannot generate: say so.
                    reason += "; /health and /v1/models answer but generation is dead (the 1-token completion fails)"
                return self._result(False, best, started, "%s; last answer: %s" % (reason, last.get("detail", "")),
                                    diagnosis, last, log_text)
            self.sleep(min(self.interval, max(0.0, self.timeout - elapsed)))

    def _tolerate(self, diagnosis, now, elapsed, log_text):
        """Wait through an expected first-start failure once; the diagnosis of anything else in the log, or None."""
        if self.tolerated is None:
            self.tolerated = {"id": diagnosis["id"], "at": now}
            what = (elapsed, diagnosis["id"], diagnosis["title"], self.restart_grace)
            line = ("expected first-start failure after %ds (%s: %s); waiting for the restart policy to start it again "
                    "(once, up to %d s without a process)" % what)
            self.progress.append(line)
            self.emit(line)
        others = [s for s in self.signatures if s["id"] not in (diagnosis["id"], "engine_startup_failed")]
        return diag.first_diagnosis(log_text, others)

    def _emit(self, phase, elapsed, last, log_text):
        try:
            size = self.weights_bytes()
        except Exception:  # noqa: BLE001 - progress is best effort, never a reason to fail
            size = None
        line = progress_line(phase, elapsed, size, weights_from_log(log_text), last.get("detail", ""))
        self.progress.append(line)
        self.emit(line)


# --------------------------------------------------------------------------- checks on the server host
# Built as argv lists so the action plugin can run them through ansible.builtin.command on the target
# and the module can run them locally; each parser turns (rc, stdout, stderr) into a state dict.

_PIDFILE_SCRIPT = (
    'pid=$(cat "$1" 2>/dev/null) || { echo "exited no-pidfile"; exit 0; }; '
    'st=$(sed "s/.*) //" "/proc/$pid/stat" 2>/dev/null | cut -d" " -f1); '
    'case "$st" in ""|Z|X) echo "exited $pid";; *) echo "running $pid";; esac'
)
_LOG_SCRIPT = (
    'size=$(stat -c %s "$1" 2>/dev/null || echo 0); off=$2; [ "$size" -lt "$off" ] && off=0; '
    'tail -c +$((off + 1)) "$1" 2>/dev/null | tail -c 262144'
)


def process_check(service=None, pidfile=None, container=None):
    """(kind, argv) of the liveness check for the configured runtime, or (None, None)."""
    if container:
        return "container", ["docker", "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}} {{.State.Restarting}}",
                             container]
    if service:
        return "service", ["systemctl", "show", service, "-p", "ActiveState", "-p", "SubState", "-p", "Result",
                           "-p", "ExecMainStatus", "-p", "MemoryMax"]
    if pidfile:
        return "pidfile", ["/bin/sh", "-c", _PIDFILE_SCRIPT, "sh", pidfile]
    return None, None


def parse_process_check(kind, rc, stdout, stderr="", name=""):
    """{'running': bool, 'detail': str} from the check's output."""
    out = (stdout or "").strip()
    if kind == "container":
        if rc != 0:
            return {"running": False, "detail": "container %s not found (%s)" % (name, (stderr or out).strip()[:200])}
        parts = out.split()
        status = parts[0] if parts else "unknown"
        code = parts[1] if len(parts) > 1 else "?"
        if status == "running":
            return {"running": True, "detail": "container running"}
        return {"running": False, "detail": "container %s is %s (exit code %s)" % (name, status, code)}
    if kind == "service":
        props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        active, sub = props.get("ActiveState", "unknown"), props.get("SubState", "unknown")
        if active in ("active", "activating", "reloading") and sub not in ("auto-restart", "exited", "dead",
                                                                           "failed"):
            return {"running": True, "detail": "unit %s %s/%s" % (name, active, sub)}
        detail = "unit %s is %s/%s (result %s, exit status %s)" % (
            name, active, sub, props.get("Result", "?"), props.get("ExecMainStatus", "?"))
        if props.get("Result") == "oom-kill":
            # systemd's own word for a unit the kernel's OOM killer stopped: at the unit's MemoryMax (the memory
            # guard) when it has one, else because the whole host ran out.
            ceiling = props.get("MemoryMax", "infinity")
            if ceiling.isdigit():
                detail = "stopped by the memory guard: the kernel's OOM killer killed it at its ceiling (MemoryMax %s); %s" % (
                    human_bytes(int(ceiling)), detail)
            else:
                detail = "killed by the kernel's OOM killer (the host ran out of memory; the unit has no MemoryMax); %s" % detail
        return {"running": False, "detail": detail}
    if kind == "pidfile":
        words = out.split()
        if words[:1] == ["running"]:
            return {"running": True, "detail": "pid %s running" % (words[1] if len(words) > 1 else "?")}
        return {"running": False, "detail": "process from pidfile %s has exited (%s)" % (
            name, words[1] if len(words) > 1 else "?")}
    return {"running": True, "detail": "not checked"}


def log_command(service=None, container=None, log_path=None, since_epoch=0, offset=0):
    """argv that prints the engine log written since the wait began, or None."""
    if log_path:
        return ["/bin/sh", "-c", _LOG_SCRIPT, "sh", log_path, str(int(offset))]
    if container:
        return ["docker", "logs", "--since", str(int(since_epoch)), "--tail", "400", container]
    if service:
        return ["journalctl", "-u", service, "--since", "@%d" % int(since_epoch), "-n", "400", "--no-pager",
                "-o", "cat"]
    return None


def log_offset_command(log_path):
    return ["/bin/sh", "-c", 'stat -c %s "$1" 2>/dev/null || echo 0', "sh", log_path]


def weights_size_command(weights_path):
    return ["du", "-sb", "--", weights_path] if weights_path else None


def parse_du(rc, stdout):
    try:
        return int((stdout or "").split()[0]) if rc == 0 else None
    except (IndexError, ValueError):
        return None


# Shared by the module's argument_spec and the action plugin's validation.
ARGUMENT_SPEC = dict(oc.api_argument_spec(), **{
    "timeout": {"type": "int", "default": 600},
    "interval": {"type": "float", "default": 3.0},
    "progress_interval": {"type": "int", "default": 20},
    "service": {"type": "str"},
    "pidfile": {"type": "path"},
    "container": {"type": "str"},
    "log_path": {"type": "path"},
    "weights_path": {"type": "path"},
    "request_timeout": {"type": "float", "default": 10.0},
    "expected_failures": {"type": "list", "elements": "str", "default": []},
    "restart_grace": {"type": "float", "default": 120.0},
})
MUTUALLY_EXCLUSIVE = [["service", "pidfile", "container"]]
