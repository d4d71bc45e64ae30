"""Reads of a run's page: the timeline's windows and live poll, other policies' runs, guard errors."""

import pytest

from tests.factories import (
    RunFactory,
    StepFactory,
    guard_stop,
    ok_attempt,
    refund_too_old_starter,
    refund_too_old_structured,
    run_with_steps,
    tool_step,
)
from tracer.models import Run
from tracer.reads import run_page

pytestmark = pytest.mark.django_db


def test_the_live_poll_gets_only_later_steps():
    run = run_with_steps(5, status=Run.Status.RUNNING, stop_reason="", verdict="")
    assert [s.index for s in run_page.step_window_new(run=run, after="3").steps] == [4, 5]
    assert [s.index for s in run_page.step_window_new(run=run, after="nonsense").steps] == [1, 2, 3, 4, 5]


def test_a_long_finished_run_shows_its_first_window_and_a_gap_for_the_rest():
    run = run_with_steps(120)
    window = run_page.step_window_first(run=run)
    assert [s.index for s in window.steps] == list(range(1, 51))
    assert window.gap_before is None and window.tail == []
    gap = window.gap_after
    assert (gap.first, gap.next_last, gap.last, gap.hidden, gap.before) == (51, 100, 120, 70, None)
    more = run_page.step_window(run=run, after=gap.after, before=gap.before)
    assert [s.index for s in more.steps] == list(range(51, 101))
    assert (more.gap_after.first, more.gap_after.last) == (101, 120)
    rest = run_page.step_window(run=run, after=100)
    assert [s.index for s in rest.steps] == list(range(101, 121)) and rest.gap_after is None


def test_a_window_asked_for_one_step_holds_it_with_gaps_on_either_side():
    run = run_with_steps(500)
    window = run_page.step_window(run=run, after=50, at=480)
    assert [s.index for s in window.steps] == list(range(451, 501))
    assert (window.gap_before.first, window.gap_before.last, window.gap_before.before) == (51, 450, 451)
    assert window.gap_after is None
    middle = run_page.step_window(run=run, after=50, before=451, at=130)
    assert [s.index for s in middle.steps] == list(range(101, 151))
    assert (middle.gap_before.first, middle.gap_before.last) == (51, 100)
    assert (middle.gap_after.first, middle.gap_after.last, middle.gap_after.before) == (151, 450, 451)


def test_a_long_live_run_shows_its_first_window_and_its_newest_steps():
    run = run_with_steps(300, status=Run.Status.RUNNING, stop_reason="", verdict="")
    window = run_page.step_window_first(run=run)
    assert [s.index for s in window.steps] == list(range(1, 51))
    assert [s.index for s in window.tail] == list(range(291, 301))
    assert (window.gap_after.first, window.gap_after.last, window.gap_after.before) == (51, 290, 291)
    assert window.last_index == 300


def test_the_live_poll_puts_a_gap_before_the_newest_when_many_steps_arrived():
    run = run_with_steps(300, status=Run.Status.RUNNING, stop_reason="", verdict="")
    window = run_page.step_window_new(run=run, after=20)
    assert window.steps == [] and [s.index for s in window.tail] == list(range(291, 301))
    assert (window.gap_after.first, window.gap_after.last, window.gap_after.before) == (21, 290, 291)


def test_run_other_policies_gives_the_latest_run_of_each_other_policy():
    mine = refund_too_old_starter()
    refund_too_old_structured()
    latest = refund_too_old_structured()
    message = RunFactory(policy_name="message")
    RunFactory(scenario="lookup-empty", policy_name="message")
    assert [r.pk for r in run_page.run_other_policies(run=mine)] == [message.pk, latest.pk]


def test_guard_errors_are_the_errors_in_a_row_at_the_end():
    run = guard_stop()
    StepFactory(run=run, event=tool_step(0, [ok_attempt(1, "fine")]))
    assert [s.index for s in run_page.run_guard_errors(run=run)] == [1, 2, 3]
    assert run_page.run_guard_errors(run=refund_too_old_structured()) == []
