"""Reads of stored findings: a run's, and the findings query the CLI and the API answer (kind, tool, since).

The query's filters are checked first (``findings_filter``): an unknown kind, tool or date is a
``FindingFilterError`` naming what is valid. Every read is a fixed number of queries, by index.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any

from django.db.models import QuerySet
from django.utils.dateparse import parse_date, parse_datetime

from agents.diagnosis.kinds import BY_KEY, KEYS
from agents.prices import format_money, price

from ..models import Finding, Run, ToolDay
from .prepared import Prepared


class FindingFilterError(ValueError):
    """A findings filter that names nothing known: ``field`` says which, the message what is valid."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class FindingFilter:
    kinds: tuple[str, ...] = ()
    tool: str = ""
    since: datetime | None = None
    run_id: int | None = None


def known_tools() -> list[str]:
    """Every tool any diagnosed run called, sorted (one query over the tool rollup's index)."""
    return sorted(set(ToolDay.objects.values_list("tool", flat=True).distinct()))


def since_parse(value: str) -> datetime:
    """``2026-12-01`` (midnight UTC) or an ISO 8601 time; ``FindingFilterError`` otherwise."""
    text = (value or "").strip()
    try:
        moment = parse_datetime(text) if "T" in text or " " in text else None
    except ValueError:  # well formed but no such time (hour 25)
        moment = None
    if moment is None:
        try:
            day = parse_date(text)
        except ValueError:
            day = None
        if day is None:
            raise FindingFilterError(
                "since", f"{value!r} is not a date; expected YYYY-MM-DD or an ISO 8601 time (2026-12-01T09:00Z)"
            )
        moment = datetime.combine(day, time.min)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def findings_filter(
    *, kind: str | list[str] | tuple[str, ...] = (), tool: str = "", since: str = "", run_id: int | None = None
) -> FindingFilter:
    """The filter, checked: each kind one of ``KEYS``, the tool one some run called, ``since`` a date."""
    given = [kind] if isinstance(kind, str) else list(kind)
    kinds = tuple(part.strip() for item in given for part in item.split(",") if part.strip())
    unknown = [k for k in kinds if k not in KEYS]
    if unknown:
        raise FindingFilterError(
            "kind", f"unknown finding kind {', '.join(map(repr, unknown))}; expected one of {', '.join(KEYS)}"
        )
    tool = (tool or "").strip()
    if tool:
        tools = known_tools()
        if tool not in tools:
            shown = ", ".join(tools[:40]) + (" …" if len(tools) > 40 else "")
            raise FindingFilterError("tool", f"no run called a tool named {tool!r}; tools seen: {shown or 'none yet'}")
    return FindingFilter(kinds, tool, since_parse(since) if since else None, run_id)


def findings_query(f: FindingFilter) -> QuerySet[Finding]:
    """Findings matching ``f``, newest run first, then in the run's order."""
    qs = Finding.objects.all()
    if f.run_id is not None:
        qs = qs.filter(run_id=f.run_id)
    if f.kinds:
        qs = qs.filter(kind__in=f.kinds)
    if f.tool:
        qs = qs.filter(tool=f.tool)
    if f.since is not None:
        qs = qs.filter(run_created_at__gte=f.since)
    return qs.order_by("-run_created_at", "-run_id", "position")


def finding_cost(f: Finding) -> tuple[Any, str]:
    """The finding's wasted tokens priced (``agents.prices``) at its model's price on its run's day, and
    how that price is said (or why there is none)."""
    day: date = f.run_created_at.date()
    found = price(f.model_name, day) if f.model_name else None
    if found is None:
        return None, f"no price for {f.model_name or 'an unnamed model'}"
    return found.cost(f.wasted_input_tokens, f.wasted_output_tokens), found.basis


def finding_json(f: Finding) -> dict[str, Any]:
    """A stored finding as the CLI's JSON Lines and the API give it."""
    cost, basis = finding_cost(f)
    return {
        "kind": f.kind,
        "run": f.run_id,
        "tool": f.tool,
        "steps": f.steps,
        "message": f.message,
        "evidence": f.evidence,
        "fix": f.fix,
        "setting": f.setting,
        "rewrite": f.rewrite or None,
        "basis": f.basis,
        "wasted_calls": f.wasted_calls,
        "wasted_tokens": f.wasted_input_tokens + f.wasted_output_tokens,
        "wasted_ms": f.wasted_ms,
        "cost_usd": None if cost is None else str(cost),
        "cost": format_money(cost),
        "price_basis": basis,
        "rule_set": f.rule_set,
        "scenario": f.scenario,
        "policy": f.policy_name,
        "source": f.source,
        "run_created_at": f.run_created_at.isoformat(),
    }


@dataclass
class RunFinding:
    """A stored finding as the run page's panel shows it: the row, its title, lesson and priced cost."""

    row: Finding
    title: str
    lesson: str
    why: str
    cost: str
    price_basis: str


# A run's findings, the run page's and its live poll's read (its SQL compiled once per process).
_RUN_FINDINGS = Prepared(lambda run_id: Finding.objects.filter(run_id=run_id).order_by("position"))


def run_findings(*, run: Run) -> list[RunFinding]:
    """A run's findings in its order, each with its kind's words and its cost: one query, none when
    its row says it has none (``Run.finding_kinds``, written with them)."""
    if not run.finding_kinds:
        return []
    out = []
    for f in _RUN_FINDINGS(run_id=run.pk):
        kind = BY_KEY.get(f.kind)
        cost, basis = finding_cost(f)
        out.append(
            RunFinding(
                f,
                kind.title if kind else f.kind,
                kind.lesson if kind else "",
                kind.why if kind else "",
                format_money(cost) if (f.wasted_input_tokens or f.wasted_output_tokens) else "",
                basis,
            )
        )
    return out


def findings_by_step(findings: list[RunFinding]) -> dict[int, list[tuple[int, str]]]:
    """For the timeline's markers: each step index, the (position, kind) of the findings citing it."""
    by_step: dict[int, list[tuple[int, str]]] = {}
    for f in findings:
        for index in f.row.steps or []:
            if isinstance(index, int):
                by_step.setdefault(index, []).append((f.row.position, f.row.kind))
    return by_step


@dataclass
class FindingDiff:
    """One kind on one tool in either of two runs: each run's findings of it (empty: not found there)."""

    kind: str
    title: str
    tool: str
    a: list[Finding]
    b: list[Finding]

    @property
    def differs(self) -> bool:
        return bool(self.a) != bool(self.b)


def findings_compare(*, a: Run, b: Run) -> list[FindingDiff]:
    """The findings of two runs matched by kind and tool (one query): those found in only one run
    first, then those both have, each in the order of its first step."""
    pairs: dict[tuple[str, str], FindingDiff] = {}
    for f in Finding.objects.filter(run_id__in=[a.pk, b.pk]).order_by("run_id", "position"):
        kind = BY_KEY.get(f.kind)
        diff = pairs.setdefault((f.kind, f.tool), FindingDiff(f.kind, kind.title if kind else f.kind, f.tool, [], []))
        (diff.a if f.run_id == a.pk else diff.b).append(f)
    return sorted(pairs.values(), key=lambda d: (not d.differs, (d.a or d.b)[0].steps[:1] or [0], d.kind))
