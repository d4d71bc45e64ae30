"""Reads of the experiment pages and pickers: an experiment, its runs and progress, its compare pairs, and the
pickers' newest experiments."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.shortcuts import get_object_or_404
from django.utils import timezone

from ..models import Experiment, Run
from .peers import experiment_repeats


def experiment_get(*, pk: int) -> Experiment:
    return get_object_or_404(Experiment, pk=pk)


def experiment_recent(*, limit: int = 10) -> list[Experiment]:
    return list(Experiment.objects.filter(archived_at__isnull=True).order_by("-created_at")[:limit])


_EXPERIMENTS_NEWEST_SQL = (
    f"SELECT * FROM {Experiment._meta.db_table} WHERE archived_at IS NULL ORDER BY created_at DESC, id DESC LIMIT %s"
)


def experiment_choices(*, selected: Iterable[int] = (), limit: int = 20) -> list[Experiment]:
    """The experiment pickers' choices: the ``limit`` newest experiments and any selected older one,
    newest first. One query, in plain SQL (the ORM's took three times the CPU, nearly all of it in
    building the query: the runs list asks it on every request), two when an older one is selected."""
    newest = "-created_at", "-id"
    experiments = list(Experiment.objects.raw(_EXPERIMENTS_NEWEST_SQL, [limit]))
    older = set(selected) - {e.pk for e in experiments}
    if older:
        experiments += Experiment.objects.filter(id__in=older).order_by(*newest)
        experiments.sort(key=lambda e: (e.created_at, e.pk), reverse=True)
    return experiments


# What the experiment page reads of each run: its row (``tracer_tags.experiment_run_row``), its progress,
# its compare pairs and its review; the run's other columns are left in the table.
EXPERIMENT_RUN_COLUMNS = (
    "experiment_id",
    "scenario",
    "policy_name",
    "model_backend",
    "model_name",
    "source",
    "source_detail",
    "status",
    "step_count",
    "error_count",
    "failed_attempt_count",
    "retry_count",
    "stop_reason",
    "verdict",
    "judge",
    "rerun_of_id",
    "created_at",
    "enqueued_at",
    "started_at",
)
REVIEW_COLUMNS = tuple(
    f"review__{name}"
    for name in ("verdict", "verdict_override", "override_reason", "note", "reviewed_at", "reviewer__username")
)


def experiment_runs(*, experiment: Experiment) -> list[Run]:
    """An experiment's top-level runs, each with its review (an override shows beside the judge's verdict)."""
    runs = experiment.runs.filter(parent__isnull=True).only(*EXPERIMENT_RUN_COLUMNS, *REVIEW_COLUMNS).order_by("id")
    return list(runs.select_related("review__reviewer").prefetch_related("review__tags"))


# An experiment page says it is waiting for a worker when nothing was claimed for this long.
WAITING_FOR_WORKER_AFTER_S = 10


@dataclass
class ExperimentProgress:
    """What an experiment page says about runs not yet taken, and how often it asks again."""

    queued: int
    running: int
    oldest_sent: datetime | None  # the queued run whose task was sent longest ago
    waiting_for_worker: bool  # queued runs, none running, and nothing claimed for a while
    poll_s: int


def experiment_progress(*, runs: list[Run], now: datetime | None = None) -> ExperimentProgress:
    """Progress read from the runs the page already has: no query of its own."""
    now = now or timezone.now()
    queued = [r for r in runs if r.status == Run.Status.QUEUED]
    running = sum(1 for r in runs if r.status == Run.Status.RUNNING)
    oldest_sent = min((r.enqueued_at or r.created_at for r in queued), default=None)
    last_claim = max((r.started_at for r in runs if r.started_at), default=None)
    quiet_since = max(filter(None, [last_claim, oldest_sent]), default=None)
    waiting = bool(queued) and not running and quiet_since is not None
    waiting = waiting and (now - quiet_since).total_seconds() > WAITING_FOR_WORKER_AFTER_S
    return ExperimentProgress(
        queued=len(queued),
        running=running,
        oldest_sent=oldest_sent,
        waiting_for_worker=waiting,
        poll_s=5 if waiting else 1,
    )


def experiment_pairs(*, runs: list[Run], policies: list[str], first_repeat: bool = False) -> list[tuple[Run, Run]]:
    """Compare pairs: for each scenario and repeat, the first policy's run against each other policy's;
    with ``first_repeat``, only each scenario's first repeat (one link per scenario and other policy).

    A run that was interrupted and re-run is stood in for by its re-run, in its own repeat
    (``experiment_repeats``, as "other policy" links pair runs).
    """
    fields = ("experiment_id", "scenario", "policy_name", "rerun_of_id")
    place = experiment_repeats([{"id": run.pk, **{f: getattr(run, f) for f in fields}} for run in runs])
    groups: dict[tuple[str, int], dict[str, Run]] = defaultdict(dict)
    for run in sorted(runs, key=lambda r: r.pk):  # the newest re-run stands in for its repeat
        _, scenario, policy, repeat = place[run.pk]
        groups[(scenario, repeat)][policy] = run
    pairs = []
    for (_, repeat), group in groups.items():
        if first_repeat and repeat:
            continue
        present = [group[p] for p in policies if p in group]
        pairs.extend((present[0], other) for other in present[1:])
    return pairs
