"""Retention at 100,000 runs while a writer records steps: the purge removes every expired run in
batches, and the writer is neither refused nor held up for long (SQLite's one write lock is taken by
each batch in turn; PostgreSQL locks only the rows that go). Runs on this session's database, so once
on each CI pass."""

from __future__ import annotations

import statistics
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from agents.events import StepEvent
from tracer import recording, retention
from tracer.models import Run, Step
from tracer.tasks import PURGE_PAUSE_S

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

RUNS = 100_000
CHUNK = 5_000
# The longest a single step write may wait while the purge runs: a stall, not the odd slow write.
STALL_S = 2.0


def _expired_runs(count: int) -> None:
    """``count`` ended imported runs from a year ago, with a step each, written in bulk."""
    long_ago = timezone.now() - timedelta(days=365)
    made = 0
    while made < count:
        runs = Run.objects.bulk_create(
            Run(scenario="s", policy_name="p", source=Run.Source.IMPORT, status=Run.Status.FINISHED, step_count=1)
            for _ in range(min(CHUNK, count - made))
        )
        Step.objects.bulk_create(Step(run_id=run.pk, index=1, kind="final_answer", text="done") for run in runs)
        Run.objects.filter(pk__in=[r.pk for r in runs]).update(created_at=long_ago)
        made += len(runs)


def test_a_purge_of_100000_runs_does_not_lock_out_a_writer_recording_steps():
    _expired_runs(RUNS)
    live = Run.objects.create(scenario="s", policy_name="p", source=Run.Source.API, status=Run.Status.RUNNING)
    latencies: list[float] = []
    failures: list[BaseException] = []
    purging = threading.Event()
    done = threading.Event()

    def writer() -> None:
        index = 0
        try:
            while not done.is_set():
                index += 1
                started = time.monotonic()
                recording.step_record(run=live, step=StepEvent(index=index, kind="tool_call", tool_name="lookup"))
                if purging.is_set():
                    latencies.append(time.monotonic() - started)
                time.sleep(0.01)
        except BaseException as exc:  # a refused or failed write: the test fails with it
            failures.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        purging.set()
        report = retention.runs_purge(rules={"import": 30}, pause_s=PURGE_PAUSE_S)
    finally:
        done.set()
        thread.join(60)
    assert not failures, failures
    assert report.runs_by_source == {"import": RUNS} and report.rows["tracer.Step"] == RUNS
    assert not Run.objects.filter(source=Run.Source.IMPORT).exists()
    live.refresh_from_db()
    assert live.step_count == Step.objects.filter(run=live).count() > 0  # every write landed, none lost
    worst = max(latencies)
    # A writer waits at most for the batch that holds the lock; on a machine too busy for that batch to
    # take under a second, the bound is that batch's time and a second more, not a stall.
    bound = max(STALL_S, report.longest_batch_s + 1.0)
    assert worst < bound, f"a step write waited {worst:.2f} s; the longest batch took {report.longest_batch_s:.2f} s"
    print(
        f"\n[faults] retention on {connection.vendor}: {report.summary()}; meanwhile {len(latencies)} step writes, "
        f"median {statistics.median(latencies) * 1000:.1f} ms, p99 "
        f"{sorted(latencies)[int(len(latencies) * 0.99)] * 1000:.1f} ms, longest {worst * 1000:.0f} ms (longest batch "
        f"{report.longest_batch_s * 1000:.0f} ms)"
    )
