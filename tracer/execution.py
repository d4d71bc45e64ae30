"""Execution: claiming a queued run on a worker, running it with the agent core, and making sure
every run the database says must execute either runs or ends.

A worker holds a run under a claim: a token written by ``run_claim``, the Celery worker's name
(``celery@host``) and the pid of the process executing it, each a field. The claim is a lease: the
executing process renews it with every step and from a heartbeat thread (``LeaseHeartbeat``), so
it lapses only when that process is gone or cut off. ``runs_sweep`` (run by beat, see ``tasks``)
ends ``interrupted`` the runs whose lease lapsed, queues one re-run of each, sends a queued run's
task again when its message may be lost, and gives up on queued runs no worker takes.
``run_interrupt_stale`` (the ``interrupt_stale`` command) and ``runs_interrupt_dead_holders`` (a
starting worker, a redelivered task) interrupt through the same path. docs/recording.md says the
rules. Steps and ends are written through ``recording``, task messages sent through ``delivery``;
Celery tasks (``tasks.py``) call in here and nothing here imports them.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import psutil
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q, QuerySet
from django.utils import timezone

from agents.events import RunEnd

from . import delivery
from .models import Experiment, OtlpSpanBatch, Run, Step
from .recording import DATABASE_LOST, DbRecorder, RecordingStopped, lease_expires, run_finish, run_lease_renew

logger = logging.getLogger(__name__)

# Fields a sweep does not need to read; everything else is copied into a re-run.
_UNREAD = ("transcript", "search_text", "final_answer", "verdict_reason")
# Runs one sweep handles per rule; the next sweep takes the rest.
SWEEP_BATCH = 500
# A queued run's task is sent again RLT_RESEND_AFTER_S after its last send, then after twice that,
# and so on up to 2**RESEND_DOUBLINGS times that: a long queue that is only slow is not flooded.
RESEND_DOUBLINGS = 5


def run_claim(*, run_id: int, worker_name: str, worker_pid: int | None) -> str | None:
    """Atomically move a queued run to running under a new claim; its token, or None when another
    delivery already took it. The claim's lease lapses after ``RLT_LEASE_S`` unless renewed."""
    token = uuid.uuid4().hex
    claimed = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
        status=Run.Status.RUNNING,
        started_at=timezone.now(),
        worker_name=worker_name[:200],
        worker_pid=worker_pid,
        claim_token=token,
        lease_expires_at=lease_expires(),
    )
    return token if claimed == 1 else None


class LeaseHeartbeat:
    """Renews a claimed run's lease every ``RLT_LEASE_S / 3`` from a thread of the executing process.

    The thread dies with its process (the OOM killer, a hard time limit), and then the lease lapses.
    It stops by itself once a renewal finds the run ended or taken (``lost``), keeps trying through
    database errors (a lease outlives two missed beats), and always closes its own connection.

    It is also the run's watchdog: ``OVERRUN_S`` after ``RLT_RUN_TIME_LIMIT_S`` (counted from the
    heartbeat's start, just before the run's), a run still going is ended ``crashed`` from here,
    whatever its loop is stuck in (a tool that never returns, a model call). The loop ends the run
    itself at its limit when it can; this is for when it cannot, and in a threads pool, where Celery
    has no time limits, nothing else would. The stuck call's late steps are refused.
    """

    OVERRUN_S = 5.0

    def __init__(
        self, *, run_id: int, claim_token: str, interval_s: float | None = None, time_limit_s: float | None = None
    ) -> None:
        self.run_id = run_id
        self.claim_token = claim_token
        self.interval_s = interval_s if interval_s is not None else settings.RLT_LEASE_S / 3
        self.time_limit_s = time_limit_s if time_limit_s is not None else settings.RLT_RUN_TIME_LIMIT_S
        self.ended_overdue = False
        self.lost = False
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"lease-heartbeat-run-{run_id}", daemon=True)

    def start(self) -> LeaseHeartbeat:
        self._overdue_at = time.monotonic() + self.time_limit_s + self.OVERRUN_S
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=10)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _beat(self) -> None:
        try:
            while not self._stopping.wait(min(self.interval_s, max(0.0, self._overdue_at - time.monotonic()))):
                if time.monotonic() >= self._overdue_at:
                    try:
                        self._end_overdue()
                    except DATABASE_LOST as exc:
                        logger.warning(
                            "run %s: could not end it after its time limit (%s); trying again", self.run_id, exc
                        )
                        connection.close()
                        self._overdue_at = time.monotonic() + min(self.interval_s, 5.0)
                        continue
                    return
                try:
                    renewed = run_lease_renew(run_id=self.run_id, claim_token=self.claim_token)
                except DATABASE_LOST as exc:
                    logger.warning("run %s: could not renew its lease (%s); trying again", self.run_id, exc)
                    connection.close()  # the next try connects afresh
                    continue
                if not renewed:
                    self.lost = True
                    logger.warning("run %s: its lease is no longer this process's (it ended elsewhere)", self.run_id)
                    return
        finally:
            connection.close()  # this thread's own connection

    def _end_overdue(self) -> None:
        run = Run.objects.filter(pk=self.run_id).only("pk", "experiment_id", "parent_id").first()
        overrun = (
            f"went on for more than {self.time_limit_s:g} s (RLT_RUN_TIME_LIMIT_S) and was still inside a call "
            f"(a tool or the model) {self.OVERRUN_S:g} s later, so its watchdog ended it; whatever that call "
            "returns later is not recorded"
        )
        error = f"the run {overrun}"
        if run is not None and run_finish(
            run=run, end=RunEnd(stop_reason=Run.StopReason.CRASHED, error=error), claim_token=self.claim_token
        ):
            self.ended_overdue = True
            logger.warning("run %s: %s", self.run_id, error)
            _children_end(run_id=self.run_id, claim_token=self.claim_token, error=f"its coordinating run {overrun}")
        else:
            self.lost = True  # it had ended, or is no longer this process's


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
    already executed); if the run is held under this worker's name by a process that is gone (a
    redelivery after a pool process was killed), it is interrupted and re-run first. A run that
    cannot start, or whose loop raises, ends ``crashed`` with the reason. A run ended elsewhere
    meanwhile (the sweep interrupted it) refuses further writes, and the loop stops without ending
    it again. ``worker_name`` is the Celery worker's name (``celery@host``); outside a worker, this
    host's name. The run is held by this process: its pid is stored with the name, and a heartbeat
    renews its lease until this returns.
    """
    worker_name = worker_name or socket.gethostname()
    worker_pid = os.getpid()
    claim_token = run_claim(run_id=run_id, worker_name=worker_name, worker_pid=worker_pid)
    if claim_token is None:
        logger.info("run %s is not queued; duplicate delivery ignored", run_id)
        runs_interrupt_dead_holders(worker_name=worker_name, run_id=run_id)
        return None
    heartbeat = LeaseHeartbeat(run_id=run_id, claim_token=claim_token).start()
    try:
        return _run_held(
            run_id=run_id,
            claim_token=claim_token,
            worker_name=worker_name,
            worker_pid=worker_pid,
            cassette=cassette,
            record_to=record_to,
            observer=observer,
        )
    finally:
        heartbeat.stop()


def _run_held(
    *,
    run_id: int,
    claim_token: str,
    worker_name: str,
    worker_pid: int,
    cassette: str | None,
    record_to: str | None,
    observer,
) -> Run:
    run = Run.objects.select_related("experiment").get(pk=run_id)
    recorder = DbRecorder(
        run,
        worker_name=worker_name,
        worker_pid=worker_pid,
        observer=observer,
        claim_token=claim_token,
        # the pace chosen at launch, read as the run starts: no worker restarts to watch runs arrive
        step_delay_s=run.experiment.step_delay_s if run.experiment else None,
    )
    try:
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
                # Every model call gets only what is left of the run's time.
                time_limit_s=settings.RLT_RUN_TIME_LIMIT_S,
                deadline=recorder.deadline,
                judge=run.judge or "rules",
            )
        except ValueError as exc:  # the agent core could not start it: unknown scenario, bad policy or cassette
            logger.warning("run %s could not start: %s", run_id, exc)
            _crash(recorder, f"the run could not start: {exc}")
        except Exception as exc:  # the loop reports its own crashes; this is anything it could not
            logger.exception("run %s failed outside the agent loop", run_id)
            _crash(recorder, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}")
        else:
            _crash(recorder, "the agent loop returned without reporting how the run ended")
        _children_end(
            run_id=run_id,
            claim_token=claim_token,
            error="the coordinating run ended before this sub-agent reported its end",
        )
    except RecordingStopped as exc:
        if not exc.database_lost:
            logger.warning("run %s: %s; its agent loop was stopped", run_id, exc)
        else:
            _release_after_database_loss(run=run, claim_token=claim_token, exc=exc)
            return run
    run.refresh_from_db()
    return run


def _release_after_database_loss(*, run: Run, claim_token: str, exc: RecordingStopped) -> None:
    """The database went away mid-run: the loop's state is lost with it. Interrupt and re-run the run
    now if the database is back; otherwise its lease lapses and the sweep does the same."""
    logger.warning("run %s: %s", run.pk, exc)
    try:
        with transaction.atomic():
            held = _lock(Run.objects.filter(status=Run.Status.RUNNING, claim_token=claim_token), pk=run.pk)
            if held is not None:
                _interrupt_locked(
                    run=held,
                    error=f"{_holder(held)} lost its database connection mid-run ({exc.__cause__}); "
                    "the run was interrupted",
                )
    except DATABASE_LOST:
        logger.warning(
            "run %s stays running until its lease lapses; then the sweep interrupts it and queues a re-run", run.pk
        )


def _children_end(*, run_id: int, claim_token: str, error: str) -> None:
    """End, as interrupted, the sub-agent runs of ``run_id`` that did not report their end."""
    for child in Run.objects.filter(parent_id=run_id, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).only(
        "pk", "parent_id", "experiment_id"
    ):
        run_finish(run=child, end=RunEnd(stop_reason=Run.StopReason.INTERRUPTED, error=error), claim_token=claim_token)


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


def _when(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC" if moment else "an unknown time"


def _duration(seconds: float) -> str:
    """``45 s``, ``2 min``, ``1 h``, ``1.5 h``: how long, for a person."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds < 120:
        return f"{seconds:g} s"
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


# --- interrupting and re-running ------------------------------------------------------------


@dataclass(frozen=True)
class Interruption:
    """A run ended ``interrupted``, and the re-run queued for it (None when it may not have one)."""

    run_id: int
    rerun_id: int | None
    error: str


def _lock(candidates: QuerySet, *, pk: int) -> Run | None:
    """Run ``pk`` if it is still one of ``candidates``, locked until the transaction ends.

    PostgreSQL locks the row and skips one another transaction holds (a second sweep, a step being
    written): that transaction decides, and the row is looked at again by the next sweep. SQLite
    has no row locks; its transactions take the write lock at BEGIN (``transaction_mode``
    IMMEDIATE), so the read and the writes that follow it are never interleaved with another writer.
    """
    return candidates.filter(pk=pk).select_for_update(skip_locked=True).defer(*_UNREAD).first()


def _rerun_allowed(run: Run) -> bool:
    """One automatic re-run, of a top-level run that was sent to the workers and is no re-run itself."""
    return (
        run.parent_id is None
        and run.rerun_of_id is None
        and run.send_count > 0
        and run.source == Run.Source.AGENT
        and not Run.objects.filter(rerun_of_id=run.pk).exists()
    )


def _interrupt_locked(*, run: Run, error: str) -> Interruption | None:
    """End ``run`` interrupted (steps kept) with ``error``, end its unfinished sub-agent runs, and
    queue one linked re-run when it may have one, in the caller's transaction (which holds the row).

    The re-run joins the run's experiment, whose ``total_runs`` grows by one in the same transaction,
    so its progress stays finished / total; its task is sent once the transaction commits.
    None when the run had already ended.
    """
    if not run_finish(
        run=run, end=RunEnd(stop_reason=Run.StopReason.INTERRUPTED, error=error), claim_token=run.claim_token
    ):
        return None
    _children_end(
        run_id=run.pk,
        claim_token=run.claim_token,
        error="the coordinating run was interrupted before this sub-agent reported its end",
    )
    rerun = None
    if _rerun_allowed(run):
        rerun = Run.objects.create(
            experiment_id=run.experiment_id,
            rerun_of=run,
            **run.spec(),
            task=run.task,
            status=Run.Status.QUEUED,
            enqueued_at=timezone.now(),
            send_count=1,
        )
        if run.experiment_id:
            Experiment.objects.filter(pk=run.experiment_id).update(total_runs=F("total_runs") + 1)
        delivery.runs_send_on_commit(run_ids=[rerun.pk])
    logger.warning(
        "run %s interrupted: %s%s", run.pk, error, f"; re-run as run {rerun.pk}" if rerun else "; not re-run"
    )
    return Interruption(run_id=run.pk, rerun_id=rerun.pk if rerun else None, error=error)


def _lapsed(*, now: datetime) -> QuerySet:
    """Top-level running runs whose lease lapsed before ``now`` (no lease: claimed before leases existed).

    Only runs executed here hold leases: a run from outside (``tracer/intake/``) that is open
    while its sender adds steps has none, and is never interrupted by the sweep.
    """
    return Run.objects.filter(status=Run.Status.RUNNING, parent__isnull=True, source=Run.Source.AGENT).filter(
        Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True)
    )


def run_interrupt_stale(
    *, worker_name: str | None = None, started_before: datetime | None = None, now: datetime | None = None
) -> list[Interruption]:
    """End ``interrupted`` the running runs whose lease has lapsed, and queue one re-run of each.

    Liveness is the lease, never age: a run whose process still renews its lease is left alone,
    however long it has run. ``worker_name`` narrows to runs claimed under exactly that name
    (``w@web`` is not ``w@web2``), ``started_before`` to runs started before then.
    """
    now = now or timezone.now()
    candidates = _lapsed(now=now)
    if worker_name is not None:
        candidates = candidates.filter(worker_name=worker_name)
    if started_before is not None:
        candidates = candidates.filter(started_at__lt=started_before)
    done = []
    for pk in list(candidates.order_by("lease_expires_at", "pk").values_list("pk", flat=True)[:SWEEP_BATCH]):
        with transaction.atomic():
            run = _lock(candidates, pk=pk)
            if run is None:
                continue
            lapsed = (
                f"its lease lapsed at {_when(run.lease_expires_at)}, renewed by no step or heartbeat since"
                if run.lease_expires_at
                else "it was claimed without a lease, by a version that had none"
            )
            interruption = _interrupt_locked(
                run=run, error=f"{_holder(run)} stopped before the run ended: {lapsed}; the run was interrupted"
            )
        if interruption is not None:
            done.append(interruption)
    return done


def runs_interrupt_dead_holders(*, worker_name: str, run_id: int | None = None) -> list[Interruption]:
    """End ``interrupted``, and re-run once, the running runs held under exactly ``worker_name`` by a
    process that no longer runs on this machine (or ``run_id`` only, if so).

    A worker calls it when it starts (its earlier incarnation died) and when a task is delivered
    again for a run its name holds (one of its pool processes was killed): without waiting for the
    lease to lapse. Runs held by a live process (another worker started under the same name) are
    left alone.
    """
    held = Run.objects.filter(status=Run.Status.RUNNING, parent__isnull=True, worker_name=worker_name)
    if run_id is not None:
        held = held.filter(pk=run_id)
    done = []
    for pk, pid in list(held.values_list("pk", "worker_pid")):
        if pid == os.getpid() or process_alive(pid):
            continue
        with transaction.atomic():
            run = _lock(held.filter(worker_pid=pid), pk=pk)
            if run is None:
                continue
            interruption = _interrupt_locked(
                run=run,
                error=f"{_holder(run)} stopped before the run ended: that process is gone; the run was interrupted",
            )
        if interruption is not None:
            done.append(interruption)
    return done


# --- the sweep --------------------------------------------------------------------------------


def resend_after_s(send_count: int) -> float:
    """Seconds after its last send that a still-queued run's task is sent again."""
    return settings.RLT_RESEND_AFTER_S * 2 ** min(max(send_count, 1) - 1, RESEND_DOUBLINGS)


def _resend_due(*, now: datetime) -> QuerySet:
    """Top-level queued runs that were sent and whose last send is older than ``resend_after_s``."""

    def sent_before(count: int) -> datetime:
        return now - timedelta(seconds=resend_after_s(count))

    due = Q(send_count__gt=RESEND_DOUBLINGS, enqueued_at__lt=sent_before(RESEND_DOUBLINGS + 1))
    for count in range(1, RESEND_DOUBLINGS + 1):
        due |= Q(send_count=count, enqueued_at__lt=sent_before(count))
    return Run.objects.filter(status=Run.Status.QUEUED, parent__isnull=True).filter(due)


def runs_resend(*, now: datetime | None = None) -> int:
    """Send again the task of each queued run whose message may be lost; how many were sent.

    Each send is claimed first by a conditional ``UPDATE`` on ``send_count``, so two sweeps at once
    send a run once. A send that fails (broker down) is undone, so the run is due again next sweep.
    """
    now = now or timezone.now()
    before: dict[int, tuple[datetime | None, int]] = {}
    for pk, enqueued_at, send_count in (
        _resend_due(now=now).order_by("enqueued_at", "pk").values_list("pk", "enqueued_at", "send_count")[:SWEEP_BATCH]
    ):
        if Run.objects.filter(pk=pk, status=Run.Status.QUEUED, send_count=send_count).update(
            enqueued_at=now, send_count=F("send_count") + 1
        ):
            before[pk] = (enqueued_at, send_count)
    ids = list(before)
    sent = delivery.runs_send(run_ids=ids)
    for pk in ids[sent:]:
        enqueued_at, send_count = before[pk]
        Run.objects.filter(pk=pk, status=Run.Status.QUEUED, send_count=send_count + 1).update(
            enqueued_at=enqueued_at, send_count=send_count
        )
    if sent:
        logger.info("sent the tasks of %d queued run(s) again", sent)
    return sent


def _workers_seen_since(moment: datetime) -> bool:
    """Whether any worker held a live lease after ``moment``: it claimed or renewed a run then."""
    return Run.objects.filter(
        status__in=[Run.Status.RUNNING, Run.Status.FINISHED], lease_expires_at__gt=moment
    ).exists()


def runs_give_up_unclaimed(*, now: datetime | None = None) -> int:
    """End ``interrupted`` the top-level runs queued longer than ``RLT_QUEUED_GIVE_UP_S``, when no
    worker has claimed or renewed any run in that time either: nothing is taking work from the
    queue. (A long queue that workers are getting through is left to wait.) Not re-run: with no
    worker, a re-run would wait the same way. Returns how many were ended.
    """
    now = now or timezone.now()
    give_up_s = settings.RLT_QUEUED_GIVE_UP_S
    cutoff = now - timedelta(seconds=give_up_s)
    waiting = Run.objects.filter(status=Run.Status.QUEUED, parent__isnull=True, created_at__lt=cutoff)
    if not waiting.exists() or _workers_seen_since(cutoff):
        return 0
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    ended = 0
    for pk in list(waiting.order_by("pk").values_list("pk", flat=True)[:SWEEP_BATCH]):
        with transaction.atomic():
            run = _lock(waiting, pk=pk)
            if run is None:
                continue
            if run.send_count:
                error = (
                    f"no worker took this run in {_duration(give_up_s)}; is a worker running on queue {queue!r}? "
                    f"(celery -A config worker -Q {queue}; its task was sent {run.send_count} times)"
                )
            else:
                error = f"this run was never sent to the workers, and nothing started it in {_duration(give_up_s)}"
            ended += run_finish(run=run, end=RunEnd(stop_reason=Run.StopReason.INTERRUPTED, error=error))
    if ended:
        logger.warning("gave up on %d queued run(s) that no worker took in %s", ended, _duration(give_up_s))
    return ended


def runs_end_idle_outside(*, now: datetime | None = None) -> int:
    """End ``interrupted`` the runs from outside (the step API, OTLP, a document sent as still
    running) that are still open with nothing heard of them for ``RLT_OUTSIDE_IDLE_S``: no step
    written and no OTLP span received in that time, counted from when the run arrived. Their sender
    stopped reporting (its agent died, or never sent the root span or the finish call); no worker
    here can end them. Not re-run: they were not executed here. Returns how many were ended.

    Afterwards, a step sent to such a run through the API is refused, as to any ended run; a span of
    its trace has the run written again from all the trace's spans (``tracer.intake.otlp.receiver``), open
    until its root span arrives or it is idle that long again.
    """
    now = now or timezone.now()
    idle_s = settings.RLT_OUTSIDE_IDLE_S
    cutoff = now - timedelta(seconds=idle_s)
    idle = (
        Run.objects.filter(status__in=[Run.Status.QUEUED, Run.Status.RUNNING], created_at__lt=cutoff)
        .exclude(source=Run.Source.AGENT)
        .exclude(Exists(Step.objects.filter(run=OuterRef("pk"), created_at__gte=cutoff)))
        .exclude(Exists(OtlpSpanBatch.objects.filter(trace__run=OuterRef("pk"), received_at__gte=cutoff)))
    )
    error = (
        f"no step or span of this run arrived for {_duration(idle_s)} (RLT_OUTSIDE_IDLE_S): its sender "
        "stopped reporting before ending it"
    )
    ended = 0
    for pk in list(idle.order_by("pk").values_list("pk", flat=True)[:SWEEP_BATCH]):
        with transaction.atomic():
            run = _lock(idle, pk=pk)
            if run is not None:
                ended += run_finish(run=run, end=RunEnd(stop_reason=Run.StopReason.INTERRUPTED, error=error))
    if ended:
        logger.warning("ended %d run(s) from outside that sent nothing for %s", ended, _duration(idle_s))
    return ended


def runs_end_orphaned_children() -> int:
    """End ``interrupted`` the sub-agent runs still open under a run that has ended."""
    ended = 0
    for child in Run.objects.filter(
        status__in=[Run.Status.QUEUED, Run.Status.RUNNING], parent__status=Run.Status.FINISHED
    ).only("pk", "parent_id", "experiment_id")[:SWEEP_BATCH]:
        ended += run_finish(
            run=child,
            end=RunEnd(
                stop_reason=Run.StopReason.INTERRUPTED,
                error="the coordinating run ended before this sub-agent reported its end",
            ),
        )
    return ended


@dataclass
class SweepReport:
    interrupted: list[Interruption] = field(default_factory=list)
    resent: int = 0
    given_up: int = 0
    orphans_ended: int = 0
    otlp_written: int = 0
    idle_outside_ended: int = 0

    def __str__(self) -> str:
        reruns = sum(1 for i in self.interrupted if i.rerun_id)
        return (
            f"{len(self.interrupted)} run(s) interrupted (lease lapsed), {reruns} re-run(s) queued, "
            f"{self.resent} queued run(s) sent again, {self.given_up} queued run(s) given up, "
            f"{self.orphans_ended} sub-agent run(s) ended, {self.otlp_written} OTLP trace(s) written, "
            f"{self.idle_outside_ended} idle run(s) from outside ended"
        )


def runs_sweep(*, now: datetime | None = None) -> SweepReport:
    """Make every run the database says must execute either run or end; safe to run from two beats.

    In order: interrupt runs whose lease lapsed, each with one re-run (``run_interrupt_stale``);
    send again the tasks of queued runs whose message may be lost (``runs_resend``); give up on
    queued runs no worker takes (``runs_give_up_unclaimed``); end sub-agent runs left open under an
    ended run; write the runs of OTLP traces left behind their stored spans (a process that died after
    answering, ``otlp.receiver.traces_unrecorded_write``: those stored more than ``RLT_SWEEP_S`` ago);
    end runs from outside whose sender went quiet (``runs_end_idle_outside``). Each change is a
    conditional ``UPDATE`` (and a skipped row lock on PostgreSQL), so a second sweep at the same time
    changes nothing twice.
    """
    from .intake.otlp.receiver import traces_unrecorded_write

    now = now or timezone.now()
    return SweepReport(
        interrupted=run_interrupt_stale(now=now),
        resent=runs_resend(now=now),
        given_up=runs_give_up_unclaimed(now=now),
        orphans_ended=runs_end_orphaned_children(),
        otlp_written=traces_unrecorded_write(older_than=now - timedelta(seconds=settings.RLT_SWEEP_S)),
        idle_outside_ended=runs_end_idle_outside(now=now),
    )
