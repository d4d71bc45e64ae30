"""Workers that die or are stopped while they execute runs, and stale-run clean-up racing live runs.

These use the session's broker and database (Redis + PostgreSQL in CI's first pass, the broker folder
+ SQLite in the second) and workers with short leases and sweeps (``FAST_RECOVERY``): beat is embedded
in a surviving worker (``-B``; ``./rlt up`` runs a threads pool with beat in a thread, which the SIGKILL
and time-limit tests use too).
"""

from __future__ import annotations

import os
import re
import signal
import time
from io import StringIO

import psutil
import pytest
from django.core.management import call_command

from tracer.experiments import experiment_launch
from tracer.models import Run

from .conftest import FAST_RECOVERY
from .harness import INTERRUPTED, assert_recovered, every_run_ended, session_snapshot, wait_for

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

POLICIES = ["starter", "structured"]
# 12 runs of 1 to 10 steps. The coordinator's come first, so the runs a worker holds when it is
# killed or stopped have sub-agent runs under way.
SCENARIOS = [
    "coordinator-partial",
    "refund-too-old",
    "lookup-flaky",
    "room-book-permission",
    "fatal-credentials",
    "stuck-model",
]


def running_with_steps(snapshot) -> list:
    return [r for r in snapshot.runs if r.status == Run.Status.RUNNING and r.step_count > 0 and r.parent_id is None]


def test_two_beats_at_once_send_every_sweep_twice_and_nothing_runs_twice(start_worker):
    """Two workers each with beat (one install started twice by mistake): every sweep is sent twice,
    every re-send may go out twice, yet each run is executed once, its steps written once."""
    workers = [
        start_worker(step_delay_s=0.25, beat=True, env={**FAST_RECOVERY, "RLT_RESEND_AFTER_S": "1"}) for _ in range(2)
    ]
    experiment = experiment_launch(scenarios=SCENARIOS, policies=POLICIES, repeats=2)
    started = time.monotonic()
    snapshot = wait_for(session_snapshot, every_run_ended, timeout=180, what="every run to end", workers=workers)
    figures = assert_recovered(snapshot, experiment_id=experiment.pk)
    assert figures.interrupted == 0, "a run was interrupted: two beats made a live run look lost"
    assert all("runs_sweep_task" in w.log() for w in workers), "a worker's beat sent no sweep"
    print(
        f"\n[faults] two beats at once: {figures}; every run ended {snapshot.read_at - started:.1f} s after the launch"
    )


def test_a_run_whose_pool_process_was_killed_ends_interrupted_and_its_rerun_ends(start_worker):
    # Two pool processes, as ./rlt up runs: the other one takes the sweep and the re-run while the
    # worker's main process waits for the killed one's result (Celery's worker_lost_wait, 10 s).
    worker = start_worker(step_delay_s=1.5, concurrency=2, beat=True, env=FAST_RECOVERY)
    experiment = experiment_launch(scenarios=["refund-too-old"], policies=["starter"])
    snapshot = wait_for(session_snapshot, running_with_steps, timeout=60, what="the run's first step", workers=[worker])
    run = running_with_steps(snapshot)[0]
    pool_process = psutil.Process(run.worker_pid)
    assert pool_process.ppid() == worker.proc.pid, "the run's worker_pid is not a pool process of the worker"
    os.kill(run.worker_pid, signal.SIGKILL)
    killed_at = time.monotonic()

    def rerun_ended(s):
        return every_run_ended(s) and any(r.rerun_of_id == run.id for r in s.runs)

    snapshot = wait_for(session_snapshot, rerun_ended, timeout=60, what="the run's re-run to end", workers=[worker])
    recovered_s = snapshot.read_at - killed_at
    figures = assert_recovered(snapshot, experiment_id=experiment.pk)
    original = next(r for r in snapshot.runs if r.id == run.id)
    rerun = next(r for r in snapshot.runs if r.rerun_of_id == run.id)
    assert original.stop_reason == INTERRUPTED and original.steps >= 1  # its steps are kept
    assert rerun.stop_reason != INTERRUPTED  # its real outcome, checked against the agent core above
    assert worker.proc.poll() is None, "the worker died with its pool process"
    print(
        f"\n[faults] pool process killed: run {original.id} interrupted with {original.steps} steps kept, re-run "
        f"{rerun.id} ended {rerun.stop_reason}; {figures}; {recovered_s:.1f} s from the kill to the re-run's end"
    )


def test_a_frozen_pool_process_is_refused_its_late_steps_once_its_run_was_interrupted_and_rerun(start_worker):
    """SIGSTOP on the pool process executing a run (a paused VM, a stop-the-world pause) for longer than
    the lease: its heartbeat stops too, so the sweep interrupts the run and queues its re-run. Then
    SIGCONT: the thawed process's next step must be refused, and the run not ended a second time."""
    worker = start_worker(step_delay_s=1.0, concurrency=2, beat=True, env=FAST_RECOVERY)
    experiment = experiment_launch(scenarios=["refund-too-old"], policies=["starter"])  # 2 steps
    snapshot = wait_for(session_snapshot, running_with_steps, timeout=60, what="the run's first step", workers=[worker])
    run = running_with_steps(snapshot)[0]
    assert psutil.Process(run.worker_pid).ppid() == worker.proc.pid
    os.kill(run.worker_pid, signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        frozen = wait_for(
            session_snapshot,
            lambda s: any(r.rerun_of_id == run.id for r in s.runs),
            timeout=30,
            what="the frozen run to be interrupted and re-run",
            workers=[worker],
        )
    finally:
        os.kill(run.worker_pid, signal.SIGCONT)
    frozen_s = time.monotonic() - frozen_at
    steps_when_interrupted = next(r for r in frozen.runs if r.id == run.id).steps

    snapshot = wait_for(session_snapshot, every_run_ended, timeout=60, what="the re-run to end", workers=[worker])
    # The thawed process sleeps at most one step delay before it tries its next step.
    refusal = re.compile(rf"run {run.id} already ended \(interrupted.*\); step \d+ refused")
    deadline = time.monotonic() + 15
    while not refusal.search(worker.log()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert refusal.search(worker.log()), "the thawed process never tried a late step: the fault did not happen"
    snapshot = session_snapshot()
    figures = assert_recovered(snapshot, experiment_id=experiment.pk)
    original = next(r for r in snapshot.runs if r.id == run.id)
    assert original.stop_reason == INTERRUPTED
    assert original.steps == original.step_count == steps_when_interrupted, "a late step landed after the interruption"
    print(
        f"\n[faults] pool process frozen {frozen_s:.1f} s (SIGSTOP, lease 3 s): run {original.id} interrupted with "
        f"{original.steps} steps, its late step refused after SIGCONT; {figures}"
    )


@pytest.mark.parametrize("pool", ["prefork", "threads"])
def test_runs_of_a_worker_killed_with_sigkill_are_interrupted_and_rerun_or_executed(start_worker, pool):
    # threads: as ./rlt up runs its worker, with beat in a thread of the surviving worker
    first = start_worker(step_delay_s=0.3, concurrency=2, env=FAST_RECOVERY, pool=pool)
    experiment = experiment_launch(scenarios=SCENARIOS, policies=POLICIES)
    wait_for(
        session_snapshot,
        lambda s: len(running_with_steps(s)) >= 2,
        timeout=60,
        what="two runs with steps",
        workers=[first],
    )
    first.kill()  # the main process and its pool: nothing gets to clean up
    killed_at = time.monotonic()
    held = [r for r in session_snapshot().runs if r.status == Run.Status.RUNNING and r.parent_id is None]
    assert held, "the killed worker held no run"

    second = start_worker(step_delay_s=0.1, concurrency=2, beat=True, env=FAST_RECOVERY, pool=pool)
    snapshot = wait_for(
        session_snapshot, every_run_ended, timeout=120, what="every run to end", workers=[first, second]
    )
    recovered_s = snapshot.read_at - killed_at
    figures = assert_recovered(snapshot, experiment_id=experiment.pk)
    ended = {r.id: r for r in snapshot.runs}
    for run in held:
        assert ended[run.id].stop_reason == INTERRUPTED, f"run {run.id}, held by the killed worker, was not interrupted"
    print(
        f"\n[faults] worker SIGKILL ({pool} pool): {len(held)} runs held at the kill; {figures}; every run ended "
        f"{recovered_s:.1f} s after the kill"
    )


def test_a_worker_stopped_with_sigterm_finishes_its_runs_and_nothing_is_stuck(start_worker):
    first = start_worker(step_delay_s=0.3, concurrency=2, env=FAST_RECOVERY)
    experiment = experiment_launch(scenarios=SCENARIOS, policies=POLICIES)
    wait_for(
        session_snapshot,
        lambda s: len(running_with_steps(s)) >= 2,
        timeout=60,
        what="two runs with steps",
        workers=[first],
    )
    held = [r.id for r in session_snapshot().runs if r.status == Run.Status.RUNNING and r.parent_id is None]
    first.proc.send_signal(signal.SIGTERM)  # a warm shutdown: the runs it executes finish first
    stopped_at = time.monotonic()
    first.proc.wait(timeout=60)
    shutdown_s = time.monotonic() - stopped_at
    after_stop = {r.id: r for r in session_snapshot().runs}
    assert all(after_stop[pk].ended for pk in held), "the worker stopped before its runs ended:\n" + "\n".join(
        after_stop[pk].line() for pk in held
    )

    second = start_worker(step_delay_s=0.1, concurrency=2, beat=True, env=FAST_RECOVERY)
    snapshot = wait_for(
        session_snapshot, every_run_ended, timeout=120, what="every run to end", workers=[first, second]
    )
    recovered_s = snapshot.read_at - stopped_at
    figures = assert_recovered(snapshot, experiment_id=experiment.pk, allow_interrupted=False)
    print(
        f"\n[faults] worker SIGTERM: {len(held)} runs running at the signal finished in the {shutdown_s:.1f} s "
        f"shutdown; {figures}; every run ended {recovered_s:.1f} s after the signal"
    )


def test_interrupt_stale_and_the_sweep_never_interrupt_a_live_run(start_worker):
    # A 3 s lease and 4 s between steps: only the heartbeat keeps these runs' leases alive.
    worker = start_worker(step_delay_s=4, concurrency=2, env={"RLT_LEASE_S": "3"})
    experiment = experiment_launch(scenarios=["refund-too-old"], policies=POLICIES)
    wait_for(session_snapshot, running_with_steps, timeout=60, what="a run with a step", workers=[worker])
    said = []
    deadline = time.monotonic() + 60
    snapshot = session_snapshot()
    while not every_run_ended(snapshot) and time.monotonic() < deadline:
        live = [r for r in snapshot.runs if r.status == Run.Status.RUNNING]
        for command, *args in (
            ("interrupt_stale", "--older-than", "0"),
            *(("interrupt_stale", "--worker", name) for name in {r.worker_name for r in live}),
            ("sweep_runs",),
        ):
            out = StringIO()
            call_command(command, *args, stdout=out)
            said.append(out.getvalue().strip())
        time.sleep(0.5)
        snapshot = session_snapshot()
    snapshot = wait_for(session_snapshot, every_run_ended, timeout=30, what="every run to end", workers=[worker])
    figures = assert_recovered(snapshot, experiment_id=experiment.pk, allow_interrupted=False)
    interrupting = [line for line in said if "marked interrupted" in line and not line.startswith("0 run(s)")]
    assert not interrupting, interrupting
    print(
        f"\n[faults] interrupt_stale and sweep_runs called {len(said)} times while runs executed (lease 3 s, "
        f"4 s between steps): {figures}"
    )


def test_a_run_stuck_in_a_call_on_a_threads_worker_ends_crashed_soon_after_its_time_limit(start_worker):
    """A threads pool has no Celery time limits: a call that never returns (here the test hold, before
    the run's final answer) must still not keep the run ``running``. Its heartbeat's watchdog ends it."""
    limit_s = 10  # the run's first step must come before it, on a loaded machine too
    worker = start_worker(
        pool="threads", hold=True, beat=True, env={**FAST_RECOVERY, "RLT_RUN_TIME_LIMIT_S": str(limit_s)}
    )
    experiment = experiment_launch(scenarios=["refund-too-old"], policies=["starter"])
    snapshot = wait_for(session_snapshot, running_with_steps, timeout=60, what="the run's first step", workers=[worker])
    run = running_with_steps(snapshot)[0]
    snapshot = wait_for(session_snapshot, every_run_ended, timeout=60, what="the stuck run to end", workers=[worker])
    ended = next(r for r in Run.objects.filter(pk=run.id))
    took_s = (ended.finished_at - ended.started_at).total_seconds()
    assert ended.stop_reason == Run.StopReason.CRASHED and "watchdog" in ended.error, ended.error
    assert limit_s <= took_s <= limit_s + 5 + 3, f"ended {took_s:.1f} s after it started (limit {limit_s} s)"
    assert not any(r.rerun_of_id == run.id for r in snapshot.runs), "a run that ran out of time was re-run"
    steps_at_end = ended.steps.count()
    worker.release()  # the stuck call returns: its final answer must be refused, the run not ended again
    refusal = re.compile(rf"run {run.id} already ended \(crashed.*\); step \d+ refused")
    deadline = time.monotonic() + 15
    while not refusal.search(worker.log()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert refusal.search(worker.log()), worker.log()[-2000:]
    ended.refresh_from_db()
    assert ended.stop_reason == Run.StopReason.CRASHED and ended.steps.count() == steps_at_end
    assert worker.proc.poll() is None
    print(
        f"\n[faults] threads pool, a call stuck past RLT_RUN_TIME_LIMIT_S={limit_s}: run {run.id} ended crashed "
        f"{took_s:.1f} s after its start (experiment {experiment.pk}), its late step refused"
    )
