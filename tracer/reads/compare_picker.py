"""Reads of the compare picker: the newest runs (and the pair on show) grouped by scenario, and which asked-for ids
no run has."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import NamedTuple

from ..models import Run

COMPARE_CHOICES = 200  # the picker offers this many of the newest runs; the runs list ticks any two


class RunChoice(NamedTuple):
    """A run as the compare picker offers it (``tracer_tags.run_options``): its words, and a reviewer's
    override of its verdict ("" when none)."""

    id: int
    scenario: str
    policy_name: str
    status: str
    verdict: str
    verdict_override: str
    source: str
    model_backend: str
    model_name: str
    label: str

    @property
    def pk(self) -> int:
        return self.id


CHOICE_FIELDS = ("id", "scenario", "policy_name", "status", "verdict", "review__verdict_override")
CHOICE_FIELDS += ("source", "model_backend", "model_name", "label")


def compare_choices(*, include: Iterable[Run] = ()) -> list[tuple[str, list[RunChoice]]]:
    """The newest runs, and ``include`` (the pair on show), grouped by scenario: (scenario, runs)
    sorted by scenario, newest run first in each, with a reviewer's override of its verdict. One query,
    read as tuples (200 runs built as model instances with their reviews took 7 ms of CPU a compare)."""
    newest = Run.objects.order_by("-pk").values_list(*CHOICE_FIELDS)[:COMPARE_CHOICES]
    runs = {row[0]: RunChoice(*row[:5], row[5] or "", *row[6:]) for row in newest}
    for run in include:
        if run.pk not in runs:
            override = getattr(getattr(run, "review", None), "verdict_override", "") or ""
            fields = (run.scenario, run.policy_name, run.status, run.verdict, override)
            runs[run.pk] = RunChoice(run.pk, *fields, run.source, run.model_backend, run.model_name, run.label)
    groups: dict[str, list[RunChoice]] = defaultdict(list)
    for run in sorted(runs.values(), key=lambda r: -r.pk):
        groups[run.scenario or "unknown scenario"].append(run)
    return sorted(groups.items())


def run_ids_missing(*, ids: Iterable[int]) -> set[int]:
    """Which of ``ids`` no run has."""
    wanted = set(ids)
    return wanted - set(Run.objects.filter(pk__in=wanted).values_list("pk", flat=True))
