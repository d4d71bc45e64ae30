"""Diagnosis stored: a run's findings written when it ends, with the rollups the Tools and Findings pages sum.

``runs_diagnose`` is the one write: it reads each finished run as stored (its start, steps and end),
runs ``agents.diagnosis`` on it, and in one transaction replaces its ``Finding`` rows, takes back what
an earlier diagnosis of it added to the rollups (``Run.rolled_up``) and adds what this one finds:
per tool and day (``ToolDay``: calls, failures by category, retries, repeats, wasted retries and
their tokens, the outcomes of second and third tries), per kind and day (``FindingDay``), per message
template (``MessageTemplate``, ``TemplateDay``) and, for a failing run, its signature (``PatternDay``).
Every rollup row is keyed by the day the run was created (the runs list's dates) and the runs list's
scope (source, scenario, policy, model), so a page sums a few rows per tool and day whatever the
number of runs.
``tracer.recording`` calls it wherever a run ends (``run_finish``, ``runs_record_many``,
``imported_run_rewrite``); ``findings_recompute`` rebuilds everything after a rule change.

A run of an archived experiment keeps its findings (its own page shows them) but adds nothing to the
rollups, as the matrix and the runs list leave it out: archiving an experiment or bringing it back
diagnoses its runs again (``experiment_runs_rediagnose``), which takes back or adds what they count.

A failing run is one its judge failed, or, unjudged, one that ended other than with a final answer or
whose last tool call failed: its signature is that last failed call's tool, category and message
template, and the run's stop reason.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import orjson
from django.db import connection, transaction
from django.db.models import TextField
from django.db.models.functions import Cast

from agents.diagnosis import lint
from agents.diagnosis.calls import CATEGORIES, Call, Trace, failure_of, found_nothing, trace_read, wasted_try
from agents.diagnosis.kinds import RULE_SET
from agents.diagnosis.rules import REFUSALS, RULES, Finding, price_findings
from agents.events import Attempt, RunEnd, RunStart, StepEvent, Verdict, failed_attempts
from agents.vocabulary import ErrorCategory, StepKind, StopReason

from .models import Finding as FindingRow
from .models import FindingDay, MessageTemplate, PatternDay, Run, Step, TemplateDay, ToolDay
from .signatures import GUARD_STOPS, event_fields, stop_key

logger = logging.getLogger(__name__)
SCOPE = ("day", "source", "scenario", "policy_name", "model_name")
TOOL_COUNTS = tuple(f.name for f in ToolDay._meta.concrete_fields if f.get_internal_type() == "PositiveIntegerField")
FINDING_COUNTS = ("findings", "runs", "wasted_calls", "wasted_input_tokens", "wasted_output_tokens")
_RUN_FIELDS = (
    "id",
    "source",
    "scenario",
    "policy_name",
    "policy_settings",
    "model_backend",
    "model_name",
    "task",
    "tools",
    "status",
    "stop_reason",
    "verdict",
    "verdict_reason",
    "final_answer",
    "error",
    "guard",
    "transcript",
    "created_at",
    "started_at",
    "rolled_up",
    "experiment__archived_at",
)
STEP_FIELDS = (
    "run_id",
    "index",
    "kind",
    "tool_name",
    "tool_use_id",
    "input",
    "attempts",
    "result_content",
    "is_error",
    "category",
    "retryable",
    "retry_count",
    "latency_ms",
    "input_tokens",
    "output_tokens",
    "text",
    "api_stop_reason",
    "repeat_of",
)


@dataclass
class Stored:
    """A finished run as diagnosis reads it: its scope and its start, steps and end as the loop's events."""

    run_id: int
    scope: tuple[Any, ...]  # (day, source, scenario, policy_name, model_name)
    created_at: Any
    start: RunStart
    steps: list[StepEvent]
    end: RunEnd
    verdict: str
    rolled_up: dict[str, Any]
    finished: bool
    archived: bool = False  # of an archived experiment: counted in no rollup
    new: bool = False  # just written (``run_written``): no findings stored yet, nothing rolled up


def run_written(*, run: Run, steps: Sequence[dict[str, Any]]) -> Stored:
    """A new run from outside as ``runs_stored`` would read it back, made from what the recorder has
    just written instead (``run`` with its fields as inserted, ``steps`` its steps' columns by attribute
    name, JSON columns as values): the same values, without the read."""
    return _stored(vars(run), _written_steps(steps), new=True)


@dataclass
class Rewritten:
    """A run from outside just written again (``recording.imported_run_rewrite``), as ``run_rewritten``
    makes it: the fields written and its steps, without what the rewrite keeps (its source, creation,
    contribution to the rollups and experiment), which ``runs_diagnose`` reads for all of them at once."""

    run_id: int
    fields: dict[str, Any]
    steps: list[StepEvent]


def run_rewritten(*, run_id: int, run: Run, steps: Sequence[dict[str, Any]]) -> Rewritten:
    """Run ``run_id`` written again from ``run`` (its fields as written, ``imported_run_rewrite``'s
    ``_REWRITTEN``) with ``steps``, every step's columns by attribute name as stored now (those kept as
    read, the new ones as written): what ``runs_stored`` would read back, but for the fields the rewrite
    keeps."""
    return Rewritten(run_id, dict(vars(run)), _written_steps(steps))


def _written_steps(steps: Sequence[dict[str, Any]]) -> list[StepEvent]:
    events = []
    for row in steps:
        if row["latency_ms"] is not None:  # a float column: 12 reads back as 12.0
            row = {**row, "latency_ms": float(row["latency_ms"])}
        events.append(step_event(row))
    return events


def step_event(row: dict[str, Any]) -> StepEvent:
    """A stored step (its ``STEP_FIELDS`` as values) as the loop's event."""
    return StepEvent(
        index=row["index"],
        kind=row["kind"],
        tool_name=row["tool_name"] or None,
        tool_use_id=row["tool_use_id"] or None,
        input=row["input"],
        attempts=[Attempt.from_dict(a) for a in row["attempts"] or [] if isinstance(a, dict)],
        result_content=row["result_content"],
        is_error=row["is_error"],
        category=row["category"] or None,
        retryable=row["retryable"],
        retry_count=row["retry_count"],
        latency_ms=row["latency_ms"],
        input_tokens=row["input_tokens"],
        output_tokens=row["output_tokens"],
        text=row["text"] or None,
        api_stop_reason=row["api_stop_reason"] or None,
        repeat_of=row["repeat_of"],
    )


def _day(row: dict[str, Any]) -> date:
    """A run's day, as the runs list's date filters read it: the day it was created (UTC)."""
    return row["created_at"].date()


# JSON columns read as their text and decoded by orjson: Django's JSONField decodes each with json,
# a third of reading a batch back.
_RUN_JSON = ("policy_settings", "tools", "transcript", "rolled_up")
_STEP_JSON = ("input", "attempts", "result_content")


def _json_rows(qs, fields: Sequence[str], json_fields: Sequence[str]) -> list[dict[str, Any]]:
    texts = {f"{name}__text": Cast(name, TextField()) for name in json_fields}
    plain = [f for f in fields if f not in json_fields]
    rows = list(qs.annotate(**texts).values(*plain, *texts))
    for row in rows:
        for name in json_fields:
            text = row.pop(f"{name}__text")
            row[name] = None if text is None else orjson.loads(text)
    return rows


_STEP_BOOLEANS = ("is_error", "retryable")


def _step_rows(run_ids: list[int]) -> list[dict[str, Any]]:
    """The steps of these runs in order, as ``_json_rows`` gives them, read with one cursor: the most
    rows diagnosis reads, which Django's per-value converters would each go through."""
    if not run_ids:
        return []
    quote = connection.ops.quote_name
    cast = "CAST({} AS text)" if connection.vendor == "postgresql" else "{}"
    columns = ", ".join(
        (cast if f in _STEP_JSON else "{}").format(quote(Step._meta.get_field(f).column)) for f in STEP_FIELDS
    )
    table = quote(Step._meta.db_table)
    rows = []
    with connection.cursor() as cursor:
        for start in range(0, len(run_ids), 500):
            chunk = run_ids[start : start + 500]
            cursor.execute(
                f"SELECT {columns} FROM {table} WHERE {quote('run_id')} IN ({', '.join(['%s'] * len(chunk))}) "
                f"ORDER BY {quote('run_id')}, {quote('index')}",
                chunk,
            )
            for values in cursor.fetchall():
                row = dict(zip(STEP_FIELDS, values, strict=True))
                for name in _STEP_JSON:
                    text = row[name]
                    row[name] = None if text is None else orjson.loads(text)
                for name in _STEP_BOOLEANS:  # SQLite's 0 and 1
                    if row[name] is not None:
                        row[name] = bool(row[name])
                rows.append(row)
    return rows


def runs_stored(run_ids: Sequence[int]) -> list[Stored]:
    """The runs ``run_ids``, read in two queries (their rows, then all their steps)."""
    if not run_ids:
        return []
    rows = _json_rows(Run.objects.filter(pk__in=list(run_ids)), _RUN_FIELDS, _RUN_JSON)
    steps: dict[int, list[StepEvent]] = defaultdict(list)
    for step in _step_rows([r["id"] for r in rows]):
        steps[step["run_id"]].append(step_event(step))
    return [_stored(row, steps[row["id"]]) for row in rows]


# What writing a run again keeps, read back for ``Rewritten`` runs.
_KEPT_FIELDS = ("id", "source", "created_at", "rolled_up", "experiment__archived_at")


def _rewritten_stored(runs: Sequence[Rewritten]) -> list[Stored]:
    """These runs written again, completed with what the rewrite kept of each, read in one query (a
    run gone meanwhile is left out, as ``runs_stored`` leaves it)."""
    if not runs:
        return []
    kept = {row["id"]: row for row in Run.objects.filter(pk__in=[r.run_id for r in runs]).values(*_KEPT_FIELDS)}
    return [_stored({**r.fields, **kept[r.run_id]}, r.steps) for r in runs if r.run_id in kept]


def _stored(row: dict[str, Any], steps: list[StepEvent], *, new: bool = False) -> Stored:
    """A run's values by attribute name (``_RUN_FIELDS``, read or as written) and its steps, as diagnosis reads them."""
    start = RunStart(
        scenario=row["scenario"],
        policy_name=row["policy_name"],
        policy_settings=row["policy_settings"] or {},
        model_backend=row["model_backend"],
        model_name=row["model_name"],
        task=row["task"],
        tools=row["tools"] or [],
    )
    verdict = Verdict(row["verdict"] == Run.Verdict.PASS, row["verdict_reason"]) if row["verdict"] else None
    end = RunEnd(
        stop_reason=row["stop_reason"],
        final_answer=row["final_answer"],
        verdict=verdict,
        error=row["error"],
        guard=row["guard"],
        transcript=row["transcript"] or [],
    )
    scope = (_day(row), row["source"], row["scenario"], row["policy_name"], row["model_name"])
    return Stored(
        row["id"],
        scope,
        row["created_at"],
        start,
        steps,
        end,
        row["verdict"],
        row["rolled_up"],
        row["status"] == Run.Status.FINISHED,
        row.get("experiment__archived_at") is not None,
        new,
    )


# --- what one run adds ------------------------------------------------------------------------------


@dataclass
class Contribution:
    """What one run's diagnosis adds to the rollups, keyed as the rows are (scope left out: the run's)."""

    tools: dict[str, dict[str, int]] = field(default_factory=dict)  # tool -> ToolDay counts
    findings: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)  # (kind, tool) -> counts
    templates: dict[str, int] = field(default_factory=dict)  # template key -> times sent
    pattern: dict[str, str] | None = None  # the failing run's signature row

    def to_dict(self) -> dict[str, Any]:
        return {
            "tools": self.tools,
            "findings": [[k, t, counts] for (k, t), counts in self.findings.items()],
            "templates": self.templates,
            "pattern": self.pattern,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Contribution:
        if not data:
            return cls()
        return cls(
            tools=data.get("tools") or {},
            findings={(k, t): counts for k, t, counts in data.get("findings") or []},
            templates=data.get("templates") or {},
            pattern=data.get("pattern"),
        )


@dataclass
class TemplateSeen:
    """A message template's first sighting in a run, for its ``MessageTemplate`` row: scored and
    rewritten (``row``) only when no row has it yet."""

    key: str
    run_id: int
    call: Call
    trace: Trace

    def row(self) -> dict[str, Any]:
        """The ``MessageTemplate`` row's column values by attribute name (``TEMPLATE_COLUMNS``)."""
        call, schema = self.call, self.trace.schema(self.call.tool)
        scored = lint.lint(call.sent_text, call_input=call.input, schema=schema)
        f = failure_of(call.attempts[-1], sent=call.sent)
        known = call.attempts[-1].message if call.attempts[-1].message != call.sent_text else None
        suggested = lint.rewrite(
            tool=call.tool, call_input=call.input, schema=schema, category=f.category, sent=call.sent_text, known=known
        )
        return dict(
            key=self.key,
            tool=call.tool[:200],
            template=lint.template(call.sent_text),
            example=call.sent_text[:2000],
            example_run_id=self.run_id,
            example_step=call.step,
            category=f.category or "",
            what=scored.what,
            why=scored.why,
            instead=scored.instead,
            internals=", ".join(w for w, _ in scored.internals)[:200],
            score=scored.score,
            rewrite=suggested.message,
        )


# the key first: it is what a row already there is found by
TEMPLATE_COLUMNS = ("key", *(f.attname for f in MessageTemplate._meta.concrete_fields if f.name not in ("id", "key")))


def _tool_counts(trace: Trace) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for call in trace.calls:
        c = counts.get(call.tool)
        if c is None:
            c = counts[call.tool] = dict.fromkeys(TOOL_COUNTS, 0)
        c["calls"] += 1
        c["retries"] += call.harness_retries
        first, last = call.attempts[0], call.attempts[-1]
        if found_nothing(first):
            c["empty"] += 1
        if (call.sent_error and call.delivered) or (not call.delivered and not last.ok):
            c["failed"] += 1
            f = failure_of(last, sent=call.sent)
            c[f"failed_{f.category}" if f.category in CATEGORIES else "failed_unknown"] += 1
        # retries and repeats after a failure no retry can fix, or after nothing found
        if call.repeat_of is not None:
            c["repeats"] += 1
            wasted_here = sum(
                1 for previous in [call.repeat_of.attempts[-1], *call.attempts[:-1]] if wasted_try(previous)
            )
            c["wasted"] += wasted_here
            if wasted_here:
                c["wasted_input_tokens"] += call.tokens[0]
                c["wasted_output_tokens"] += call.tokens[1]
        elif len(call.attempts) > 1:
            c["wasted"] += sum(1 for previous in call.attempts[:-1] if wasted_try(previous))
        if not first.ok:
            f0 = failure_of(first)
            if f0.category in REFUSALS:
                c["refusals"] += 1
                if len(call.attempts) > 1:
                    c["refusals_retried"] += 1
            if f0.category == ErrorCategory.TRANSIENT:
                c["transient_first"] += 1
                if len(call.attempts) > 1:
                    c["second_tries"] += 1
                    c["second_ok"] += int(call.attempts[1].ok)
                if len(call.attempts) > 2:
                    c["third_tries"] += 1
                    c["third_ok"] += int(call.attempts[2].ok)
    for step in trace.steps:
        if step.kind == StepKind.TOOL_USE and (n := failed_attempts([step])):
            counts[step.tool_name or ""]["failed_attempts"] += n
    for c in counts.values():
        c["runs"] = 1
    return counts


def _failing(stored: Stored, trace: Trace) -> bool:
    if stored.verdict:
        return stored.verdict == Run.Verdict.FAIL
    if stored.end.stop_reason and stored.end.stop_reason != StopReason.FINAL_ANSWER:
        return True
    return bool(trace.calls) and trace.calls[-1].sent_error


def _signature(stored: Stored, trace: Trace) -> dict[str, str]:
    failed: Call | None = next((c for c in reversed(trace.calls) if c.sent_error or not c.delivered), None)
    tool = category = tpl = ""
    if failed is not None:
        tool = failed.tool
        f = failure_of(failed.attempts[-1], sent=failed.sent)
        category = f.category or ""
        text = failed.sent_text or (failed.attempts[-1].message or "")
        tpl = lint.template(text)
    stop = stored.end.stop_reason or ""
    key = hashlib.sha1("\x1f".join((tool, category, tpl, stop)).encode()).hexdigest()[:16]
    return {"signature": key, "tool": tool, "category": category, "template": tpl, "stop_reason": stop}


def diagnose_stored(stored: Stored) -> tuple[list[Finding], Contribution, list[TemplateSeen]]:
    """One stored run's findings, its contribution to the rollups and the message templates it sent;
    nothing for a run that has not ended (a trace written again as running)."""
    if not stored.finished:
        return [], Contribution(), []
    trace = trace_read(start=stored.start, steps=stored.steps, end=stored.end)
    findings: list[Finding] = []
    for _, rule in RULES:
        findings += rule(trace)
    findings.sort(key=lambda f: (f.steps[0] if f.steps else 0, f.kind))
    price_findings(findings, model=stored.start.model_name, on=stored.scope[0])
    contribution = Contribution(tools=_tool_counts(trace))
    for f in findings:
        counts = contribution.findings.setdefault((f.kind, f.tool), dict.fromkeys(FINDING_COUNTS, 0))
        counts["findings"] += 1
        counts["runs"] = 1
        counts["wasted_calls"] += f.wasted_calls
        counts["wasted_input_tokens"] += f.wasted_input_tokens
        counts["wasted_output_tokens"] += f.wasted_output_tokens
    seen: list[TemplateSeen] = []
    for call in trace.calls:
        if not (call.delivered and call.sent_error) or call.attempts[-1].ok:
            continue
        key = lint.template_key(call.tool, call.sent_text)
        if key not in contribution.templates:
            seen.append(TemplateSeen(key, stored.run_id, call, trace))
        contribution.templates[key] = contribution.templates.get(key, 0) + 1
    if _failing(stored, trace):
        contribution.pattern = _signature(stored, trace)
    return findings, contribution, seen


# --- writing ----------------------------------------------------------------------------------


def _upsert(table: str, keys: Sequence[str], counts: Sequence[str], rows: list[tuple], extra: Sequence[str] = ()):
    """Add ``rows`` (key values, then counts, then ``extra`` columns kept from the first insert) to
    ``table``: one ``INSERT … ON CONFLICT DO UPDATE`` adding the counts, on either database (with no
    counts, ``DO NOTHING``: a row already there is kept as it is)."""
    if not rows:
        return
    quote = connection.ops.quote_name
    columns = [*keys, *counts, *extra]
    head = f"INSERT INTO {quote(table)} ({', '.join(quote(c) for c in columns)}) VALUES "
    one = "(" + ", ".join(["%s"] * len(columns)) + ")"
    tail = f" ON CONFLICT ({', '.join(quote(k) for k in keys)}) " + (
        "DO UPDATE SET " + ", ".join(f"{quote(c)} = {quote(table)}.{quote(c)} + excluded.{quote(c)}" for c in counts)
        if counts
        else "DO NOTHING"
    )
    size = max(1, 900 // len(columns))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), size):
            chunk = rows[start : start + size]
            cursor.execute(head + ", ".join([one] * len(chunk)) + tail, [v for row in chunk for v in row])


def _subtract(table: str, keys: Sequence[str], counts: Sequence[str], rows: dict[tuple, dict[str, int]]) -> None:
    """Take ``rows`` (key values -> counts) off the rows of ``table`` they key: one ``UPDATE … FROM`` a
    VALUES list per 200 rows, on either database."""
    if not rows:
        return
    quote = connection.ops.quote_name
    t = quote(table)
    names = [*(f"k{n}" for n in range(len(keys))), *(f"c{n}" for n in range(len(counts)))]
    assign = ", ".join(f"{quote(c)} = {t}.{quote(c)} - v.c{n}" for n, c in enumerate(counts))
    # PostgreSQL reads a VALUES list's dates as text
    date = "CAST(v.k{} AS date)" if connection.vendor == "postgresql" else "v.k{}"
    match = " AND ".join(f"{t}.{quote(k)} = {(date if k == 'day' else 'v.k{}').format(n)}" for n, k in enumerate(keys))
    items = [(*key, *(values.get(c, 0) for c in counts)) for key, values in rows.items()]
    with connection.cursor() as cursor:
        for start in range(0, len(items), 200):
            chunk = items[start : start + 200]
            values = ", ".join(["(" + ", ".join(["%s"] * len(names)) + ")"] * len(chunk))
            cursor.execute(
                f"WITH v ({', '.join(names)}) AS (VALUES {values}) UPDATE {t} SET {assign} FROM v WHERE {match}",
                [value for row in chunk for value in row],
            )


def _take_back(old: Sequence[tuple[Stored, Contribution]], template_ids: dict[str, int]) -> None:
    """Take what earlier diagnoses of these runs added off the rollups: one statement per rollup (and
    per 200 of its rows), the same rows' counts added up first."""
    tools: dict[tuple, dict[str, int]] = {}
    findings: dict[tuple, dict[str, int]] = {}
    templates: dict[tuple, dict[str, int]] = {}
    patterns: dict[tuple, dict[str, int]] = {}

    def add(rows: dict[tuple, dict[str, int]], key: tuple, counts: dict[str, int]) -> None:
        total = rows.setdefault(key, {})
        for name, value in counts.items():
            total[name] = total.get(name, 0) + (value or 0)

    for stored, contribution in old:
        for tool, counts in contribution.tools.items():
            add(tools, (tool[:200], *stored.scope), counts)
        for (kind, tool), counts in contribution.findings.items():
            add(findings, (kind, tool[:200], *stored.scope), counts)
        for key, sent in contribution.templates.items():
            if key in template_ids:
                add(templates, (template_ids[key], *stored.scope), {"sent": sent})
        if contribution.pattern:
            add(patterns, (contribution.pattern["signature"], *stored.scope), {"runs": 1})
    _subtract(ToolDay._meta.db_table, ("tool", *SCOPE), TOOL_COUNTS, tools)
    _subtract(FindingDay._meta.db_table, ("kind", "tool", *SCOPE), FINDING_COUNTS, findings)
    _subtract(TemplateDay._meta.db_table, ("template_id", *SCOPE), ("sent",), templates)
    _subtract(PatternDay._meta.db_table, ("signature", *SCOPE), ("runs",), patterns)


def _template_ids(keys: Iterable[str]) -> dict[str, int]:
    """The ids of the ``MessageTemplate`` rows of these keys that there are, in one query per 500 keys."""
    keys = list(keys)
    quote = connection.ops.quote_name
    head = f"SELECT {quote('key')}, {quote('id')} FROM {quote(MessageTemplate._meta.db_table)} WHERE {quote('key')} IN "
    ids: dict[str, int] = {}
    with connection.cursor() as cursor:
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            cursor.execute(head + "(" + ", ".join(["%s"] * len(chunk)) + ")", chunk)
            ids.update(cursor.fetchall())
    return ids


def _templates_write(seen: Iterable[TemplateSeen], *, also: Iterable[str] = ()) -> dict[str, int]:
    """Create the ``MessageTemplate`` rows not yet known; the ids of every key seen, and of the keys
    ``also`` (those an earlier diagnosis counted) that have a row."""
    firsts: dict[str, TemplateSeen] = {}
    for s in seen:
        firsts.setdefault(s.key, s)
    keys = {*firsts, *also}
    if not keys:
        return {}
    known = _template_ids(keys)
    new = [s.row() for key, s in firsts.items() if key not in known]
    if new:
        columns = [MessageTemplate._meta.get_field(name).column for name in TEMPLATE_COLUMNS]
        _upsert(
            MessageTemplate._meta.db_table,
            columns[:1],
            (),
            [tuple(r[c] for c in TEMPLATE_COLUMNS) for r in new],
            extra=columns[1:],
        )
        known.update(_template_ids(r["key"] for r in new))
    return known


def _findings_delete(run_ids: list[int]) -> None:
    """Delete these runs' ``Finding`` rows (nothing refers to them), one statement per 500 runs."""
    quote = connection.ops.quote_name
    head = f"DELETE FROM {quote(FindingRow._meta.db_table)} WHERE {quote('run_id')} IN "
    with connection.cursor() as cursor:
        for start in range(0, len(run_ids), 500):
            chunk = run_ids[start : start + 500]
            cursor.execute(head + "(" + ", ".join(["%s"] * len(chunk)) + ")", chunk)


def _finding_row(stored: Stored, f: Finding, position: int) -> dict[str, Any]:
    """The ``Finding`` row's column values (``recording.values_insert`` writes them without model instances)."""
    _, source, scenario, policy_name, model_name = stored.scope
    return dict(
        run_id=stored.run_id,
        kind=f.kind,
        tool=f.tool[:200],
        steps=f.steps,
        message=f.message,
        evidence=f.evidence,
        fix=f.fix,
        setting=f.setting,
        rewrite=f.rewrite or "",
        basis=f.basis,
        template=f.template[:300],
        wasted_calls=f.wasted_calls,
        wasted_input_tokens=f.wasted_input_tokens,
        wasted_output_tokens=f.wasted_output_tokens,
        wasted_ms=f.wasted_ms,
        rule_set=RULE_SET,
        position=position,
        run_created_at=stored.created_at,
        source=source,
        scenario=scenario,
        policy_name=policy_name,
        model_name=model_name,
    )


def _counts_add(rows: dict[tuple, dict[str, int]], key: tuple, counts: dict[str, int]) -> None:
    """Add one run's ``counts`` (every count of its rollup, in the rollup's order) to the row ``key``."""
    total = rows.get(key)
    if total is None:
        rows[key] = dict(counts)
        return
    for name, value in counts.items():
        total[name] += value


def runs_diagnose(
    *, run_ids: Sequence[int] = (), written: Sequence[Stored | Rewritten] = (), fresh: bool = False
) -> int:
    """Diagnose these runs and store what was found, in one transaction (a savepoint inside the
    caller's); the number diagnosed. A run that has not ended gets nothing, and loses what an earlier
    diagnosis of it stored. ``written``: runs just written, as the recorder wrote them (``run_written``,
    or ``run_rewritten`` for a run written again), diagnosed without reading their steps back.
    ``fresh``: the rollups were emptied (a recompute), so nothing is taken back."""
    known = {s.run_id for s in written}
    stored = [
        *(s for s in written if isinstance(s, Stored)),
        *_rewritten_stored([s for s in written if isinstance(s, Rewritten)]),
        *runs_stored([i for i in run_ids if i not in known]),
    ]
    # newest first, as runs are listed: the order decides which run is a message template's example
    stored.sort(key=lambda s: (s.created_at, s.run_id), reverse=True)
    if not stored:
        return 0
    results = [diagnose_stored(s) for s in stored]
    tool_rows: dict[tuple, dict[str, int]] = {}
    finding_rows: dict[tuple, dict[str, int]] = {}
    template_rows: dict[tuple, int] = {}
    pattern_rows: dict[tuple, list] = {}
    rows: list[dict[str, Any]] = []
    seen: list[TemplateSeen] = []
    for s, (findings, contribution, templates) in zip(stored, results, strict=True):
        rows += [_finding_row(s, f, k) for k, f in enumerate(findings)]
        if s.archived:
            continue
        seen += templates
        for tool, counts in contribution.tools.items():
            _counts_add(tool_rows, (tool[:200], *s.scope), counts)
        for (kind, tool), counts in contribution.findings.items():
            _counts_add(finding_rows, (kind, tool[:200], *s.scope), counts)
        for key, sent in contribution.templates.items():
            template_rows[(key, *s.scope)] = template_rows.get((key, *s.scope), 0) + sent
        if contribution.pattern:
            p = contribution.pattern
            row = pattern_rows.setdefault((p["signature"], *s.scope), [p, 0, s.run_id])
            row[1] += 1
    from .recording import values_insert  # the recorder calls this module where runs end

    # no savepoint inside a caller's transaction: what could fail (the rules) has run before this
    old = [] if fresh else [(s, Contribution.from_dict(s.rolled_up)) for s in stored if s.rolled_up]
    with transaction.atomic(savepoint=False):
        template_ids = _templates_write(seen, also={k for _, c in old for k in c.templates})
        if old:
            _take_back(old, template_ids)
        if not fresh and (earlier := [s.run_id for s in stored if not s.new]):
            _findings_delete(earlier)
        values_insert(model=FindingRow, rows=rows)
        _upsert(
            ToolDay._meta.db_table,
            ("tool", *SCOPE),
            TOOL_COUNTS,
            [(*key, *(counts[c] for c in TOOL_COUNTS)) for key, counts in tool_rows.items()],
        )
        _upsert(
            FindingDay._meta.db_table,
            ("kind", "tool", *SCOPE),
            FINDING_COUNTS,
            [(*key, *(counts[c] for c in FINDING_COUNTS)) for key, counts in finding_rows.items()],
        )
        _upsert(
            TemplateDay._meta.db_table,
            ("template_id", *SCOPE),
            ("sent",),
            [(template_ids[key[0]], *key[1:], sent) for key, sent in template_rows.items() if key[0] in template_ids],
        )
        _upsert(
            PatternDay._meta.db_table,
            ("signature", *SCOPE),
            ("runs",),
            [
                (key[0], *key[1:], n, p["tool"][:200], p["category"], p["template"], p["stop_reason"], example)
                for key, (p, n, example) in pattern_rows.items()
            ],
            extra=("tool", "category", "template", "stop_reason", "example_run_id"),
        )
        _runs_mark(stored, results)
    return sum(1 for s in stored if s.finished)


def _stop_key(stored: Stored) -> str | None:
    """The run's ``Run.stop_signature``: a guard stop's signature from its last step, as stored."""
    if not stored.finished or stored.end.stop_reason not in GUARD_STOPS:  # no signature: its last step unread
        return None
    last = event_fields(stored.steps[-1]) if stored.steps else None
    return stop_key(stored.start.scenario, stored.start.policy_name, stored.end.stop_reason, last)


def _runs_mark(stored: Sequence[Stored], results) -> None:
    """Each run's finding kinds, rule set, contribution and stop signature, in one ``UPDATE … FROM`` a
    VALUES list per 200 runs: ``bulk_update``'s ``CASE`` costs Django more to build than the diagnosis
    costs to run, and a subquery per column would read the list once per run and column."""
    rows = [
        (
            s.run_id,
            ",".join(dict.fromkeys(f.kind for f in findings))[:400],
            RULE_SET if s.finished else "",
            orjson.dumps(contribution.to_dict() if s.finished and not s.archived else {}).decode(),
            _stop_key(s),
        )
        for s, (findings, contribution, _) in zip(stored, results, strict=True)
    ]
    table = connection.ops.quote_name(Run._meta.db_table)
    rolled = "CAST(v.rolled AS jsonb)" if connection.vendor == "postgresql" else "v.rolled"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), 200):
            chunk = rows[start : start + 200]
            values = ", ".join(["(%s, %s, %s, %s, %s)"] * len(chunk))
            cursor.execute(
                f"WITH v (id, kinds, rule_set, rolled, stop) AS (VALUES {values}) "
                f"UPDATE {table} SET finding_kinds = v.kinds, rule_set = v.rule_set, rolled_up = {rolled}, "
                f"stop_signature = v.stop FROM v WHERE {table}.id = v.id",
                [value for row in chunk for value in row],
            )


def rollups_clear() -> None:
    """Empty every finding and rollup (``findings_recompute`` rebuilds them)."""
    for model in (FindingRow, ToolDay, FindingDay, TemplateDay, PatternDay, MessageTemplate):
        model.objects.all().delete()
    Run.objects.exclude(rule_set="").update(finding_kinds="", rule_set="", rolled_up={})


def findings_recompute(*, batch: int = 500, progress: Callable[[int, int], None] | None = None) -> int:
    """Diagnose every finished run again with this rule set, rebuilding every rollup from nothing;
    ``progress(done, total)`` after each batch. The number of runs diagnosed."""
    ids = list(Run.objects.filter(status=Run.Status.FINISHED).order_by("id").values_list("id", flat=True))
    rollups_clear()
    done = 0
    for start in range(0, len(ids), batch):
        done += runs_diagnose(run_ids=ids[start : start + batch], fresh=True)
        if progress is not None:
            progress(start + len(ids[start : start + batch]), len(ids))
    return done


def experiment_runs_rediagnose(*, experiment_ids: Sequence[int], batch: int = 500) -> int:
    """Diagnose again the finished runs of these experiments, just archived or brought back, so the
    rollups leave them out or count them again; the number diagnosed."""
    ids = list(
        Run.objects.filter(experiment_id__in=list(experiment_ids), status=Run.Status.FINISHED)
        .order_by("id")
        .values_list("id", flat=True)
    )
    return sum(runs_diagnose(run_ids=ids[start : start + batch]) for start in range(0, len(ids), batch))


def runs_diagnose_safely(*, run_ids: Sequence[int] = (), written: Sequence[Stored | Rewritten] = ()) -> None:
    """``runs_diagnose`` where a run ends: a failure of diagnosis is logged and never stops the run's
    end or its import (the run keeps no findings until ``manage.py findings --recompute``)."""
    try:
        runs_diagnose(run_ids=run_ids, written=written)
    except Exception:
        ids = [*run_ids, *(s.run_id for s in written)]
        logger.exception("diagnosis of runs %s failed; their findings are missing until a recompute", ids)
