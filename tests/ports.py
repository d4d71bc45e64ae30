"""The loopback ports the servers that tests and benchmarks start listen on (Redis, PostgreSQL,
gunicorn, the MCP server over HTTP): ``free_port()``.

Without ``RLT_TEST_PORTS`` it is a port the kernel hands out for ``bind(port 0)``: free when asked,
but only until the server binds it, and from the same range as the client ports of outgoing
connections, so another test process or a connection could take it in between. With
``RLT_TEST_PORTS=START-END`` (``.ci/run`` gives each of its concurrent passes a range of its own) the
ports come from that range only, each handed out once per process in turn (wrapping round at the
end), skipping one a socket is bound to or that is in TIME_WAIT: two processes with disjoint ranges
never pick the same port.
"""

from __future__ import annotations

import itertools
import os
import socket

ENV_VAR = "RLT_TEST_PORTS"


def _range(value: str) -> range:
    try:
        start, end = (int(part) for part in value.split("-"))
    except ValueError:
        raise SystemExit(f"{ENV_VAR}={value!r}: expected START-END, two port numbers, e.g. 21000-21499") from None
    if not 1024 <= start <= end <= 65535:
        raise SystemExit(f"{ENV_VAR}={value!r}: expected 1024 <= START <= END <= 65535")
    return range(start, end + 1)


_turn = None  # the next ports of RLT_TEST_PORTS' range, in turn, once it is read


def free_port() -> int:
    """A loopback port nothing is bound to (see the module docstring for where it comes from)."""
    global _turn
    spec = os.environ.get(ENV_VAR)
    if not spec:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    ports = _range(spec)
    if _turn is None:
        _turn = itertools.cycle(ports)
    for port in itertools.islice(_turn, len(ports)):
        # no SO_REUSEADDR: a port a server just left (TIME_WAIT) is skipped too, not only a bound one
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {ENV_VAR}={spec}")
