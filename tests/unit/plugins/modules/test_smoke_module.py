"""The smoke module against the fast token source (answers ' tok tok ...': a stand-in that passes chat only)."""
import pytest
from http_module_helpers import FastTokenSource, run_module

from ansible_collections.sparkfleet.vllm.plugins.modules import smoke as smoke_module


@pytest.fixture()
def source():
    server = FastTokenSource(model="fake").start_in_thread()
    yield server
    server.stop()


def test_plan_picks_checks_and_failures_carry_reasons(source, monkeypatch):
    # The fake source streams; the smoke module asks without stream, so point it at a fake non-streaming answer.
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import openai_client as oc

    def fake_request(url, method="GET", body=None, api_key=None, timeout=0):
        return oc.Response(status=200, body={"choices": [{"message": {"content": "tok tok"}}]}, text="tok tok")
    monkeypatch.setattr(oc, "request_json", fake_request)
    monkeypatch.setattr(smoke_module.oc, "request_json", fake_request)
    monkeypatch.setattr(smoke_module, "run_checks", _wrap(smoke_module.run_checks, fake_request))
    kind, res = run_module(smoke_module, {"url": source.url, "model": "fake",
                                          "plan": {"model": {"stand_in": True}, "argv": ["x"]}})
    assert kind == "exit" and [c["name"] for c in res["checks"]] == ["chat"] and res["counts"]["passed"] == 1
    kind, res = run_module(smoke_module, {"url": source.url, "model": "fake", "checks": ["chat", "vision"]})
    assert kind == "fail" and res["failed_checks"] == ["vision"] and "expected 'vLLM'" in res["msg"]
    kind, res = run_module(smoke_module, {"url": source.url, "model": "fake", "checks": ["vision"],
                                          "fail_on_failure": False})
    assert kind == "exit" and res["failed_checks"] == ["vision"]


def _wrap(func, request):
    def run_checks(*args, **kwargs):
        kwargs["request"] = request
        return func(*args, **kwargs)
    return run_checks


def test_check_mode(source):
    kind, res = run_module(smoke_module, {"url": source.url, "model": "fake"}, check_mode=True)
    assert kind == "exit" and res["checks"] == [] and source.requests == []
