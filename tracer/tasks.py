"""Celery tasks: another interface to ``execution``. They take ids, never model instances.

The tracer's modules import one another one way, at module level and with no circle:
``tasks`` -> ``execution`` (which runs them) -> ``recording``; ``experiments`` and ``execution`` send
tasks through ``delivery``, by name, so neither imports this module.
"""

from __future__ import annotations

import logging

import kombu.exceptions
import redis.exceptions
from celery import shared_task
from celery.signals import worker_ready
from django.conf import settings
from django.db import InterfaceError, OperationalError

from . import delivery, execution

logger = logging.getLogger(__name__)

# A database restarting or out of reach, a broker connection dropped: worth trying again later.
TRANSIENT_ERRORS = (
    OperationalError,
    InterfaceError,
    kombu.exceptions.OperationalError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
)


@shared_task(
    bind=True,
    name=delivery.RUN_EXECUTE_TASK,
    acks_late=True,
    ignore_result=True,
    # A transient failure (the claim hit a database that is restarting) is retried with exponential
    # backoff and full jitter, up to about 2, 4, … 256 s apart, 8 times (≈ 8 min in all), instead of
    # being acknowledged and forgotten. After that the run is still queued, and the sweep sends it again.
    autoretry_for=TRANSIENT_ERRORS,
    retry_backoff=2,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=8,
)
def run_execute_task(self, run_id: int) -> None:
    """Execute one queued run. A second delivery of the same run finds it claimed and does nothing."""
    execution.run_execute(run_id=run_id, worker_name=self.request.hostname or "")


@shared_task(name="tracer.tasks.runs_sweep_task", ignore_result=True)
def runs_sweep_task() -> None:
    """Interrupt and re-run runs whose lease lapsed, re-send lost queued runs (``execution.runs_sweep``).

    Sent by beat every ``RLT_SWEEP_S`` (``CELERY_BEAT_SCHEDULE``); a sweep that fails is simply
    followed by the next one.
    """
    report = execution.runs_sweep()
    changes = (report.interrupted, report.resent, report.given_up, report.orphans_ended, report.otlp_written)
    if any(changes) or report.idle_outside_ended:
        logger.warning("sweep: %s", report)


@shared_task(name="tracer.tasks.runs_purge_task", ignore_result=True)
def runs_purge_task() -> None:
    """Remove the runs ``RLT_RETENTION_DAYS`` says have expired (``retention.runs_purge``), in batches,
    for at most half the time until the next purge; logs what went. Sent by beat every
    ``RLT_RETENTION_EVERY_S``; nothing to do when no rule is set."""
    from . import retention

    if not retention.retention_rules():
        return
    report = retention.runs_purge(budget_s=settings.RLT_RETENTION_EVERY_S / 2, pause_s=PURGE_PAUSE_S)
    if report.batches:
        logger.warning("%s", report.summary())


# Seconds the purge waits between its batches, so writers waiting on SQLite's lock get it first:
# longer than the 100 ms SQLite's busy handler sleeps at most between tries, or a waiting writer can
# miss the gap and wait for the next batch too.
PURGE_PAUSE_S = 0.25


# Logged (INFO) once a worker has taken over from its earlier incarnation and takes tasks.
WORKER_READY = "worker %s ready: it executes runs from now on"


@worker_ready.connect
def _interrupt_runs_of_previous_incarnation(sender=None, **kwargs) -> None:
    """A worker starting under a name finishes, as interrupted, what that name held in processes now
    gone, and queues one re-run of each (the sweep's path, without waiting for the leases to lapse);
    then it says it is ready (``WORKER_READY``).

    Runs held by a live process (a second worker started under the same name) are left alone.
    """
    hostname = getattr(sender, "hostname", None)
    if not hostname:
        return
    interrupted = execution.runs_interrupt_dead_holders(worker_name=hostname)
    if interrupted:
        logger.warning(
            "%s: %d run(s) left running by an earlier worker of this name marked interrupted",
            hostname,
            len(interrupted),
        )
    logger.info(WORKER_READY, hostname)
