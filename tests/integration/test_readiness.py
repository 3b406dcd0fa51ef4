"""Readiness that cannot lie: sparkfleet.vllm.wait_healthy reports ready only after a 1-token completion.

vLLM's /health and /v1/models have been seen answering 200 on a GB10
tensor-parallel cluster whose generation was dead. The stand-in here is a
fake server (stdlib http.server on 127.0.0.1, no vLLM): /health and
/v1/models answer 200 and list the model, but /v1/completions fails with a
500 or hangs. wait_healthy runs through ansible-playbook (its action plugin,
exactly as playbooks/verify.yml calls it) and must not report ready: it fails
at its timeout with the phase stuck below `ready` and says the completion is
what failed. With an API key, the fake server checks that the completion
carries it.
"""
import http.server
import json
import os
import pathlib
import re
import sys
import threading
import time

import pytest

from conftest import REPO, require, run, tool

SERVED = "tiny"
KEY = "sk-readiness-standin-%d" % os.getpid()


class FakeVllm(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, mode, api_key=None):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode, self.api_key = mode, api_key
        self.completions = []  # (Authorization header, body) of every completion request
        self.stop_event = threading.Event()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.server_address[1]


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output clean
        pass

    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self):
        return not self.server.api_key or self.headers.get("Authorization") == "Bearer " + self.server.api_key

    def do_GET(self):
        if self.path == "/health":
            self._send(200, {})
        elif self.path == "/v1/models":
            if not self._authorised():
                self._send(401, {"error": "Unauthorized"})
            else:
                self._send(200, {"object": "list", "data": [{"id": SERVED, "object": "model"}]})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path != "/v1/completions":
            self._send(404, {"error": "not found"})
            return
        self.server.completions.append((self.headers.get("Authorization"), body))
        if not self._authorised():
            self._send(401, {"error": "Unauthorized"})
        elif self.server.mode == "500":
            self._send(500, {"error": {"message": "EngineCore died: RPC call to sample_tokens timed out"}})
        elif self.server.mode == "hang":
            self.server.stop_event.wait(120)  # generation never answers
        else:
            self._send(200, {"id": "cmpl-1", "object": "text_completion", "model": SERVED,
                             "choices": [{"index": 0, "text": " hi", "finish_reason": "length"}],
                             "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})


@pytest.fixture
def fake_server(request):
    mode, api_key = request.param
    server = FakeVllm(mode, api_key)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.stop_event.set()
    server.shutdown()
    server.server_close()


def wait_healthy(tmp_path, url, timeout, api_key=None, request_timeout=2.0):
    """Run the module through ansible-playbook; return (its registered result, wall seconds, playbook output)."""
    require(tool("ansible-playbook"), "ansible-playbook (run `make venv`)")
    out = tmp_path / "result.json"
    args = {"url": url, "model": SERVED, "timeout": timeout, "interval": 1, "request_timeout": request_timeout}
    if api_key:
        args["api_key"] = api_key
    playbook = tmp_path / "wait.yml"
    playbook.write_text(json.dumps([{
        "name": "Wait for the fake server", "hosts": "localhost", "gather_facts": False,
        "tasks": [
            {"name": "Wait until healthy", "sparkfleet.vllm.wait_healthy": args, "register": "health", "ignore_errors": True},
            {"name": "Save the result",
             "ansible.builtin.copy": {"content": "{{ health | to_json }}", "dest": str(out), "mode": "0600"}},
        ]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH="%s:%s" % (pathlib.Path(tool("ansible-playbook")).parent, os.environ.get("PATH", "")))
    started = time.monotonic()
    proc = run([tool("ansible-playbook"), "-i", "localhost,", "-c", "local", "-e",
                json.dumps({"ansible_python_interpreter": sys.executable}), str(playbook)], env=env, timeout=300)
    return json.loads(out.read_text()), time.monotonic() - started, proc.stdout


@pytest.mark.parametrize("fake_server", [("500", None)], indirect=True, ids=["completion-500"])
def test_dead_generation_500_is_not_ready(fake_server, tmp_path):
    result, wall, output = wait_healthy(tmp_path, fake_server.url, timeout=8)
    assert result.get("failed"), "wait_healthy reported ready with dead generation: %s" % result
    assert result["phase"] == "models", result  # /health and /v1/models passed; the completion never did
    assert result["elapsed"] >= 8, result  # not a fast failure: a 500 can be transient while the engine warms up
    assert "timeout" in result["msg"] and "HTTP 500" in result["msg"], result["msg"]
    assert fake_server.completions, "wait_healthy never tried a completion"
    sys.stderr.write("\nreadiness (completion 500): failed after %.1f s (wall %.1f s), phase %s: %s\n" % (
        result["elapsed"], wall, result["phase"], result["msg"][:200]))


@pytest.mark.parametrize("fake_server", [("hang", None)], indirect=True, ids=["completion-hangs"])
def test_dead_generation_hang_is_not_ready(fake_server, tmp_path):
    result, wall, output = wait_healthy(tmp_path, fake_server.url, timeout=8)
    assert result.get("failed"), "wait_healthy reported ready with a hung generation: %s" % result
    assert result["phase"] == "models", result
    assert re.search(r"time(d)? ?out", result["msg"]), result["msg"]
    assert fake_server.completions, "wait_healthy never tried a completion"
    sys.stderr.write("\nreadiness (completion hangs): failed after %.1f s (wall %.1f s), phase %s: %s\n" % (
        result["elapsed"], wall, result["phase"], result["msg"][:200]))


@pytest.mark.parametrize("fake_server", [("ok", KEY)], indirect=True, ids=["api-key"])
def test_authenticated_completion_carries_the_key(fake_server, tmp_path):
    result, _wall, output = wait_healthy(tmp_path, fake_server.url, timeout=20, api_key=KEY)
    assert not result.get("failed"), result
    assert result["phase"] == "ready", result
    assert fake_server.completions, "no completion was sent"
    header, body = fake_server.completions[-1]
    assert header == "Bearer " + KEY, "the 1-token completion did not carry the API key"
    assert body.get("max_tokens") == 1 and body.get("model") == SERVED, body
    assert KEY not in output, "the API key reached the playbook output"


@pytest.mark.parametrize("fake_server", [("ok", KEY)], indirect=True, ids=["wrong-key"])
def test_rejected_key_fails_fast(fake_server, tmp_path):
    result, _wall, _output = wait_healthy(tmp_path, fake_server.url, timeout=60, api_key="sk-not-the-right-key")
    assert result.get("failed"), result
    # A quarter of the 60 s timeout: generous on any machine, and a module that waited out a 401 would exceed it.
    assert result["elapsed"] < 60 / 4, "a rejected API key should fail at once, not at the timeout: %s" % result
    assert "API key" in result["msg"], result["msg"]


# The timeout message says that generation is dead when /health and /v1/models answer
# but the 1-token completion fails.
@pytest.mark.parametrize("fake_server", [("500", None)], indirect=True, ids=["message-names-generation"])
def test_timeout_message_names_dead_generation(fake_server, tmp_path):
    result, _wall, _output = wait_healthy(tmp_path, fake_server.url, timeout=5)
    assert re.search(r"generation is dead", result["msg"], re.I), result["msg"]
