"""Shared fixtures: a real Celery worker process on this test database (events and rows to record
are built in ``tests/factories.py``).

Each pytest session has its own SQLite test file (or PostgreSQL test database) and its own queue
name (see config/settings.py), so a worker started here takes only this session's tasks.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import psutil
import pytest
from django.conf import settings
from django.db import connection

from agents.scenarios import ENV_VAR as SCENARIO_PACKS_VAR
from agents.scenarios import registry_reset

BASE_DIR = Path(__file__).resolve().parent.parent
# What a session leaves for a reader (worker and server logs, screenshots): RLT_TEST_ARTIFACTS, else
# test-artifacts/ (.ci/run gives each of its concurrent passes a folder of its own).
ARTIFACTS = Path(os.environ.get("RLT_TEST_ARTIFACTS") or BASE_DIR / "test-artifacts")

# The suite checks the built-in scenarios: packs set in this shell (for ./rlt up) would change every
# list of scenarios it compares, here and in the workers it starts. Tests that need a pack load it.
os.environ.pop(SCENARIO_PACKS_VAR, None)
registry_reset()

# Users made by the tests get cheap hashes (tests/hashers.py); the production hasher still checks them.
settings.PASSWORD_HASHERS = ["tests.hashers.OneIterationPBKDF2PasswordHasher", *settings.PASSWORD_HASHERS]


def database_url_for_workers() -> str:
    """The URL of the test database this session created, for worker subprocesses."""
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{db['NAME']}"
    user = quote(db.get("USER") or "")
    password = f":{quote(db['PASSWORD'])}" if db.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    host = db.get("HOST") or "127.0.0.1"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{auth}{host}{port}/{db['NAME']}"


def subprocess_env(overrides: dict[str, str | None]) -> dict[str, str]:
    """This process's environment for a subprocess on the same settings, with ``overrides`` laid over
    it (a value of None removes the variable); never this session's test database file."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    env.pop("RLT_TEST_DB_FILE", None)
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def wait_until(condition, *, timeout: float, what: str, worker: WorkerProcess | None = None):
    """``condition()``'s first true value, asked every 0.05 s; fails after ``timeout`` seconds naming
    ``what``, with the end of ``worker``'s log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    log = worker.log()[-3000:] if worker else ""
    raise AssertionError(f"timed out waiting for {what}\n{log}")


def purge_test_queue() -> None:
    from config.celery import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(settings.CELERY_TASK_DEFAULT_QUEUE)


class WorkerProcess:
    """A ``celery worker`` subprocess; ``log()`` returns what it printed so far.

    ``env`` is laid over the worker's environment (a value of None removes the variable), e.g. another
    broker or database; ``beat=True`` embeds Celery beat (``-B``), so the worker runs periodic tasks too.
    ``pool="threads"`` runs it as ``./rlt up`` does: a threads pool, beat in a thread (``--beat-thread``).
    ``hold=True`` holds every run it executes before its final answer or end is written (the
    ``RLT_TEST_HOLD_FILE`` flag), so a test can look at runs that are still running, for as long as it
    needs, until it calls ``release()``.
    """

    def __init__(
        self,
        *,
        step_delay_s: float = 0.0,
        concurrency: int = 2,
        name: str | None = None,
        env: dict[str, str | None] | None = None,
        beat: bool = False,
        hold: bool = False,
        pool: str = "prefork",
    ) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        self.name = name or f"test-{uuid.uuid4().hex[:8]}"
        self.log_path = ARTIFACTS / f"worker-{os.getpid()}-{self.name}-{uuid.uuid4().hex[:4]}.log"
        self.hold_file = ARTIFACTS / f"hold-{os.getpid()}-{self.name}-{uuid.uuid4().hex[:4]}" if hold else None
        if self.hold_file:
            self.hold_file.touch()
        self.beat_schedule = ARTIFACTS / f"beat-{os.getpid()}-{self.name}-{uuid.uuid4().hex[:4]}" if beat else None
        env = subprocess_env(
            {
                "DATABASE_URL": database_url_for_workers(),
                "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
                "RLT_BROKER_DIR": str(settings.BROKER_DIR),
                "RLT_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
                "RLT_STEP_DELAY_S": str(step_delay_s),
                "RLT_TEST_HOLD_FILE": str(self.hold_file or ""),
                **(env or {}),
            }
        )
        embed = "--beat-thread" if pool == "threads" else "--beat"
        beat_args = [embed, f"--schedule={self.beat_schedule}"] if self.beat_schedule else []
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                f"--pool={pool}",
                f"--concurrency={concurrency}",
                "-n",
                f"{self.name}@%h",
                "-Q",
                settings.CELERY_TASK_DEFAULT_QUEUE,
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel=INFO",
                *beat_args,
            ],
            cwd=BASE_DIR,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def release(self) -> None:
        """Let the runs held by ``hold=True`` (and every later one) write their last step and end."""
        if self.hold_file:
            self.hold_file.unlink(missing_ok=True)

    def wait_ready(self, timeout: float = 60) -> None:
        """Until the worker logs our ``tasks.WORKER_READY`` line: it has taken over from an earlier
        incarnation of its name and takes tasks."""
        from tracer.tasks import WORKER_READY

        ready = re.compile(re.escape(WORKER_READY).replace("%s", re.escape(f"{self.name}@") + r"\S+"))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready.search(self.log()):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise AssertionError(f"the worker did not start:\n{self.log()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the worker and its pool processes: nothing gets to finish or clean up."""
        # The main process first, so it cannot fork a replacement for a pool process killed before it.
        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            children = []
        for pid in [self.proc.pid, *(child.pid for child in children)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        self.release()  # a held run would keep a warm shutdown waiting
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        if self.beat_schedule:
            for path in self.beat_schedule.parent.glob(self.beat_schedule.name + "*"):
                path.unlink(missing_ok=True)


@pytest.fixture
def worker_process(transactional_db):
    """A real Celery worker process executing this test's runs from the real broker.

    Needs committed rows, hence ``transactional_db`` (or ``live_server``). Stopped before the
    database is flushed.
    """
    purge_test_queue()
    worker = WorkerProcess()
    worker.wait_ready()
    yield worker
    worker.stop()


def _uses_transactional_db(request) -> bool:
    if {"transactional_db", "live_server"} & set(request.fixturenames):
        return True
    marker = request.node.get_closest_marker("django_db")
    return bool(marker and marker.kwargs.get("transaction"))


@pytest.fixture(autouse=True)
def _preset_policies_after_flush(request):
    """Transactional tests empty every table between tests, data migrations included: put the presets
    and the reviewer group back."""
    if _uses_transactional_db(request):
        request.getfixturevalue("transactional_db")
        import importlib

        from django.apps import apps

        importlib.import_module("tracer.migrations.0007_reviewer_group").reviewer_group_create(apps, None)
        from agents.policies import PRESETS
        from tracer.models import PolicyVariant

        for policy in PRESETS.values():
            PolicyVariant.objects.get_or_create(
                name=policy.name,
                defaults={"description": policy.description, "settings": policy.settings(), "is_preset": True},
            )
    yield


@pytest.fixture(scope="session", autouse=True)
def _clean_up_the_session(request):
    """At the end: empty this session's queue; keep the worker logs only if a test failed."""
    yield
    with contextlib.suppress(Exception):  # the broker may already be gone at the end of the session
        purge_test_queue()
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        (settings.BROKER_DIR / "control" / f"{settings.CELERY_TASK_DEFAULT_QUEUE}.exchange").unlink(missing_ok=True)
    if not request.session.testsfailed:
        for log in ARTIFACTS.glob(f"worker-{os.getpid()}-*.log"):
            log.unlink(missing_ok=True)


@pytest.fixture
def fake_api(monkeypatch):
    """A started fake Messages API (``tests/fake_messages_api.py``): ``ANTHROPIC_BASE_URL`` and
    ``ANTHROPIC_API_KEY`` point this process, and subprocesses started with ``subprocess_env``, at it."""
    from tests.fake_messages_api import FakeMessagesAPI

    with FakeMessagesAPI() as api:
        for name, value in api.env.items():
            monkeypatch.setenv(name, value)
        yield api
