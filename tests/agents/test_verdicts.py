"""Verdicts judge outcomes, not wording: the world's final state and the facts an answer carries."""

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from agents.__main__ import verdict_table
from agents.judges import Check, Judge, answered, gives, gives_time, has_number, has_term, mentions, state
from agents.llm.claude import ClaudeBackend
from agents.run import run_scenario
from agents.scenarios import registry
from tests.agents.test_backends import ScriptedClaude

ROOT = Path(__file__).resolve().parents[2]


def finished(answer, stop_reason="final_answer"):
    """A run as a judge reads it: how it ended and what it answered."""
    return SimpleNamespace(end=SimpleNamespace(final_answer=answer, stop_reason=stop_reason, guard=None), steps=[])


def test_structured_with_five_attempts_recovers_the_exhausted_lookup_and_passes():
    patient = {"base": "structured", "name": "patient", "max_attempts": 5}
    result = run_scenario("lookup-flaky-exhausted", patient)
    assert result.end.final_answer == "The value for 'answer' is 42."
    assert result.end.verdict.passed, result.end.verdict.reason
    assert result.end.verdict.reason == (
        "answered ✓; answer gives the value 42, or why the lookup failed and what to do next ✓"
    )


def test_the_verdict_table_in_docs_agents_md_is_what_the_outcome_checks_give_today():
    docs = (ROOT / "docs" / "agents.md").read_text()
    found = re.search(r"<!-- verdicts:start -->\n(.*?)\n<!-- verdicts:end -->", docs, re.S)
    assert found, "docs/agents.md lost its <!-- verdicts:start --> … <!-- verdicts:end --> block"
    assert found.group(1) == verdict_table(), (
        "docs/agents.md's verdict table is out of date: paste `python -m agents verdicts` between its markers"
    )


@pytest.mark.parametrize("scenario", list(registry().scenarios))
def test_every_built_in_verdict_comes_from_named_outcome_checks(scenario):
    judge = registry().scenarios[scenario].judge
    assert isinstance(judge, Judge)
    verdict = run_scenario(scenario, "structured").end.verdict
    assert [c["name"] for c in verdict.checks] == judge.names
    assert verdict.reason == "; ".join(f"{c['name']} ✓" for c in verdict.checks)


def test_claude_is_judged_on_the_facts_it_gives_in_its_own_words():
    def refund_reply(text):
        return [
            [{"type": "tool_use", "id": "toolu_1", "name": "process_refund", "input": {"order_id": "0871"}}],
            [{"type": "text", "text": text}],
        ]

    def verdict(text):
        backend = ClaudeBackend(transport=ScriptedClaude(refund_reply(text)), environ={"ANTHROPIC_API_KEY": "sk-t"})
        return run_scenario("refund-too-old", "structured", model=backend).end.verdict

    own_words = verdict("Sorry! Our 30-day return window has closed: you bought that stand 239 days ago.")
    assert own_words.passed, own_words.reason
    vague = verdict("Sorry, that order can't be refunded any more.")
    assert not vague.passed
    assert vague.reason.endswith("answer gives 30 days ✗; answer gives 239 days ✗")


def test_numbers_are_matched_as_numbers_with_their_unit_beside_them():
    assert has_number("refunds close after 30 days", 30, ["day"])
    assert has_number("outside our 30-day window", 30, ["day"])
    assert has_number("that's about €92.00", 92, ["eur", "€"])
    assert has_number("EUR 92", 92, ["eur"])
    assert has_number("a total of 1,234 units", 1234, ["unit"])
    assert not has_number("order 0871 is 239 days old", 30, ["day"])
    assert not has_number("order 2390 was placed 5 days ago", 239)
    assert not has_number("30 minutes later, 2 days passed", 30, ["day"])


def test_terms_are_matched_case_insensitively_from_the_start_of_a_word():
    assert has_term("It needs a Manager's approval.", "manager")
    assert has_term("It needs a Manager's approval.", "approv")
    assert has_term("Order 0912 isn’t on your   account.", "your account")
    assert not has_term("our management approves", "manager")
    assert not has_term("order 07812", "0781")


def test_clock_times_are_matched_in_either_notation():
    for said in ("free at 13:00", "free from 1 pm", "free at 1pm", "free at 1 p.m."):
        assert gives_time("13:00").run(None, finished(said)).passed, said
    assert not gives_time("13:00").run(None, finished("free at 3 pm and 11:00")).passed


def test_each_check_is_named_in_the_reason_with_what_was_found_when_it_failed():
    judge = Judge(
        answered(),
        state("stock left alone", lambda world: (world["left"] == 3, f"{world['left']} left")),
        gives(3, "unit"),
        mentions("answer names the product", "LMP-002"),
    )
    verdict = judge({"left": 1}, finished("Only 3 units are left."))
    assert not verdict.passed
    assert (
        verdict.reason == "answered ✓; stock left alone ✗ (1 left); answer gives 3 unit ✓; answer names the product ✗"
    )


def test_a_check_that_raises_fails_with_the_exception_named_and_the_run_is_still_judged():
    judge = Judge(answered(), state("ledger balanced", lambda world: world.ledger.total == 0))
    verdict = judge(object(), finished("Done."))
    assert not verdict.passed
    assert verdict.reason.startswith("answered ✓; ledger balanced ✗ (the check raised AttributeError:")


def test_a_run_that_did_not_answer_fails_the_answered_check_saying_how_it_ended():
    check = answered().run(None, finished(None, stop_reason="max_steps"))
    assert (check.passed, check.detail) == (False, "it ended max_steps")


def test_a_judge_takes_only_named_checks():
    with pytest.raises(TypeError, match="a Judge takes Check objects"):
        Judge(lambda world, run: True)
    assert isinstance(answered(), Check)
