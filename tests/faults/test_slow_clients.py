"""Slow clients take no worker thread: 256 sockets each send the start of a request and then trickle
a header line every few seconds, never finishing it, while a person's requests must still be answered
within a second. Under ``./rlt up``'s serving (one process, on loopback) and the production setup
docs/deployment.md gives (two processes, bound to 0.0.0.0), both ``config/gunicorn.py``.

With the thread workers served before (``--worker-class gthread``), the same sockets held all eight
threads and every normal request waited until it timed out."""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time

import pytest

from .conftest import Served

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

SLOW_SOCKETS = 256
TRICKLE_S = 2  # a header line from each slow socket this often
NORMAL_REQUESTS = 12
ANSWER_WITHIN_S = 1.0


class Trickle:
    """``count`` connections, each with a request begun and never finished, fed a header line every
    ``TRICKLE_S`` seconds by one thread until ``stop()``."""

    def __init__(self, port: int, count: int) -> None:
        self.sockets = []
        for _ in range(count):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /api/openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow\r\n")
            self.sockets.append(s)
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._feed)
        self._thread.start()

    def _feed(self) -> None:
        while not self._stop.wait(TRICKLE_S):
            for s in self.sockets:
                with contextlib.suppress(OSError):
                    s.sendall(b"X-Trickle: 1\r\n")
                    self.sent += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for s in self.sockets:
            s.close()


def _get(port: int, *, timeout: float) -> int:
    """``GET /`` on a new connection, as a browser's first request: the status."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", "/")
        return connection.getresponse().status
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("workers", "host"),
    [pytest.param(1, "127.0.0.1", id="rlt-up"), pytest.param(2, "0.0.0.0", id="deployment")],
)
def test_normal_requests_are_answered_within_a_second_while_256_slow_clients_trickle(workers, host):
    served = Served(workers=workers, host=host)
    trickle = None
    try:
        for _ in range(4 * workers):  # new connections, so each process has answered a few
            assert _get(served.port, timeout=60) == 302  # a process's first request loads the views: slow when busy
        trickle = Trickle(served.port, SLOW_SOCKETS)
        time.sleep(TRICKLE_S + 0.5)  # each slow socket has trickled once: a thread reading it would be stuck
        took = []
        for _ in range(NORMAL_REQUESTS):
            started = time.monotonic()
            try:
                status = _get(served.port, timeout=5)  # the runs list, a new connection each time: to the login page
            except TimeoutError:
                status = "timed out"
            took.append(time.monotonic() - started)
            assert status == 302, f"request {len(took)}: {status} after {took[-1]:.1f} s"
            time.sleep(0.25)
        assert trickle.sent >= SLOW_SOCKETS, "the slow sockets did not trickle: the fault did not happen"
        assert max(took) < ANSWER_WITHIN_S, [f"{t:.2f}" for t in took]
        print(
            f"\n[faults] {SLOW_SOCKETS} slow sockets trickling, {workers} process(es) on {host}: "
            f"{NORMAL_REQUESTS} normal requests answered in {min(took) * 1000:.0f}–{max(took) * 1000:.0f} ms"
        )
    finally:
        if trickle is not None:
            trickle.stop()
        served.stop()
