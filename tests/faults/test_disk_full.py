"""The disk holding the SQLite database (the embedded default) fills up: a command says what is full
and what was kept; workers writing runs ride it out.

Each test mounts a tmpfs of its own (root only; skipped otherwise) as ``RLT_VAR_DIR``, so the
database and the broker folder are on a disk it can fill for real with a file that takes every free
byte. A launch on the full disk must say so, and the database must hold everything it held before,
pass SQLite's integrity check and take the next launch. Workers executing an experiment while the
disk is full for ``OUTAGE_S`` must end every run once the file goes (docs/reliability.md's checks).
It runs in both CI passes: its database is its own, not the session's.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import BASE_DIR, subprocess_env

from .conftest import FAST_RECOVERY, OUTAGE_S, manage
from .harness import assert_recovered, every_run_ended, read_snapshot, wait_for

pytestmark = pytest.mark.faults

DISK_MB = 64


@pytest.fixture
def small_disk():
    if os.geteuid() != 0:
        pytest.skip("mounting a small disk (tmpfs) to fill needs root")
    directory = Path(tempfile.mkdtemp(prefix="rlt-faults-disk-"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(directory)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        directory.rmdir()
        pytest.skip(f"this machine does not let the test mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)
        with contextlib.suppress(OSError):
            directory.rmdir()


def _fill(directory: Path) -> Path:
    """A file that takes every free byte of the disk."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 20, 4096, 1):  # megabytes, then the last pages, then the last bytes
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler


def test_a_launch_on_a_full_disk_says_what_is_full_and_keeps_what_was_recorded(small_disk):
    env = {"DATABASE_URL": None, "CELERY_BROKER_URL": None, "RLT_VAR_DIR": str(small_disk)}
    manage("migrate", "--no-input", "-v0", env=env)
    manage("run_experiment", "--scenario", "refund-too-old", "--policy", "starter", env=env)
    database = small_disk / "tracer.sqlite3"

    def counts() -> tuple[int, int]:
        with contextlib.closing(sqlite3.connect(database)) as conn:
            return (
                conn.execute("SELECT count(*) FROM tracer_experiment").fetchone()[0],
                conn.execute("SELECT count(*) FROM tracer_run").fetchone()[0],
            )

    before = counts()
    filler = _fill(small_disk)
    launched = subprocess.run(
        [sys.executable, "manage.py", "run_experiment", "--scenario", "all", "--policy", "starter", "--repeats", "20"],
        cwd=BASE_DIR,
        env=subprocess_env(env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    filler.unlink()
    assert launched.returncode == 1, launched.stdout + launched.stderr
    assert "Traceback" not in launched.stderr, launched.stderr
    assert f"the disk that holds the database ({database}) is full" in launched.stderr, launched.stderr
    assert "everything recorded before is kept" in launched.stderr
    with contextlib.closing(sqlite3.connect(database)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert counts() == before  # nothing of the refused launch, nothing of before lost
    manage("run_experiment", "--scenario", "refund-too-old", "--policy", "starter", env=env)
    assert counts() == (before[0] + 1, before[1] + 1)
    print(f"\n[faults] disk full at launch: {launched.stderr.strip()}")


def test_every_run_ends_after_the_disk_is_full_under_running_workers(small_disk, start_worker):
    database = small_disk / "tracer.sqlite3"
    env = {
        "DATABASE_URL": f"sqlite:///{database}",
        "CELERY_BROKER_URL": None,
        "RLT_BROKER_DIR": str(small_disk / "broker"),
        "RLT_VAR_DIR": str(small_disk),
    }
    manage("migrate", "--no-input", "-v0", env=env)

    def read():
        with contextlib.closing(sqlite3.connect(database, timeout=5)) as conn:
            return read_snapshot(conn.cursor())

    worker = start_worker(step_delay_s=0.3, beat=True, env={**env, **FAST_RECOVERY})
    launched = manage(
        "run_experiment",
        "--scenario",
        "refund-too-old,refund-flaky-payment,lookup-flaky,room-book-permission,fatal-credentials,stuck-model",
        "--policy=starter",
        "--policy=structured",
        env=env,
    ).stdout
    experiment_id = int(re.search(r"experiment (\d+):", launched).group(1))
    wait_for(
        read,
        lambda s: s.count(lambda r: r.status == "running" and r.step_count > 0) >= 2,
        timeout=60,
        what="two runs with steps",
        workers=[worker],
    )
    filler = _fill(small_disk)
    full_at = time.monotonic()
    time.sleep(OUTAGE_S)
    filler.unlink()
    snapshot = wait_for(
        read,
        every_run_ended,
        timeout=120 + OUTAGE_S,
        what="every run to end once the disk had room again",
        workers=[worker],
        tolerate=(sqlite3.OperationalError,),
    )
    figures = assert_recovered(snapshot, experiment_id=experiment_id, allow_interrupted=True)
    assert worker.proc.poll() is None, "the worker died with the disk"
    with contextlib.closing(sqlite3.connect(database)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    print(
        f"\n[faults] disk full {OUTAGE_S:.0f} s under running workers (SQLite + folder on it): {figures}; every run "
        f"ended {snapshot.read_at - full_at:.1f} s after it filled"
    )
