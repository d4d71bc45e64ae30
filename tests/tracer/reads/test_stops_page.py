"""Reads of the stop queue: failing calls grouped, the queue and its counts, each stop's case."""

import pytest

from tests.factories import (
    RunFactory,
    StopReviewFactory,
    failed_attempt,
    guard_stop,
    refund_too_old_structured,
    run_with_steps,
    step_row,
    tool_step,
)
from tracer.models import Run
from tracer.reads import stops_page

pytestmark = pytest.mark.django_db


def test_failing_calls_group_repeats_and_keep_each_error_text_once():
    run = run_with_steps(1)
    bad_date = [failed_attempt(n, category="validation", message="bad date") for n in (1, 2)]
    steps = [
        step_row(tool_step(i, bad_date, tool="free_slots", input={"date": "next Friday"}), run=run) for i in (1, 2, 3)
    ]
    [call] = stops_page.failing_calls(steps)
    assert call.tool_name == "free_slots" and call.times == 3
    assert call.errors == [("validation · not retryable", "bad date", 6)]
    assert call.model_saw == "Error"


def test_stop_queue_and_counts_follow_reviews():
    unreviewed = guard_stop()
    reviewed = guard_stop()
    StopReviewFactory(run=reviewed)
    RunFactory(stop_reason=Run.StopReason.MAX_STEPS)
    refund_too_old_structured()
    assert stops_page.stop_counts() == {"all": 3, "reviewed": 1, "unreviewed": 2}
    assert reviewed.pk not in {r.pk for r in stops_page.stop_queue(state="unreviewed")}
    assert [r.pk for r in stops_page.stop_queue(state="reviewed")] == [reviewed.pk]
    assert unreviewed.pk in {r.pk for r in stops_page.stop_queue(state="all")}


def test_stop_cases_pair_each_stop_with_another_policys_run():
    stopped = guard_stop(scenario="stuck-model")
    other = RunFactory(scenario="stuck-model", policy_name="starter")
    [case] = stops_page.stop_cases(runs=[stopped])
    assert case.other == other
    assert [s.index for s in case.errors] == [1, 2, 3]
    assert case.review is None
