"""Smoke grading: passes, failures with request/response, and the notes' known misses.

The known misses are the catalog's `models.<short>.smoke_expected_misses`
(data/catalog.yml); these tests read them from there, through a plan-shaped
dict, exactly as the module receives them from playbooks/verify.yml.
"""
import base64
import json

import pytest

from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog as cat
from ansible_collections.sparkfleet.vllm.plugins.module_utils import catalog_conditions, png, smoke
from ansible_collections.sparkfleet.vllm.plugins.module_utils import openai_client as oc
from ansible_collections.sparkfleet.vllm.plugins.module_utils.plan import planner
from conftest import keyless

CATALOG = cat.load_catalog()


def plan_for(short, profile="rtx_pro_6000", drafter="none", node_count=1):
    """The parts of a plan that the misses depend on: the catalog's model entry, profile, drafter, nodes."""
    model = dict(CATALOG["models"][short], short=short)
    return {"model": model, "profile": profile, "drafter": drafter, "node_count": node_count}


def misses(short, **plan):
    """The known misses of a catalog model in a plan, as verify.yml hands them to the module."""
    built = plan_for(short, **plan)
    return smoke.misses_for_plan(built, built["model"].get("smoke_expected_misses") or {})


def answer(content="", reasoning=None, tool_calls=None, status=200):
    body = {"choices": [{"message": {"role": "assistant", "content": content, "reasoning": reasoning,
                                     "tool_calls": tool_calls or []}}]}
    return oc.Response(status=status, body=body, text=json.dumps(body))


def exchanges(check, responses):
    reqs = smoke.build_requests(check, "m")
    return [(label, body, resp) for (label, body), resp in zip(reqs, responses)]


def accuracy_answers(wrong=()):
    out = []
    for qid, _question, accepted in smoke.ACCURACY_SET:
        out.append(answer("I am not sure" if qid in wrong else "The answer is %s." % accepted[0].title()))
    return out


def test_select_checks():
    assert smoke.select_checks(None) == list(smoke.DEFAULT_CHECKS)
    assert smoke.select_checks(["vision", "chat"], audio=True) == ["chat", "vision", "audio"]
    with pytest.raises(ValueError):
        smoke.select_checks(["nope"])


def test_accuracy_set_has_twenty_questions_with_reverse_necessary():
    assert len(smoke.ACCURACY_SET) == 20
    assert len({q for q, _question, _accepted in smoke.ACCURACY_SET}) == 20
    assert {q: a for q, _question, a in smoke.ACCURACY_SET}["reverse_necessary"] == ("yrassecen",)


def test_accuracy_all_right_passes():
    result = smoke.grade("accuracy", exchanges("accuracy", accuracy_answers()))
    assert result["status"] == "passed" and result["score"] == "20/20"


def test_accuracy_known_miss_of_the_12b_is_expected():
    result = smoke.grade("accuracy", exchanges("accuracy", accuracy_answers({"reverse_necessary"})),
                         misses("12b"))
    assert result["status"] == "expected_miss" and result["score"] == "19/20"
    assert result["miss"] == ["reverse_necessary"]


def test_accuracy_same_miss_fails_on_a_model_without_it():
    result = smoke.grade("accuracy", exchanges("accuracy", accuracy_answers({"reverse_necessary"})),
                         misses("26b-a4b"))
    assert result["status"] == "failed" and "yrassecen" in result["reason"]
    assert result["details"][0]["request"] and "I am not sure" in result["details"][0]["response"]


def test_accuracy_other_miss_fails_even_for_the_12b():
    result = smoke.grade("accuracy", exchanges("accuracy", accuracy_answers({"reverse_necessary", "capital_france"})),
                         misses("12b"))
    assert result["status"] == "failed" and result["score"] == "18/20"


@pytest.mark.parametrize("text,ok", [("Paris", True), ("paris.", True), ("It is Paris!", True), ("Parisian", False)])
def test_answer_matching_is_whole_word(text, ok):
    assert smoke.answer_matches(text, ("paris",)) is ok


def test_numbers_are_whole_words():
    assert smoke.answer_matches("144", ("144",))
    assert not smoke.answer_matches("1440", ("144",))
    assert smoke.answer_matches("Carbon dioxide (CO2).", ("carbon dioxide", "co2"))


def test_vision_reads_llm_is_expected_for_e4b_only():
    reads_llm = exchanges("vision", [answer("LLM")])
    assert smoke.grade("vision", reads_llm, misses("e4b"))["status"] == "expected_miss"
    assert smoke.grade("vision", reads_llm, misses("26b-a4b"))["status"] == "failed"
    assert smoke.grade("vision", exchanges("vision", [answer("vLLM")]))["status"] == "passed"


def test_vision_request_puts_the_image_before_the_text():
    body = smoke.build_requests("vision", "m")[0][1]
    parts = body["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["image_url", "text"]
    uri = parts[0]["image_url"]["url"]
    assert uri.startswith("data:image/png;base64,")
    assert png.decode_png_size(base64.b64decode(uri.split(",", 1)[1]))[0] > 100


def test_thinking_needs_reasoning():
    assert smoke.grade("thinking", exchanges("thinking", [answer("42", reasoning="17+25=42")]))["status"] == "passed"
    result = smoke.grade("thinking", exchanges("thinking", [answer("42")]))
    assert result["status"] == "failed" and "no reasoning" in result["reason"]
    assert smoke.grade("thinking", exchanges("thinking", [answer("42")]),
                       misses("e2b", profile="dgx_spark"))["status"] == "expected_miss"
    body = smoke.build_requests("thinking", "m")[0][1]
    assert body["chat_template_kwargs"] == {"enable_thinking": True}


def test_tool_call():
    call = [{"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]
    assert smoke.grade("tools", exchanges("tools", [answer("", tool_calls=call)]))["status"] == "passed"
    refused = oc.Response(status=400, text='{"error":{"message":"\\"auto\\" tool choice requires '
                                           '--enable-auto-tool-choice and --tool-call-parser to be set"}}')
    result = smoke.grade("tools", exchanges("tools", [refused]))
    assert result["status"] == "failed" and "HTTP 400" in result["reason"] and "enable-auto-tool-choice" in \
        result["reason"]
    assert "get_weather" in result["details"][0]["request"]


def test_no_tool_call_is_a_miss_a_model_can_declare():
    """A random-weight stand-in answers without calling the tool (the GPU run's tiny Gemma 4, tests/fixtures/h200)."""
    no_call = exchanges("tools", [answer("random words")])
    result = smoke.grade("tools", no_call)
    assert result["status"] == "failed" and result["miss"] == ["no_tool_call"]
    assert smoke.grade("tools", no_call, {"tools": ["no_tool_call"]})["status"] == "expected_miss"
    # an HTTP failure is no such miss, declared or not
    refused = exchanges("tools", [oc.Response(status=400, text='{"error": "no"}')])
    assert smoke.grade("tools", refused, {"tools": ["no_tool_call"]})["status"] == "failed"


def test_unreachable_server_fails_with_reason():
    result = smoke.grade("chat", exchanges("chat", [oc.Response(error="Connection refused", refused=True)]))
    assert result["status"] == "failed" and "no HTTP response" in result["reason"]


def test_redacted_request_shortens_data_uris():
    body = smoke.build_requests("vision", "m")[0][1]
    assert "chars)" in smoke.redact_request(body) and len(smoke.redact_request(body)) < 1000


def test_audio_wav_is_valid():
    wav = smoke.tone_wav(0.1)
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE" and len(wav) == 44 + 2 * 1600


def test_checks_for_plan():
    tiny = {"model": {"stand_in": True, "vision": False}, "argv": ["sparkfleet/tiny-random-llama"]}
    assert smoke.checks_for_plan(tiny) == ["chat"]
    gemma = {"model": {"vision": True, "audio": True, "short": "e4b"}, "profile": "rtx_pro_6000",
             "argv": ["x", "--reasoning-parser", "gemma4", "--enable-auto-tool-choice", "--tool-call-parser", "gemma4",
                      "--limit-mm-per-prompt", '{"image": 4, "audio": 1}']}
    assert smoke.checks_for_plan(gemma) == ["chat", "thinking", "tools", "vision", "audio", "accuracy"]
    text_only = {"model": {"vision": True}, "argv": ["x", "--language-model-only"]}
    assert "vision" not in smoke.checks_for_plan(text_only)
    gemma["model"]["smoke_expected_misses"] = CATALOG["models"]["e4b"]["smoke_expected_misses"]
    assert smoke.misses_for_plan(gemma) == {"accuracy": ["reverse_necessary"], "vision": ["reads_llm"],
                                            "thinking": ["no_reasoning"]}
    # An explicit table wins over the plan's model entry.
    assert smoke.misses_for_plan(gemma, {"vision": ["reads_llm"]}) == {"vision": ["reads_llm"]}
    assert smoke.misses_for_plan({"model": {"short": "12b", "smoke_expected_misses": {"vision": []}}}) == {}


def test_no_builtin_table_is_left():
    """The misses live in the catalog only: without a table nothing is an expected miss."""
    assert not hasattr(smoke, "KNOWN_MISSES")
    assert smoke.misses_for_plan({"model": {"short": "e4b"}}) == {}
    result = smoke.grade("vision", exchanges("vision", [answer("LLM")]), smoke.misses_for_plan({"model": {"short": "e4b"}}))
    assert result["status"] == "failed"


def test_catalog_misses_by_model_and_condition():
    assert misses("26b-a4b") == {} and misses("31b") == {}
    rtx = {"profile": "rtx_pro_6000"}
    assert misses("12b", **rtx) == {"accuracy": ["reverse_necessary"], "vision": ["reads_llm"]}
    # The 12b reads the image right with DFlash on (the notes): then "LLM" is a real failure.
    assert misses("12b", drafter="dflash", **rtx) == {"accuracy": ["reverse_necessary"]}
    reads_llm = exchanges("vision", [answer("LLM")])
    assert smoke.grade("vision", reads_llm, misses("12b", drafter="dflash", **rtx))["status"] == "failed"
    assert smoke.grade("vision", reads_llm, misses("12b", drafter="mtp", **rtx))["status"] == "expected_miss"
    # On the DGX Spark "chat, auto tool calls, vision and the accuracy check pass on every model" (the notes):
    # the RTX cards' accuracy and vision misses are real failures there.
    for model in ("12b", "e4b", "e2b"):
        spark = misses(model, profile="dgx_spark")
        assert "accuracy" not in spark and "vision" not in spark, (model, spark)
        assert misses(model, profile="rtx_5090")["accuracy"] == ["reverse_necessary"]
    assert smoke.grade("vision", reads_llm, misses("e4b", profile="dgx_spark"))["status"] == "failed"
    # The E4B returns no reasoning everywhere; the E2B only in the DGX Spark notes.
    assert misses("e4b", profile="rtx_5090")["thinking"] == ["no_reasoning"]
    assert misses("e2b", profile="dgx_spark", node_count=2)["thinking"] == ["no_reasoning"]
    assert "thinking" not in misses("e2b", profile="rtx_5090")
    no_reasoning = exchanges("thinking", [answer("42")])
    assert smoke.grade("thinking", no_reasoning, misses("e2b", profile="rtx_5090"))["status"] == "failed"
    assert smoke.grade("thinking", no_reasoning, misses("e2b", profile="dgx_spark"))["status"] == "expected_miss"


# How each miss id the catalog may name is produced by a wrong answer.
MISS_ANSWERS = {
    ("vision", "reads_llm"): [answer("LLM")],
    ("thinking", "no_reasoning"): [answer("42")],
}
MISS_ANSWERS.update({("accuracy", qid): accuracy_answers({qid}) for qid, _question, _accepted in smoke.ACCURACY_SET})
CATALOG_MISSES = [(short, check, entry["miss"]) for short, model in CATALOG["models"].items()
                  for check, entries in (model.get("smoke_expected_misses") or {}).items() for entry in entries]


def test_the_catalog_records_the_notes_misses():
    assert sorted(CATALOG_MISSES) == sorted([
        ("12b", "accuracy", "reverse_necessary"), ("12b", "vision", "reads_llm"),
        ("e4b", "accuracy", "reverse_necessary"), ("e4b", "vision", "reads_llm"), ("e4b", "thinking", "no_reasoning"),
        ("e2b", "accuracy", "reverse_necessary"), ("e2b", "vision", "reads_llm"), ("e2b", "thinking", "no_reasoning")])


STAND_INS = ("tiny-31b", "tiny-26b-a4b", "tiny-e2b")


@pytest.mark.parametrize("short", STAND_INS)
def test_a_gemma4_stand_in_constrains_its_thinking_and_tools_answers(short):
    """Random weights never think or call a tool: a stand-in's thinking and tools requests ask for one known Gemma 4
    output (structured_outputs choice), so the grade is of what the server's gemma4 parsers make of it."""
    plan = planner.plan(CATALOG, keyless({"profile": "cpu", "model": short}))  # the planner's own plan: argv decides the checks
    assert smoke.checks_for_plan(plan) == ["chat", "thinking", "tools"]
    constrained = smoke.constrained_outputs_for_plan(plan)
    assert constrained == CATALOG["models"][short]["smoke_constrained_outputs"]
    assert constrained["tools"].startswith("<|tool_call>call:get_weather{") and "<channel|>" in constrained["thinking"]
    assert not (plan["model"].get("smoke_expected_misses") or {}), "a constrained stand-in needs no known miss"
    (_label, thinking), = smoke.build_requests("thinking", "m", 64, constrained)
    assert thinking["structured_outputs"] == {"choice": [constrained["thinking"]]}
    # With thinking on, vLLM applies the constraint only after the reasoning ends: the request turns it off.
    assert thinking["chat_template_kwargs"] == {"enable_thinking": False}
    (_label, tools), = smoke.build_requests("tools", "m", 64, constrained)
    assert tools["structured_outputs"] == {"choice": [constrained["tools"]]} and tools["tool_choice"] == "auto"
    # The chat check is never constrained.
    assert "structured_outputs" not in smoke.build_requests("chat", "m", 64, constrained)[0][1]


def test_a_real_model_is_never_constrained():
    plan = planner.plan(CATALOG, keyless({"profile": "rtx_pro_6000", "model": "26b-a4b"}))
    assert smoke.checks_for_plan(plan)[:3] == ["chat", "thinking", "tools"] and smoke.constrained_outputs_for_plan(plan) == {}
    (_label, thinking), = smoke.build_requests("thinking", "m", 64, smoke.constrained_outputs_for_plan(plan))
    assert thinking["chat_template_kwargs"] == {"enable_thinking": True} and "structured_outputs" not in thinking


def test_a_constrained_check_still_grades_the_parsers_output():
    """The constraint fixes the model's text, not the grade: a parser that leaves the call in the content (a server
    without --tool-call-parser gemma4) or the thinking in the answer fails, as on a real model."""
    parsed_call = answer(tool_calls=[{"function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}])
    assert smoke.grade("tools", exchanges("tools", [parsed_call]))["status"] == "passed"
    unparsed = answer('<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>')
    assert smoke.grade("tools", exchanges("tools", [unparsed]))["status"] == "failed"
    assert smoke.grade("thinking", exchanges("thinking", [answer("42", reasoning="17 + 25 is 42.")]))["status"] == "passed"
    assert smoke.grade("thinking", exchanges("thinking", [answer("<|channel>thought\n17 + 25 is 42.<channel|>42")]))[
        "status"] == "failed"


@pytest.mark.parametrize("short,check,miss", CATALOG_MISSES, ids=["%s-%s-%s" % m for m in CATALOG_MISSES])
def test_every_catalog_miss_is_one_the_grader_produces(short, check, miss):
    assert (check, miss) in MISS_ANSWERS, "the catalog names a miss smoke.grade never reports: %s/%s" % (check, miss)
    result = smoke.grade(check, exchanges(check, MISS_ANSWERS[(check, miss)]), {check: [miss]})
    assert result["miss"] == [miss] and result["status"] == "expected_miss"
    assert smoke.grade(check, exchanges(check, MISS_ANSWERS[(check, miss)]), {})["status"] == "failed"


def test_resolve_misses_forms_and_errors():
    table = {"vision": ["reads_llm"], "thinking": [{"miss": "no_reasoning", "when": {"profiles": ["dgx_spark"]},
                                                    "unless": {"min_nodes": 4}}]}
    assert smoke.resolve_misses(table, {"profile": "dgx_spark", "node_count": 2}) == {
        "vision": ["reads_llm"], "thinking": ["no_reasoning"]}
    assert smoke.resolve_misses(table, {"profile": "dgx_spark", "node_count": 4}) == {"vision": ["reads_llm"]}
    # A condition on something the context does not say does not hold.
    assert smoke.resolve_misses(table, {}) == {"vision": ["reads_llm"]}
    with pytest.raises(ValueError):
        smoke.resolve_misses({"speling": ["x"]})
    # An unknown condition is a ValueError, which the smoke module reports as a malformed expected_misses.
    with pytest.raises(catalog_conditions.ConditionError, match="unknown condition gpus"):
        smoke.resolve_misses({"vision": [{"miss": "reads_llm", "when": {"gpus": [1]}}]}, {})


# --- auth: the key the plan promises is enforced ------------------------------------------------------------


def refused():
    return oc.Response(status=401, body={"error": "Unauthorized"}, text='{"error": "Unauthorized"}')


def test_auth_joins_whenever_a_key_is_given_and_needs_one():
    assert smoke.select_checks(["chat"], api_key=True) == ["auth", "chat"]
    assert smoke.select_checks(["chat"]) == ["chat"]
    with pytest.raises(ValueError, match="auth check needs the API key"):
        smoke.select_checks(["auth"])


def test_auth_sends_no_key_a_wrong_key_then_the_key():
    labels = [label for label, _body in smoke.build_requests("auth", "m")]
    assert [smoke.key_for(label, "the-key") for label in labels] == [None, smoke.WRONG_KEY, "the-key"]
    assert smoke.key_for("chat", "the-key") == "the-key"
    assert smoke.key_for("wrong_key", smoke.WRONG_KEY) != smoke.WRONG_KEY


def test_auth_passes_when_the_server_refuses_without_the_key():
    result = smoke.grade("auth", exchanges("auth", [refused(), refused(), answer("hi")]))
    assert result["status"] == "passed", result


@pytest.mark.parametrize("open_at", [0, 1])
def test_auth_fails_on_an_open_server(open_at):
    responses = [refused(), refused(), answer("hi")]
    responses[open_at] = answer("hi")
    result = smoke.grade("auth", exchanges("auth", responses))
    assert result["status"] == "failed"
    assert "instead of 401: the server does not enforce the API key" in result["reason"]


def test_auth_fails_when_the_key_itself_is_refused():
    result = smoke.grade("auth", exchanges("auth", [refused(), refused(), refused()]))
    assert result["status"] == "failed" and "with_key: HTTP 401" in result["reason"], result
