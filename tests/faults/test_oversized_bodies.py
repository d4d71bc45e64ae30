"""A body over the limit under a real gunicorn (``config/gunicorn.py``, as ``./rlt up`` serves): refused
by its Content-Length, 413, and read and thrown away rather than left unread, so a client that sends
its whole body before it reads the answer (Python's ``http.client``, as OTLP exporters and the API's
callers do) gets the 413 instead of a connection reset mid-send (BrokenPipe)."""

from __future__ import annotations

import http.client

import pytest

from tests.tracer.intake.otlp.test_receiver import importer
from tracer.tokens import token_create

from .conftest import Served

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def served():
    server = Served(env={"RLT_OTLP_MAX_BYTES": "100000", "RLT_API_MAX_BYTES": "100000"})
    yield server
    server.stop()


@pytest.mark.parametrize("path, kind", [("/v1/traces", "application/x-protobuf"), ("/api/imports", "application/json")])
def test_a_body_over_the_limit_is_a_413_that_pythons_http_client_reads(served, path, kind):
    user = importer("big-sender")
    _, secret = token_create(user=user, name="big")
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    try:
        headers = {"Authorization": f"Bearer {secret}", "Content-Type": kind}
        connection.request("POST", path, body=b"x" * 8_000_000, headers=headers)
        response = connection.getresponse()
        said = response.read().decode(errors="replace")
    finally:
        connection.close()
    assert response.status == 413 and "100000 bytes" in said
