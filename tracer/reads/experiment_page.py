"""Reads of the experiment pages and pickers: an experiment, its runs and progress, its compare pairs, and the
pickers' newest experiments."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from django.core.paginator import Page, Paginator
from django.db.models import Count, Max, Min, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.shortcuts import get_object_or_404
from django.utils import timezone

from ..models import Experiment, Run
from .common import index_or_zero
from .peers import experiment_repeats


def experiment_get(*, pk: int) -> Experiment:
    """The experiment, with ``first_judge``: the judge of its first run (the page says whether the
    model judge judges its runs)."""
    first = Run.objects.filter(experiment_id=OuterRef("pk"), parent__isnull=True).order_by("id").values("judge")[:1]
    return get_object_or_404(Experiment.objects.annotate(first_judge=Subquery(first)), pk=pk)


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


RUNS_PER_PAGE = 50


def experiment_runs(*, experiment: Experiment, count: int, number: Any = 1) -> Page:
    """Page ``number`` of an experiment's top-level runs in the order they were made, ``RUNS_PER_PAGE``
    a page (the first when ``number`` is not a page number, the last when it is past the end, as the
    runs list pages), each
    with its review (an override shows beside the judge's verdict). ``count``: how many top-level runs
    it has (``experiment_progress``'s), not counted again."""
    runs = experiment.runs.filter(parent__isnull=True).only(*EXPERIMENT_RUN_COLUMNS, *REVIEW_COLUMNS).order_by("id")
    paginator = Paginator(runs.select_related("review__reviewer").prefetch_related("review__tags"), RUNS_PER_PAGE)
    paginator.count = count  # a cached property: what it would have counted
    return paginator.get_page(index_or_zero(number) or 1)


# An experiment page says it is waiting for a worker when nothing was claimed for this long.
WAITING_FOR_WORKER_AFTER_S = 10


@dataclass
class ExperimentProgress:
    """What an experiment page says about runs not yet taken, and how often it asks again."""

    runs: int  # its top-level runs, whatever their state
    queued: int
    running: int
    oldest_sent: datetime | None  # the queued run whose task was sent longest ago
    waiting_for_worker: bool  # queued runs, none running, and nothing claimed for a while
    poll_s: int


def experiment_progress(*, experiment: Experiment, now: datetime | None = None) -> ExperimentProgress:
    """An experiment's top-level runs counted, those queued and running, the oldest task sent and the
    last claim: one query, over the experiment's runs in the database (not those of one page)."""
    now = now or timezone.now()
    queued = Q(status=Run.Status.QUEUED)
    counted = experiment.runs.filter(parent__isnull=True).aggregate(
        runs=Count("id"),
        queued=Count("id", filter=queued),
        running=Count("id", filter=Q(status=Run.Status.RUNNING)),
        oldest_sent=Min(Coalesce("enqueued_at", "created_at"), filter=queued),
        last_claim=Max("started_at"),
    )
    oldest_sent = counted["oldest_sent"]
    quiet_since = max(filter(None, [counted["last_claim"], oldest_sent]), default=None)
    waiting = bool(counted["queued"]) and not counted["running"] and quiet_since is not None
    waiting = waiting and (now - quiet_since).total_seconds() > WAITING_FOR_WORKER_AFTER_S
    return ExperimentProgress(
        runs=counted["runs"],
        queued=counted["queued"],
        running=counted["running"],
        oldest_sent=oldest_sent,
        waiting_for_worker=waiting,
        poll_s=5 if waiting else 1,
    )


class PairedRun(NamedTuple):
    """What a compare pair needs of a run (``experiment_pairs``, and the page's links)."""

    pk: int
    experiment_id: int | None
    scenario: str
    policy_name: str
    rerun_of_id: int | None


def experiment_pair_runs(*, experiment: Experiment) -> list[PairedRun]:
    """Every top-level run of an experiment as ``PairedRun``s, for its compare pairs: one query of
    these columns alone."""
    rows = experiment.runs.filter(parent__isnull=True).order_by("id")
    return [PairedRun(*row) for row in rows.values_list("id", *PairedRun._fields[1:])]


def experiment_pairs(
    *, runs: list[Run] | list[PairedRun], policies: list[str], first_repeat: bool = False
) -> list[tuple[Run, Run]]:
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
