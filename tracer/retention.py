"""Retention: the one way recorded runs are removed. Nothing in the dashboard or the admin deletes a
run or an experiment (an experiment is archived instead); a rule does, as trace stores offer it.

``RLT_RETENTION_DAYS`` says how many days runs are kept: one number for every run (``90``), or one
per source with a default (``otlp=7,api=30,90``; sources are ``Run.Source``: agent, import, otlp, api).
Unset, or a source left out with no default, keeps its runs for ever. A run goes once it started that
many days ago and has ended: with its steps, sub-agent runs, review and stored OTLP spans; a re-run
that stays loses only its link. The runs of an experiment go together with the experiment, by the
``agent`` rule, once the experiment is that old and none of its runs is still active, so an
experiment's counts never disagree with its runs.

``runs_purge`` deletes in batches, each its own short transaction, so writers recording steps
meanwhile wait at most one batch (SQLite's lock) or not at all (PostgreSQL's row locks); beat runs it
every ``RLT_RETENTION_EVERY_S`` (``tasks.runs_purge_task``) and it logs what it removed, with counts.
``manage.py purge`` runs it by hand, ``--dry-run`` saying what would go.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from .models import Experiment, Run

logger = logging.getLogger(__name__)

DEFAULT = "*"  # the rule's key for every source it does not name
RUN_BATCH = 500  # top-level runs deleted per transaction
EXPERIMENT_BATCH = 5  # experiments (with all their runs) deleted per transaction


class RetentionError(ValueError):
    """``RLT_RETENTION_DAYS`` cannot be read; the message says what is wrong and what is expected."""


def retention_parse(text: str) -> dict[str, int]:
    """``RLT_RETENTION_DAYS`` as {source or ``*``: days}; empty when unset."""
    rules: dict[str, int] = {}
    sources = set(Run.Source.values)
    for part in (p.strip() for p in (text or "").split(",")):
        if not part:
            continue
        source, _, days = part.rpartition("=")
        source = source.strip() or DEFAULT
        if source != DEFAULT and source not in sources:
            raise RetentionError(
                f"RLT_RETENTION_DAYS names the source {source!r}; expected one of {', '.join(sorted(sources))}, "
                "e.g. 'otlp=7,api=30,90'"
            )
        try:
            number = int(days)
        except ValueError:
            number = 0
        if number < 1:
            raise RetentionError(f"RLT_RETENTION_DAYS: {part!r} is not a whole number of days (1 or more)")
        rules[source] = number
    return rules


def retention_rules() -> dict[str, int]:
    return retention_parse(settings.RLT_RETENTION_DAYS)


def _cutoffs(rules: dict[str, int], now: datetime) -> dict[str, datetime]:
    """Each source's cutoff: runs started before it may go."""
    out = {}
    for source in Run.Source.values:
        days = rules.get(source, rules.get(DEFAULT))
        if days is not None:
            out[source] = now - timedelta(days=days)
    return out


def _active() -> Q:
    return Q(status__in=[Run.Status.QUEUED, Run.Status.RUNNING])


def experiments_expired(*, cutoff: datetime) -> QuerySet[Experiment]:
    """Experiments created before ``cutoff`` none of whose runs is still queued or running."""
    active = Run.objects.filter(_active(), experiment=OuterRef("pk"))
    return Experiment.objects.filter(created_at__lt=cutoff).exclude(Exists(active)).order_by("created_at", "id")


def runs_expired(*, source: str, cutoff: datetime) -> QuerySet[Run]:
    """Top-level runs of ``source`` outside any experiment, started before ``cutoff``, that have ended."""
    return (
        Run.objects.filter(source=source, parent__isnull=True, experiment__isnull=True, created_at__lt=cutoff)
        .exclude(_active())
        .order_by("created_at", "id")
    )


@dataclass
class PurgeReport:
    """What a purge removed (or, dry, would remove): rows by model, top-level runs by source."""

    dry_run: bool
    rules: dict[str, int]
    runs_by_source: Counter = field(default_factory=Counter)
    rows: Counter = field(default_factory=Counter)  # model label -> rows
    batches: int = 0
    seconds: float = 0.0
    longest_batch_s: float = 0.0  # the longest a batch held its transaction: what a writer may wait
    finished: bool = True  # False when the time budget ran out first

    @property
    def experiments(self) -> int:
        return self.rows["tracer.Experiment"]

    def summary(self) -> str:
        verb = "would remove" if self.dry_run else "removed"
        if not self.rules:
            return "retention: RLT_RETENTION_DAYS is not set; every run is kept"
        rules = ", ".join(f"{'every other source' if s == DEFAULT else s}: {d} days" for s, d in self.rules.items())
        by_source = ", ".join(f"{n} {s}" for s, n in sorted(self.runs_by_source.items())) or "none"
        rows = (
            ", ".join(f"{n} {label.split('.')[-1].lower()}" for label, n in sorted(self.rows.items()) if n) or "nothing"
        )
        tail = "" if self.finished else "; stopped at its time budget, the rest goes next time"
        return (
            f"retention ({rules}): {verb} {sum(self.runs_by_source.values())} top-level runs ({by_source}) "
            f"and {self.experiments} experiments; rows: {rows}; {self.batches} batches in {self.seconds:.1f} s{tail}"
        )


def _delete(queryset: QuerySet, report: PurgeReport) -> None:
    """One batch, in one transaction. Django's cascade reads the rows it deletes: their ids only."""
    started = time.monotonic()
    with transaction.atomic():
        _, counts = queryset.only("id").delete()
    report.longest_batch_s = max(report.longest_batch_s, time.monotonic() - started)
    report.rows.update(counts)
    report.batches += 1


def runs_purge(
    *,
    now: datetime | None = None,
    rules: dict[str, int] | None = None,
    dry_run: bool = False,
    budget_s: float | None = None,
    pause_s: float = 0.0,
) -> PurgeReport:
    """Remove what the retention rules say has expired, batch by batch, until nothing is left or
    ``budget_s`` seconds have passed; ``pause_s`` between batches lets writers in. ``dry_run`` counts
    instead (the rows each run would take with it are counted by the same cascade, not deleted)."""
    now = now or timezone.now()
    rules = retention_rules() if rules is None else rules
    report = PurgeReport(dry_run=dry_run, rules=rules)
    started = time.monotonic()
    cutoffs = _cutoffs(rules, now)

    def out_of_time() -> bool:
        return budget_s is not None and time.monotonic() - started > budget_s

    if dry_run:
        _count(report, cutoffs)
        report.seconds = time.monotonic() - started
        return report
    if Run.Source.AGENT in cutoffs:
        while not out_of_time():
            ids = list(
                experiments_expired(cutoff=cutoffs[Run.Source.AGENT]).values_list("id", flat=True)[:EXPERIMENT_BATCH]
            )
            if not ids:
                break
            report.runs_by_source.update(
                Run.objects.filter(experiment_id__in=ids, parent__isnull=True).values_list("source", flat=True)
            )
            _delete(Experiment.objects.filter(id__in=ids), report)
            time.sleep(pause_s)
    for source, cutoff in cutoffs.items():
        while not out_of_time():
            ids = list(runs_expired(source=source, cutoff=cutoff).values_list("id", flat=True)[:RUN_BATCH])
            if not ids:
                break
            report.runs_by_source[source] += len(ids)
            _delete(Run.objects.filter(id__in=ids), report)
            time.sleep(pause_s)
    report.finished = not out_of_time()
    report.seconds = time.monotonic() - started
    return report


def _count(report: PurgeReport, cutoffs: dict[str, datetime]) -> None:
    """The dry run: top-level runs and experiments that would go, and the steps that go with them."""
    from .models import Step

    runs = Q(pk__in=[])
    if Run.Source.AGENT in cutoffs:
        experiments = experiments_expired(cutoff=cutoffs[Run.Source.AGENT])
        report.rows["tracer.Experiment"] = experiments.count()
        runs |= Q(experiment__in=experiments)
    for source, cutoff in cutoffs.items():
        runs |= Q(pk__in=runs_expired(source=source, cutoff=cutoff).values("pk"))
    top = Run.objects.filter(runs, parent__isnull=True)
    report.runs_by_source.update(dict(Counter(top.values_list("source", flat=True))))
    going = Run.objects.filter(Q(pk__in=top.values("pk")) | Q(parent__in=top.values("pk")))
    report.rows["tracer.Run"] = going.count()
    report.rows["tracer.Step"] = Step.objects.filter(run__in=going.values("pk")).count()
