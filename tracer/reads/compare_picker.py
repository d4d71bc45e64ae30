"""Reads of the compare picker: its typeahead's runs, the pairs it suggests (one scenario under two policies),
and which asked-for ids no run has."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import NamedTuple

from django.db.models import Q

from ..models import Run

COMPARE_CHOICES = 200  # suggested pairs are found among this many of the newest runs


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


SUGGESTIONS = 12  # the typeahead's answers
PAIRS_SHOWN = 8  # suggested pairs


def _choices(rows: Iterable[tuple]) -> list[RunChoice]:
    return [RunChoice(*row[:5], row[5] or "", *row[6:]) for row in rows]


def run_suggestions(*, text: str) -> list[RunChoice]:
    """The compare picker's typeahead: the newest runs whose id is ``text`` (``#12`` or ``12``) or whose
    scenario, policy or label holds it; the newest runs for no text. One query."""
    runs = Run.objects.order_by("-pk")
    text = text.strip()
    if text:
        number = text.removeprefix("#")
        match = Q(scenario__icontains=text) | Q(policy_name__icontains=text) | Q(label__icontains=text)
        if number.isdigit() and len(number) <= 18:
            match |= Q(pk=int(number))
        runs = runs.filter(match)
    return _choices(runs.values_list(*CHOICE_FIELDS)[:SUGGESTIONS])


class SuggestedPair(NamedTuple):
    """Two finished runs of one scenario under two policies: the newest of each policy."""

    scenario: str
    a: RunChoice
    b: RunChoice


def suggested_pairs() -> list[SuggestedPair]:
    """Pairs worth comparing among the newest finished runs: in each scenario, the newest run of its
    newest policy beside the newest run of each other policy; the newest pairs first. One query."""
    newest = (
        Run.objects.filter(status=Run.Status.FINISHED)
        .exclude(scenario="")
        .exclude(policy_name="")
        .order_by("-pk")
        .values_list(*CHOICE_FIELDS)[:COMPARE_CHOICES]
    )
    by_scenario: dict[str, dict[str, RunChoice]] = defaultdict(dict)
    for run in _choices(newest):  # newest first: the first run of a policy is its newest
        by_scenario[run.scenario].setdefault(run.policy_name, run)
    pairs = []
    for scenario, runs in by_scenario.items():
        first, *others = runs.values()
        # A is the older run, as the runs list's two ticked boxes make it.
        pairs += [SuggestedPair(scenario, *sorted((first, other), key=lambda r: r.pk)) for other in others]
    pairs.sort(key=lambda pair: -max(pair.a.pk, pair.b.pk))
    return pairs[:PAIRS_SHOWN]


def runs_exist() -> bool:
    return Run.objects.exists()


def run_ids_missing(*, ids: Iterable[int]) -> set[int]:
    """Which of ``ids`` no run has."""
    wanted = set(ids)
    return wanted - set(Run.objects.filter(pk__in=wanted).values_list("pk", flat=True))
