"""The optional model judge: Claude, through the real anthropic SDK (against the fake Messages API), judges a
finished run with a rubric of its scenario's facts; its verdict sits beside the rules' one, and a failure
(an API error, an answer that is not the JSON asked for, no key) leaves it empty with the reason, never a
crash and never a fail. Never asked unless ``--judge claude``."""

from __future__ import annotations

import io
import json

import pytest

from agents.__main__ import main
from agents.run import run_scenario
from agents.scenarios import get_scenario
from tests.fake_messages_api import error, reply, text


def said(verdict: str, rationale: str) -> object:
    return reply(text(json.dumps({"verdict": verdict, "rationale": rationale})))


def test_claude_judges_with_a_rubric_of_the_scenarios_facts_and_its_verdict_sits_beside_the_rules(fake_api):
    fake_api.script(said("fail", "The answer never says a manager must approve the booking."))
    result = run_scenario("room-book-permission", "structured", judge="claude")
    assert result.end.verdict.passed  # the rules' verdict is untouched
    model = result.end.model_verdict
    assert (model.verdict, model.rationale, model.error) == (
        "fail",
        "The answer never says a manager must approve the booking.",
        "",
    )
    [body] = fake_api.bodies()  # one request: the simulated model made none
    assert body["model"] == model.model
    prompt = body["messages"][0]["content"]
    for fact in get_scenario("room-book-permission").judge_checks:  # the rules' facts, as the rubric
        assert fact in prompt
    assert "Book the meeting room for 2 October 2026 at 10:00." in prompt
    assert result.end.final_answer in prompt
    assert "book_slot(" in prompt


def test_the_model_judge_is_never_asked_by_default(fake_api):
    result = run_scenario("refund-too-old", "structured")
    assert result.end.model_verdict is None and fake_api.bodies() == []


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        (error(400), "no verdict: the API answered 400: invalid request"),
        (reply(text("I think it passed, mostly.")), "no verdict: unparseable answer: the answer holds no JSON object"),
        (
            said("maybe", "hard to say"),
            "no verdict: unparseable answer: verdict: expected 'pass' or 'fail', got 'maybe'",
        ),
        (reply(text('{"verdict": "pass"')), "no verdict: unparseable answer: the answer holds no JSON object"),
        (said("pass", ""), "no verdict: unparseable answer: rationale: the answer gives none"),
    ],
)
def test_a_model_judge_failure_leaves_its_verdict_empty_with_the_reason(fake_api, behaviour, reason):
    fake_api.script(behaviour)
    result = run_scenario("refund-too-old", "structured", judge="claude")
    assert result.end.stop_reason == "final_answer" and result.end.verdict.passed  # neither crashed nor failed
    assert result.end.model_verdict.verdict == ""
    assert result.end.model_verdict.reason.startswith(reason)


def test_without_a_key_the_model_judge_says_so(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = run_scenario("refund-too-old", "structured", judge="claude")
    assert result.end.verdict.passed
    assert result.end.model_verdict.reason == "no verdict: ANTHROPIC_API_KEY is not set"


def test_an_unknown_judge_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match="judge: expected one of rules, claude; got 'gpt'"):
        run_scenario("refund-too-old", "structured", judge="gpt")


def test_the_cli_prints_the_model_judges_verdict_labelled_and_a_disagreement(fake_api, monkeypatch):
    monkeypatch.setenv("RLT_JUDGE_MODEL", "claude-sonnet-4-6")
    fake_api.script(said("fail", "It refunded nothing but implies the refund is on its way."))
    out, err = io.StringIO(), io.StringIO()
    code = main(["run", "--scenario", "refund-too-old", "--policy", "structured", "--judge", "claude"], out, err)
    assert code == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    assert any(line.startswith("verdict: PASS") for line in lines)
    assert (
        "model judge (Claude), claude-sonnet-4-6: FAIL: It refunded nothing but implies the refund is on its way. "
        "(disagrees with the rules' PASS: the run goes to review)"
    ) in lines
    assert fake_api.bodies()[0]["model"] == "claude-sonnet-4-6"
    assert main(["run", "--scenario", "refund-too-old", "--policy", "structured", "--judge", "x"], out, err) == 2
