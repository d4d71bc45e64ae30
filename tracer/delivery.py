"""Delivery: sending runs' task messages to the workers, and checking the broker before a launch.

The database is the truth about what must execute; the broker only delivers. Every message that
asks a worker to execute a run is sent from here, by task name, so the modules that decide what to
send (``experiments`` at launch, ``execution``'s sweep) need not import ``tasks``. A failed send
never raises into a request: it is logged and the run stays ``queued``, where the sweep finds it and
sends it again (``execution.runs_sweep``). Sending a run twice is safe: the claim is idempotent.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit, urlunsplit

from celery import current_app
from django.db import transaction

logger = logging.getLogger(__name__)

# The name ``tasks.run_execute_task`` is registered under; spelled here once.
RUN_EXECUTE_TASK = "tracer.tasks.run_execute_task"
# Seconds the launch waits for the broker to answer before it says it is unreachable.
BROKER_CHECK_TIMEOUT_S = 3


class BrokerUnreachable(Exception):
    """The task broker did not answer; the message says which broker (no password) and why."""


def broker_url_display(url: str | None = None) -> str:
    """The broker's URL as it may be shown to a person: a password is replaced by ``**``.

    Without ``url``, the one tasks are sent to (Celery's ``broker_write_url``, or ``broker_url``).
    """
    if url is None:
        with current_app.connection_for_write() as conn:
            url = conn.as_uri(include_password=True)
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:**@{host}"))


def broker_check(*, timeout: float = BROKER_CHECK_TIMEOUT_S) -> None:
    """Raise ``BrokerUnreachable`` unless the broker accepts a connection within ``timeout`` seconds."""
    with current_app.connection_for_write(connect_timeout=timeout) as conn:
        try:
            conn.ensure_connection(max_retries=0, timeout=timeout)
        except Exception as exc:  # kombu raises its OperationalError, or the transport's own errors
            url = broker_url_display(conn.as_uri(include_password=True))
            raise BrokerUnreachable(
                f"the task broker ({url}) is not reachable: {str(exc).rstrip('.')}. Nothing was launched; "
                "start it or check CELERY_BROKER_URL."
            ) from exc


def runs_send(*, run_ids: list[int]) -> int:
    """Send each run's task now, over one broker connection; returns how many were sent.

    Stops at the first failure (a broker that is down fails every send, each after its retries):
    the runs not sent stay queued, and the sweep sends them once the broker is back.
    """
    sent = 0
    try:
        with current_app.producer_or_acquire() as producer:
            for run_id in run_ids:
                current_app.send_task(RUN_EXECUTE_TASK, args=[run_id], producer=producer)
                sent += 1
    except Exception as exc:  # a broker error must not fail the request: the sweep sends them again
        logger.error(
            "could not send %d run task(s) to the broker %s (%s: %s); they stay queued and the sweep sends them again",
            len(run_ids) - sent,
            broker_url_display(),
            type(exc).__name__,
            exc,
        )
    return sent


def runs_send_on_commit(*, run_ids: list[int]) -> None:
    """Send the runs' tasks once the current transaction commits (none if it rolls back)."""
    if run_ids:
        ids = list(run_ids)
        transaction.on_commit(lambda: runs_send(run_ids=ids))
