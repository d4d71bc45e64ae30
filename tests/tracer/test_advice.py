"""Advice per tool from the outcomes observed: the setting the evidence supports, and how sure it is."""

from __future__ import annotations

from tracer.advice import LIKELY, SURE, TOO_FEW, refusal_advice, tool_advice, transient_advice


def counts(**given):
    base = dict.fromkeys(
        ["transient_first", "second_tries", "second_ok", "third_tries", "third_ok", "refusals_retried", "empty"], 0
    )
    return base | given


def test_a_second_attempt_that_mostly_works_and_a_third_that_almost_never_does_is_max_attempts_2():
    advice = transient_advice(
        "lookup_order", counts(transient_first=2000, second_tries=2000, second_ok=1820, third_tries=180, third_ok=3)
    )
    assert advice.setting == {"max_attempts": 2} and advice.sureness == SURE
    assert advice.seen.startswith("lookup_order: 2000 transient failures; a second attempt succeeded in 91 %")
    assert "a third in 2 %" in advice.seen and "95 % interval" in advice.seen


def test_an_interval_that_reaches_across_the_line_is_only_likely():
    advice = transient_advice(
        "lookup_order", counts(transient_first=212, second_tries=212, second_ok=187, third_tries=25, third_ok=0)
    )
    assert advice.setting == {"max_attempts": 2} and advice.sureness == LIKELY


def test_a_third_attempt_that_still_pays_is_max_attempts_3():
    advice = transient_advice(
        "charge", counts(transient_first=400, second_tries=400, second_ok=200, third_tries=200, third_ok=100)
    )
    assert advice.setting == {"max_attempts": 3} and advice.sureness == SURE


def test_retries_that_never_help_say_so():
    advice = transient_advice("flaky", counts(transient_first=300, second_tries=300, second_ok=3))
    assert advice.setting == {"max_attempts": 1} and advice.sureness == SURE


def test_a_handful_of_tries_is_too_few_to_say_anything_sure():
    advice = transient_advice("lookup", counts(transient_first=3, second_tries=3, second_ok=3))
    assert advice.sureness == TOO_FEW and "3 tries" in advice.seen


def test_transient_failures_never_retried_point_to_retrying_in_code_without_a_rate_made_up():
    advice = transient_advice("lookup", counts(transient_first=40))
    assert advice.setting == {"retry_on": "transient", "max_attempts": 2} and advice.sureness == TOO_FEW
    assert "none tried again" in advice.seen and "%" not in advice.seen


def test_refusals_the_harness_retried_are_retry_on_transient_with_how_often_and_in_how_many_runs():
    advice = refusal_advice(
        "process_refund",
        counts(refusals_retried=112, failed_business=112),
        {"findings": 112, "runs": 112, "wasted_calls": 224},
    )
    assert advice.setting == {"retry_on": "transient"} and advice.sureness == SURE
    assert advice.seen == (
        "process_refund: refusals (business 112) tried 3.0× on average in 112 runs; the harness retried 112 of them"
    )


def test_no_failures_give_no_advice():
    assert tool_advice("calm", counts(), {}) == []
