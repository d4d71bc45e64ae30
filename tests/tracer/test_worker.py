"""Real Celery worker processes over the configured broker, writing to this session's test database."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from agents.events import ListRecorder
from agents.run import run_scenario
from agents.scenarios import scenario_names
from tests.conftest import WorkerProcess, purge_test_queue, wait_until
from tracer.experiments import experiment_launch, run_create
from tracer.models import PolicyVariant, Run, Step
from tracer.tasks import run_execute_task

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def holding_worker(transactional_db):
    """A worker that holds each run before its final answer or end, until the test releases it."""
    purge_test_queue()
    worker = WorkerProcess(hold=True)
    worker.wait_ready()
    yield worker
    worker.stop()


def test_a_worker_process_records_an_experiment_live_with_the_agent_cores_verdicts(holding_worker):
    scenarios = list(scenario_names())
    experiment = experiment_launch(scenarios=scenarios, policies=["starter", "structured"])

    # Read a run's steps while the worker is still writing them.
    def a_run_seen_mid_flight():
        for run in Run.objects.filter(experiment=experiment, status=Run.Status.RUNNING, step_count__gt=0):
            steps = list(Step.objects.filter(run=run).values_list("index", flat=True))
            run.refresh_from_db(fields=["status", "step_count"])
            if steps and run.status == Run.Status.RUNNING:
                return run.pk, steps
        return None

    seen_run_id, seen_steps = wait_until(
        a_run_seen_mid_flight, timeout=60, what="a running run with steps", worker=holding_worker
    )
    assert seen_steps == list(range(1, len(seen_steps) + 1))
    holding_worker.release()

    def done():
        experiment.refresh_from_db()
        return experiment.is_done

    wait_until(done, timeout=240, what="every run to finish", worker=holding_worker)
    runs = list(experiment.runs.order_by("id"))
    assert len(runs) == len(scenarios) * 2
    seen = next(r for r in runs if r.pk == seen_run_id)
    assert seen.step_count >= len(seen_steps)
    for run in runs:
        assert run.status == Run.Status.FINISHED
        assert run.worker_name.startswith(holding_worker.name + "@") and run.worker_pid
        expected = ListRecorder()
        run_scenario(run.scenario, run.policy_settings, recorder=expected, seed=run.pk)
        what = f"{run.scenario} under {run.policy_name}"
        assert run.stop_reason == expected.end.stop_reason, what
        assert run.verdict == ("pass" if expected.end.verdict.passed else "fail"), what
        assert run.step_count == len(expected.steps) == run.steps.count(), what
        assert run.children.count() == len(expected.children), what


def test_a_duplicate_delivery_to_a_real_worker_records_the_steps_once(worker_process):
    run = run_create(scenario="refund-flaky-payment", policy=PolicyVariant.objects.get(name="starter"))
    run_execute_task.delay(run.pk)
    run_execute_task.delay(run.pk)
    wait_until(
        lambda: (
            Run.objects.filter(pk=run.pk, status=Run.Status.FINISHED).exists()
            and f"run {run.pk} is not queued; duplicate delivery ignored" in worker_process.log()
        ),
        timeout=60,
        what="the run to end and the second delivery to be ignored",
        worker=worker_process,
    )
    run.refresh_from_db()
    expected = ListRecorder()
    run_scenario(run.scenario, run.policy_settings, recorder=expected, seed=run.pk)
    assert run.status == Run.Status.FINISHED
    assert run.step_count == run.steps.count() == len(expected.steps)
    assert run.retry_count == sum(s.retry_count for s in expected.steps)


def test_a_run_whose_worker_was_killed_is_interrupted_when_the_worker_restarts(transactional_db):
    purge_test_queue()
    worker = WorkerProcess(hold=True, concurrency=1)
    worker.wait_ready()
    run = run_create(scenario="refund-too-old", policy=PolicyVariant.objects.get(name="starter"))
    run_execute_task.delay(run.pk)
    try:
        wait_until(
            lambda: Run.objects.filter(pk=run.pk, step_count__gt=0).exists(), timeout=60, what="a step", worker=worker
        )
        worker.kill()  # while the run is held before its final answer
    finally:
        worker.stop()
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING  # nobody is left to finish it

    # The same worker name starting again knows its earlier incarnation is gone.
    purge_test_queue()
    restarted = WorkerProcess(concurrency=1, name=worker.name)
    try:
        restarted.wait_ready()
        wait_until(
            lambda: Run.objects.filter(pk=run.pk, status=Run.Status.FINISHED).exists(),
            timeout=90,
            what="the run to be interrupted",
            worker=restarted,
        )
    finally:
        restarted.stop()
    run.refresh_from_db()
    assert run.stop_reason == Run.StopReason.INTERRUPTED
    assert "stopped before the run ended" in run.error
    assert run.steps.count() == run.step_count >= 1


def test_run_experiment_waits_for_the_worker_and_prints_the_summary_table(worker_process):
    out = StringIO()
    call_command(
        "run_experiment",
        "--scenario",
        "refund-too-old,lookup-empty",
        "--policy",
        "starter",
        "--policy",
        "structured",
        "--wait",
        "--timeout",
        "120",
        stdout=out,
    )
    text = out.getvalue()
    assert "4/4 runs finished" in text
    rows = {
        tuple(line.split()[:2]): line.split() for line in text.splitlines() if line.startswith(("refund", "lookup"))
    }
    # scenario, policy, runs, pass, tool calls, retries, wasted, stop reasons
    assert rows[("refund-too-old", "starter")][2:7] == ["1", "0", "1.0", "2", "2"]
    assert rows[("refund-too-old", "structured")][2:7] == ["1", "1", "1.0", "0", "0"]
    assert rows[("lookup-empty", "structured")][3] == "1"


def test_the_demo_is_launched_once_and_then_reported_as_recorded(worker_process):
    first = StringIO()
    call_command("demo", "--wait", "--timeout", "180", stdout=first)
    runs = len(scenario_names()) * 2
    assert f"{runs}/{runs} runs finished" in first.getvalue()
    again = StringIO()
    call_command("demo", stdout=again)
    assert "is already recorded" in again.getvalue()
    assert Run.objects.filter(parent__isnull=True).count() == runs
