"""The database goes away while workers write runs: PostgreSQL restarted, or SQLite locked.

PostgreSQL: the test owns a cluster (``own_postgres``), so it runs in both CI passes; the launch is
``manage.py run_experiment`` and the worker a subprocess, both pointed at that cluster, and the rows
are read with psycopg, which fails while it is down. SQLite: another connection holds
the session's test database with ``BEGIN EXCLUSIVE`` longer than the workers' busy timeout, so their
writes fail with "database is locked"; it needs the session to run on SQLite (CI's second pass).
"""

from __future__ import annotations

import re
import sqlite3
import time

import pytest
from django.conf import settings
from django.db import connection

from tracer.experiments import experiment_launch
from tracer.models import Run

from .conftest import FAST_RECOVERY, OUTAGE_S, manage
from .harness import assert_recovered, every_run_ended, read_snapshot, session_snapshot, wait_for

pytestmark = pytest.mark.faults

# 12 runs of 1 to 10 steps: with 0.3 s after each step they take about 5 s on two pool processes,
# so several are running, and several queued, when the database goes away.
SCENARIOS = [
    "refund-too-old",
    "refund-flaky-payment",
    "lookup-flaky",
    "room-book-permission",
    "fatal-credentials",
    "stuck-model",
]
POLICIES = ["starter", "structured"]
DOWN_S = OUTAGE_S


def running_with_steps(snapshot) -> int:
    return snapshot.count(lambda r: r.status == Run.Status.RUNNING and r.step_count > 0)


def session_broker_env() -> dict[str, str]:
    """The broker and queue of this session, for subprocesses that send to or read from it."""
    return {
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "RLT_BROKER_DIR": str(settings.BROKER_DIR),
        "RLT_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
    }


@pytest.mark.parametrize(
    "lease_s",
    [
        pytest.param(20, id="outage-within-the-retry-window"),
        pytest.param(3, id="outage-beyond-the-lease"),
    ],
)
def test_every_run_ends_after_postgresql_restarts_under_running_workers(lease_s, own_postgres, start_worker):
    """A worker retries a write for RLT_LEASE_S / 2: with a 20 s lease the runs ride out the 3 s restart
    (nothing interrupted); with a 3 s lease the runs under way are interrupted and re-run."""
    import psycopg

    database = own_postgres.create_database("rlt_faults")
    env = {**session_broker_env(), "DATABASE_URL": database}
    manage("migrate", "--no-input", "-v0", env=env)

    def read():
        with own_postgres.connect("rlt_faults") as conn, conn.cursor() as cursor:
            return read_snapshot(cursor)

    worker = start_worker(step_delay_s=0.3, beat=True, env={**env, **FAST_RECOVERY, "RLT_LEASE_S": str(lease_s)})
    launched = manage(
        "run_experiment", "--scenario", ",".join(SCENARIOS), *(f"--policy={p}" for p in POLICIES), env=env
    ).stdout
    experiment_id = int(re.search(r"experiment (\d+):", launched).group(1))
    wait_for(read, lambda s: running_with_steps(s) >= 2, timeout=60, what="two runs with steps", workers=[worker])

    own_postgres.stop(mode="fast")  # every connection cut, as a restart or failover does
    down_at = time.monotonic()
    time.sleep(DOWN_S)
    own_postgres.start()
    at_restart = read()
    snapshot = wait_for(
        read,
        every_run_ended,
        timeout=120 + DOWN_S,
        what="every run to end after the restart",
        workers=[worker],
        tolerate=(psycopg.OperationalError,),
    )
    recovered_s = snapshot.read_at - down_at
    rides_out = lease_s / 2 > DOWN_S + 2  # the retry window covers the outage and pg_ctl's own seconds
    figures = assert_recovered(snapshot, experiment_id=experiment_id, allow_interrupted=not rides_out)
    if not rides_out:
        assert figures.interrupted > 0, "no run was cut off by the outage: the fault did not happen"
    assert worker.proc.poll() is None, "the worker died with the database"
    print(
        f"\n[faults] PostgreSQL restarted ({DOWN_S} s down, lease {lease_s} s): {running_with_steps(at_restart)} runs "
        f"running when it came back; {figures}; every run ended {recovered_s:.1f} s after the stop"
    )


@pytest.mark.django_db(transaction=True)
def test_every_run_ends_after_sqlite_is_locked_beyond_the_busy_timeout(start_worker):
    if connection.vendor != "sqlite":
        pytest.skip(
            "this session's database is PostgreSQL: its outage is the PostgreSQL restart test; the SQLite lock "
            "runs in the SQLite pass"
        )
    # Writes give up after 0.5 s instead of 20 s, so a 3 s lock makes them fail.
    worker = start_worker(step_delay_s=0.3, beat=True, env={"RLT_SQLITE_TIMEOUT_S": "0.5", **FAST_RECOVERY})
    experiment = experiment_launch(scenarios=SCENARIOS, policies=POLICIES)
    wait_for(
        session_snapshot, lambda s: running_with_steps(s) >= 2, timeout=60, what="two runs with steps", workers=[worker]
    )

    lock = sqlite3.connect(connection.settings_dict["NAME"], timeout=10, isolation_level=None)
    try:
        lock.execute("BEGIN EXCLUSIVE")
        locked_at = time.monotonic()
        time.sleep(DOWN_S)
    finally:
        lock.close()  # rolls back: the lock is released
    at_unlock = session_snapshot()
    snapshot = wait_for(
        session_snapshot, every_run_ended, timeout=120, what="every run to end after the lock", workers=[worker]
    )
    recovered_s = snapshot.read_at - locked_at
    assert "database is locked" in worker.log(), "no write of the worker met the lock: the fault did not happen"
    figures = assert_recovered(snapshot, experiment_id=experiment.pk)
    assert worker.proc.poll() is None, "the worker died with the lock"
    print(
        f"\n[faults] SQLite locked {DOWN_S} s (busy timeout 0.5 s): {running_with_steps(at_unlock)} runs running at "
        f"the unlock; {figures}; every run ended {recovered_s:.1f} s after the lock was taken"
    )
