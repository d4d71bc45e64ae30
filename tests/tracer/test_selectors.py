"""Reads behind the dashboard: list filters, the matrix's SQL aggregates, stop cases, experiment pairs."""

import datetime

import pytest
from django.utils import timezone

from tests.factories import (
    ExperimentFactory,
    RunFactory,
    StepFactory,
    StopReviewFactory,
    failed_attempt,
    guard_stop,
    ok_attempt,
    refund_too_old_starter,
    refund_too_old_structured,
    run_with_steps,
    step_row,
    tool_step,
)
from tracer import reviews, selectors
from tracer.models import Run

pytestmark = pytest.mark.django_db


def test_run_list_filters_by_each_column_and_hides_sub_agents():
    starter = refund_too_old_starter()
    structured = refund_too_old_structured()
    running = RunFactory(scenario="lookup-flaky", status=Run.Status.RUNNING, stop_reason="", verdict="")
    claude = RunFactory(scenario="lookup-empty", model_backend="claude", verdict="")
    RunFactory(parent=starter, label="sub-agent")

    def ids(**filters):
        return {r.pk for r in selectors.run_list(filters=filters)}

    assert ids() == {starter.pk, structured.pk, running.pk, claude.pk}
    assert ids(scenario="refund-too-old") == {starter.pk, structured.pk}
    assert ids(policy_name="starter") == {starter.pk}
    assert ids(model_backend="claude") == {claude.pk}
    assert ids(status="running") == {running.pk}
    assert ids(verdict="fail") == {starter.pk}
    assert ids(verdict="unknown") == {running.pk, claude.pk}
    assert ids(stop_reason="final_answer") == {starter.pk, structured.pk, claude.pk}
    assert ids(min_retries=1) == {starter.pk}
    assert ids(min_errors=1, min_steps=2) == {starter.pk, structured.pk}
    assert ids(scenario="", policy_name=None) == ids()  # blank filters are ignored


def test_run_list_filters_by_start_date_and_experiment():
    old = RunFactory()
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - datetime.timedelta(days=10))
    exp = ExperimentFactory()
    new = RunFactory(experiment=exp)
    today = timezone.now().date()
    assert {r.pk for r in selectors.run_list(filters={"started_from": today})} == {new.pk}
    assert {r.pk for r in selectors.run_list(filters={"started_to": today - datetime.timedelta(days=5)})} == {old.pk}
    assert {r.pk for r in selectors.run_list(filters={"experiment_id": exp.pk})} == {new.pk}


def test_run_list_searches_tool_inputs_and_final_answers():
    by_input = RunFactory(search_text='process_refund {"order_id": "0999"}')
    by_answer = RunFactory(final_answer="Order 0999 was refunded.")
    RunFactory(final_answer="Something else.")
    assert {r.pk for r in selectors.run_list(filters={"q": "0999"})} == {by_input.pk, by_answer.pk}


def test_run_filter_values_lists_known_scenarios_policies_and_review_tags():
    run = refund_too_old_starter()
    RunFactory(scenario="", policy_name="")  # imported, unknown
    reviews.run_review_save(run=run, note="n", tags="zz-last, a-first")
    assert selectors.run_filter_values() == {
        "scenarios": ["refund-too-old"],
        "policies": ["starter"],
        "tags": ["a-first", "zz-last"],
    }


def test_the_live_poll_gets_only_later_steps():
    run = run_with_steps(5, status=Run.Status.RUNNING, stop_reason="", verdict="")
    assert [s.index for s in selectors.step_window_new(run=run, after="3").steps] == [4, 5]
    assert [s.index for s in selectors.step_window_new(run=run, after="nonsense").steps] == [1, 2, 3, 4, 5]


def test_a_long_finished_run_shows_its_first_window_and_a_gap_for_the_rest():
    run = run_with_steps(120)
    window = selectors.step_window_first(run=run)
    assert [s.index for s in window.steps] == list(range(1, 51))
    assert window.gap_before is None and window.tail == []
    gap = window.gap_after
    assert (gap.first, gap.next_last, gap.last, gap.hidden, gap.before) == (51, 100, 120, 70, None)
    more = selectors.step_window(run=run, after=gap.after, before=gap.before)
    assert [s.index for s in more.steps] == list(range(51, 101))
    assert (more.gap_after.first, more.gap_after.last) == (101, 120)
    rest = selectors.step_window(run=run, after=100)
    assert [s.index for s in rest.steps] == list(range(101, 121)) and rest.gap_after is None


def test_a_window_asked_for_one_step_holds_it_with_gaps_on_either_side():
    run = run_with_steps(500)
    window = selectors.step_window(run=run, after=50, at=480)
    assert [s.index for s in window.steps] == list(range(451, 501))
    assert (window.gap_before.first, window.gap_before.last, window.gap_before.before) == (51, 450, 451)
    assert window.gap_after is None
    middle = selectors.step_window(run=run, after=50, before=451, at=130)
    assert [s.index for s in middle.steps] == list(range(101, 151))
    assert (middle.gap_before.first, middle.gap_before.last) == (51, 100)
    assert (middle.gap_after.first, middle.gap_after.last, middle.gap_after.before) == (151, 450, 451)


def test_a_long_live_run_shows_its_first_window_and_its_newest_steps():
    run = run_with_steps(300, status=Run.Status.RUNNING, stop_reason="", verdict="")
    window = selectors.step_window_first(run=run)
    assert [s.index for s in window.steps] == list(range(1, 51))
    assert [s.index for s in window.tail] == list(range(291, 301))
    assert (window.gap_after.first, window.gap_after.last, window.gap_after.before) == (51, 290, 291)
    assert window.last_index == 300


def test_the_live_poll_puts_a_gap_before_the_newest_when_many_steps_arrived():
    run = run_with_steps(300, status=Run.Status.RUNNING, stop_reason="", verdict="")
    window = selectors.step_window_new(run=run, after=20)
    assert window.steps == [] and [s.index for s in window.tail] == list(range(291, 301))
    assert (window.gap_after.first, window.gap_after.last, window.gap_after.before) == (21, 290, 291)


def test_run_other_policies_gives_the_latest_run_of_each_other_policy():
    mine = refund_too_old_starter()
    refund_too_old_structured()
    latest = refund_too_old_structured()
    message = RunFactory(policy_name="message")
    RunFactory(scenario="lookup-empty", policy_name="message")
    assert [r.pk for r in selectors.run_other_policies(run=mine)] == [message.pk, latest.pk]


def test_guard_errors_are_the_errors_in_a_row_at_the_end():
    run = guard_stop()
    StepFactory(run=run, event=tool_step(0, [ok_attempt(1, "fine")]))
    assert [s.index for s in selectors.run_guard_errors(run=run)] == [1, 2, 3]
    assert selectors.run_guard_errors(run=refund_too_old_structured()) == []


def test_failing_calls_group_repeats_and_keep_each_error_text_once():
    run = run_with_steps(1)
    bad_date = [failed_attempt(n, category="validation", message="bad date") for n in (1, 2)]
    steps = [
        step_row(tool_step(i, bad_date, tool="free_slots", input={"date": "next Friday"}), run=run) for i in (1, 2, 3)
    ]
    [call] = selectors.failing_calls(steps)
    assert call.tool_name == "free_slots" and call.times == 3
    assert call.errors == [("validation · not retryable", "bad date", 6)]
    assert call.model_saw == "Error"


def test_policy_matrix_aggregates_each_scenario_and_policy():
    refund_too_old_starter()
    refund_too_old_starter(verdict=Run.Verdict.PASS, tool_call_count=3)
    refund_too_old_structured()
    RunFactory(policy_name="fragile", stop_reason=Run.StopReason.CRASHED, verdict=Run.Verdict.FAIL)
    guard_stop(scenario="stuck-model")
    RunFactory(status=Run.Status.RUNNING, stop_reason="", verdict="")  # not finished: not counted
    RunFactory(parent=RunFactory(), policy_name="starter")  # sub-agent: not counted

    matrix = selectors.policy_matrix()

    assert matrix.policies == ["fragile", "starter", "structured"]
    assert [r.scenario for r in matrix.rows] == ["refund-too-old", "stuck-model"]
    fragile, starter, structured = matrix.rows[0].cells
    assert (starter.runs, starter.passes, starter.pass_pct) == (2, 1, 50)
    assert starter.mean_tool_calls == 2.0
    assert starter.wasted_retries == 4 and starter.wasted_pct == 100
    assert (structured.runs, structured.pass_pct, structured.wasted_retries) == (2, 100, 0)  # one is the parent
    assert fragile.crashes == 1
    assert matrix.rows[1].cells[0] is None and matrix.rows[1].cells[2].guard_stops == 1


def test_policy_matrix_keeps_only_chosen_known_columns_and_an_experiment():
    exp = ExperimentFactory()
    refund_too_old_starter(experiment=exp)
    refund_too_old_structured()
    assert selectors.policy_matrix(policies=["structured", "nope"]).policies == ["structured"]
    assert selectors.policy_matrix(policies=["nope"]).policies == ["starter", "structured"]
    assert selectors.policy_matrix(experiment_ids=[exp.pk]).policies == ["starter"]


def test_stop_queue_and_counts_follow_reviews():
    unreviewed = guard_stop()
    reviewed = guard_stop()
    StopReviewFactory(run=reviewed)
    RunFactory(stop_reason=Run.StopReason.MAX_STEPS)
    refund_too_old_structured()
    assert selectors.stop_counts() == {"all": 3, "reviewed": 1, "unreviewed": 2}
    assert reviewed.pk not in {r.pk for r in selectors.stop_queue(state="unreviewed")}
    assert [r.pk for r in selectors.stop_queue(state="reviewed")] == [reviewed.pk]
    assert unreviewed.pk in {r.pk for r in selectors.stop_queue(state="all")}


def test_stop_cases_pair_each_stop_with_another_policys_run():
    stopped = guard_stop(scenario="stuck-model")
    other = RunFactory(scenario="stuck-model", policy_name="starter")
    [case] = selectors.stop_cases(runs=[stopped])
    assert case.other == other
    assert [s.index for s in case.errors] == [1, 2, 3]
    assert case.review is None


def test_experiment_pairs_compare_the_first_policy_with_each_other_per_scenario_and_repeat():
    exp = ExperimentFactory(policies=["starter", "structured", "message"])
    runs = [
        RunFactory(experiment=exp, scenario=s, policy_name=p)
        for _ in range(2)
        for s in ("a", "b")
        for p in ("starter", "structured", "message")
    ]
    pairs = selectors.experiment_pairs(runs=runs, policies=exp.policies)
    assert len(pairs) == 8
    assert pairs[0] == (runs[0], runs[1]) and pairs[1] == (runs[0], runs[2])
    assert all(a.policy_name == "starter" and a.scenario == b.scenario for a, b in pairs)
