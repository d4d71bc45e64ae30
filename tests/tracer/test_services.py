"""The recorder and the launch services, against hand-made agent events."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection
from django.db.models import Sum
from django.utils import timezone

from agents.events import CONSECUTIVE_ERRORS, FINAL_ANSWER, RunEnd, RunStart, Verdict
from agents.policies import PRESETS
from tests.conftest import failed_attempt, final_step, ok_attempt, tool_step
from tracer import services
from tracer.models import Experiment, PolicyVariant, Run, Step
from tracer.services import DbRecorder, run_claim, run_create, run_interrupt_stale

pytestmark = pytest.mark.django_db


def start_for(run: Run) -> RunStart:
    return RunStart(
        scenario=run.scenario,
        policy_name=run.policy_name,
        policy_settings=run.policy_settings,
        model_backend="simulated",
        model_name="simulated-rules",
        task="Refund order 0871.",
    )


@pytest.fixture
def starter() -> PolicyVariant:
    return PolicyVariant.objects.get(name="starter")


@pytest.fixture
def run(starter) -> Run:
    return run_create(scenario="refund-too-old", policy=starter)


def test_the_four_presets_exist_as_policy_variants_with_their_settings():
    presets = {v.name: v for v in PolicyVariant.objects.filter(is_preset=True)}
    assert set(presets) == {"fragile", "starter", "message", "structured"}
    for name, variant in presets.items():
        assert variant.settings == PRESETS[name].settings()


def test_a_created_run_is_queued_with_a_snapshot_of_its_policy(starter):
    run = run_create(scenario="lookup-empty", policy=starter)
    starter.settings = {**starter.settings, "max_attempts": 9}
    starter.save()
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert run.policy_name == "starter"
    assert run.policy_settings["max_attempts"] == 3


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
    real_update = services.Run.objects.filter

    def failing_filter(*args, **kwargs):
        qs = real_update(*args, **kwargs)
        qs.update = mock.Mock(side_effect=RuntimeError("database went away"))
        return qs

    with mock.patch.object(services.Run.objects, "filter", side_effect=failing_filter), pytest.raises(RuntimeError):
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
        stop_reason=FINAL_ANSWER,
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
    recorder.run_finished(RunEnd(stop_reason=CONSECUTIVE_ERRORS, guard="3 tool errors in a row"))
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
    child.run_finished(RunEnd(stop_reason=FINAL_ANSWER, final_answer="found it"))
    experiment.refresh_from_db()
    assert experiment.finished_runs == 0
    child_run = Run.objects.get(parent=parent)
    assert child_run.label == "look up order 1050"
    assert child_run.experiment is None
    assert child_run.status == Run.Status.FINISHED and child_run.step_count == 1
    recorder.run_finished(RunEnd(stop_reason=FINAL_ANSWER, final_answer="partial report"))
    experiment.refresh_from_db()
    assert experiment.finished_runs == 1


def test_a_run_is_claimed_once(run):
    assert run_claim(run_id=run.pk, worker_name="w1", worker_pid=11) is True
    assert run_claim(run_id=run.pk, worker_name="w2", worker_pid=12) is False
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and run.started_at is not None
    assert (run.worker_name, run.worker_pid) == ("w1", 11)


def test_runs_left_running_by_a_dead_worker_are_marked_interrupted(starter):
    experiment = Experiment.objects.create(scenarios=["lookup-flaky"], policies=["starter"], total_runs=3)
    dead, alive, old = (run_create(scenario="lookup-flaky", policy=starter, experiment=experiment) for _ in range(3))
    run_claim(run_id=dead.pk, worker_name="celery@a", worker_pid=1)
    run_claim(run_id=alive.pk, worker_name="celery@b", worker_pid=2)
    run_claim(run_id=old.pk, worker_name="celery@c", worker_pid=3)
    Run.objects.filter(pk=old.pk).update(started_at=timezone.now() - timedelta(hours=3))

    assert run_interrupt_stale(worker_name="celery@a") == 1
    assert run_interrupt_stale(older_than=timedelta(hours=1)) == 1
    states = {r.pk: (r.status, r.stop_reason) for r in Run.objects.all()}
    assert states[dead.pk] == ("finished", "interrupted")
    assert states[old.pk] == ("finished", "interrupted")
    assert states[alive.pk] == ("running", "")
    assert "celery@a pid 1 stopped before the run ended" in Run.objects.get(pk=dead.pk).error
    experiment.refresh_from_db()
    assert experiment.finished_runs == 2


def test_interrupting_needs_to_know_which_runs_are_stale():
    with pytest.raises(ValueError, match="worker_name or older_than"):
        run_interrupt_stale()


def test_a_starting_worker_leaves_runs_of_live_processes_under_its_name_alone(starter):
    import os
    import subprocess

    gone = subprocess.Popen(["true"])
    gone.wait()
    live = run_create(scenario="lookup-flaky", policy=starter)
    dead = run_create(scenario="lookup-flaky", policy=starter)
    run_claim(run_id=live.pk, worker_name="celery@same", worker_pid=os.getpid())
    run_claim(run_id=dead.pk, worker_name="celery@same", worker_pid=gone.pid)
    assert run_interrupt_stale(worker_name="celery@same", skip_live_processes=True) == 1
    assert Run.objects.get(pk=live.pk).status == Run.Status.RUNNING
    assert Run.objects.get(pk=dead.pk).stop_reason == Run.StopReason.INTERRUPTED


def test_a_killed_process_its_parent_has_not_reaped_counts_as_dead_when_interrupting_runs():
    """A killed worker's pool process can linger as a zombie (init reaps it late): it runs nothing."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while not services._is_zombie(child.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert services._is_zombie(child.pid)  # exited, not reaped: it still answers signal 0
        assert not services._process_alive(child.pid)
    finally:
        child.wait()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as running:
        try:
            assert services._process_alive(running.pid)
        finally:
            running.kill()
