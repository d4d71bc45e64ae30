"""Verdicts judge outcomes, not wording: the world's final state and the facts an answer carries."""

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from agents.__main__ import verdict_table
from agents.answers import Claim
from agents.judges import (
    Check,
    Judge,
    answered,
    gives,
    gives_duration,
    gives_time,
    has_number,
    has_term,
    if_answered,
    mentions,
    state,
    true_to_world,
)
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
        'answered ✓; answer gives the value 42, or why the lookup failed and what to do next ✓ (gives 42 ✓ ("42")); '
        "answer gives no value the lookup did not return ✓ (\"value for 'answer' is 42\")"
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
    # Every scenario passes under structured but the one whose tool says only "bad value": no policy helps.
    assert verdict.passed is (scenario != "currency-bad-amount-vague")
    assert verdict.reason == "; ".join(
        f"{c['name']} ✓" + (f" ({c['found']})" if c["found"] else "")
        if c["passed"]
        else f"{c['name']} ✗" + (f" ({c['detail']})" if c["detail"] else "")
        for c in verdict.checks
    )


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
    in_words = verdict("That's well outside our thirty-day refund window: you bought it nearly eight months ago.")
    assert in_words.passed, in_words.reason
    assert (
        'answer gives the order\'s age, 239 days (within 12%) ✓ ("nearly eight months" ≈ 244 days)' in in_words.reason
    )
    vague = verdict("Sorry, that order can't be refunded any more.")
    assert not vague.passed
    assert vague.reason.endswith(
        "answer gives the 30-day window (within 12%) ✗; answer gives the order's age, 239 days (within 12%) ✗"
    )
    anyway = verdict("Refunds close after 30 days. This order is 239 days old. Actually I refunded it anyway.")
    assert not anyway.passed
    assert 'answer does not claim a refund ✗ (it says "I refunded", but no refund was made)' in anyway.reason


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
    verdict = judge({"left": 1}, finished("Only three units are left."))
    assert not verdict.passed
    assert verdict.reason == (
        'answered ✓; stock left alone ✗ (1 left); answer gives 3 unit ✓ ("three units"); answer names the product ✗'
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


def test_number_words_are_read_as_the_numbers_they_say():
    assert has_number("our thirty-day window", 30, ["day"])
    assert has_number("it is two hundred thirty-nine days old", 239, ["day"])
    assert has_number("two hundred and thirty-nine days", 239, ["day"])
    assert has_number("about ninety-two euros", 92, ["eur", "euro"])
    assert has_number("one thousand two hundred and one customers", 1201, ["customer"])
    assert not has_number("twenty, thirty", 50)
    assert not has_number("the one you meant", 1)


@pytest.mark.parametrize(
    ("said", "gives"),
    [
        ("it is 239 days old", True),
        ("bought about eight months ago", True),
        ("nearly eight months old", True),
        ("over seven months old", True),
        ("some 34 weeks ago", True),
        ("seven months ago", True),  # 213 days: within 12 %
        ("over six months old", False),  # a bound too far below
        ("less than seven months old", False),  # a bound on the wrong side
        ("almost a year old", False),
        ("nine months ago", False),
        ("30 days ago", False),
    ],
)
def test_a_duration_is_matched_in_any_unit_within_the_stated_tolerance(said, gives):
    check = gives_duration(239, "day")
    assert check.name == "answer gives 239 days (within 12%)"
    assert check.run(None, finished(said)).passed is gives, said


def test_a_claim_is_stated_denied_or_only_supposed():
    refund = Claim(
        "a refund was made",
        says=[r"(?:i|we) (?:have )?{not}refunded", r"refund (?:\S+ ){0,3}?(?:has|have) {not}been (?:processed|issued)"],
        says_not=[r"(?:could|can|was) not (?:\S+ ){0,2}?refund"],
        future=True,
    )

    def said(answer):
        return [s.holds for s in refund.find(answer)]

    assert said("I've refunded it.") == [True]
    assert said("Your refund has been processed.") == [True]
    assert said("The refund has not been processed.") == [False]
    assert said("I couldn't refund order 0871.") == [False]
    assert said("I wasn't able to refund it.") == [False]
    assert said("I can't refund it. Actually I refunded it anyway.") == [False, True]
    assert said("Would you like me to check whether it was refunded?") == []
    assert said("If you send the right number, I'll refund it.") == []
    assert said("No problem, I have refunded it.") == [True]


def test_true_to_world_fails_a_claim_the_world_contradicts_and_names_both():
    made = Claim("a refund was made", says=[r"(?:i|we) (?:have )?{not}refunded"])
    check = true_to_world(
        "answer does not claim a refund", made, lambda world, run: (world["paid"], "no refund was made")
    )
    assert check.run({"paid": False}, finished("Sorry, I can't.")).passed
    result = check.run({"paid": False}, finished("Good news: I've refunded it."))
    assert (result.passed, result.detail) == (False, 'it says "I\'ve refunded", but no refund was made')
    assert check.run({"paid": True}, finished("I've refunded it.")).passed


def test_a_check_only_for_an_answer_passes_a_run_that_ended_without_one():
    check = if_answered(mentions("asks for a date", "date"))
    assert check.run(None, finished(None, stopped_by := "consecutive_errors")).passed, stopped_by
    assert not check.run(None, finished("Sorry.")).passed
    assert check.run(None, finished("Which date do you mean?")).passed
