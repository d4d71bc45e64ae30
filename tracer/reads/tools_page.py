"""Reads of the Tools page: every tool over the runs in scope, from the rollups written when runs end.

Per tool: its calls and runs, failures by category (and a chart of them per day), the harness's
retries and the model's repeats, the wasted tries (after a failure no retry can fix) and what the
model's share of them cost, its findings by kind, its message lint (each failure message template it
sent, worst first) and the advice its outcomes support (``tracer.advice``). Seven queries whatever
the number of runs, findings or tools: the tools' totals, their charts' days, their wasted tokens by
model and day, the findings by tool and kind, the message templates' counts and their rows, and (for
the filters) the tools known (``findings.known_tools``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from django.db.models import Max, Min, Q, Sum
from django.utils.safestring import SafeString

from agents.diagnosis.kinds import BY_KEY
from agents.prices import format_money

from .. import charts
from ..advice import Advice, tool_advice
from ..diagnosis import FINDING_COUNTS, TOOL_COUNTS
from ..models import FindingDay, MessageTemplate, TemplateDay, ToolDay
from .rollups import Priced, Scope, add_cost, chart_days

LINT_PER_TOOL = 8  # message templates shown per tool, worst first; the rest are counted
LINT_READ = 2000  # templates shown at most over all tools, worst first


@dataclass
class Category:
    name: str
    failed: int
    pct: float  # of the tool's calls


@dataclass
class ToolFinding:
    kind: str
    title: str
    findings: int
    runs: int
    wasted_calls: int


@dataclass
class LintRow:
    """One failure message template a tool sent, with its score and a rewrite."""

    template: str
    example: str
    example_run_id: int | None
    example_step: int
    category: str
    what: bool
    why: bool
    instead: bool
    internals: str
    score: int
    rewrite: str
    sent: int

    @property
    def missing(self) -> list[str]:
        parts = [("what went wrong", self.what), ("why", self.why), ("what to do instead", self.instead)]
        out = [name for name, present in parts if not present]
        if self.internals:
            out.append(f"no internal details (it has {self.internals})")
        return out


@dataclass
class ToolSummary:
    tool: str
    counts: dict[str, int]
    categories: list[Category]
    chart: SafeString
    wasted_cost: Decimal | None
    cost_known: bool
    findings: list[ToolFinding] = field(default_factory=list)
    lint: list[LintRow] = field(default_factory=list)
    lint_more: int = 0
    advice: list[Advice] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return self.counts["calls"]

    @property
    def failed_pct(self) -> float:
        return round(100 * self.counts["failed"] / self.calls, 1) if self.calls else 0.0

    @property
    def wasted_tokens(self) -> int:
        return self.counts["wasted_input_tokens"] + self.counts["wasted_output_tokens"]

    @property
    def wasted_cost_said(self) -> str:
        if not self.wasted_tokens:
            return format_money(Decimal(0))
        said = format_money(self.wasted_cost)
        return said if self.cost_known else f"{said} and some unpriced" if self.wasted_cost else "unknown"

    @property
    def finding_count(self) -> int:
        return sum(f.findings for f in self.findings)


@dataclass
class ToolsPage:
    tools: list[ToolSummary]
    days: list[date]
    unpriced: list[str]


# what a day's column of a tool's chart draws (``charts.failure_chart``)
CHART_COUNTS = ("calls", "failed", *(f"failed_{cat}" for cat in charts.CATEGORIES))


def tools_page(*, scope: Scope, tool: str = "") -> ToolsPage:
    """Every tool called by runs in ``scope`` (only ``tool`` when given), worst first: most findings,
    then most failed calls.

    The database sums the rollups: each tool's counts over the whole scope (one row a tool, with its
    first and last day), its chart's days (only the days charted), and its wasted tokens by model and
    day (only the rows that have some: what they cost depends on the model's price that day)."""
    rows = ToolDay.objects.filter(scope.q())
    findings = FindingDay.objects.filter(scope.q())
    templates = TemplateDay.objects.filter(scope.q())
    if tool:
        rows, findings = rows.filter(tool=tool), findings.filter(tool=tool)
        templates = templates.filter(template__tool=tool)
    totals = list(
        rows.values("tool").annotate(first=Min("day"), last=Max("day"), **{c: Sum(c) for c in TOOL_COUNTS}).order_by()
    )
    days = chart_days([d for row in totals for d in (row["first"], row["last"])], scope)
    charted = (
        list(
            rows.filter(day__gte=days[0]).values("tool", "day").annotate(**{c: Sum(c) for c in CHART_COUNTS}).order_by()
        )
        if days
        else []
    )
    wasted = list(
        rows.filter(Q(wasted_input_tokens__gt=0) | Q(wasted_output_tokens__gt=0))  # toolday_wasted_idx
        .values("tool", "model_name", "day")
        .annotate(wasted_input_tokens=Sum("wasted_input_tokens"), wasted_output_tokens=Sum("wasted_output_tokens"))
        .order_by()
    )
    found = list(findings.values("tool", "kind").annotate(**{c: Sum(c) for c in FINDING_COUNTS}).order_by())
    # the counts summed by template id alone (no GROUP BY over the templates' text), then those rows
    sent = dict(
        templates.values("template_id").annotate(sent=Sum("sent")).order_by().values_list("template_id", "sent")
    )
    lint_rows = [
        {**row, "sent": sent[row["id"]]}
        for row in MessageTemplate.objects.filter(pk__in=list(sent)).values(
            "id",
            "tool",
            "template",
            "example",
            "example_run_id",
            "example_step",
            "category",
            "what",
            "why",
            "instead",
            "internals",
            "score",
            "rewrite",
        )
    ]
    lint_rows.sort(key=lambda r: (r["score"], -r["sent"], r["tool"], r["template"]))
    return _page(days, totals, charted, wasted, found, lint_rows)


def _page(
    days: list[date],
    totals: list[dict],
    charted: list[dict],
    wasted: list[dict],
    found: list[dict],
    lint_rows: list[dict],
) -> ToolsPage:
    priced = Priced()
    per_day: dict[str, dict[date, dict[str, int]]] = defaultdict(dict)
    for row in charted:
        per_day[row["tool"]][row["day"]] = row
    costs: dict[str, tuple[Decimal | None, bool]] = {}
    for row in wasted:
        total, known = costs.get(row["tool"], (Decimal(0), True))
        more = priced.cost(row["model_name"], row["day"], row["wasted_input_tokens"], row["wasted_output_tokens"])
        costs[row["tool"]] = add_cost(total, more, known=known)
    kinds: dict[str, dict[str, dict[str, int]]] = defaultdict(dict)
    for row in found:
        kinds[row["tool"]][row["kind"]] = {c: row[c] or 0 for c in FINDING_COUNTS}
    lint: dict[str, list[LintRow]] = defaultdict(list)
    for row in lint_rows[:LINT_READ]:
        lint[row["tool"]].append(LintRow(**{k: v for k, v in row.items() if k not in ("id", "tool")}))
    tools = []
    for row in totals:
        tool = row["tool"]
        counts = {c: row[c] or 0 for c in TOOL_COUNTS}
        calls = counts["calls"]
        categories = [
            Category(cat, counts[f"failed_{cat}"], round(100 * counts[f"failed_{cat}"] / calls, 1) if calls else 0.0)
            for cat in charts.CATEGORIES
            if counts[f"failed_{cat}"]
        ]
        cost, known = costs.get(tool, (Decimal(0), True))
        its_findings = sorted(
            (
                ToolFinding(
                    kind, BY_KEY[kind].title if kind in BY_KEY else kind, c["findings"], c["runs"], c["wasted_calls"]
                )
                for kind, c in kinds.get(tool, {}).items()
                if c["findings"]
            ),
            key=lambda f: (-f.findings, f.kind),
        )
        messages = lint.get(tool, [])
        tools.append(
            ToolSummary(
                tool=tool,
                counts=counts,
                categories=categories,
                chart=charts.failure_chart(days, per_day[tool], label=f"failed calls of {tool} per day"),
                wasted_cost=cost,
                cost_known=known,
                findings=its_findings,
                lint=messages[:LINT_PER_TOOL],
                lint_more=max(0, len(messages) - LINT_PER_TOOL),
                advice=tool_advice(tool, counts, kinds.get(tool, {})),
            )
        )
    tools.sort(key=lambda t: (-t.finding_count, -t.counts["failed"], t.tool))
    return ToolsPage(tools=tools, days=days, unpriced=sorted(priced.unpriced))
