"""What the benchmarks share: a free loopback port, a fresh PostgreSQL database, a child process's
environment for one database, and the app served by gunicorn as `./rlt up` serves it (DEBUG off)."""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tests.ports import free_port

BASE_DIR = Path(__file__).resolve().parents[2]


def pg_recreate(url: str) -> None:
    """Drop and create the database ``url`` names, so a round starts empty."""
    import psycopg

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def backend_env(tmp: str, backend: str, pg_url: str, *, served: bool = False) -> dict[str, str]:
    """The environment of a benchmark's child process for ``backend``: its files under ``tmp``, and
    for "postgres" the database ``pg_url`` names, dropped and created afresh (else SQLite). With
    ``served``, DEBUG off as the app is served (a secret key, the test client's host)."""
    env = dict(os.environ, RLT_VAR_DIR=tmp, DJANGO_SETTINGS_MODULE="config.settings")
    if served:
        env.update(DJANGO_DEBUG="0", DJANGO_SECRET_KEY=secrets.token_urlsafe(50), DJANGO_ALLOWED_HOSTS="testserver")
    env.pop("RLT_TEST_DB_FILE", None)
    if backend == "postgres":
        pg_recreate(pg_url)
        env["DATABASE_URL"] = pg_url
    else:
        env.pop("DATABASE_URL", None)
    return env


def pg_answers(url: str) -> bool:
    try:
        import psycopg

        base = url.rpartition("/")[0]
        with psycopg.connect(f"{base}/postgres", connect_timeout=3):
            return True
    except Exception:
        return False


# The web server before requests were read by an event loop: gunicorn's thread workers, 4 threads, over
# the WSGI application (bench_serving.py measures the current one against it).
GTHREAD = ("--worker-class", "gthread", "--threads", "4", "config.wsgi")


@contextlib.contextmanager
def gunicorn_serving(*options: str, tree: Path = BASE_DIR) -> Iterator[int]:
    """The app under gunicorn (``config/gunicorn.py``, and ``options`` of gunicorn's over it) on a free
    loopback port, until the block ends; yields the port once it accepts connections. The database is
    whatever this process's environment names; ``tree``: the checkout whose code is served (another
    one than this: the code before a change, on the same database)."""
    port = free_port()
    env = dict(os.environ, DJANGO_DEBUG="0", DJANGO_SECRET_KEY=secrets.token_urlsafe(40), LOG_LEVEL="WARNING")
    web = subprocess.Popen(
        [
            str(BASE_DIR / ".venv" / "bin" / "gunicorn"),
            *("-c", str(tree / "config" / "gunicorn.py")),
            *("--bind", f"127.0.0.1:{port}", *options),
        ],
        cwd=tree,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if web.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"gunicorn did not start: {web.stderr.read().decode()[-2000:]}") from None
                time.sleep(0.1)
        yield port
    finally:
        web.terminate()
        web.wait(timeout=30)


def pg_drop(url: str) -> None:
    """Drop the database ``url`` names (a benchmark's scratch database, at its end)."""
    import psycopg

    base, _, name = url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
