"""Celery tasks: another interface to ``execution``. They take ids, never model instances.

The tracer's modules import one another one way, at module level and with no circle:
``experiments`` (which enqueues runs) -> ``tasks`` -> ``execution`` (which runs them) -> ``recording``.
"""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import worker_ready

from . import execution

logger = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, ignore_result=True)
def run_execute_task(self, run_id: int) -> None:
    """Execute one queued run. A second delivery of the same run finds it claimed and does nothing."""
    execution.run_execute(run_id=run_id, worker_name=self.request.hostname or "")


@worker_ready.connect
def _interrupt_runs_of_previous_incarnation(sender=None, **kwargs) -> None:
    """A worker starting under a name finishes, as interrupted, what that name held in processes now gone.

    Runs held by a live process (a second worker started under the same name) are left alone.
    """
    hostname = getattr(sender, "hostname", None)
    if not hostname:
        return
    count = execution.run_interrupt_stale(worker_name=hostname, skip_live_processes=True)
    if count:
        logger.warning(
            "%s: %d run(s) left running by an earlier worker of this name marked interrupted", hostname, count
        )
