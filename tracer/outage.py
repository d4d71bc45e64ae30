"""What the dashboard says while its database cannot be used: 503 with ``Retry-After``, never a 500.

A database that went away (PostgreSQL restarting, a connection cut), SQLite's lock held past its busy
timeout, or a full disk raise ``OperationalError`` or ``InterfaceError`` wherever the database is
touched first: a token check, a session read or saved, a login, a page, the API, OTLP. Requests meet
it in many places, but every uncaught exception reaches the project's ``handler500``, which is
``server_error`` here: it answers such an error 503 with ``Retry-After`` (the API's error shape under
``/api/``, a page naming the problem elsewhere), so browsers, API clients and OTLP exporters know to
try again, and keeps the 500 page for everything else. The OTLP receiver and the API answer in their
own formats before it (``tracer.intake.otlp.views``, ``tracer.api``) with the same ``RETRY_AFTER_S``.

Management commands have no response: ``command_failure`` says in one sentence what was met, which
database, and that what was recorded before is kept (a write the database refused is rolled back),
instead of a traceback (``manage.py``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, HttpResponseServerError, JsonResponse
from django.template import loader

# Errors of a database that is down, restarting, locked past its busy timeout or out of disk.
DATABASE_LOST = (OperationalError, InterfaceError)
# What every 503 for the database asks a client to wait before it sends again. OTLP exporters honour
# it within their export timeout (10 s by default): 2 s gives them five tries in that time.
RETRY_AFTER_S = 2

# Free bytes under which SQLite's "disk I/O error" is taken as a full disk: a write of its log failed.
DISK_FULL_BELOW_BYTES = 1 << 20
_DISK_FULL = ("database or disk is full", "no space left on device", "could not extend file", "disk full")


def database_problem(exc: BaseException) -> str:
    """The database error ``exc`` in words a person can act on, naming the database (no password)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    lowered = str(exc).lower()
    where = database_display()
    if any(marker in lowered for marker in _DISK_FULL) or ("disk i/o error" in lowered and _sqlite_disk_full()):
        return f"the disk that holds the database ({where}) is full ({text})"
    if "disk i/o error" in lowered:
        return f"the database file ({where}) could not be read or written ({text})"
    if "database is locked" in lowered:
        return f"the database ({where}) is busy: another writer held its lock longer than RLT_SQLITE_TIMEOUT_S ({text})"
    return f"the database ({where}) cannot be reached ({text})"


def _sqlite_disk_full() -> bool:
    """Whether the SQLite file's disk has no room left: SQLite says "disk I/O error" when its write-ahead
    log or shared-memory file cannot grow, not "database or disk is full"."""
    db = settings.DATABASES["default"]
    if not db["ENGINE"].endswith("sqlite3"):
        return False
    try:
        return shutil.disk_usage(Path(db["NAME"]).parent).free < DISK_FULL_BELOW_BYTES
    except OSError:
        return False


def database_display() -> str:
    """The default database as it may be shown: the SQLite file, or PostgreSQL's host, port and name."""
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return str(db["NAME"])
    host = db.get("HOST") or "localhost"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgresql://{host}{port}/{db.get('NAME') or ''}"


def database_lost(exc: BaseException | None) -> bool:
    return isinstance(exc, DATABASE_LOST)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: 503 with ``Retry-After`` when the exception being handled is the database's,
    else the 500 page. Both render without the request or context processors, which would read the
    session and the user from the database that just failed."""
    exc = sys.exc_info()[1]
    if not database_lost(exc):
        return HttpResponseServerError(loader.get_template("500.html").render())
    message = database_problem(exc)
    if request.path.startswith("/api/"):  # the API's error shape (docs/api.md)
        response: HttpResponse = JsonResponse(
            {"errors": [{"path": "", "message": f"{message}; try again"}]}, status=503
        )
    else:
        response = HttpResponse(loader.get_template("503.html").render({"message": message}), status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response


def command_failure(exc: BaseException, *, command: str) -> str:
    """What ``manage.py COMMAND`` says when the database refused it: the problem, and what is kept."""
    problem = database_problem(exc)
    then = (
        "Free space on that disk and run it again."
        if problem.startswith("the disk")
        else "Run it again once it answers."
    )
    return (
        f"{command}: stopped, {problem}. The write it was making was rolled back; everything recorded before is "
        f"kept. {then}"
    )
