"""The web application as gunicorn's asyncio worker serves it (``config/gunicorn.py``): slow clients
cost no thread.

gunicorn's event loop reads each request's line and headers; ``application`` then reads its body,
whole, into memory or past ``SPOOL_BYTES`` a temporary file, still on the event loop. Only a complete
request is handed to Django's WSGI handler, in a fixed pool of ``WEB_THREADS`` threads, and the
response it makes is written back by the event loop. So a client that sends a request slowly, or
never finishes it, holds a socket and a few kilobytes, never a thread, and neither does one that
reads its answer slowly (a streamed download past ``STREAM_PAST_BYTES`` holds its thread while it
streams). The threads are the
same few for the life of the process, each with its database connection kept across requests
(``CONN_MAX_AGE``), as gunicorn's thread workers had them, and a response's ``close()`` runs on the
thread that made it once its body is complete (Django's ``request_finished``; the OTLP receiver's
runs written after the answer, ``tracer.intake.otlp.views``). A body declared larger than ``BODY_MAX_BYTES``
is answered 413 unread.

Django's own ASGI handler reads bodies first as well, but runs each request's synchronous views on a
thread made for that request, which opens a database connection per request (Django advises a
connection pool under ASGI): on PostgreSQL a new connection costs more than the whole runs list.
"""

from __future__ import annotations

import asyncio
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from tempfile import SpooledTemporaryFile
from typing import Any

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
wsgi_application = get_wsgi_application()

# Threads that run Django per process: requests answered at once; the event loop queues the rest.
WEB_THREADS = int(os.environ.get("WEB_THREADS") or 4)
# A body larger than this stays on disk while it is read, not in memory.
SPOOL_BYTES = 1024 * 1024
# A streamed response longer than this (an export) is written from its thread as it is made.
STREAM_PAST_BYTES = 256 * 1024
# The largest body any page reads: the Import page takes several files of up to 50 MB at once.
BODY_MAX_BYTES = 256 * 1024 * 1024

threads = ThreadPoolExecutor(max_workers=WEB_THREADS, thread_name_prefix="web")


async def application(scope: dict, receive, send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
    elif scope["type"] == "http":
        await _http(scope, receive, send)
    # websockets: none is served here; the server closes such a connection


async def _lifespan(receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            # gunicorn has waited for its connections; a request still running on a thread ends first
            await asyncio.get_running_loop().run_in_executor(None, threads.shutdown)
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _answer(send, status: int, text: str) -> None:
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _http(scope: dict, receive, send) -> None:
    declared = next((value for name, value in scope["headers"] if name == b"content-length"), b"")
    if declared.isdigit() and int(declared) > BODY_MAX_BYTES:
        await _answer(send, 413, f"the body is {int(declared)} bytes; the most this server reads is {BODY_MAX_BYTES}")
        return
    body = SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 - the request's thread reads it, then it is closed
    try:
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left before it finished sending
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > BODY_MAX_BYTES:
                await _answer(send, 413, f"the body is larger than {BODY_MAX_BYTES} bytes, the most this server reads")
                return
            body.write(chunk)
            if not message.get("more_body", False):
                break
        body.seek(0)
        loop = asyncio.get_running_loop()
        answer = await loop.run_in_executor(threads, _respond, _environ(scope, body), loop, send)
        if answer is not None:  # made whole on the thread: written here, however slowly it is read
            start, chunks = answer
            await send(start)
            await send({"type": "http.response.body", "body": b"".join(chunks)})
    finally:
        body.close()


def _start(status: str, headers: list[tuple[str, str]]) -> dict:
    return {
        "type": "http.response.start",
        "status": int(status.split(" ", 1)[0]),
        "headers": [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers],
    }


def _respond(environ: dict, loop: asyncio.AbstractEventLoop, send) -> tuple[dict, list[bytes]] | None:
    """On a thread: Django's answer to ``environ``. A response made in memory comes back whole, to be
    written by the event loop; a streamed one is written from here, chunk by chunk, and None comes back."""
    started: dict[str, Any] = {}

    def start_response(status, headers, exc_info=None):
        started["start"] = _start(status, headers)

    def sync_send(message: dict) -> None:
        asyncio.run_coroutine_threadsafe(send(message), loop).result()

    result = wsgi_application(environ, start_response)
    try:
        if not getattr(result, "streaming", False):
            return started["start"], list(result)
        chunks, size, stream = [], 0, iter(result)
        for chunk in stream:  # a short stream (a static file) is read whole, then written by the loop
            chunks.append(chunk)
            size += len(chunk)
            if size > STREAM_PAST_BYTES:
                break
        else:
            return started["start"], chunks
        sync_send(started["start"])
        sync_send({"type": "http.response.body", "body": b"".join(chunks), "more_body": True})
        for chunk in stream:
            if chunk:
                sync_send({"type": "http.response.body", "body": chunk, "more_body": True})
        sync_send({"type": "http.response.body", "body": b""})
        return None
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()


def _environ(scope: dict, body) -> dict:
    """The WSGI environ of an ASGI HTTP scope (PEP 3333: text as latin-1 of the bytes sent)."""
    server = scope.get("server") or ("localhost", 80)
    environ = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": scope.get("root_path", "").encode().decode("latin-1"),
        "PATH_INFO": scope["path"].encode().decode("latin-1"),
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1] if server[1] is not None else 80),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "REMOTE_ADDR": (scope.get("client") or ("", 0))[0],
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": body,
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    for raw_name, raw_value in scope["headers"]:
        if b"_" in raw_name:  # X_Forwarded_Proto would read as X-Forwarded-Proto: dropped, as gunicorn does
            continue
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        key = name if name in ("CONTENT_LENGTH", "CONTENT_TYPE") else f"HTTP_{name}"
        value = raw_value.decode("latin-1")
        if key in environ:  # a header sent twice: one value, as RFC 9110 allows (cookies with "; ")
            value = environ[key] + ("; " if key == "HTTP_COOKIE" else ",") + value
        environ[key] = value
    return environ
