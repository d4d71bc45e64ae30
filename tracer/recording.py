"""Recording: the one path that writes a run, from its start through each step to its end.

``run_start``, ``step_record`` and ``run_finish`` are the only writes of a run's progress, and
``DbRecorder`` is the agents ``Recorder`` that calls them as the loop reports. Workers record through
it today; importers (OTLP spans, transcripts) and a live step API will write through the same
functions, so counters, divergence, the matrix and the stop queue work the same whatever a run's
source. Each step and its counters are one transaction, so a run's steps can be read while it runs.
Every text written (tool inputs and outputs, errors, answers, the transcript, labels, the search
text) goes through ``redaction.redact`` first, so no secret is ever stored.

A write lands only while the run may still be written: a run that has ended refuses it, with
``RunNotRunning``, and nothing is written. A worker writes under the token of its claim
(``claim_token``): then the run must also still be held by that claim, and each step renews the
claim's lease (``lease_expires``). Writers without a claim (importers) leave ``claim_token`` empty.

HackSoft style: keyword-only typed arguments, ``<entity>_<action>`` names. Reads live in
``reads/``, one module per page.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, InterfaceError, OperationalError, connection, connections, router, transaction
from django.db import models as db_models
from django.db.models import Case, ExpressionWrapper, F, FloatField, Subquery, Value, When
from django.db.models.functions import Concat
from django.utils import timezone

from agents import prices
from agents.diagnosis.calls import step_repeats, wasted_repeat
from agents.events import RunAborted, RunEnd, RunStart, StepEvent, failed_attempts, failed_steps, model_retries
from agents.redaction import NotJSON

from . import diagnosis
from .models import Experiment, Run, Step, run_cost
from .redaction import redact, redact_text, redactor
from .waterfall import step_time_s

logger = logging.getLogger(__name__)


def _wasted_retries(step: StepEvent) -> int:
    """Retries made after a failure the tool said was not retryable, or after an empty result.

    A retry is worth making only when the previous attempt failed with ``retryable`` true; a retry
    after a non-retryable refusal, or after "nothing found" treated as an error, repeats a call that
    cannot come out differently.
    """
    wasted = 0
    for previous in step.attempts[:-1]:
        if previous.ok or previous.retryable is False:
            wasted += 1
    return wasted


def _repeats(steps: Sequence[StepEvent], *, before: StepEvent | None) -> tuple[list[int | None], int]:
    """Each step's ``repeat_of``: the index of the tool_use step before it (``before``, the run's last
    stored one, for the first) when the model sent that same call again after it failed or found
    nothing (``calls.step_repeats``, the Tools page's model repeats); and how many of those repeats
    were wasted (``calls.wasted_repeat``: after a failure no retry fixes, or nothing found)."""
    marks: list[int | None] = []
    wasted = 0
    previous = before
    for step in steps:
        if step.kind != Step.Kind.TOOL_USE:
            marks.append(None)
            continue
        if previous is not None and step_repeats(previous, step):
            marks.append(previous.index)
            wasted += wasted_repeat(previous)
        else:
            marks.append(None)
        previous = step
    return marks, wasted


def _last_tool_step(*, run_id: int, before_index: int) -> StepEvent | None:
    """The run's last stored tool_use step before step ``before_index`` (one query), for ``_repeats``."""
    row = (
        Step.objects.filter(run_id=run_id, index__lt=before_index, kind=Step.Kind.TOOL_USE)
        .order_by("-index")
        .values(*diagnosis.STEP_FIELDS)
        .first()
    )
    return diagnosis.step_event(row) if row is not None else None


def _error_messages(messages: Iterable[Any]) -> list[str]:
    """Each distinct failure message once, in order (a retried call often fails the same way)."""
    return list(dict.fromkeys(str(m) for m in messages if m))


def _jsonable(value: Any) -> Any:
    """Tool content as stored: anything ``json`` cannot encode becomes its string form, and secrets
    become markers (``tracer.redaction``: every text a run stores goes through ``redact``). A value
    whose JSON text holds nothing to redact (``Redactor.clean_json``: one scan) is returned as it is,
    since storing it gives the same JSON; one that is JSON already (what importers read from JSON) is
    redacted in one walk, without the ``json`` round trip, which would give it back equal."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        pass  # a part json cannot encode: its string form below
    else:
        if redactor().clean_json(text):
            return value  # nothing to redact: one scan of its JSON text instead of a walk
    return _redacted(value)


def _redacted(value: Any) -> Any:
    """``value`` with its secrets redacted, as JSON (``_jsonable`` once its JSON text was not clean)."""
    try:
        return redactor().json(value)
    except NotJSON:
        return redact(json.loads(json.dumps(value, default=str)))


class JsonText(str):
    """The JSON text of a value for a JSON column, encoded once by the recorder (``_json_column``):
    ``rows_insert`` writes it as it is instead of having the value encoded again."""

    __slots__ = ()


def _json_column(value: Any) -> tuple[Any, JsonText | None]:
    """``_jsonable(value)`` and its JSON text as a JSON column stores it (None: SQL NULL). The text of
    a value with nothing to redact is the one ``clean_json`` scanned, so the value is encoded once
    where ``_jsonable`` and the column each encoded it."""
    if value is None:
        return None, None
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = None
    if text is None or not redactor().clean_json(text):
        value = _redacted(value)
        text = json.dumps(value)
    return value, JsonText(text)


class RunNotRunning(Exception):
    """A write to a run that has ended, or that another claim now holds: refused, nothing written."""


def lease_expires() -> datetime:
    """When a lease taken or renewed now lapses: ``RLT_LEASE_S`` from now."""
    return timezone.now() + timedelta(seconds=settings.RLT_LEASE_S)


def _writable(*, run_id: int, claim_token: str):
    """The run, if it may still be written: not finished and, under a claim, still held by it.

    One ``filter()``, so the guard and the write are one conditional ``UPDATE``.
    """
    if claim_token:
        return Run.objects.filter(
            pk=run_id, status__in=[Run.Status.QUEUED, Run.Status.RUNNING], claim_token=claim_token
        )
    return Run.objects.filter(pk=run_id, status__in=[Run.Status.QUEUED, Run.Status.RUNNING])


def _refused(*, run_id: int, what: str) -> RunNotRunning:
    """The refusal of ``what`` (e.g. "step 4") for a run that may not be written, saying why."""
    row = Run.objects.filter(pk=run_id).values("status", "stop_reason", "finished_at").first()
    if row is None:
        return RunNotRunning(f"run {run_id} does not exist; {what} refused")
    if row["status"] == Run.Status.FINISHED:
        when = f" at {row['finished_at']:%Y-%m-%d %H:%M:%S} UTC" if row["finished_at"] else ""
        return RunNotRunning(f"run {run_id} already ended ({row['stop_reason'] or 'finished'}{when}); {what} refused")
    return RunNotRunning(f"run {run_id} is held by another claim now; {what} refused")


_STEP_KINDS = frozenset(Step.Kind.values)  # Kind.values builds its list again on each use


@dataclass(slots=True)
class StepValues:
    """One ``StepEvent`` as its ``Step`` row stores it, redacted, made once per step: ``columns`` by
    attribute name (``run_id`` left to the caller; JSON columns as values), ``texts`` the JSON
    columns' text (``JsonText``, what ``rows_insert`` writes), ``search`` what it adds to its run's
    ``search_text``. A plain dict, not a model instance: a ``Step()`` costs more than the rest."""

    columns: dict[str, Any]
    texts: dict[str, JsonText | None]
    search: str

    def row(self, run_id: int) -> dict[str, Any]:
        """The columns ``rows_insert`` writes for the step of run ``run_id``."""
        return {**self.columns, **self.texts, "run_id": run_id}


def _step_values(step: StepEvent, *, repeat_of: int | None = None) -> StepValues:
    """The stored values of one ``StepEvent`` (``StepValues``); ``repeat_of`` from ``_repeats``."""
    redact_str = redactor().text
    texts: dict[str, JsonText | None] = {}
    values: dict[str, Any] = {}
    for name, value in (
        ("input", step.input),
        ("attempts", [a.to_dict() for a in step.attempts]),
        ("result_content", step.result_content),
        ("model_attempts", [a.to_dict() for a in step.model_attempts]),
    ):
        values[name], texts[name] = _json_column(value)
    tool_name = redact_str(step.tool_name or "")
    text = redact_str(step.text or "")
    columns = {
        "index": step.index,
        "kind": step.kind if step.kind in _STEP_KINDS else Step.Kind.FINAL_ANSWER,
        "tool_name": tool_name,
        "tool_use_id": redact_str(step.tool_use_id or ""),
        "is_error": step.is_error,
        "category": step.category or "",
        "retryable": step.retryable,
        "retry_count": step.retry_count,
        "latency_ms": step.latency_ms,
        "input_tokens": step.input_tokens,
        "output_tokens": step.output_tokens,
        "text": text,
        "api_stop_reason": (step.api_stop_reason or "")[:40],
        "repeat_of": repeat_of,
        **values,
    }
    # what the runs list's search reads of the step: its tool, input, error messages and text
    parts = []
    if tool_name:
        parts.append(tool_name)
    if values["input"] is not None:
        parts.append(json.dumps(values["input"], ensure_ascii=False, sort_keys=True))
    attempts = values["attempts"]
    parts += _error_messages(a.get("message") for a in attempts or [] if isinstance(a, dict) and not a.get("ok"))
    if text:
        parts.append(text)
    return StepValues(columns=columns, texts=texts, search=" ".join(parts))


def _step_row(*, run: Run, values: StepValues) -> Step:
    """The ``Step`` row of one step, of its ``values`` (``_step_values``), not yet saved."""
    return Step(run=run, **values.columns)


def _counter_values(steps: Sequence[StepEvent], *, searches: Sequence[str], wasted_repeats: int = 0) -> dict[str, Any]:
    """What ``steps`` add to their run's counters, and the text they add to its ``search_text``
    (``searches``: each step's ``StepValues.search``; ``wasted_repeats``: the model's repeats among
    them that were wasted, ``_repeats``, counted with the harness's wasted retries)."""
    times = [step_time_s(model_attempts=s.model_attempts, attempts=s.attempts) for s in steps]
    return {
        "step_count": len(steps),
        "tool_call_count": sum(1 for s in steps if s.kind == Step.Kind.TOOL_USE),
        "error_count": failed_steps(steps),
        "failed_attempt_count": failed_attempts(steps),
        "retry_count": sum(s.retry_count for s in steps),
        "wasted_retry_count": sum(_wasted_retries(s) for s in steps) + wasted_repeats,
        "model_retry_count": sum(model_retries(s.model_attempts) for s in steps),
        "input_tokens": sum(s.input_tokens for s in steps),
        "output_tokens": sum(s.output_tokens for s in steps),
        "measured_ms": round(sum(t[0] for t in times) * 1000, 3),
        "waited_ms": round(sum(t[1] for t in times) * 1000, 3),
        "search_text": "".join(text + "\n" for text in searches if text),
    }


def _counters_bump(
    *, run_id: int, steps: Sequence[StepEvent], searches: Sequence[str], claim_token: str, wasted_repeats: int = 0
) -> int:
    """Move the run's counters by ``steps`` (``searches``: their ``StepValues.search``) in one guarded
    ``UPDATE``; 0 when it may not be written."""
    values = _counter_values(steps, searches=searches, wasted_repeats=wasted_repeats)
    text = values.pop("search_text")
    lease = {"lease_expires_at": lease_expires()} if claim_token else {}
    return _writable(run_id=run_id, claim_token=claim_token).update(
        **{name: F(name) + value for name, value in values.items()},
        search_text=Concat(F("search_text"), Value(text)) if text else F("search_text"),
        **lease,
    )


# Python types a column of these fields takes as they are; any other value goes through the field's
# own ``get_db_prep_save`` (``rows_insert``).
_PLAIN_TYPES: dict[str, tuple[type, ...]] = {
    "CharField": (str,),
    "TextField": (str,),
    "BooleanField": (bool,),
    "IntegerField": (int,),
    "PositiveIntegerField": (int,),
    "PositiveSmallIntegerField": (int,),
    "SmallIntegerField": (int,),
    "BigIntegerField": (int,),
    "AutoField": (int,),
    "BigAutoField": (int,),
    "FloatField": (float,),  # an int goes through the field (float()): an array holds one type
}


def _column_converter(field: db_models.Field, conn) -> Any:
    """The function that makes one value of ``field`` a query parameter, as ``field.get_db_prep_save``
    would: JSON encoded as the field encodes it (None is SQL NULL; a ``JsonText`` is that encoding
    already), datetimes adapted for the database, values of the column's own type as they are.
    Chosen once per field and batch."""
    if isinstance(field, db_models.JSONField):
        adapt, encoder = conn.ops.adapt_json_value, field.encoder
        if conn.vendor == "postgresql":
            from psycopg.types.json import Jsonb

            def encoded(text: JsonText) -> Any:
                return Jsonb(text, dumps=str)  # the text is the encoding

        else:
            encoded = str  # the column holds the JSON text

        return lambda value: (
            None if value is None else encoded(value) if type(value) is JsonText else adapt(value, encoder)
        )
    if isinstance(field, db_models.DateTimeField):
        return conn.ops.adapt_datetimefield_value
    plain = _PLAIN_TYPES.get(field.target_field.get_internal_type() if field.is_relation else field.get_internal_type())
    prep = field.get_db_prep_save
    if plain is None:
        return lambda value: prep(value, conn)
    return lambda value: value if value is None or type(value) in plain else prep(value, conn)


def _insert_cursor(conn):
    """A cursor for ``rows_insert``: on PostgreSQL one that sends its parameters apart from the query
    (server-side binding, psycopg's ``Cursor``), so the arrays of an UNNEST insert travel in binary
    instead of being spelled out in the query text by the driver; Django's own cursors elsewhere.
    Wrapped as Django wraps its cursors, so its statements count as queries wherever queries are
    counted (a ``COPY`` through it, ``_rows_copy``, does not: it is no ``execute``)."""
    if conn.vendor != "postgresql":
        return conn.cursor()
    import psycopg

    conn.ensure_connection()
    raw = psycopg.Cursor(conn.connection)
    return conn.make_debug_cursor(raw) if conn.queries_logged else conn.make_cursor(raw)


def rows_insert(*, rows: Sequence[db_models.Model], returning: bool = True) -> None:
    """Insert ``rows`` (new instances of one model) as ``bulk_create`` would, and set their ids, in
    multi-row ``INSERT … RETURNING`` statements of as many rows as the database takes at once
    (without ``RETURNING``, the rows left without ids, when ``returning`` is False: rows nobody
    reads again).

    What it leaves out is Django's per-value work (a field lookup, a pre-save and a preparation call
    per value, a placeholder formatted per value), which was over a quarter of receiving a request of
    OTLP spans: each column's converter is chosen once (``_column_converter``), ``auto_now``/
    ``auto_now_add`` columns take one timestamp for the batch, and the statement's text is made once
    per batch size. The models it writes (runs, steps, OTLP traces and span batches) have no other
    pre-save behaviour and no signals are sent, as with ``bulk_create``.
    """
    if not rows:
        return
    model = type(rows[0])
    now = timezone.now()
    for f in model._meta.concrete_fields:
        if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
            for row in rows:
                setattr(row, f.attname, now)
    pks = _rows_write(model=model, rows=rows, read=getattr, now=now, returning=returning)
    if pks is None:
        return
    alias = router.db_for_write(model)
    for row, pk in zip(rows, pks, strict=True):
        row.pk = pk
        row._state.adding = False
        row._state.db = alias


def values_insert(*, model: type[db_models.Model], rows: Sequence[dict[str, Any]]) -> None:
    """``rows_insert`` for rows nobody reads back, given as plain dicts of column values by attribute
    name (``run_id``; a column left out takes its field's default): no model instance is made."""
    if not rows:
        return
    defaults = {f.attname: f.get_default() for f in model._meta.concrete_fields if not f.primary_key}

    def read(row: dict[str, Any], name: str) -> Any:
        return row[name] if name in row else defaults[name]

    _rows_write(model=model, rows=rows, read=read, now=timezone.now(), returning=False)


def _rows_write(*, model: type[db_models.Model], rows: Sequence[Any], read, now: datetime, returning: bool):
    """The ``INSERT`` statements of ``rows_insert`` and ``values_insert``; ``read(row, attname)`` gives a
    row's value. The new ids in order when ``returning``, else None."""
    meta = model._meta
    conn = connections[router.db_for_write(model)]
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    converters = []
    for f in fields:
        if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
            stamp = f.get_db_prep_save(now, conn)  # converted once for the batch
            converters.append(lambda value, stamp=stamp: stamp)
        else:
            converters.append(_column_converter(f, conn))
    columns = list(zip([f.attname for f in fields], converters, strict=True))
    quote = conn.ops.quote_name
    head = f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
    one = "(" + ", ".join(["%s"] * len(fields)) + ")"
    postgresql = conn.vendor == "postgresql"
    # Rows nobody reads back: on PostgreSQL through COPY (``_rows_copy``), on SQLite through one
    # prepared statement (executemany).
    if not returning:
        if postgresql:
            _rows_copy(conn=conn, table=meta.db_table, fields=fields, columns=columns, rows=rows, read=read)
        else:
            with _insert_cursor(conn) as cursor:
                cursor.executemany(
                    head + "VALUES " + one, [[convert(read(row, name)) for name, convert in columns] for row in rows]
                )
        return None
    # Rows whose ids are read back: on PostgreSQL one array per column through UNNEST, as Django's own
    # bulk_create does there (one "%s" query parameter per value makes the driver's query parsing the
    # slowest part); on SQLite VALUES rows within the database's limit of query parameters.
    tail = f" RETURNING {quote(meta.pk.column)}"
    pks: list[int] = []
    with _insert_cursor(conn) as cursor:
        if postgresql:
            types = ", ".join(f"(%b)::{f.db_type(conn).split('(')[0]}[]" for f in fields)
            params = [[convert(read(row, name)) for row in rows] for name, convert in columns]
            cursor.execute(f"{head}SELECT * FROM UNNEST({types}){tail}", params)
            pks += [pk for (pk,) in cursor.fetchall()]
        else:
            size = max(1, _sqlite_parameters(conn) // len(fields))
            for start in range(0, len(rows), size):
                chunk = rows[start : start + size]
                params = [convert(read(row, name)) for row in chunk for name, convert in columns]
                cursor.execute(head + "VALUES " + ", ".join([one] * len(chunk)) + tail, params)
                pks += [pk for (pk,) in cursor.fetchall()]
    return pks


def _rows_copy(*, conn, table: str, fields, columns, rows: Sequence[Any], read) -> None:
    """PostgreSQL: rows nobody reads back (steps, span batches) sent with ``COPY … FROM STDIN``, each
    row formatted by psycopg's C code, where an UNNEST insert's arrays were built value by value in
    Python (a tenth of writing the shared benchmark's steps). JSON columns go as their text, which
    the server parses as for an INSERT. A COPY is no ``execute``: Django's query log and execute
    wrappers do not see it, as they do not see a COPY anywhere."""
    quote = conn.ops.quote_name
    json_columns = {f.attname for f in fields if isinstance(f, db_models.JSONField)}
    convert = [(name, _json_copy_text if name in json_columns else converter) for name, converter in columns]
    statement = f"COPY {quote(table)} ({', '.join(quote(f.column) for f in fields)}) FROM STDIN"
    with _insert_cursor(conn) as cursor, conn.wrap_database_errors, cursor.cursor.copy(statement) as copy:
        write = copy.write_row
        for row in rows:
            write([converter(read(row, name)) for name, converter in convert])


def _json_copy_text(value: Any) -> str | None:
    """A JSON column's value as ``COPY`` takes it: its JSON text (``JsonText`` is that already)."""
    if value is None or type(value) is JsonText:
        return value
    return json.dumps(value)


def _sqlite_parameters(conn) -> int:
    """How many query parameters one SQLite statement takes: the library's own limit (32,766 by default
    since SQLite 3.32, Debian's 250,000), not Django's 999, which the oldest versions had."""
    conn.ensure_connection()
    try:
        return conn.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    except AttributeError:  # another DB-API driver than Python's sqlite3
        return conn.features.max_query_params or 999


_STORED: Any = object()  # ``before`` not given: the run's last stored tool_use step, read


def step_record(*, run: Run, step: StepEvent, claim_token: str = "", before: StepEvent | None = _STORED) -> Step:
    """Write one step and bump the run's counters, in one transaction.

    Counters move with ``F()`` expressions in the same transaction as the step row, so a reader
    sees either both or neither, and concurrent writers never lose an increment. The counter
    ``UPDATE`` goes first and is the guard: if the run may not be written (``_writable``) it changes
    no row, and ``RunNotRunning`` is raised before any step is inserted. Under a claim it also
    renews the lease. ``before``: the run's tool_use step before this one (None: none), for its
    ``repeat_of``; left out, it is read.
    """
    if before is _STORED:
        before = _last_tool_step(run_id=run.pk, before_index=step.index)
    marks, wasted = _repeats([step], before=before)
    values = _step_values(step, repeat_of=marks[0])
    with transaction.atomic():
        if not _counters_bump(
            run_id=run.pk, steps=[step], searches=[values.search], claim_token=claim_token, wasted_repeats=wasted
        ):
            raise _refused(run_id=run.pk, what=f"step {step.index}")
        row = _step_row(run=run, values=values)
        row.save(force_insert=True)
    return row


def steps_record_many(
    *, run: Run, steps: Sequence[StepEvent], claim_token: str = "", before: StepEvent | None = _STORED
) -> list[Step]:
    """Write several steps and bump the run's counters once, in one transaction: ``step_record`` for
    a batch (an imported run, a batch from the step API). Two statements whatever the number of steps,
    and a third reading the run's last stored tool_use step when ``before`` is left out (see
    ``step_record``): the guarded counter ``UPDATE`` (``RunNotRunning`` before anything is written, as
    ``step_record``) and one multi-row ``INSERT``. The caller numbers the steps; a taken index fails
    the whole batch (``IntegrityError``) and nothing is written.
    """
    if not steps:
        return []
    if before is _STORED:
        before = _last_tool_step(run_id=run.pk, before_index=steps[0].index)
    marks, wasted = _repeats(steps, before=before)
    values = [_step_values(step, repeat_of=mark) for step, mark in zip(steps, marks, strict=True)]
    with transaction.atomic():
        searches = [v.search for v in values]
        if not _counters_bump(
            run_id=run.pk, steps=steps, searches=searches, claim_token=claim_token, wasted_repeats=wasted
        ):
            first, last = steps[0].index, steps[-1].index
            raise _refused(run_id=run.pk, what=f"steps {first}-{last}" if len(steps) > 1 else f"step {first}")
        rows = [_step_row(run=run, values=v) for v in values]
        rows_insert(rows=rows)
        return rows


def run_lease_renew(*, run_id: int, claim_token: str) -> bool:
    """Extend the lease of a run its claim still holds; False once the run has ended or was taken."""
    return bool(
        Run.objects.filter(pk=run_id, status=Run.Status.RUNNING, claim_token=claim_token).update(
            lease_expires_at=lease_expires()
        )
    )


def _start_fields(*, run: Run, start: RunStart) -> dict[str, Any]:
    """The columns ``run_start`` writes from ``start``: running, with scenario, policy, model and task."""
    fields: dict[str, Any] = {
        "status": Run.Status.RUNNING,
        "scenario": redact_text(start.scenario) if start.scenario else run.scenario,
        "policy_name": redact_text(start.policy_name) if start.policy_name else run.policy_name,
        "model_backend": start.model_backend or run.model_backend,
        "model_name": redact_text(start.model_name) if start.model_name else run.model_name,
        "task": redact_text(start.task or ""),
    }
    if start.policy_settings:
        fields["policy_settings"] = _jsonable(start.policy_settings)
    if start.tools:
        fields["tools"] = _jsonable(start.tools)
    return fields


def run_start(
    *, run: Run, start: RunStart, worker_name: str = "", worker_pid: int | None = None, claim_token: str = ""
) -> None:
    """Mark a run running and store what the loop says about it (model name, task, policy snapshot).

    Raises ``RunNotRunning`` when the run may not be written (it ended, or another claim holds it).
    """
    fields = _start_fields(run=run, start=start)
    if worker_name:
        fields["worker_name"] = worker_name[:200]
        fields["worker_pid"] = worker_pid
    if claim_token:
        fields["lease_expires_at"] = lease_expires()
    with transaction.atomic():
        if not _writable(run_id=run.pk, claim_token=claim_token).update(**fields):
            raise _refused(run_id=run.pk, what="its start")
        # A run claimed by a task already has started_at; a child run gets it now.
        Run.objects.filter(pk=run.pk, started_at__isnull=True).update(started_at=timezone.now())
    for name, value in fields.items():
        setattr(run, name, value)


def _end_fields(*, end: RunEnd, finished_at: datetime | None) -> dict[str, Any]:
    """The columns ``run_finish`` writes: finished, how, with the answer, verdict and transcript."""
    verdict = ""
    verdict_reason = ""
    if end.verdict is not None:
        verdict = Run.Verdict.PASS if end.verdict.passed else Run.Verdict.FAIL
        verdict_reason = redact_text(end.verdict.reason or "")
    return {
        "status": Run.Status.FINISHED,
        "stop_reason": end.stop_reason,
        "final_answer": redact_text(end.final_answer or ""),
        "verdict": verdict,
        "verdict_reason": verdict_reason,
        "error": redact_text(end.error or ""),
        "guard": redact_text(end.guard or "")[:200],
        "api_stop_reason": (end.api_stop_reason or "")[:40],
        "transcript": _jsonable(end.transcript or []),
        "finished_at": finished_at or timezone.now(),
        "failed_model_call": _jsonable([a.to_dict() for a in end.model_attempts]),
        **_model_verdict_fields(end=end, verdict=verdict),
    }


def _model_verdict_fields(*, end: RunEnd, verdict: str) -> dict[str, Any]:
    """The model judge's columns, when it was asked: its verdict (blank when it could not judge), the
    rationale or why there is none, with the model; whether it disagrees with the rules' ``verdict``."""
    said = end.model_verdict
    if said is None:
        return {}
    mine = said.verdict if said.verdict in Run.Verdict.values else ""
    return {
        "model_verdict": mine,
        "model_verdict_reason": redact_text(f"{said.model}: {said.reason}")[:2000],
        "judges_disagree": bool(mine and verdict and mine != verdict),
    }


def _failed_call_retries(end: RunEnd) -> int:
    """The model retries of the call that ended the run, counted with its steps' when the call was its
    own (a sub-agent's were counted on the sub-agent's run, and reach this one with its total)."""
    return 0 if end.model_call_of else model_retries(end.model_attempts)


# What a sub-agent's run adds to its parent's when it ends: what the whole run spent.
ROLLED_UP = ("input_tokens", "output_tokens", "model_retry_count")


def _cost_expression(run: Run) -> Any:
    """``Run.cost`` of the tokens the row holds as it ends (a coordinator's include its sub-agents'),
    in SQL; None when its model has no price."""
    day = (run.started_at or run.created_at or timezone.now()).astimezone(UTC).date()
    price = prices.price(run.model_name, day) if run.model_name else None
    if price is None:
        return Case(When(input_tokens=0, output_tokens=0, then=Value(0.0)), default=None, output_field=FloatField())
    per_input, per_output = float(price.input_per_mtok) / 1e6, float(price.output_per_mtok) / 1e6
    return ExpressionWrapper(
        F("input_tokens") * Value(per_input) + F("output_tokens") * Value(per_output), output_field=FloatField()
    )


def run_finish(*, run: Run, end: RunEnd, claim_token: str = "", finished_at: datetime | None = None) -> bool:
    """Store how a run ended and count it in its experiment; a sub-agent's run adds its tokens and model
    retries to its parent's (``ROLLED_UP``), so a coordinator's total is what the whole run spent (its
    own steps' stay on them).

    False, writing nothing, if it had already finished or (under ``claim_token``) another claim holds it.
    ``finished_at``: when the run ended, for runs recorded after the fact (imports); now by default.
    """
    fields = _end_fields(end=end, finished_at=finished_at)
    fields["cost_usd"] = _cost_expression(run)
    verdict, now = fields["verdict"], fields["finished_at"]
    if retries := _failed_call_retries(end):
        fields["model_retry_count"] = F("model_retry_count") + retries
    with transaction.atomic():
        updated = _writable(run_id=run.pk, claim_token=claim_token).update(**fields)
        if updated and run.experiment_id and run.parent_id is None:
            Experiment.objects.filter(pk=run.experiment_id).update(finished_runs=F("finished_runs") + 1)
        if updated and run.parent_id is not None:
            child = Run.objects.filter(pk=run.pk)
            Run.objects.filter(pk=run.parent_id).update(
                **{name: F(name) + Subquery(child.values(name)[:1]) for name in ROLLED_UP}
            )
    if updated:
        run.status = Run.Status.FINISHED
        run.stop_reason = end.stop_reason
        run.verdict = verdict
        run.finished_at = now
        _diagnose([run.pk])
    return bool(updated)


# Runs ended while ``diagnosis_deferred`` is open, diagnosed together when it closes: by id, each with
# the values just written of it (``diagnosis.run_written``) or None (read back); the last word on a run wins.
_DEFERRED: contextvars.ContextVar[dict[int, diagnosis.Stored | diagnosis.Rewritten | None] | None] = (
    contextvars.ContextVar("rlt_diagnosis_deferred", default=None)
)


def _diagnose(run_ids: list[int], *, written: Sequence[diagnosis.Stored | diagnosis.Rewritten] = ()) -> None:
    """Where every run's end is written: its findings (``tracer.diagnosis``), now or, inside
    ``diagnosis_deferred``, with the others when it closes. ``written``: runs just inserted or written
    again, diagnosed from the values written (``run_ids`` are read back)."""
    if not settings.RLT_DIAGNOSE:
        return
    waiting = _DEFERRED.get()
    if waiting is None:
        diagnosis.runs_diagnose_safely(run_ids=run_ids, written=written)
        return
    for run_id, stored in [*((i, None) for i in run_ids), *((s.run_id, s) for s in written)]:
        waiting.pop(run_id, None)
        waiting[run_id] = stored


@contextmanager
def diagnosis_deferred() -> Iterator[None]:
    """Diagnose the runs that end inside this block together, once it is done (a request writing many
    traces one by one diagnoses them in one go: a fixed number of statements, not a few per run)."""
    waiting: dict[int, diagnosis.Stored | diagnosis.Rewritten | None] = {}
    token = _DEFERRED.set(waiting)
    try:
        yield
    finally:
        _DEFERRED.reset(token)
        if waiting:
            diagnosis.runs_diagnose_safely(
                run_ids=[i for i, s in waiting.items() if s is None],
                written=[s for s in waiting.values() if s is not None],
            )


@dataclass
class RunRecord:
    """A whole run from outside, for ``runs_record_many``: the unsaved ``Run`` with where it came from
    (source, owner, external_id, labels, started_at), its start, its steps numbered from 1, and its
    end if it has ended."""

    run: Run
    start: RunStart
    steps: Sequence[StepEvent] = ()
    end: RunEnd | None = None
    finished_at: datetime | None = None
    # The run's model retries as its sender counted them (a coordinator's include its sub-agents'), in
    # place of those of its steps and failed call; None: counted from them.
    model_retry_count: int | None = None
    # False: the source cannot carry a tool_result's is_error (GenAI's messages drop it), so a failure
    # is known only where the result or a tool span says so; the run page says it.
    is_error_carried: bool = True


def _record_prepare(record: RunRecord) -> list[StepValues]:
    """Set on ``record.run`` (unsaved) every field a new run of ``record`` has: what ``run_start``,
    ``steps_record_many`` and, once it has ended, ``run_finish`` would write, with the same fields,
    counters and redaction. Returns its steps' values, each step redacted once."""
    run = record.run
    marks, wasted = _repeats(record.steps, before=None)
    values = [_step_values(step, repeat_of=mark) for step, mark in zip(record.steps, marks, strict=True)]
    fields = _start_fields(run=run, start=record.start)
    fields.update(_counter_values(record.steps, searches=[v.search for v in values], wasted_repeats=wasted))
    if record.end is not None:
        fields.update(_end_fields(end=record.end, finished_at=record.finished_at))
        fields["model_retry_count"] += _failed_call_retries(record.end)
    if record.model_retry_count is not None:
        fields["model_retry_count"] = record.model_retry_count
    fields["is_error_carried"] = record.is_error_carried
    for name, value in fields.items():
        setattr(run, name, value)
    if run.started_at is None:
        run.started_at = timezone.now()
    if record.end is not None:
        cost = run_cost(run.model_name, run.started_at, run.input_tokens, run.output_tokens)
        run.cost_usd = None if cost is None else float(cost)
    return values


def runs_record_many(*, records: Sequence[RunRecord]) -> list[Run]:
    """Record many new runs from outside at once (a request's worth of OTLP traces), in one transaction
    (the caller's, when it is in one: a failure here then fails it): for each run what ``run_start``,
    ``steps_record_many`` and, once it has ended, ``run_finish`` would write, with the same fields,
    counters and redaction, as two multi-row ``INSERT``s (the runs, then all their steps) whatever the
    number of runs. A taken external id fails the whole batch (``IntegrityError``) and nothing is
    written. Runs executed here never come this way.
    """
    prepared: list[list[StepValues]] = []
    for record in records:
        run = record.run
        if run.pk is not None or run.source == Run.Source.AGENT or run.experiment_id or run.parent_id:
            raise ValueError("runs_record_many writes new top-level runs from outside only")
        prepared.append(_record_prepare(record))
    with transaction.atomic(savepoint=False):
        runs = [record.run for record in records]
        rows_insert(rows=runs)
        # the runs are returned, not their steps: plain rows, no ids read back
        values_insert(
            model=Step, rows=[v.row(run.pk) for run, values in zip(runs, prepared, strict=True) for v in values]
        )
        ended = [
            diagnosis.run_written(run=record.run, steps=[v.columns for v in values])
            for record, values in zip(records, prepared, strict=True)
            if record.end is not None
        ]
        if ended:
            _diagnose([], written=ended)
    return runs


# What writing a run from outside again sets: every field a new run of the record has, blank when the
# record leaves it blank (no end: running again). Its id, source, owner, external id and arrival stay.
_REWRITTEN = (
    "source_detail",
    "labels",
    "started_at",
    "scenario",
    "policy_name",
    "policy_settings",
    "model_backend",
    "model_name",
    "task",
    "tools",
    "status",
    "stop_reason",
    "api_stop_reason",
    "guard",
    "verdict",
    "verdict_reason",
    "final_answer",
    "error",
    "transcript",
    "search_text",
    "step_count",
    "tool_call_count",
    "error_count",
    "failed_attempt_count",
    "retry_count",
    "wasted_retry_count",
    "model_retry_count",
    "failed_model_call",
    "is_error_carried",
    "input_tokens",
    "output_tokens",
    "measured_ms",
    "waited_ms",
    "cost_usd",
    "finished_at",
)
_STEP_STORED = tuple(f.attname for f in Step._meta.concrete_fields if f.attname not in ("id", "run_id", "created_at"))


def imported_run_rewrite(*, run_id: int, record: RunRecord) -> None:
    """Write run ``run_id``, a run from outside, again from ``record``, a whole new version of it (a
    trace whose late spans change what was written): its fields as ``runs_record_many`` writes a new
    run of ``record`` (``_REWRITTEN``), its steps as ``record`` has them; it keeps its id.

    Steps stored as ``record`` has them stay as they are (a live run's earlier steps, as its page shows
    them already); from the first that differs, the stored steps are deleted and the record's written.
    One transaction (the caller's, when it is in one) of at most four statements whatever the number
    of steps: the run's row updated (the guard: ``RunNotRunning`` for a run executed here or gone,
    before anything is written), its steps read, those that differ deleted, the new ones inserted.
    """
    values = _record_prepare(record)
    fields = {name: getattr(record.run, name) for name in _REWRITTEN}
    with transaction.atomic(savepoint=False):
        if not Run.objects.filter(pk=run_id).exclude(source=Run.Source.AGENT).update(**fields):
            raise RunNotRunning(f"run {run_id} is gone or was executed here; only runs from outside are written again")
        stored = list(Step.objects.filter(run_id=run_id).order_by("index").values_list(*_STEP_STORED))
        kept = 0
        for row, v in zip(stored, values, strict=False):  # either may be longer
            if row != tuple(v.columns[name] for name in _STEP_STORED):
                break
            kept += 1
        if len(stored) > kept:
            Step.objects.filter(run_id=run_id, index__gt=kept).delete()
        values_insert(model=Step, rows=[v.row(run_id) for v in values[kept:]])
        steps = [
            *(dict(zip(_STEP_STORED, row, strict=True)) for row in stored[:kept]),
            *(v.columns for v in values[kept:]),
        ]
        _diagnose([], written=[diagnosis.run_rewritten(run_id=run_id, run=record.run, steps=steps)])


def imported_run_reset(*, run: Run) -> None:
    """Take back everything written of an imported run, to write it again from its source: its steps,
    counters and end, in one transaction; the run is running again. Only for runs from outside (a
    document re-sent under the same external id with other content: ``intake.files.run_import``); a run
    executed here is never rewritten.
    """
    if run.source == Run.Source.AGENT:
        raise ValueError(f"run {run.pk} was executed here; only imported runs are written again")
    with transaction.atomic():
        Step.objects.filter(run_id=run.pk).delete()
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.RUNNING,
            step_count=0,
            tool_call_count=0,
            error_count=0,
            failed_attempt_count=0,
            retry_count=0,
            wasted_retry_count=0,
            model_retry_count=0,
            input_tokens=0,
            output_tokens=0,
            measured_ms=0,
            waited_ms=0,
            cost_usd=None,
            search_text="",
            stop_reason="",
            final_answer="",
            verdict="",
            verdict_reason="",
            error="",
            guard="",
            api_stop_reason="",
            failed_model_call=[],
            transcript=[],
            finished_at=None,
        )
    run.status = Run.Status.RUNNING
    run.stop_reason = ""
    run.verdict = ""
    run.finished_at = None


class RunTimeLimitExceeded(RunAborted):
    """Raised into the agent loop after a step when the run has used up ``RLT_RUN_TIME_LIMIT_S``. A
    ``RunAborted``: the run (a coordinator too, when its sub-agent runs out of time) ends ``crashed``
    with this message as its reason, as it is, without an exception's class name before it."""


class RecordingStopped(BaseException):
    """Raised into the agent loop by ``DbRecorder`` when it can no longer write the run: the run was
    ended elsewhere (``RunNotRunning``: interrupted by the sweep, say), or the database went away.

    The loop must then stop without reporting an end, so it is a ``BaseException``, like the loop's
    own ``RunAborted``: neither the loop nor the tool wrapper around a sub-agent turns it into a
    crash. ``execution.run_execute`` catches it.
    """

    def __init__(self, message: str, *, database_lost: bool = False) -> None:
        super().__init__(message)
        self.database_lost = database_lost


# Errors of a database that is down, restarting or unreachable: the run cannot be recorded now.
DATABASE_LOST = (OperationalError, InterfaceError)


class DbRecorder:
    """The agents ``Recorder`` that writes a run to the database as it happens.

    ``observer`` (optional) receives every event after it is stored, e.g. to print the trace.
    ``claim_token``: the claim the run is executed under (``execution.run_claim``); every write is
    then refused once the run has ended or another claim holds it, and the loop is stopped with
    ``RecordingStopped``.
    ``step_delay_s``: seconds to pause after each recorded step (the experiment's pace); None: the
    worker's ``RLT_STEP_DELAY_S``.
    Sub-agents get child runs (``parent`` set, no experiment: an experiment counts top-level runs) at
    the same pace, each with the index of the parent's step that started it.
    """

    def __init__(
        self,
        run: Run,
        *,
        worker_name: str = "",
        worker_pid: int | None = None,
        observer=None,
        deadline: float | None = None,
        claim_token: str = "",
        step_delay_s: float | None = None,
    ) -> None:
        self.run = run
        self.worker_name = worker_name
        self.worker_pid = worker_pid
        self.claim_token = claim_token
        self.observer = observer
        self.finished = False
        self.last_tool_step: StepEvent | None = None  # the last tool_use step written, for its repeats
        # the run's experiment's pace when it has one, else the worker's RLT_STEP_DELAY_S
        self.step_delay_s = settings.RLT_STEP_DELAY_S if step_delay_s is None else step_delay_s
        self.hold_file = settings.RLT_TEST_HOLD_FILE
        # monotonic time after which the run is stopped; sub-agents share their parent's
        self.deadline = deadline if deadline is not None else time.monotonic() + settings.RLT_RUN_TIME_LIMIT_S

    def _stop(self, exc: Exception) -> RecordingStopped:
        self.finished = True  # nothing more is written for this run by this recorder
        if isinstance(exc, RunNotRunning):
            return RecordingStopped(str(exc))
        return RecordingStopped(
            f"the database went away while recording run {self.run.pk}: {type(exc).__name__}: {exc}",
            database_lost=True,
        )

    def _write(self, write, *, what: str):
        """``write()``, tried again through a database restart for up to ``RLT_LEASE_S / 2``.

        Each write is one transaction guarded by the claim, so trying it again is safe: it lands
        once, or it is refused because the run ended meanwhile. Then, or when the database stays
        away, the loop is stopped with ``RecordingStopped``.
        """
        deadline = time.monotonic() + settings.RLT_LEASE_S / 2
        pause = 0.5
        while True:
            try:
                return write()
            except RunNotRunning as exc:
                raise self._stop(exc) from exc
            except DATABASE_LOST as exc:
                if time.monotonic() + pause > deadline:
                    raise self._stop(exc) from exc
                logger.warning("run %s: %s failed (%s); trying again in %.1f s", self.run.pk, what, exc, pause)
                if not connection.in_atomic_block:
                    connection.close()  # the next try connects afresh
                time.sleep(pause)
                pause = min(pause * 2, 5.0)

    def _hold(self) -> None:
        """Tests only (``RLT_TEST_HOLD_FILE``): wait while that file exists. Called before a run's final
        answer and its end are written; the lease heartbeat keeps renewing meanwhile."""
        while self.hold_file and os.path.exists(self.hold_file):
            time.sleep(0.05)

    def run_started(self, start: RunStart) -> None:
        self._write(
            lambda: run_start(
                run=self.run,
                start=start,
                worker_name=self.worker_name,
                worker_pid=self.worker_pid,
                claim_token=self.claim_token,
            ),
            what="recording its start",
        )
        if self.observer is not None:
            self.observer.run_started(start)

    def step_recorded(self, step: StepEvent) -> None:
        if step.kind != Step.Kind.TOOL_USE:  # the run's last step: a final answer, or the turn that ended it
            self._hold()
        tried = False

        def write() -> None:
            nonlocal tried
            try:
                step_record(run=self.run, step=step, claim_token=self.claim_token, before=self.last_tool_step)
            except IntegrityError:
                # Trying again after a connection lost at COMMIT: the step may have landed then.
                if not (tried and Step.objects.filter(run_id=self.run.pk, index=step.index).exists()):
                    raise
            finally:
                tried = True

        self._write(write, what=f"recording step {step.index}")
        if step.kind == Step.Kind.TOOL_USE:
            self.last_tool_step = step
        if self.observer is not None:
            self.observer.step_recorded(step)
        if self.step_delay_s:
            time.sleep(self.step_delay_s)
        if time.monotonic() > self.deadline:
            raise RunTimeLimitExceeded(
                f"the run went on for more than {settings.RLT_RUN_TIME_LIMIT_S} s (RLT_RUN_TIME_LIMIT_S) "
                "and was stopped"
            )

    def run_finished(self, end: RunEnd) -> None:
        self._hold()
        if not self._write(
            lambda: run_finish(run=self.run, end=end, claim_token=self.claim_token), what="recording its end"
        ):
            logger.info("run %s had already ended; its end (%s) was not recorded again", self.run.pk, end.stop_reason)
        self.finished = True
        if self.observer is not None:
            self.observer.run_finished(end)

    def child(self, *, label: str) -> DbRecorder:
        """A recorder for a sub-agent's run: a child run under the same claim as this one.

        Made only while this run may still be written, checked under a row lock (PostgreSQL; SQLite
        writes one transaction at a time), so an interruption of this run also ends the child.
        """
        parent = self.run
        try:
            with transaction.atomic():
                recorded = (
                    _writable(run_id=parent.pk, claim_token=self.claim_token)
                    .select_for_update()
                    .values_list("step_count", flat=True)
                    .first()
                )
                if recorded is None:
                    raise _refused(run_id=parent.pk, what=f"sub-agent {label!r}")
                child_run = Run.objects.create(
                    parent=parent,
                    # A sub-agent runs inside a tool call, whose step is recorded once the call returns.
                    parent_step=recorded + 1,
                    label=redact_text(label)[:200],
                    experiment=None,
                    **parent.spec(),
                    status=Run.Status.QUEUED,
                    worker_name=self.worker_name,
                    worker_pid=self.worker_pid,
                    claim_token=self.claim_token,
                )
        except (RunNotRunning, *DATABASE_LOST) as exc:
            raise self._stop(exc) from exc
        child_observer = self.observer.child(label=label) if self.observer is not None else None
        return DbRecorder(
            child_run,
            worker_name=self.worker_name,
            worker_pid=self.worker_pid,
            observer=child_observer,
            deadline=self.deadline,
            claim_token=self.claim_token,
            step_delay_s=self.step_delay_s,
        )
