"""Fixtures of the fault suite: servers the test owns, and workers pointed at any broker and database.

- ``own_redis``: a ``redis-server`` on a free port in a temporary directory, without persistence
  (``--save "" --appendonly no``), so a restart comes back empty as a lost broker would; ``kill()``,
  ``start()``, ``restart()``. Killed and its directory removed when the test ends, failed or not.
- ``own_postgres``: a PostgreSQL cluster (``initdb`` in a temporary directory, trust auth, ``pg_ctl``
  on a free port); ``stop()``, ``start()``. Stopped and removed when the test ends. The binaries are
  found at run time (``PATH``, ``pg_config --bindir``, Debian's ``/usr/lib/postgresql/*/bin``); as
  root they run as the ``postgres`` user, since PostgreSQL refuses to run as root.
- ``start_worker``: starts ``tests.conftest.WorkerProcess`` workers (any ``env``: broker, database,
  lease and sweep periods; ``beat=True`` embeds Celery beat) and kills whatever is left of them at the
  end, before the test database is flushed.
- ``sending_to``: this process's Celery app sends to another broker inside a ``with`` block, so
  ``experiment_launch`` here talks to the test's own Redis or broker folder.
- ``Served``: the web server as ``./rlt up`` and docs/deployment.md run it (``config/gunicorn.py``),
  over this session's test database or another one, on a free port.

Never the shared servers: the PostgreSQL on 5432 and the Redis on 6379 are left alone.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from django.test import override_settings

from tests.conftest import (
    ARTIFACTS,
    BASE_DIR,
    WorkerProcess,
    database_url_for_workers,
    purge_test_queue,
    subprocess_env,
    wait_until,
)
from tests.ports import free_port

# Short lease, sweep and re-send periods for the workers of a fault test, so recovery is seen in
# seconds: a lease not renewed for 3 s has expired, beat sweeps every second, a queued run whose
# last message is 3 s old is sent again.
FAST_RECOVERY = {"RLT_LEASE_S": "3", "RLT_SWEEP_S": "1", "RLT_RESEND_AFTER_S": "3"}
# How long a server a test stops stays down (PostgreSQL, Redis, a full disk): a few seconds in the
# suite; RLT_FAULT_OUTAGE_S=30 makes the same tests the long outages of docs/reliability.md's table.
OUTAGE_S = float(os.environ.get("RLT_FAULT_OUTAGE_S") or 3)


def _temporary_directory(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))


# --- Redis ------------------------------------------------------------------------------------


class OwnRedis:
    """A redis-server of the test's own, without persistence: after ``restart()`` it holds nothing."""

    def __init__(self, directory: Path) -> None:
        self.binary = shutil.which("redis-server")
        self.directory = directory
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2, socket_connect_timeout=2)

    def start(self, timeout: float = 15) -> None:
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
                "--logfile",
                str(self.directory / "redis.log"),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if self.client().ping():
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        log = (self.directory / "redis.log").read_text(errors="replace")[-2000:]
        self.kill()
        raise AssertionError(f"redis-server did not start on port {self.port}:\n{log}")

    def kill(self) -> None:
        """SIGKILL: whatever it held in memory is gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def queue_length(self, queue: str) -> int:
        return int(self.client().llen(queue))


@pytest.fixture
def own_redis() -> Iterator[OwnRedis]:
    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    directory = _temporary_directory("rlt-faults-redis-")
    server = OwnRedis(directory)
    try:
        server.start()
        yield server
    finally:
        server.kill()
        shutil.rmtree(directory, ignore_errors=True)


# --- PostgreSQL -------------------------------------------------------------------------------


def postgres_bindir() -> Path | None:
    """Where ``initdb`` and ``pg_ctl`` are: on PATH, where ``pg_config`` says, or Debian's versioned folder."""
    candidates: list[Path] = []
    if shutil.which("initdb"):
        candidates.append(Path(shutil.which("initdb")).parent)
    if shutil.which("pg_config"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=10).stdout
            candidates.append(Path(out.strip()))
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: [int(x) for x in p.parent.name.split(".") if x.isdigit()],
    )
    candidates.extend(reversed(debian))
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    return None


class OwnPostgres:
    """A PostgreSQL cluster of the test's own: trust auth, user ``postgres``, no fsync (it is thrown away)."""

    def __init__(self, bindir: Path, directory: Path) -> None:
        self.bindir = bindir
        self.directory = directory
        self.data = directory / "data"
        self.log = directory / "postgres.log"
        self.port = free_port()
        self.running = False
        # PostgreSQL refuses to run as root: then its programs run as the postgres user (or nobody).
        self.user: str | None = None
        if os.geteuid() == 0:
            for name in ("postgres", "nobody"):
                with contextlib.suppress(KeyError):
                    pwd.getpwnam(name)
                    self.user = name
                    break
            account = pwd.getpwnam(self.user)
            os.chown(directory, account.pw_uid, account.pw_gid)

    def _run(self, program: str, *args: str, timeout: float = 60) -> None:
        kwargs = {}
        if self.user:
            account = pwd.getpwnam(self.user)
            kwargs = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
        result = subprocess.run(
            [str(self.bindir / program), *args],
            cwd=self.directory,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            **kwargs,
        )
        if result.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise AssertionError(f"{program} {' '.join(args)} failed:\n{result.stdout}{result.stderr}\n{log}")

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "-N")

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c full_page_writes=off -c synchronous_commit=off"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start")
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m fast``: every connection is cut, as when the database server restarts."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")
        self.running = False

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str, **kwargs):
        import psycopg

        return psycopg.connect(self.url(database), connect_timeout=3, **kwargs)

    def create_database(self, name: str) -> str:
        with self.connect("postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def close(self) -> None:
        if self.running:
            with contextlib.suppress(Exception):
                self.stop(mode="immediate")
        pid_file = self.data / "postmaster.pid"
        if pid_file.exists():  # pg_ctl could not stop it: the postmaster this test started, by its pid
            with contextlib.suppress(Exception):
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest.fixture
def own_postgres() -> Iterator[OwnPostgres]:
    bindir = postgres_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL's initdb and pg_ctl were not found (PATH, pg_config --bindir)")
    directory = _temporary_directory("rlt-faults-pg-")
    cluster = OwnPostgres(bindir, directory)
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        cluster.close()


# --- workers and this process's broker --------------------------------------------------------


@pytest.fixture(autouse=True)
def _session_queue_empty_around_each_fault():
    """No task of an earlier test reaches this test's workers, and none of this test's outlives it."""
    purge_test_queue()
    yield
    purge_test_queue()


@pytest.fixture
def start_worker() -> Iterator:
    """``start_worker(**WorkerProcess options)``: a ready worker; all of them are killed when the test ends."""
    started: list[WorkerProcess] = []

    def start(**options) -> WorkerProcess:
        worker = WorkerProcess(**options)
        started.append(worker)
        worker.wait_ready()
        return worker

    yield start
    for worker in started:
        if worker.proc.poll() is None:
            worker.kill()
        worker.stop()


def filesystem_broker(directory: Path) -> tuple[str, dict]:
    """The URL and transport options of a filesystem broker in ``directory``, as config/settings.py makes them."""
    for sub in ("queue", "processed", "control"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    return "filesystem://localhost//", {
        "data_folder_in": str(directory / "queue"),
        "data_folder_out": str(directory / "queue"),
        "processed_folder": str(directory / "processed"),
        "control_folder": str(directory / "control"),
        "store_processed": False,
        "polling_interval": 0.05,
    }


def _drop_broker_connections(app) -> None:
    if app._pool is not None:
        with contextlib.suppress(Exception):
            app._pool.force_close_all()
        app._pool = None
    app.amqp._producer_pool = None


@contextlib.contextmanager
def sending_to(url: str, transport_options: dict | None = None) -> Iterator[None]:
    """Inside the block, this process's Celery app (launches, sweeps called here) uses broker ``url``.

    The read and write URLs are set too: Celery prefers the CELERY_BROKER_URL environment variable to
    ``broker_url``, and CI sets that variable.
    """
    from config.celery import app

    keys = ("broker_url", "broker_read_url", "broker_write_url", "broker_transport_options")
    saved = {key: app.conf.get(key) for key in keys}
    _drop_broker_connections(app)
    app.conf.update(
        broker_url=url, broker_read_url=url, broker_write_url=url, broker_transport_options=transport_options or {}
    )
    try:
        with override_settings(CELERY_BROKER_URL=url):
            yield
    finally:
        _drop_broker_connections(app)
        app.conf.update(saved)


@pytest.fixture
def broker_folder() -> Iterator[Path]:
    """A filesystem broker's folder of the test's own, removed at the end."""
    directory = _temporary_directory("rlt-faults-broker-")
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def manage(*args: str, env: dict[str, str | None], timeout: float = 180) -> subprocess.CompletedProcess:
    """``manage.py ARGS`` in a subprocess with ``env`` laid over this environment (None removes a variable)."""
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=subprocess_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise AssertionError(f"manage.py {' '.join(args)} exited {result.returncode}:\n{result.stdout}{result.stderr}")
    return result


# --- the web server ---------------------------------------------------------------------------


class Served:
    """The web server as ``./rlt up`` runs it (``config/gunicorn.py``, ``DEBUG`` off), on a free port.

    Over this session's test database unless ``env`` names another ``DATABASE_URL``; ``held``: the
    OTLP writer thread waits (``RLT_TEST_HOLD_FILE``) until ``release()``; ``host``: the address it
    binds (``0.0.0.0`` as docs/deployment.md has it; the test still connects over loopback);
    ``options``: more of gunicorn's (e.g. the thread workers served before, to compare). Its error and
    access logs go to one file in test-artifacts/ (``log()``).
    """

    def __init__(
        self,
        *,
        held: bool = False,
        env: dict[str, str | None] | None = None,
        workers: int = 1,
        host: str = "127.0.0.1",
        options: tuple[str, ...] = (),
    ) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        self.hold = ARTIFACTS / f"otlp-writer-hold-{secrets.token_hex(4)}"
        if held:
            self.hold.touch()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = ARTIFACTS / f"gunicorn-{self.port}.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        environment = subprocess_env(
            {
                "DATABASE_URL": database_url_for_workers(),
                "RLT_TEST_HOLD_FILE": str(self.hold),
                "DJANGO_DEBUG": "0",
                "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
                "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
                "WEB_CONCURRENCY": str(workers),
                **(env or {}),
            }
        )
        self.proc = subprocess.Popen(
            [
                str(BASE_DIR / ".venv" / "bin" / "gunicorn"),
                *("-c", str(BASE_DIR / "config" / "gunicorn.py")),
                *("--bind", f"{host}:{self.port}", "--access-logfile", "-", *options),
            ],
            cwd=BASE_DIR,
            env=environment,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        wait_until(self._answers, timeout=60, what=f"gunicorn on port {self.port}")

    def _answers(self) -> bool:
        assert self.proc.poll() is None, self.log()[-3000:]
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def release(self) -> None:
        self.hold.unlink(missing_ok=True)

    def stop(self) -> None:
        self.release()
        for proc in (
            [*psutil.Process(self.proc.pid).children(recursive=True), self.proc] if self.proc.poll() is None else []
        ):
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        self.proc.wait(10)
        self._log.close()
