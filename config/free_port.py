"""The port ``./rlt up`` serves on: the first of RLT_PORT and the 49 after it that no program listens on.

Run as ``python config/free_port.py START`` (a file, not ``-m``: nothing of the project is imported).
A port is free when a socket with ``SO_REUSEADDR`` can bind it, as gunicorn's own does: the
connections a server that just stopped leaves in TIME_WAIT (``./rlt up`` stopped with Ctrl-C and
started again) do not make its port look taken; only a socket still listening does.
"""

from __future__ import annotations

import socket
import sys

TRIES = 50


def free_port(start: int, host: str = "127.0.0.1") -> int | None:
    for port in range(start, start + TRIES):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    return None


if __name__ == "__main__":
    first = int(sys.argv[1])
    found = free_port(first)
    if found is None:
        sys.exit(f"rlt: no free port from {first} to {first + TRIES - 1}; set RLT_PORT")
    print(found)
