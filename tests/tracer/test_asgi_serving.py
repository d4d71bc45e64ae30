"""config/asgi.py: a request reaches Django only once its body has been read whole; the answer is
Django's, written back by the event loop; what no page reads is refused before it is read."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from config import asgi

pytestmark = pytest.mark.django_db(transaction=True)


def served(method: str, path: str, *, chunks=(b"",), headers=(), query: bytes = b"") -> tuple[int, dict, bytes, int]:
    """``application`` asked once: (status, headers, body, body messages received before the answer)."""
    incoming = [
        {"type": "http.request", "body": chunk, "more_body": k < len(chunks) - 1} for k, chunk in enumerate(chunks)
    ]
    sent: list[dict] = []
    taken = 0

    async def receive():
        nonlocal taken
        await asyncio.sleep(0.01)  # a slow client: each piece arrives later
        taken += 1
        return incoming[taken - 1]

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "query_string": query,
        "headers": [(b"host", b"testserver"), *headers],
        "http_version": "1.1",
        "scheme": "http",
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 5000),
    }
    # Its own thread, so its own event loop: a browser test earlier in the session may leave
    # Playwright's loop running on this one, where asyncio.run refuses to start.
    failed: list[BaseException] = []

    def serve():
        try:
            asyncio.run(asgi.application(scope, receive, send))
        except BaseException as exc:  # re-raised below, on the test's thread
            failed.append(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, body, taken


def test_a_body_sent_in_pieces_reaches_django_whole():
    from tests.tracer.intake.otlp.test_receiver import importer
    from tracer.tokens import token_create

    _, secret = token_create(user=importer("agent"), name="t")
    body = json.dumps({"scenario": "s", "policy": "p"}).encode()
    pieces = [body[i : i + 7] for i in range(0, len(body), 7)]
    status, _, answer, taken = served(
        "POST",
        "/api/runs",
        chunks=pieces,
        headers=[
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"authorization", f"Bearer {secret}".encode()),
        ],
    )
    assert taken == len(pieces)
    assert status == 201, answer
    assert json.loads(answer)["id"] > 0


def test_a_body_declared_larger_than_any_page_reads_is_refused_unread():
    status, _, answer, taken = served(
        "POST", "/v1/traces", headers=[(b"content-length", str(asgi.BODY_MAX_BYTES + 1).encode())]
    )
    assert status == 413 and taken == 0
    assert f"the most this server reads is {asgi.BODY_MAX_BYTES}" in answer.decode()


def test_a_header_with_an_underscore_is_dropped_and_a_repeated_one_joined():
    environ = asgi._environ(
        {
            "method": "GET",
            "path": "/é",
            "headers": [(b"x_forwarded_proto", b"https"), (b"accept", b"a"), (b"accept", b"b")],
        },
        body=None,
    )
    assert "HTTP_X_FORWARDED_PROTO" not in environ
    assert environ["HTTP_ACCEPT"] == "a,b"
    assert environ["PATH_INFO"] == "/é".encode().decode("latin-1")  # PEP 3333's text


def test_a_page_is_answered_by_django_with_its_headers():
    status, headers, _, _ = served("GET", "/")
    assert status == 302 and headers["location"].startswith("/login/")
