"""The smoke module against the fast token source (answers ' tok tok ...': a stand-in that passes chat only)."""
import pytest
from http_module_helpers import FastTokenSource, run_module

from ansible_collections.sparkfleet.vllm.plugins.modules import smoke as smoke_module
from conftest import keyless


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


def test_catalog_misses_passed_as_verify_passes_them(source, monkeypatch):
    """verify.yml passes the plan and `vllm_plan.model.smoke_expected_misses`; conditions are applied to the plan."""
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import openai_client as oc

    def reads_llm(url, method="GET", body=None, api_key=None, timeout=0):
        return oc.Response(status=200, body={"choices": [{"message": {"content": "LLM"}}]}, text="LLM")
    monkeypatch.setattr(smoke_module, "run_checks", _wrap(smoke_module.run_checks, reads_llm))
    table = cat.load_catalog()["models"]["12b"]["smoke_expected_misses"]
    base = {"url": source.url, "model": "fake", "checks": ["vision"], "expected_misses": table}
    rtx = {"model": {"short": "12b"}, "profile": "rtx_5090"}
    kind, res = run_module(smoke_module, dict(base, plan=dict(rtx, drafter="mtp")))
    assert kind == "exit" and res["counts"]["expected_miss"] == 1 and res["checks"][0]["miss"] == ["reads_llm"]
    # The notes: the 12b reads the image right with DFlash on, and on the DGX Spark, so there "LLM" fails the check.
    kind, res = run_module(smoke_module, dict(base, plan=dict(rtx, drafter="dflash")))
    assert kind == "fail" and res["failed_checks"] == ["vision"]
    kind, res = run_module(smoke_module, dict(base, plan=dict(rtx, drafter="mtp", profile="dgx_spark")))
    assert kind == "fail" and res["failed_checks"] == ["vision"]
    kind, res = run_module(smoke_module, dict(base, expected_misses={"vison": ["reads_llm"]}))
    assert kind == "fail" and "unknown smoke check vison" in res["msg"]


def test_a_stand_ins_plan_constrains_thinking_and_tools_through_the_module(source, monkeypatch):
    """verify.yml passes the plan: a Gemma 4 stand-in's checks send its catalog smoke_constrained_outputs, and the
    results name the constraint. The fake server answers as vLLM's gemma4 parsers answered the real constraint."""
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
    from ansible_collections.sparkfleet.vllm.plugins.module_utils import openai_client as oc
    from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import planner

    sent = []

    def parsed(url, method="GET", body=None, api_key=None, timeout=0):
        sent.append(body)
        message = {"content": "42"}
        if "tools" in body:
            message = {"content": None, "tool_calls": [{"function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}
        elif (body.get("chat_template_kwargs") or {}).get("enable_thinking") is False:
            message = {"content": "42", "reasoning": "17 + 25 is 42."}
        return oc.Response(status=200, body={"choices": [{"message": message}]}, text="{}")
    monkeypatch.setattr(smoke_module, "run_checks", _wrap(smoke_module.run_checks, parsed))
    catalog = cat.load_catalog()
    plan = planner.plan(catalog, keyless({"profile": "cpu", "model": "tiny-26b-a4b"}))
    kind, res = run_module(smoke_module, {"url": source.url, "model": plan["served_name"], "plan": plan})
    assert kind == "exit" and res["counts"] == {"passed": 3, "failed": 0, "expected_miss": 0}, res
    wanted = catalog["models"]["tiny-26b-a4b"]["smoke_constrained_outputs"]
    assert {c["name"]: c.get("constrained_output") for c in res["checks"]} == {
        "chat": None, "thinking": wanted["thinking"], "tools": wanted["tools"]}
    assert [b.get("structured_outputs") for b in sent] == [None, {"choice": [wanted["thinking"]]}, {"choice": [wanted["tools"]]}]
    assert res["msg"] == "chat passed, thinking passed (output constrained), tools passed (output constrained)"
