"""Recovery with real worker processes: a lost message is sent again and run, a live run survives
``interrupt_stale`` and the sweep, a killed pool process's run is interrupted and re-run, and beat
embedded in a worker really sends the sweep. (tests/faults/ breaks real brokers and databases.)"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from io import StringIO

import psutil
import pytest
from django.core.management import call_command

from agents.events import ListRecorder
from agents.run import run_scenario
from tests.conftest import WorkerProcess, purge_test_queue, wait_until
from tracer.execution import run_claim, runs_sweep
from tracer.experiments import experiment_launch
from tracer.models import Run

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def ended_as_the_agent_core_ends_it(run: Run) -> None:
    expected = ListRecorder()
    run_scenario(run.scenario, run.policy_settings, recorder=expected, seed=run.pk)
    assert run.status == Run.Status.FINISHED, run
    assert run.stop_reason == expected.end.stop_reason, run
    assert run.step_count == run.steps.count() == len(expected.steps), run


def held_after_a_step(process: WorkerProcess) -> Run:
    """Launch one starter run of refund-too-old and wait until ``process`` (``hold=True``) has recorded
    a step of it; the run is then held before its final answer."""
    experiment = experiment_launch(scenarios=["refund-too-old"], policies=["starter"])
    run = experiment.runs.get()
    wait_until(
        lambda: Run.objects.filter(pk=run.pk, step_count__gt=0).exists(), timeout=60, what="a step", worker=process
    )
    return run


@contextlib.contextmanager
def worker(**kwargs):
    purge_test_queue()
    process = WorkerProcess(**kwargs)
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


def test_a_queued_run_whose_message_was_lost_is_sent_again_by_the_sweep_and_run_by_a_worker(settings):
    experiment = experiment_launch(scenarios=["refund-too-old", "lookup-empty"], policies=["starter"])
    purge_test_queue()  # the broker lost both messages
    with worker() as process:
        settings.RLT_RESEND_AFTER_S = 0
        assert runs_sweep().resent == 2

        def done():
            experiment.refresh_from_db()
            return experiment.is_done

        wait_until(done, timeout=60, what="the runs sent again to end", worker=process)
    for run in experiment.runs.all():
        assert run.send_count == 2
        ended_as_the_agent_core_ends_it(run)


def test_a_live_run_survives_interrupt_stale_and_the_sweep_and_ends_with_its_real_outcome():
    # A 1.5 s lease, and the run held after its first step for longer than that: only the heartbeat
    # keeps the lease alive meanwhile.
    with worker(hold=True, concurrency=1, env={"RLT_LEASE_S": "1.5"}) as process:
        run = held_after_a_step(process)
        held_since = time.monotonic()
        while time.monotonic() < held_since + 4:  # more than twice the lease
            out = StringIO()
            call_command("interrupt_stale", stdout=out)
            call_command("interrupt_stale", "--older-than", "0", stdout=out)
            assert out.getvalue().count("0 run(s) marked interrupted") == 2, out.getvalue()
            assert runs_sweep().interrupted == []
            time.sleep(0.3)
        assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING  # still held: it was live all along
        process.release()
        wait_until(
            lambda: Run.objects.filter(pk=run.pk, status=Run.Status.FINISHED).exists(),
            timeout=90,
            what="the run to end",
            worker=process,
        )
    run.refresh_from_db()
    ended_as_the_agent_core_ends_it(run)
    assert not Run.objects.filter(rerun_of=run).exists()


def test_a_run_whose_pool_process_was_killed_is_interrupted_with_its_steps_and_rerun_once():
    with worker(hold=True, concurrency=1, env={"RLT_LEASE_S": "60"}) as process:
        run = held_after_a_step(process)
        experiment = run.experiment
        pool = psutil.Process(process.proc.pid).children()
        assert [p.pid for p in pool] == [Run.objects.get(pk=run.pk).worker_pid]
        os.kill(pool[0].pid, signal.SIGKILL)  # what the OOM killer does; the worker lives on
        process.release()  # the re-run is not held

        def rerun_ended():
            experiment.refresh_from_db()
            return experiment.is_done and Run.objects.filter(rerun_of=run).exists()

        # The redelivered task finds its run held by a process that is gone; the sweep is the backstop.
        # No sweep here, and a lease of a minute: the redelivered task finds the run held by a process that
        # is gone, and interrupts and re-runs it at once (billiard notices the loss ~10 s after the kill).
        wait_until(rerun_ended, timeout=60, what="the run's re-run to end", worker=process)
    run.refresh_from_db()
    assert run.stop_reason == Run.StopReason.INTERRUPTED
    assert "stopped before the run ended: that process is gone" in run.error
    assert run.step_count == run.steps.count() >= 1
    rerun = Run.objects.get(rerun_of=run)
    ended_as_the_agent_core_ends_it(rerun)
    assert (experiment.finished_runs, experiment.total_runs) == (2, 2)


def test_beat_embedded_in_a_worker_sends_the_sweep_that_interrupts_and_reruns_a_run_whose_worker_died():
    experiment = experiment_launch(scenarios=["lookup-empty"], policies=["structured"])
    run = experiment.runs.get()
    run_claim(run_id=run.pk, worker_name="celery@a-worker-now-gone", worker_pid=1)
    with worker(beat=True, env={"RLT_SWEEP_S": "1"}) as process:
        Run.objects.filter(pk=run.pk).update(lease_expires_at=run.created_at)  # lapsed long ago

        def rerun_ended():
            experiment.refresh_from_db()
            return experiment.is_done

        wait_until(rerun_ended, timeout=60, what="beat's sweep to re-run the run", worker=process)
    run.refresh_from_db()
    assert run.stop_reason == Run.StopReason.INTERRUPTED
    assert run.error.startswith("celery@a-worker-now-gone pid 1 stopped before the run ended: its lease lapsed at")
    ended_as_the_agent_core_ends_it(Run.objects.get(rerun_of=run))
