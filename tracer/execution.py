"""Execution: claiming a queued run on a worker, running it with the agent core, and stale runs.

A worker holds a run under its identity: the Celery worker's name (``celery@host``) and the pid of
the process executing it, stored as two fields. ``run_interrupt_stale`` finishes, as
``interrupted``, runs whose holder is gone: matched by worker name (equality) or by age, and, when a
worker starts, skipping runs whose process still runs here. Steps and ends are written through
``recording``; Celery tasks (``tasks.py``) call in here and nothing here imports them.
"""

from __future__ import annotations

import logging
import os
import socket
import traceback
from datetime import timedelta

import psutil
from django.conf import settings
from django.utils import timezone

from agents.events import RunEnd

from .models import Run
from .recording import DbRecorder, run_finish

logger = logging.getLogger(__name__)


def run_claim(*, run_id: int, worker_name: str, worker_pid: int | None) -> bool:
    """Atomically move a queued run to running; False when another delivery already took it."""
    claimed = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
        status=Run.Status.RUNNING, started_at=timezone.now(), worker_name=worker_name[:200], worker_pid=worker_pid
    )
    return claimed == 1


def _crash(recorder: DbRecorder, message: str) -> None:
    if not recorder.finished:
        recorder.run_finished(RunEnd(stop_reason=Run.StopReason.CRASHED, error=message))


def run_execute(
    *,
    run_id: int,
    worker_name: str = "",
    cassette: str | None = None,
    record_to: str | None = None,
    observer=None,
) -> Run | None:
    """Claim run ``run_id`` and execute it with the agent core, recording every step.

    Returns None, doing nothing, when the run is not queued (a duplicate delivery, or a run that was
    already executed). A run that cannot start, or whose loop raises, ends ``crashed`` with the reason.
    ``worker_name`` is the Celery worker's name (``celery@host``); outside a worker, this host's name.
    The run is held by this process: its pid is stored with the name.
    """
    worker_name = worker_name or socket.gethostname()
    worker_pid = os.getpid()
    if not run_claim(run_id=run_id, worker_name=worker_name, worker_pid=worker_pid):
        logger.info("run %s is not queued; duplicate delivery ignored", run_id)
        return None
    run = Run.objects.get(pk=run_id)
    recorder = DbRecorder(run, worker_name=worker_name, worker_pid=worker_pid, observer=observer)
    if run.model_backend == "claude" and not settings.ANTHROPIC_API_KEY:
        _crash(
            recorder,
            "the claude backend needs ANTHROPIC_API_KEY in the worker's environment; "
            "set it and launch the run again, or use the simulated backend",
        )
        return run
    if run.model_backend == "replay" and not cassette:
        _crash(recorder, "the replay backend needs a cassette file (run_agent --cassette FILE)")
        return run
    try:
        from agents.run import run_scenario  # every scenario and the SDK: loaded when a run executes

        run_scenario(
            run.scenario,
            dict(run.policy_settings) or run.policy_name,
            model=run.model_backend,
            recorder=recorder,
            cassette=cassette,
            record_to=record_to,
            seed=run.pk,
        )
    except ValueError as exc:  # the agent core could not start it: unknown scenario, bad policy or cassette
        logger.warning("run %s could not start: %s", run_id, exc)
        _crash(recorder, f"the run could not start: {exc}")
    except Exception as exc:  # the loop reports its own crashes; this is anything it could not
        logger.exception("run %s failed outside the agent loop", run_id)
        _crash(recorder, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}")
    else:
        _crash(recorder, "the agent loop returned without reporting how the run ended")
    for child in Run.objects.filter(parent_id=run_id).exclude(status=Run.Status.FINISHED):
        run_finish(
            run=child,
            end=RunEnd(
                stop_reason=Run.StopReason.INTERRUPTED,
                error="the coordinating run ended before this sub-agent reported its end",
            ),
        )
    run.refresh_from_db()
    return run


def process_alive(pid: int | None) -> bool:
    """Whether process ``pid`` runs on this machine.

    A killed process its parent has not reaped yet (a zombie) still exists and answers signal 0, but
    runs nothing: pool processes of a killed worker are handed to init, which may reap them late.
    """
    if not pid:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # psutil.ZombieProcess is one too
        return False
    except psutil.AccessDenied:  # it exists, under another user
        return True


def _holder(run: Run) -> str:
    """How a message names the process that held a run: ``celery@host pid 123``."""
    if not run.worker_name:
        return "its worker"
    if run.worker_pid is None:
        return run.worker_name
    return f"{run.worker_name} pid {run.worker_pid}"


def run_interrupt_stale(
    *, worker_name: str | None = None, older_than: timedelta | None = None, skip_live_processes: bool = False
) -> int:
    """Finish runs left ``running`` by a worker that died, with stop reason ``interrupted``.

    ``worker_name``: runs claimed under exactly that worker name (a worker passes its own name when it
    starts; ``w@web`` is not ``w@web2``).
    ``older_than``: runs started longer ago than that. At least one must be given.
    ``skip_live_processes``: leave runs whose claiming process still runs on this machine (another
    worker started under the same name). Returns how many runs were interrupted.
    """
    if worker_name is None and older_than is None:
        raise ValueError("give worker_name or older_than: which running runs are stale")
    stale = Run.objects.filter(status=Run.Status.RUNNING)
    if worker_name is not None:
        stale = stale.filter(worker_name=worker_name)
    if older_than is not None:
        stale = stale.filter(started_at__lt=timezone.now() - older_than)
    count = 0
    for run in stale.only("pk", "experiment_id", "parent_id", "worker_name", "worker_pid"):
        if skip_live_processes and process_alive(run.worker_pid):
            continue
        who = _holder(run)
        finished = run_finish(
            run=run,
            end=RunEnd(
                stop_reason=Run.StopReason.INTERRUPTED,
                error=f"{who} stopped before the run ended; the run was interrupted",
            ),
        )
        count += int(finished)
    return count
