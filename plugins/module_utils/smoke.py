# -*- coding: utf-8 -*-
# Copyright: (c) 2026, sparkfleet.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Smoke checks for a served model: requests to send and how to grade the answers.

Each check is a pair of pure functions, `<check>_requests()` and a grader; the
module sends the requests and hands the answers back. A grade is one of
`passed`, `failed` or `expected_miss`: the last one for the misses the notes
record as the model's own, which are reported, not failed. Which misses a
model has is data, not code: the catalog's `models.<short>.smoke_expected_misses`
(data/catalog.yml), which the plan carries and the module receives as
`expected_misses`; `resolve_misses()` applies its `when` / `unless` conditions
to the plan.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import math
import re
import struct

from ansible_collections.sparkfleet.vllm.plugins.module_utils import png
from ansible_collections.sparkfleet.vllm.plugins.module_utils.catalog_conditions import conditions_hold

# The check names; the catalog's smoke_expected_misses may name these only (tests/harness/catalog_validate.py).
CHECKS = ("auth", "chat", "thinking", "tools", "vision", "audio", "accuracy")
DEFAULT_CHECKS = ("chat", "thinking", "tools", "vision", "accuracy")
VISION_WORD = "vLLM"
# The auth check's three requests: (label, which key it sends). The key must refuse the first two with 401.
AUTH_EXCHANGES = (("without_key", None), ("wrong_key", "wrong"), ("with_key", "key"))
WRONG_KEY = "sparkfleet-smoke-not-the-key"

# Twenty short questions with one unambiguous answer each: (id, question, accepted answers).
# Numbers are matched as whole words; text answers as whole words, case-insensitive.
ACCURACY_SET = (
    ("capital_france", "What is the capital of France?", ("paris",)),
    ("days_in_week", "How many days are in a week?", ("7", "seven")),
    ("twelve_squared", "What is 12 multiplied by 12?", ("144",)),
    ("gold_symbol", "What is the chemical symbol for gold?", ("au",)),
    ("red_planet", "Which planet is known as the Red Planet?", ("mars",)),
    ("reverse_necessary", "Spell the word \"necessary\" backwards, letter by letter, as one word.", ("yrassecen",)),
    ("hexagon_sides", "How many sides does a hexagon have?", ("6", "six")),
    ("water_freezes", "At what temperature in degrees Celsius does water freeze?", ("0", "zero")),
    ("romeo_author", "Who wrote the play Romeo and Juliet?", ("shakespeare",)),
    ("largest_ocean", "What is the largest ocean on Earth?", ("pacific",)),
    ("sqrt_81", "What is the square root of 81?", ("9", "nine")),
    ("kenya_continent", "On which continent is Kenya?", ("africa",)),
    ("photosynthesis_gas", "Which gas do plants take in from the air for photosynthesis?",
     ("carbon dioxide", "co2")),
    ("minutes_in_hour", "How many minutes are in one hour?", ("60", "sixty")),
    ("opposite_hot", "What is the opposite of the word hot?", ("cold",)),
    ("fifteen_minus_seven", "What is 15 minus 7?", ("8", "eight")),
    ("brazil_language", "Which language is mainly spoken in Brazil?", ("portuguese",)),
    ("blue_plus_yellow", "What colour do you get by mixing blue and yellow paint?", ("green",)),
    ("spider_legs", "How many legs does a spider have?", ("8", "eight")),
    ("water_boils", "At what temperature in degrees Celsius does water boil at sea level?", ("100",
                                                                                             "one hundred")),
)

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}},
                       "required": ["city"]},
    },
}


def select_checks(checks=None, audio=False, api_key=False):
    """Validated, ordered list of check names; audio joins only when asked for, auth whenever a key is given."""
    chosen = list(checks) if checks else list(DEFAULT_CHECKS)
    unknown = [c for c in chosen if c not in CHECKS]
    if unknown:
        raise ValueError("unknown smoke checks %s; choose from %s" % (unknown, ", ".join(CHECKS)))
    if audio and "audio" not in chosen:
        chosen.append("audio")
    if api_key and "auth" not in chosen:
        chosen.append("auth")
    if "auth" in chosen and not api_key:
        raise ValueError("the auth check needs the API key (api_key): it proves the server refuses requests without it")
    return [c for c in CHECKS if c in chosen]


def key_for(label, api_key):
    """The key one exchange sends: the API key for every check but auth, whose labels pick none, a wrong one or it."""
    which = dict(AUTH_EXCHANGES).get(label, "key")
    if which is None:
        return None
    if which == "wrong":
        return WRONG_KEY if api_key != WRONG_KEY else WRONG_KEY + "-2"
    return api_key


def plan_context(plan):
    """What a miss's `when` / `unless` conditions test, taken from a plan (None where the plan is silent)."""
    plan = plan or {}
    return {"profile": plan.get("profile"), "drafter": plan.get("drafter"),
            "model": (plan.get("model") or {}).get("short"), "node_count": plan.get("node_count"),
            "expert_parallel": (plan.get("settings") or {}).get("expert_parallel")}


def resolve_misses(table, context=None):
    """{check: [miss ids]} that apply in `context`, from the catalog's smoke_expected_misses form.

    `table` maps a check to a list whose entries are a miss id, or a dict with `miss` and optional `when`
    and `unless` conditions (the catalog's condition keys). An entry applies when its `when` holds and its
    `unless` does not; a condition on a value the context lacks does not hold.
    """
    resolved = {}
    for check, entries in (table or {}).items():
        if check not in CHECKS:
            raise ValueError("expected misses name unknown smoke check %s; choose from %s" % (check, ", ".join(CHECKS)))
        misses = []
        for entry in entries or []:
            if not isinstance(entry, dict):
                misses.append(str(entry))
                continue
            if entry.get("when") and not conditions_hold(entry["when"], context):
                continue
            if entry.get("unless") and conditions_hold(entry["unless"], context):
                continue
            misses.append(str(entry["miss"]))
        if misses:
            resolved[check] = misses
    return resolved


def _chat(model, messages, max_tokens, **extra):
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
    body.update(extra)
    return body


def vision_image_uri():
    return "data:image/png;base64," + base64.b64encode(png.text_image(VISION_WORD)).decode("ascii")


def tone_wav(seconds=1.0, rate=16000, freq=440.0):
    """A mono 16-bit WAV of a sine tone (the audio check's input, generated locally)."""
    frames = int(seconds * rate)
    samples = b"".join(struct.pack("<h", int(12000 * math.sin(2 * math.pi * freq * i / rate))) for i in range(frames))
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(samples), b"WAVE", b"fmt ", 16, 1, 1, rate,
                         rate * 2, 2, 16, b"data", len(samples))
    return header + samples


def build_requests(check, model, max_tokens=256, constrained=None):
    """[(label, chat request body)] for one check.

    `constrained` ({check: text}, a stand-in's catalog ``smoke_constrained_outputs``) makes the thinking and
    tools requests ask for exactly that output (``structured_outputs`` ``choice``): random weights never think or
    call a tool, so the server's parsers get a known Gemma 4 output and the grade is of what they make of it.
    Thinking is then asked with ``enable_thinking`` off, as vLLM applies the constraint only after reasoning ends.
    """
    forced = (constrained or {}).get(check)
    extra = {"structured_outputs": {"choice": [forced]}} if forced else {}
    if check == "auth":
        return [(label, _chat(model, [{"role": "user", "content": "Say hi."}], 8)) for label, _key in AUTH_EXCHANGES]
    if check == "chat":
        return [("chat", _chat(model, [{"role": "user", "content": "Say hello in one short sentence."}], 64))]
    if check == "thinking":
        return [("thinking", _chat(model, [{"role": "user", "content": "What is 17 + 25? Think it through."}],
                                   max_tokens, chat_template_kwargs={"enable_thinking": not forced}, **extra))]
    if check == "tools":
        return [("tools", _chat(model, [{"role": "user", "content": "What is the weather in Paris right now? "
                                         "Use the tool."}], max_tokens, tools=[WEATHER_TOOL], tool_choice="auto",
                                **extra))]
    if check == "vision":
        content = [{"type": "image_url", "image_url": {"url": vision_image_uri()}},  # image before text
                   {"type": "text", "text": "What word is written in this image? Answer with the word only."}]
        return [("vision", _chat(model, [{"role": "user", "content": content}], 32))]
    if check == "audio":
        data = base64.b64encode(tone_wav()).decode("ascii")
        content = [{"type": "input_audio", "input_audio": {"data": data, "format": "wav"}},
                   {"type": "text", "text": "Describe this audio clip in one short sentence."}]
        return [("audio", _chat(model, [{"role": "user", "content": content}], 64))]
    if check == "accuracy":
        return [(qid, _chat(model, [{"role": "user", "content": "Answer with only the answer, no explanation. "
                                     + question}], 64)) for qid, question, _accepted in ACCURACY_SET]
    raise ValueError("unknown check %s" % check)


def redact_request(body):
    """The request as shown in a report: data: URIs shortened."""
    text = repr(body)
    return re.sub(r"data:[a-z]+/[a-z0-9.+-]+;base64,[A-Za-z0-9+/=]{40,}",
                  lambda m: m.group(0)[:40] + "...(%d chars)" % len(m.group(0)), text)


def message_of(response_body):
    try:
        return response_body["choices"][0]["message"] or {}
    except (KeyError, IndexError, TypeError):
        return {}


def _answer_text(response_body):
    return (message_of(response_body).get("content") or "").strip()


def normalise(text):
    return re.sub(r"[^a-z0-9 ]+", " ", (text or "").lower())


def answer_matches(answer, accepted):
    words = " %s " % " ".join(normalise(answer).split())
    return any(" %s " % " ".join(normalise(a).split()) in words for a in accepted)


def _http_failure(response):
    if response.ok:
        return None
    return response.summary(1000)


def grade(check, exchanges, expected_misses=None):
    """Grade one check from [(label, request body, Response)].

    Returns {'name', 'status', 'reason', 'miss', 'details'}; `details` carries
    the request and response of every failed exchange.
    """
    misses_allowed = set((expected_misses or {}).get(check, []))
    result = {"name": check, "status": "passed", "reason": "", "miss": [], "details": []}

    def fail(reason, label, body, response, miss=None):
        result["details"].append({"label": label, "request": redact_request(body),
                                  "response": response.text[:2000] if response.status is not None
                                  else response.summary(500)})
        return reason, miss

    reasons = []
    for label, body, response in exchanges:
        if check == "auth" and label != "with_key":
            if response.status != 401:
                reasons.append(fail("auth: a request %s got %s instead of 401: the server does not enforce the API key "
                                    "the plan promises (is VLLM_API_KEY in its secret env file?)" % (
                                        label.replace("_", " "), response.summary(200)), label, body, response))
            continue
        failure = _http_failure(response)
        if failure:
            reasons.append(fail("%s: %s" % (label, failure), label, body, response))
            continue
        message = message_of(response.body)
        answer = _answer_text(response.body)
        if check == "auth":
            pass  # with the key, any 2xx answer shows the key is accepted
        elif check == "chat":
            if not answer:
                reasons.append(fail("chat: empty answer", label, body, response))
        elif check == "thinking":
            reasoning = message.get("reasoning") or message.get("reasoning_content")
            if not reasoning:
                reasons.append(fail("thinking: no reasoning returned with enable_thinking on (message.reasoning "
                                    "is empty; the server needs --reasoning-parser and a template that thinks)",
                                    label, body, response, "no_reasoning"))
        elif check == "tools":
            calls = message.get("tool_calls") or []
            names = [((c or {}).get("function") or {}).get("name") for c in calls]
            if "get_weather" not in names:
                reasons.append(fail("tools: no get_weather tool call (tool_calls=%s, content=%r)" % (
                    names, answer[:200]), label, body, response, "no_tool_call"))
            else:
                args = ((calls[names.index("get_weather")] or {}).get("function") or {}).get("arguments") or ""
                if "paris" not in args.lower():
                    reasons.append(fail("tools: get_weather called without city Paris (%s)" % args[:200],
                                        label, body, response))
        elif check == "vision":
            if VISION_WORD.lower() not in normalise(answer).replace(" ", ""):
                miss = "reads_llm" if "llm" in normalise(answer) else None
                reasons.append(fail("vision: expected %r, got %r" % (VISION_WORD, answer[:200]), label, body,
                                    response, miss))
        elif check == "audio":
            if not answer:
                reasons.append(fail("audio: empty answer", label, body, response))
        elif check == "accuracy":
            accepted = {qid: ok for qid, _question, ok in ACCURACY_SET}[label]
            if not answer_matches(answer, accepted):
                reasons.append(fail("%s: expected %s, got %r" % (label, "/".join(accepted), answer[:120]),
                                    label, body, response, label))
    if check == "accuracy":
        total = len(exchanges)
        result["score"] = "%d/%d" % (total - len(reasons), total)
    if not reasons:
        return result
    result["reason"] = "; ".join(text for text, _miss in reasons)
    result["miss"] = [miss for _text, miss in reasons if miss]
    if all(miss and miss in misses_allowed for _text, miss in reasons):
        result["status"] = "expected_miss"
        result["reason"] = "known miss of this model (notes): " + result["reason"]
    else:
        result["status"] = "failed"
    return result


def summary(results):
    counts = {"passed": 0, "failed": 0, "expected_miss": 0}
    for item in results:
        counts[item["status"]] = counts.get(item["status"], 0) + 1
    parts = []
    for item in results:
        score = " %s" % item["score"] if "score" in item else ""
        constrained = " (output constrained)" if item.get("constrained_output") else ""
        parts.append("%s %s%s%s" % (item["name"], item["status"], score, constrained))
    line = ", ".join(parts)
    return counts, line


def checks_for_plan(plan):
    """The checks a plan's model and flags can pass: what verify runs when no checks are named.

    chat always; thinking and tools when the plan sets a reasoning parser / auto tool choice; vision when the
    model has vision and the plan keeps the encoder; audio when the plan enables it; accuracy for real models
    (a stand-in with random weights cannot answer questions).
    """
    plan = plan or {}
    model = plan.get("model") or {}
    argv = [str(a) for a in plan.get("argv") or []]
    chosen = ["chat"]
    if "--reasoning-parser" in argv or any(a.startswith("--reasoning-parser=") for a in argv):
        chosen.append("thinking")
    if "--enable-auto-tool-choice" in argv:
        chosen.append("tools")
    if model.get("vision") and "--language-model-only" not in argv:
        chosen.append("vision")
    if model.get("audio") and any('"audio"' in a for a in argv):
        chosen.append("audio")
    if not model.get("stand_in"):
        chosen.append("accuracy")
    return chosen


def constrained_outputs_for_plan(plan):
    """{check: output} a plan's model asks its thinking and tools checks to be constrained to (stand-ins only)."""
    return dict(((plan or {}).get("model") or {}).get("smoke_constrained_outputs") or {})


def misses_for_plan(plan, table=None):
    """Misses that apply to the plan: `table` (the catalog's form), else the plan's model.smoke_expected_misses."""
    if table is None:
        table = ((plan or {}).get("model") or {}).get("smoke_expected_misses") or {}
    return resolve_misses(table, plan_context(plan))
