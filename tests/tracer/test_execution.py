"""Execution: claiming a run under a lease, and finishing the runs a dead worker left running."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from types import SimpleNamespace

import psutil
import pytest
from django.utils import timezone

from tracer.execution import process_alive, run_claim, run_interrupt_stale
from tracer.experiments import run_create
from tracer.models import Experiment, Run
from tracer.tasks import _interrupt_runs_of_previous_incarnation

pytestmark = pytest.mark.django_db


def test_a_run_is_claimed_once_under_a_new_token_and_a_lease(run, settings):
    settings.RLT_LEASE_S = 60
    before = timezone.now()
    token = run_claim(run_id=run.pk, worker_name="w1", worker_pid=11)
    assert token and run_claim(run_id=run.pk, worker_name="w2", worker_pid=12) is None
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and run.started_at is not None
    assert (run.worker_name, run.worker_pid, run.claim_token) == ("w1", 11, token)
    assert before + timedelta(seconds=60) <= run.lease_expires_at <= timezone.now() + timedelta(seconds=60)


def test_runs_whose_lease_lapsed_are_interrupted_and_runs_whose_lease_is_renewed_are_not_however_old(starter):
    experiment = Experiment.objects.create(scenarios=["lookup-flaky"], policies=["starter"], total_runs=3)
    dead, alive, old = (run_create(scenario="lookup-flaky", policy=starter, experiment=experiment) for _ in range(3))
    run_claim(run_id=dead.pk, worker_name="celery@a", worker_pid=1)
    run_claim(run_id=alive.pk, worker_name="celery@b", worker_pid=2)
    run_claim(run_id=old.pk, worker_name="celery@c", worker_pid=3)
    Run.objects.filter(pk=dead.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=5))
    Run.objects.filter(pk=old.pk).update(started_at=timezone.now() - timedelta(hours=3))  # lease still renewed

    assert [i.run_id for i in run_interrupt_stale(worker_name="celery@b")] == []
    assert [i.run_id for i in run_interrupt_stale()] == [dead.pk]
    states = {r.pk: (r.status, r.stop_reason) for r in Run.objects.all()}
    assert states[dead.pk] == ("finished", "interrupted")
    assert states[alive.pk] == states[old.pk] == ("running", "")
    error = Run.objects.get(pk=dead.pk).error
    assert error.startswith("celery@a pid 1 stopped before the run ended: its lease lapsed at ")
    experiment.refresh_from_db()
    assert experiment.finished_runs == 1


def test_a_starting_worker_interrupts_the_runs_its_name_held_in_processes_now_gone_and_no_others(starter):
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead, live, other = (run_create(scenario="lookup-flaky", policy=starter) for _ in range(3))
    run_claim(run_id=dead.pk, worker_name="w@web", worker_pid=gone.pid)
    run_claim(run_id=live.pk, worker_name="w@web", worker_pid=os.getpid())  # a second worker under the name
    run_claim(run_id=other.pk, worker_name="w@web2", worker_pid=gone.pid)  # another worker's name
    _interrupt_runs_of_previous_incarnation(sender=SimpleNamespace(hostname="w@web"))
    assert Run.objects.get(pk=dead.pk).stop_reason == Run.StopReason.INTERRUPTED
    assert Run.objects.get(pk=live.pk).status == Run.Status.RUNNING
    assert Run.objects.get(pk=other.pk).status == Run.Status.RUNNING


def test_a_killed_process_its_parent_has_not_reaped_counts_as_dead_when_interrupting_runs():
    """A killed worker's pool process can linger as a zombie (init reaps it late): it runs nothing."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 10
        while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.02)
        assert psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE
        os.kill(child.pid, 0)  # exited, not reaped: it still answers signal 0
        assert not process_alive(child.pid)
    finally:
        child.wait()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as running:
        try:
            assert process_alive(running.pid)
        finally:
            running.kill()
