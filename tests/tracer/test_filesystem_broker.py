"""The default broker (a folder) never hands a worker a message that is still being written."""

from __future__ import annotations

import multiprocessing

from kombu import Connection

from config.celery import app
from config.filesystem_broker import Transport

MESSAGES = 300


def _send(options: dict) -> None:
    with Connection("filesystem://", transport_options=options) as conn:
        queue = conn.SimpleQueue("q")
        for i in range(MESSAGES):
            queue.put({"i": i, "padding": "x" * 20_000})


def test_a_consumer_reading_while_another_process_sends_gets_every_message_whole(tmp_path):
    # kombu's own transport let the reader take a file that was created but not yet written: the
    # worker stopped with a JSONDecodeError and the message was lost.
    options = {
        "data_folder_in": str(tmp_path),
        "data_folder_out": str(tmp_path),
        "control_folder": str(tmp_path / "control"),  # kombu's default is ./control
        "polling_interval": 0,
    }
    sender = multiprocessing.get_context("fork").Process(target=_send, args=(options,))
    sender.start()
    received = []
    try:
        with Connection("filesystem://", transport_options=options) as conn:
            queue = conn.SimpleQueue("q")
            while len(received) < MESSAGES:
                message = queue.get(timeout=30)
                received.append(message.payload["i"])
                message.ack()
    finally:
        sender.join(30)
    assert sorted(received) == list(range(MESSAGES))  # each once, whole (files of one millisecond: any order)


def test_the_apps_filesystem_broker_is_this_transport():
    with app.connection_for_write("filesystem://") as conn:
        assert conn.transport_cls == "filesystem" and isinstance(conn.transport, Transport)
