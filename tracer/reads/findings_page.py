"""Reads of the Findings page: each kind's count and trend over the runs in scope, its top tools, one
kind's findings paged (its runs), and the patterns: failing runs grouped by signature (tool, category,
message template, stop reason), largest first, each with its share of all failing runs.

Counts, trends and patterns are summed from the rollups (``FindingDay``, ``PatternDay``); the findings
listed are read a page at a time through the findings' (kind, created) index. Five queries whatever
the number of runs or findings.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date

from django.db import connection
from django.db.models import Max, Min, Sum
from django.utils.safestring import SafeString

from agents.diagnosis.kinds import KINDS

from .. import charts
from ..diagnosis import FINDING_COUNTS
from ..models import Finding, FindingDay, PatternDay
from .common import index_or_zero
from .rollups import Scope, chart_days, summed

TOP_TOOLS = 3
TREND_DAYS = 4
PATTERNS_SHOWN = 20
FINDINGS_PER_PAGE = 20
PAGE_MAX = 10**6  # a page number past this is the last one asked (an OFFSET both databases take)


@dataclass
class KindSummary:
    key: str
    title: str
    what: str
    lesson: str
    findings: int
    runs: int
    wasted_calls: int
    wasted_tokens: int
    top_tools: list[tuple[str, int]]
    chart: SafeString
    first_half: int  # findings in the first and the second half of the days charted: the trend
    second_half: int

    days: int = 0  # days charted

    @property
    def trend(self) -> str:
        """ "rising", "falling" or "steady": the second half of the charted days against the first; ""
        over fewer than ``TREND_DAYS`` days, too few to say."""
        if self.days < TREND_DAYS:
            return ""
        if self.second_half > self.first_half * 1.25 and self.second_half - self.first_half >= 2:
            return "rising"
        if self.first_half > self.second_half * 1.25 and self.first_half - self.second_half >= 2:
            return "falling"
        return "steady"


@dataclass
class Pattern:
    signature: str
    tool: str
    category: str
    template: str
    stop_reason: str
    runs: int
    example_run_id: int | None
    share_pct: float  # of all failing runs in scope


@dataclass
class FindingPage:
    """One page of one kind's findings, newest run first."""

    rows: list[Finding]
    number: int
    has_next: bool

    @property
    def has_previous(self) -> bool:
        return self.number > 1


@dataclass
class FindingsPage:
    kinds: list[KindSummary]
    patterns: list[Pattern]
    failing_runs: int
    days: list[date]
    selected: str = ""
    listed: FindingPage | None = None
    more_patterns: int = 0
    kinds_seen: list[KindSummary] = field(default_factory=list)


def kind_summaries(*, scope: Scope) -> tuple[list[KindSummary], list[date]]:
    """Every kind, those found first (most findings first), with its top tools and trend: two queries,
    each kind's counts by tool over the whole scope (with their first and last day), then its findings
    on the days charted."""
    rows = FindingDay.objects.filter(scope.q())
    by_tool = list(
        rows.values("kind", "tool")
        .annotate(first=Min("day"), last=Max("day"), **{c: Sum(c) for c in FINDING_COUNTS})
        .order_by()
    )
    days = chart_days([d for r in by_tool for d in (r["first"], r["last"])], scope)
    per_day: dict[str, dict[date, int]] = defaultdict(dict)
    if days:
        for r in rows.filter(day__gte=days[0]).values("kind", "day").annotate(findings=Sum("findings")).order_by():
            per_day[r["kind"]][r["day"]] = r["findings"] or 0
    totals = summed(by_tool, ("kind",), FINDING_COUNTS)
    tools: dict[str, dict[str, int]] = defaultdict(dict)
    for r in by_tool:
        tools[r["kind"]][r["tool"]] = r["findings"] or 0
    half = len(days) // 2
    out = []
    for kind in KINDS:
        counts = totals.get((kind.key,), dict.fromkeys(FINDING_COUNTS, 0))
        daily = per_day.get(kind.key, {})
        top = sorted(tools.get(kind.key, {}).items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_TOOLS]
        out.append(
            KindSummary(
                key=kind.key,
                title=kind.title,
                what=kind.what,
                lesson=kind.lesson,
                findings=counts["findings"],
                runs=counts["runs"],
                wasted_calls=counts["wasted_calls"],
                wasted_tokens=counts["wasted_input_tokens"] + counts["wasted_output_tokens"],
                top_tools=top,
                chart=charts.count_chart(days, daily, label=f"{kind.key} findings per day"),
                first_half=sum(daily.get(d, 0) for d in days[:half]),
                second_half=sum(daily.get(d, 0) for d in days[half:]),
                days=len(days),
            )
        )
    out.sort(key=lambda k: (-k.findings, [c.key for c in KINDS].index(k.key)))
    return out, days


def patterns(*, scope: Scope, limit: int = PATTERNS_SHOWN) -> tuple[list[Pattern], int, int]:
    """The largest failing-run signatures in scope, the number of failing runs, and how many signatures
    are not shown: two queries. The first sums the runs by signature and, over those sums, counts the
    signatures and adds up their runs (window functions over the grouped rows); the second reads the
    shown signatures' tool, category, template and stop reason from one row of each (its example's)."""
    # grouped by the signature alone: its tool, category, template and stop reason are the signature's
    grouped = (
        PatternDay.objects.filter(scope.q())
        .values("signature")
        .annotate(runs=Sum("runs"), example=Max("example_run_id"))
        .filter(runs__gt=0)
        .order_by()
    )
    sql, params = grouped.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT g.signature, g.runs, g.example, COUNT(*) OVER (), SUM(g.runs) OVER () "
            f"FROM ({sql}) g ORDER BY g.runs DESC, g.signature LIMIT %s",
            (*params, limit),
        )
        top = cursor.fetchall()
    shown_total = top[0][4] if top else 0
    signatures = top[0][3] if top else 0
    said = {
        r["signature"]: r
        for r in PatternDay.objects.filter(
            example_run_id__in=[example for _, _, example, _, _ in top if example is not None],
            signature__in=[signature for signature, *_ in top],
        ).values("signature", "tool", "category", "template", "stop_reason")
    }
    total = int(shown_total or 0)
    shown = []
    for signature, runs, example, _, _ in top:
        parts = said.get(signature, {})
        shown.append(
            Pattern(
                signature=signature,
                tool=parts.get("tool", ""),
                category=parts.get("category", ""),
                template=parts.get("template", ""),
                stop_reason=parts.get("stop_reason", ""),
                runs=runs,
                example_run_id=example,
                share_pct=round(100 * runs / total, 1) if total else 0.0,
            )
        )
    return shown, total, max(0, signatures - len(shown))


def kind_findings(*, scope: Scope, kind: str, tool: str = "", page: object = 1) -> FindingPage:
    """Page ``page`` of ``kind``'s findings in scope (of ``tool``'s when given), newest run first: one query."""
    number = min(index_or_zero(page) or 1, PAGE_MAX)
    qs = Finding.objects.filter(scope.finding_q(), kind=kind)
    if tool:
        qs = qs.filter(tool=tool)
    start = (number - 1) * FINDINGS_PER_PAGE
    rows = list(
        qs.order_by("-run_created_at", "-id").only(
            "run_id",
            "kind",
            "tool",
            "steps",
            "message",
            "fix",
            "wasted_calls",
            "run_created_at",
            "scenario",
            "policy_name",
            "source",
        )[start : start + FINDINGS_PER_PAGE + 1]
    )
    return FindingPage(rows=rows[:FINDINGS_PER_PAGE], number=number, has_next=len(rows) > FINDINGS_PER_PAGE)


def findings_page(*, scope: Scope, kind: str = "", tool: str = "", page: object = 1) -> FindingsPage:
    """The page: every kind's summary, the patterns, and ``kind``'s findings (else the most found kind's)."""
    kinds, days = kind_summaries(scope=scope)
    shown, total, more = patterns(scope=scope)
    selected = kind or next((k.key for k in kinds if k.findings), "")
    listed = kind_findings(scope=scope, kind=selected, tool=tool, page=page) if selected else None
    return FindingsPage(
        kinds=kinds,
        patterns=shown,
        failing_runs=total,
        days=days,
        selected=selected,
        listed=listed,
        more_patterns=more,
        kinds_seen=[k for k in kinds if k.findings],
    )
