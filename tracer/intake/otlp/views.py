"""The OTLP/HTTP traces endpoint, ``POST /v1/traces``.

The endpoint answers as OTLP/HTTP asks, so exporters retry what is worth retrying and drop what is
not: 200 with an ``ExportTraceServiceResponse`` (``partial_success`` when spans were refused); 400
for a body that cannot be read, naming the field; 401 without an active API token
(``Authorization: Bearer``), 403 when its user may not add runs (``access.IMPORT``, as for the
Import page and the API); 411 for a chunked body (one with a Content-Length is read); 413 past
``RLT_OTLP_MAX_BYTES``; 415 for another encoding; 503 with
``Retry-After`` while the database cannot be written. Refusals carry a ``google.rpc.Status`` in the
request's encoding.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from ... import access
from ...api_errors import body_discard
from ...outage import RETRY_AFTER_S, database_problem
from . import receiver, wire

logger = logging.getLogger(__name__)

# A request of this many spans or more (a batch exporter's: the SDK's BatchSpanProcessor sends up to
# 512) is answered as soon as its spans are stored, and its runs are written right after the answer,
# while the exporter makes its next batch. A smaller one (a live agent's SimpleSpanProcessor sends
# each span as it ends) is answered once its runs are written, so a 200 means they are queryable.
ANSWER_FIRST_SPANS = 100


def _sender(request: HttpRequest):
    """The user whose API token the request carries, or None (``tracer.tokens``)."""
    from ...tokens import token_user

    return token_user(request)


def _refusal(*, kind: str, status: int, message: str, field_path: str | None = None) -> HttpResponse:
    response = HttpResponse(
        wire.status_body(kind=kind, http_status=status, message=message, field_path=field_path),
        status=status,
        content_type=kind,
    )
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="otlp"'
    if status == 503:
        response["Retry-After"] = str(RETRY_AFTER_S)
    return response


@csrf_exempt
@require_POST
def traces_receive(request: HttpRequest) -> HttpResponse:
    try:
        kind = wire.media_type(request.content_type or "")
    except wire.UnsupportedMediaType as exc:
        return _refusal(kind=wire.JSON, status=415, message=str(exc))
    try:
        user = _sender(request)
        if user is not None:
            access.user_permissions_load(user)  # one query, read afresh: a permission taken away counts at once
    except (OperationalError, InterfaceError) as exc:  # the token cannot be checked: the exporter sends again
        logger.warning("OTLP request not checked, the database cannot be read: %s", exc)
        return _refusal(kind=kind, status=503, message=f"{database_problem(exc)}; send again")
    if user is None:
        return _refusal(
            kind=kind,
            status=401,
            message="an active API token is needed: send it as 'Authorization: Bearer <token>' "
            "(make one on the dashboard's Tokens page)",
        )
    if not user.has_perms(access.IMPORT):
        return _refusal(
            kind=kind,
            status=403,
            message="this token's user may not add runs: they need the import permission (tracer.add_run), "
            "which an administrator gives, as for the Import page and the API",
        )
    limit = settings.RLT_OTLP_MAX_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if not declared and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
        # Django reads a body by its Content-Length: a chunked one would be read as empty
        return _refusal(kind=kind, status=411, message="send the body with a Content-Length, not chunked")
    if declared > limit:  # answered by its Content-Length, the body thrown away unread so the sender sees it
        body_discard(request)
        return _refusal(kind=kind, status=413, message=str(wire.BodyTooLarge(limit)))
    body = request.body if hasattr(request, "_body") else request.read(limit + 1)
    if len(body) > limit:
        return _refusal(kind=kind, status=413, message=str(wire.BodyTooLarge(limit)))
    try:
        body = wire.decompressed(body, request.headers.get("Content-Encoding", ""), max_bytes=limit)
        decoded = wire.decode(body, kind=kind)
    except wire.BodyTooLarge as exc:
        return _refusal(kind=kind, status=413, message=str(exc))
    except wire.UnsupportedMediaType as exc:
        return _refusal(kind=kind, status=415, message=str(exc))
    except wire.WireError as exc:
        return _refusal(kind=kind, status=400, message=str(exc), field_path=exc.path)
    try:
        receipt = receiver.spans_store(spans=decoded.spans, user=user)
    except (OperationalError, InterfaceError) as exc:
        logger.warning("OTLP request not stored, the database cannot be written: %s", exc)
        return _refusal(kind=kind, status=503, message=f"{database_problem(exc)}; send again")
    answer_first = len(decoded.spans) >= ANSWER_FIRST_SPANS
    if not answer_first:
        try:
            receipt.unwritten(receiver.traces_record(unrecorded=receipt.unrecorded, user=user))
        except (OperationalError, InterfaceError) as exc:  # the spans are stored: sending again writes the runs
            logger.warning("OTLP runs not written, the database cannot be written: %s", exc)
            return _refusal(kind=kind, status=503, message=f"{database_problem(exc)}; send again")
    rejected = len(decoded.rejected) + receipt.rejected_spans
    problems = decoded.rejected + receipt.errors
    message = ""
    if problems:
        message = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
    body = wire.success_body(kind=kind, rejected_spans=rejected, error_message=message)
    if answer_first:
        return _AnsweredFirst(
            body,
            content_type=kind,
            then=lambda: _runs_write_after(receipt, user),
            behind=bool(request.META.get("wsgi.multithread")),
        )
    return HttpResponse(body, content_type=kind)


def _runs_write_after(receipt: receiver.Receipt, user) -> None:
    """The runs of a request answered first, written once the answer is sent. What fails here stays
    behind its stored spans and is written by the trace's next request or beat's sweep
    (``receiver.traces_unrecorded_write``); a trace whose run cannot be written at all is logged."""
    hold = settings.RLT_TEST_HOLD_FILE  # tests only: wait here while that file exists
    while hold and os.path.exists(hold):
        time.sleep(0.05)
    try:
        receiver.traces_record(unrecorded=receipt.unrecorded, user=user)
    except (OperationalError, InterfaceError) as exc:
        logger.warning("OTLP runs not written after the answer, the database cannot be written: %s", exc)


class _AnsweredFirst(HttpResponse):
    """A response whose ``then`` runs once it has been sent: the WSGI server calls ``close()`` after
    writing the body (gunicorn, runserver and Django's test client alike), so the client is already
    on its way (an exporter encoding its next batch). Under a threaded server (``behind``: gunicorn's
    gthread workers, runserver) ``then`` is handed to the process's writer thread (``WriteBehind``),
    so the connection takes its next request at once, its spans stored while this one's runs are
    written; otherwise it runs right here, before the connection takes its next request."""

    def __init__(self, *args, then, behind: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._then = then
        self._behind = behind

    def close(self) -> None:
        then, self._then = self._then, None
        try:
            if then is not None:
                if self._behind:
                    write_behind.submit(then)
                else:
                    then()
        except Exception:
            logger.exception("OTLP runs not written after the answer")
        finally:
            super().close()


class WriteBehind:
    """A thread of the process that writes the runs of requests answered first, in the order they were
    answered, on its own database connection. Up to ``depth`` writes wait behind the one under way;
    a request answered while that many wait writes its runs itself (before its connection takes the
    next request), so several exporters at once still write in parallel, an exporter faster than the
    database is slowed to its pace, and the spans held in memory stay bounded.
    So does one answered when the thread cannot be started. The thread ends, closing its
    connection, once no write has come for ``idle_s`` seconds (the next answer starts another); it is
    no daemon, so a process stopping gracefully finishes the writes queued before it exits. A write
    the process dies before doing is done by the trace's next request or beat's sweep
    (``receiver.traces_unrecorded_write``), as for a write that fails."""

    def __init__(self, depth: int = 2, idle_s: float = 0.5) -> None:
        self.idle_s = idle_s
        self._jobs: queue.Queue = queue.Queue(maxsize=depth)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, job) -> None:
        """``job`` queued for the thread, or done here when the queue is full or no thread can start."""
        try:
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    thread = threading.Thread(target=self._work, name="otlp-runs-writer")
                    thread.start()  # before the job is queued: a job never waits for a thread that is not there
                    self._thread = thread
                self._jobs.put_nowait(job)
        except (queue.Full, RuntimeError):  # RuntimeError: no thread can be started now
            job()

    def join(self, timeout: float | None = None) -> None:
        """Wait until the thread has written everything and ended (tests, before their database goes)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _work(self) -> None:
        from django.db import close_old_connections, connections

        try:
            while True:
                try:
                    job = self._jobs.get(timeout=self.idle_s)
                except queue.Empty:
                    with self._lock:
                        if self._jobs.empty():  # a job queued from now on finds no thread and starts one
                            self._thread = None
                            return
                    continue
                try:
                    close_old_connections()  # one the database dropped is opened again
                    job()
                except Exception:
                    logger.exception("OTLP runs not written after the answer")
        finally:
            connections.close_all()


write_behind = WriteBehind()
