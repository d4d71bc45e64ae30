"""What the Tools and Findings pages share: the scope of runs they sum (the runs list's source, scenario,
policy and dates), the rollup rows narrowed to it, the days a chart spans, and what wasted tokens cost.

The rollups (``tracer/diagnosis.py``) hold one row per tool, kind, template or signature and per day
and scope, written when each run ends; a page sums a few of them in one query, whatever the number of
runs or findings.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Q

from agents import prices

from .common import not_archived

CHART_DAYS = 30  # the charts show at most this many days: the last ones of the scope


@dataclass(frozen=True)
class Scope:
    """The runs a page sums: blank fields take every value."""

    source: str = ""
    scenario: str = ""
    policy: str = ""
    started_from: date | None = None
    started_to: date | None = None

    def q(self, prefix: str = "") -> Q:
        """The rollup rows (``Scoped``) of runs in this scope; ``prefix`` for a related model's rows."""
        q = Q()
        for name, column in (("source", "source"), ("scenario", "scenario"), ("policy", "policy_name")):
            value = getattr(self, name)
            if value:
                q &= Q(**{f"{prefix}{column}": value})
        if self.started_from:
            q &= Q(**{f"{prefix}day__gte": self.started_from})
        if self.started_to:
            q &= Q(**{f"{prefix}day__lte": self.started_to})
        return q

    def finding_q(self) -> Q:
        """The same scope over ``Finding`` rows, which copy their run's scope; outside archived
        experiments, whose runs the rollups leave out too."""
        q = not_archived("run__")
        for name, column in (("source", "source"), ("scenario", "scenario"), ("policy", "policy_name")):
            value = getattr(self, name)
            if value:
                q &= Q(**{column: value})
        if self.started_from:
            q &= Q(run_created_at__date__gte=self.started_from)
        if self.started_to:
            q &= Q(run_created_at__date__lte=self.started_to)
        return q


def chart_days(days: Iterable[date], scope: Scope) -> list[date]:
    """The days a chart draws: from the first day with data (or the scope's start) to the last (or the
    scope's end), every day in between, at most the last ``CHART_DAYS``."""
    seen = sorted(set(days))
    if not seen:
        return []
    first = scope.started_from or seen[0]
    last = scope.started_to or seen[-1]
    first, last = max(first, seen[0]), min(last, seen[-1])
    first = max(first, last - timedelta(days=CHART_DAYS - 1))
    return [first + timedelta(days=k) for k in range((last - first).days + 1)]


class Priced:
    """Sums the cost of tokens over rows of (model, day): each model's price on each day looked up once."""

    def __init__(self) -> None:
        self._prices: dict[tuple[str, date], prices.Price | None] = {}
        self.unpriced: set[str] = set()

    def cost(self, model: str, day: date, input_tokens: int, output_tokens: int) -> Decimal | None:
        if not (input_tokens or output_tokens):
            return Decimal(0)
        key = (model, day)
        if key not in self._prices:
            self._prices[key] = prices.price(model, day) if model else None
        found = self._prices[key]
        if found is None:
            self.unpriced.add(model or "an unnamed model")
            return None
        return found.cost(input_tokens, output_tokens)


def add_cost(total: Decimal | None, more: Decimal | None, *, known: bool) -> tuple[Decimal | None, bool]:
    """``total`` + ``more``; ``known`` stays true only while every part had a price."""
    if more is None:
        return total, False
    return (total or Decimal(0)) + more, known


def summed(rows: Iterable[dict[str, Any]], keys: tuple[str, ...], counts: Iterable[str]) -> dict[tuple, dict]:
    """``rows`` (dicts) added up by ``keys``: each key's counts summed."""
    counts = tuple(counts)
    out: dict[tuple, dict[str, int]] = {}
    for row in rows:
        key = tuple(row[k] for k in keys)
        total = out.setdefault(key, dict.fromkeys(counts, 0))
        for c in counts:
            total[c] += row[c] or 0
    return out
