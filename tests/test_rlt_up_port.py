"""``./rlt up``'s port: started again right after Ctrl-C, it serves on the same port."""

from __future__ import annotations

import importlib.util
import socket

import pytest

from tests.conftest import BASE_DIR


def _free_port():
    spec = importlib.util.spec_from_file_location("free_port", BASE_DIR / "config" / "free_port.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.free_port


def _port_left_in_time_wait() -> int:
    """A port a stopped server answered on: its side of the connection, closed first, waits in TIME_WAIT."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    answered, _ = server.accept()
    answered.close()  # the server closes first, as gunicorn does after a response
    client.recv(1)
    client.close()
    server.close()
    return port


def test_a_port_a_stopped_server_left_in_time_wait_is_served_on_again():
    port = _port_left_in_time_wait()
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))  # the fault is real: a bind without SO_REUSEADDR is refused
    assert _free_port()(port) == port


def test_a_port_another_program_listens_on_is_skipped():
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        assert _free_port()(port) not in (None, port)
