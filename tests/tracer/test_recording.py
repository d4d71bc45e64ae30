"""The recorder: a run's start, each step with its counters, its end and its sub-agents' child runs.

Against hand-made agent events, so each counter is checked against steps whose retries are known.
"""

from __future__ import annotations

from unittest import mock

import pytest
from django.db import connection
from django.db.models import Sum

from agents.events import RunEnd, Verdict
from tests.factories import failed_attempt, final_step, ok_attempt, start_for, tool_step
from tracer import recording
from tracer.experiments import run_create
from tracer.models import Experiment, Run, Step
from tracer.recording import DbRecorder

pytestmark = pytest.mark.django_db


def test_counters_match_the_steps_written(run):
    recorder = DbRecorder(run, worker_name="w1", worker_pid=11)
    recorder.run_started(start_for(run))
    steps = [
        # starter: a business refusal retried twice, both retries wasted
        tool_step(1, [failed_attempt(1), failed_attempt(2), failed_attempt(3)], tokens=(100, 20)),
        # a transient failure retried once: a retry worth making
        tool_step(2, [failed_attempt(1, category="transient", retryable=True), ok_attempt(2)], tool="lookup_orders"),
        # an empty result treated as an error and retried: wasted
        tool_step(3, [ok_attempt(1, [], empty=True), ok_attempt(2, [], empty=True)], tool="lookup_orders"),
        final_step(4, "I could not process the refund."),
    ]
    for step in steps:
        recorder.step_recorded(step)
    run.refresh_from_db()
    rows = Step.objects.filter(run=run)
    assert run.status == Run.Status.RUNNING
    assert run.step_count == rows.count() == 4
    assert run.tool_call_count == rows.filter(kind=Step.Kind.TOOL_USE).count() == 3
    assert run.error_count == rows.filter(is_error=True).count() == 1
    assert run.retry_count == rows.aggregate(n=Sum("retry_count"))["n"] == 2 + 1 + 1
    assert run.wasted_retry_count == 2 + 0 + 1
    assert run.input_tokens == rows.aggregate(n=Sum("input_tokens"))["n"] == 100 + 10 + 10 + 20
    assert run.output_tokens == rows.aggregate(n=Sum("output_tokens"))["n"] == 20 + 5 + 5 + 8
    assert '"order_id": "0871"' in run.search_text
    assert "I could not process the refund." in run.search_text
    first = rows.get(index=1)
    assert [a["number"] for a in first.attempts] == [1, 2, 3]
    assert first.category == "business" and first.retryable is False and first.retry_count == 2


def test_a_step_and_its_counters_are_written_in_one_transaction(run):
    recorder = DbRecorder(run)
    recorder.run_started(start_for(run))
    real_update = recording.Run.objects.filter

    def failing_filter(*args, **kwargs):
        qs = real_update(*args, **kwargs)
        qs.update = mock.Mock(side_effect=RuntimeError("database went away"))
        return qs

    with mock.patch.object(recording.Run.objects, "filter", side_effect=failing_filter), pytest.raises(RuntimeError):
        recorder.step_recorded(tool_step(1, [ok_attempt(1)]))
    # the counter update failed, so the step row was rolled back with it
    assert not Step.objects.filter(run=run).exists()
    run.refresh_from_db()
    assert run.step_count == 0


@pytest.mark.django_db(transaction=True)
def test_each_step_is_committed_and_readable_before_the_run_ends(starter):
    run = run_create(scenario="refund-too-old", policy=starter)
    recorder = DbRecorder(run)
    recorder.run_started(start_for(run))
    recorder.step_recorded(tool_step(1, [failed_attempt(1)]))
    assert not connection.in_atomic_block
    # another connection sees the step while the run is still running
    from django.db import connections

    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT status, step_count FROM tracer_run WHERE id = %s", [run.pk])
            assert cursor.fetchone() == ("running", 1)
            cursor.execute("SELECT COUNT(*) FROM tracer_step WHERE run_id = %s", [run.pk])
            assert cursor.fetchone() == (1,)
    finally:
        other.close()


def test_finishing_a_run_stores_its_end_and_counts_it_in_its_experiment(starter):
    experiment = Experiment.objects.create(scenarios=["refund-too-old"], policies=["starter"], total_runs=1)
    run = run_create(scenario="refund-too-old", policy=starter, experiment=experiment)
    recorder = DbRecorder(run)
    recorder.run_started(start_for(run))
    recorder.step_recorded(final_step(1, "Sorry, a system error occurred."))
    end = RunEnd(
        stop_reason=Run.StopReason.FINAL_ANSWER,
        final_answer="Sorry, a system error occurred.",
        verdict=Verdict(passed=False, reason="blames a generic error instead of the 30-day window"),
        transcript=[{"role": "user", "content": "Refund order 0871."}],
    )
    recorder.run_finished(end)
    recorder.run_finished(end)  # a second report changes nothing
    run.refresh_from_db()
    experiment.refresh_from_db()
    assert run.status == Run.Status.FINISHED and run.finished_at is not None
    assert run.verdict == Run.Verdict.FAIL
    assert run.verdict_reason.startswith("blames a generic error")
    assert run.final_answer == "Sorry, a system error occurred."
    assert run.transcript[0]["role"] == "user"
    assert run.model_name == "simulated-rules" and run.task == "Refund order 0871."
    assert experiment.finished_runs == 1 and experiment.is_done


def test_a_guard_stop_records_the_guard(run):
    recorder = DbRecorder(run)
    recorder.run_started(start_for(run))
    recorder.run_finished(RunEnd(stop_reason=Run.StopReason.CONSECUTIVE_ERRORS, guard="3 tool errors in a row"))
    run.refresh_from_db()
    assert run.stop_reason == Run.StopReason.CONSECUTIVE_ERRORS
    assert run.guard == "3 tool errors in a row"
    assert run.verdict == ""


def test_sub_agents_get_child_runs_outside_the_experiments_count(starter):
    experiment = Experiment.objects.create(scenarios=["coordinator-partial"], policies=["starter"], total_runs=1)
    parent = run_create(scenario="coordinator-partial", policy=starter, experiment=experiment)
    recorder = DbRecorder(parent)
    recorder.run_started(start_for(parent))
    child = recorder.child(label="look up order 1050")
    child.run_started(start_for(parent))
    child.step_recorded(tool_step(1, [ok_attempt(1)], tool="lookup_orders"))
    child.run_finished(RunEnd(stop_reason=Run.StopReason.FINAL_ANSWER, final_answer="found it"))
    experiment.refresh_from_db()
    assert experiment.finished_runs == 0
    child_run = Run.objects.get(parent=parent)
    assert child_run.label == "look up order 1050"
    assert child_run.experiment is None
    assert child_run.status == Run.Status.FINISHED and child_run.step_count == 1
    recorder.run_finished(RunEnd(stop_reason=Run.StopReason.FINAL_ANSWER, final_answer="partial report"))
    experiment.refresh_from_db()
    assert experiment.finished_runs == 1


def test_tool_content_is_stored_as_json_gives_it_back_whether_it_is_json_already_or_not():
    from datetime import UTC, datetime

    key = "sk-ant-api03-" + "Zx9_Qw8-Er7tY6uI5oP4aS3dF2gH1jK0lZ"
    native = {"a": [1, 2.5, None, True, "t"], "password": "hunter2", "note": f"key {key}"}
    assert recording._jsonable(native) == {
        "a": [1, 2.5, None, True, "t"],
        "password": "[redacted: secret value]",
        "note": "key [redacted: anthropic key]",
    }
    when = datetime(2026, 1, 2, tzinfo=UTC)
    assert recording._jsonable({"at": when, 1: ("x", key)}) == {
        "at": str(when),
        "1": ["x", "[redacted: anthropic key]"],
    }
