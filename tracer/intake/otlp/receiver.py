"""Spans received at ``/v1/traces``, kept per trace, and each trace's run written through the recording path.

One trace is one run (``source`` otlp, ``external_id`` the trace id, ``owner`` the token's user). A
trace's spans may come in several requests and in any order. A request goes in two steps:

- ``spans_store``: its spans (redacted) are added to their traces' stored ones (``OtlpSpanBatch``;
  a span sent again is taken once) and each trace is read whole again (``conventions.trace_read``):
  a trace that cannot be read as a run is refused alone, and nothing of it is stored.
- ``traces_record``: each trace's run is written from all its stored spans through the recording
  path: traces seen for the first time together (``recording.runs_record_many``), a trace seen
  before by writing its run again (``recording.imported_run_rewrite``, keeping its id): the steps
  already written as the trace now reads them stay, and only those that changed or are new are
  written, so a live run grows step by step while its agent runs, and a late span that changes what
  was written (it belongs before a written step, adds an attempt, brings the root span's labels)
  rewrites only what it changes. The run ends once the trace's root span is in.

The view answers a small request after both steps, a batch between them (``views.ANSWER_FIRST_SPANS``).
Each step is one transaction per trace (the new traces of a request share one; when it fails they
are taken one by one), so a trace's spans land whole or not at all, and so does its run: at any
moment a run is what a prefix of its stored spans says. ``OtlpTrace.recorded_spans`` says how many
of them: a run is written only from more spans than it was, so a late or repeated write changes
nothing, and a trace whose run is behind its spans (its writer died after the answer) is written by
its next request, by the same spans sent again, or by the sweep (``traces_unrecorded_write``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from agents.redaction import secret_name

from ... import redaction
from ...models import OtlpSpanBatch, OtlpTrace, Run
from ...recording import DATABASE_LOST, diagnosis_deferred, rows_insert
from ..errors import IngestError
from ..record import Arrival, runs_record
from . import conventions
from .wire import Span

logger = logging.getLogger(__name__)

CONFLICT_TRIES = 3


@dataclass
class Unrecorded:
    """A trace whose spans are stored and whose run is still to be written from them (``traces_record``)."""

    trace_pk: int
    trace_id: str
    reading: conventions.TraceReading  # what all its stored spans say
    spans: int  # how many of its spans that is (OtlpTrace.recorded_spans once written)
    run_id: int | None  # its run, when one was written before
    new: bool  # its row was made by this request: no run can be written for it yet by another
    sent: int = 0  # its spans in this request


@dataclass
class Receipt:
    """What became of one request's spans, and the traces whose runs are still to be written."""

    accepted_spans: int = 0
    rejected_spans: int = 0
    errors: list[str] = field(default_factory=list)
    unrecorded: list[Unrecorded] = field(default_factory=list)

    def refuse(self, trace_id: str, spans: int, why: str) -> None:
        self.rejected_spans += spans
        self.errors.append(f"trace {trace_id}: {why}")

    def warn(self, trace_id: str, warnings: list[str]) -> None:
        """What of a trace was refused while its spans are taken (``partial_success`` with no span
        rejected is how OTLP says so)."""
        for why in warnings:
            message = f"trace {trace_id}: {why}"
            if message not in self.errors:
                self.errors.append(message)

    def unwritten(self, failed: list[tuple[Unrecorded, str]]) -> None:
        """Count as refused the traces whose runs ``traces_record`` could not write."""
        for item, why in failed:
            self.accepted_spans -= item.sent
            self.refuse(item.trace_id, item.sent, why)


class _Conflict(Exception):
    """Another request wrote the same trace meanwhile: read it again and retry."""


def spans_redacted(spans: list[Span]) -> list[Span]:
    """``spans`` with every secret in their text replaced by its marker (``tracer.redaction``), before
    anything of them is read or stored: the kept spans hold no secret either.

    Most spans hold none: each span's strings are joined and scanned once (``Redactor.clean_text``),
    and only a span where something could be a secret (a pattern's trigger, a secret value, an
    attribute named like a secret, a nested value) is walked string by string."""
    redactor = redaction.redactor()
    resources: dict[int, dict[str, Any]] = {}  # a resource's attributes are shared by its spans
    keys = _Keys(redactor)
    for span in spans:
        strings = _span_strings(span, keys)
        if strings is None or not redactor.clean_text("\x00".join(strings)):
            span.name = redactor.text(span.name)
            span.status_message = redactor.text(span.status_message)
            span.attributes = redactor(span.attributes)
            if span.events:
                span.events = redactor(span.events)
        key = id(span.resource)
        if key not in resources:
            resources[key] = redactor(span.resource)
        span.resource = resources[key]
    return spans


class _Keys:
    """Attribute keys seen in a request, each checked once: whether a span holding it must be walked
    (it is named like a secret, so its string value is replaced whatever it says, or it holds one)."""

    def __init__(self, redactor) -> None:
        self.redactor = redactor
        self.seen: set[str] = set()
        self.walked: set[str] = set()

    def any_walked(self, attributes: dict[str, Any]) -> bool:
        new = attributes.keys() - self.seen
        for key in new:
            if secret_name(key) or self.redactor.text(key) != key:
                self.walked.add(key)
        self.seen |= new
        return bool(self.walked) and not self.walked.isdisjoint(attributes)


def _span_strings(span: Span, keys: _Keys) -> list[str] | None:
    """The strings of ``span`` that redaction reads (its name, status message, attribute values and
    events' names, attribute keys and values), or None when it must be walked: a nested value, or a
    key named like a secret or holding one."""
    strings = [span.name, span.status_message]
    for attributes in (span.attributes, *(event.get("attributes") or {} for event in span.events)):
        if keys.any_walked(attributes):
            return None
        values = attributes.values()
        texts = [v for v in values if type(v) is str]
        if len(texts) != len(values):
            for value in values:
                kind = type(value)
                if kind is list and all(type(v) in _PLAIN_ITEMS for v in value):
                    texts += [v for v in value if type(v) is str]
                elif kind not in _PLAIN_ITEMS:
                    return None
        strings += texts
    strings += [event.get("name") or "" for event in span.events]
    return strings


_PLAIN_ITEMS = frozenset({str, int, float, bool, type(None)})


EXPORT_SCOPE = "repair-loop-tracer"  # the instrumentation scope of this tracer's own export (tracer.export.otlp)


def _export_sent_back(earlier: list[Span], fresh: list[Span]) -> bool:
    """Whether ``fresh`` spans are this tracer's export of a trace whose stored spans came from elsewhere
    (an agent's own): a run downloaded and sent back under the account that sent it."""
    return any(s.scope == EXPORT_SCOPE for s in fresh) and not any(s.scope == EXPORT_SCOPE for s in earlier)


def spans_store(*, spans: list[Span], user) -> Receipt:
    """Store ``spans`` with their traces (redacted), each trace's spans in one transaction, and read
    each trace whole; its run is left to ``traces_record`` (``Receipt.unrecorded``). A trace that
    cannot be read as a run (``conventions.trace_read``) is refused alone and nothing of it stored.

    New traces are stored together, in one transaction; a trace stored before is guarded by its
    ``span_count`` (another request that added spans meanwhile makes it read again). A trace whose
    spans were all sent before changes nothing, unless its run is behind them (its writer died):
    then it is written again.
    """
    receipt = Receipt()
    by_trace: dict[str, list[Span]] = defaultdict(list)
    for span in spans_redacted(spans):
        by_trace[span.trace_id].append(span)
    pending = dict(by_trace)
    batch_first = True  # new traces are tried together once; after a collision, one at a time
    for _ in range(CONFLICT_TRIES):
        if not pending:
            break
        traces = {t.trace_id: t for t in OtlpTrace.objects.filter(owner=user, trace_id__in=list(pending))}
        stored = _stored_spans([t.pk for t in traces.values()])
        retry: dict[str, list[Span]] = {}
        storing: list[tuple[str, OtlpTrace | None, conventions.TraceReading, list[Span]]] = []
        for trace_id, new in pending.items():
            trace = traces.get(trace_id)
            earlier = stored.get(trace.pk, []) if trace else []
            known = {s.span_id for s in earlier}
            fresh = list({s.span_id: s for s in reversed(new) if s.span_id not in known}.values())[::-1]
            if not fresh and trace.recorded_spans >= trace.span_count:
                receipt.accepted_spans += len(new)  # all sent before: nothing changes
                continue
            if fresh and earlier and _export_sent_back(earlier, fresh):
                receipt.refuse(
                    trace_id,
                    len(new),
                    f"these spans are this tracer's own export of run {trace.run_id or '?'}, whose trace it is "
                    "already (sent by its agent): they are not merged into it, which would count its calls "
                    "twice; to add the export as a new run, send it under another trace id",
                )
                continue
            try:
                reading = conventions.trace_read(trace_id, earlier + fresh)
            except IngestError as exc:
                if not earlier and any(not s.parent_span_id for s in fresh):
                    # a whole trace that cannot be read: refused, nothing of it stored
                    why = "; ".join(f"{e['path']}: {e['message']}" for e in exc.errors[:3])
                    receipt.refuse(trace_id, len(new), why)
                    continue
                # part of a trace, or spans added to one stored before: kept, since the spans still to
                # come (exporters send a trace's spans in any order, over several requests) may make
                # it readable; refusing them would lose them for good
                reading = conventions.trace_read(trace_id, earlier + fresh, unreadable_ok=True)
            receipt.warn(trace_id, reading.warnings)
            if not fresh:  # sent again while its run is behind its spans: written from them now
                receipt.accepted_spans += len(new)
                receipt.unrecorded.append(
                    Unrecorded(trace.pk, trace_id, reading, trace.span_count, trace.run_id, new=False, sent=len(new))
                )
                continue
            storing.append((trace_id, trace, reading, fresh))
        creating = [(trace_id, reading, fresh) for trace_id, trace, reading, fresh in storing if trace is None]
        if batch_first and len(creating) > 1:
            try:
                stored_new = _traces_store_new(creating, user=user)
            except DATABASE_LOST:
                raise  # the whole request is answered 503, and the exporter sends it again
            except Exception:  # another request started one of them meanwhile, or one cannot be stored
                batch_first = False
                retry.update({trace_id: by_trace[trace_id] for trace_id, _, _ in creating})
            else:
                for item in stored_new:
                    item.sent = len(by_trace[item.trace_id])
                    receipt.accepted_spans += item.sent
                receipt.unrecorded += stored_new
            storing = [item for item in storing if item[1] is not None]
        for trace_id, trace, reading, fresh in storing:
            try:
                item = _trace_store(trace_id=trace_id, trace=trace, reading=reading, fresh=fresh, user=user)
            except (_Conflict, IntegrityError):
                retry[trace_id] = by_trace[trace_id]
                continue
            except DATABASE_LOST:
                raise
            except Exception as exc:  # one trace that cannot be stored is refused alone
                logger.exception("OTLP trace %s refused", trace_id)
                receipt.refuse(trace_id, len(by_trace[trace_id]), f"{type(exc).__name__}: {exc}")
                continue
            item.sent = len(by_trace[trace_id])
            receipt.accepted_spans += item.sent
            receipt.unrecorded.append(item)
        pending = retry
    for trace_id, new in pending.items():
        receipt.refuse(trace_id, len(new), "written by other requests at the same time; send it again")
    return receipt


def traces_record(*, unrecorded: list[Unrecorded], user) -> list[tuple[Unrecorded, str]]:
    """Write the runs of traces whose spans ``spans_store`` stored, each from all its spans: the new
    traces' runs together in one transaction (``recording.runs_record_many``), the others one by one
    (``recording.imported_run_rewrite``: the steps it had stay, the ones that changed or are new are
    written). Each write is guarded by ``OtlpTrace.recorded_spans``: a run already written from as
    many spans or more (by a later request, or the sweep) is left as it is, so writes that come late
    or twice change nothing.

    Returns the traces whose run could not be written and why; those are marked recorded all the
    same, so the sweep does not try them again and again (their next span has them read again).
    ``DATABASE_LOST`` is raised: those traces stay behind their spans, for the next request of each
    or the sweep.
    """
    with diagnosis_deferred():  # the runs that ended, diagnosed together once all are written
        return _traces_record(unrecorded=unrecorded, user=user)


def _traces_record(*, unrecorded: list[Unrecorded], user) -> list[tuple[Unrecorded, str]]:
    failed: list[tuple[Unrecorded, str]] = []
    new = [u for u in unrecorded if u.new]
    alone = [u for u in unrecorded if not u.new]
    if len(new) > 1:
        try:
            _runs_create(new, user=user)
            new = []
        except DATABASE_LOST:
            raise
        except Exception:  # written meanwhile by a later request, or one of them cannot be written
            pass  # each is written alone below
    for item in new + alone:
        try:
            _run_write(item, user=user)
        except DATABASE_LOST:
            raise
        except Exception as exc:
            logger.exception("OTLP trace %s: its run could not be written", item.trace_id)
            failed.append((item, f"{type(exc).__name__}: {exc}"))
            OtlpTrace.objects.filter(pk=item.trace_pk, recorded_spans__lt=item.spans).update(recorded_spans=item.spans)
    return failed


def traces_unrecorded_write(*, older_than: datetime, limit: int = 100) -> int:
    """Write the runs of traces whose spans were stored before ``older_than`` and whose run is still
    behind them: a request answered once it had stored them, whose process died before it wrote the
    run (or whose database went away). For beat's sweep; returns how many traces it wrote."""
    behind = OtlpTrace.objects.filter(recorded_spans__lt=F("span_count"), updated_at__lt=older_than)
    done = 0
    for trace in behind.select_related("owner").order_by("updated_at")[:limit]:
        spans = _stored_spans([trace.pk]).get(trace.pk, [])
        try:
            reading = conventions.trace_read(trace.trace_id, spans, unreadable_ok=True)
        except IngestError as exc:  # read when stored: only a change of this code gets here
            logger.warning("OTLP trace %s can no longer be read: %s", trace.trace_id, exc)
            OtlpTrace.objects.filter(pk=trace.pk).update(recorded_spans=F("span_count"))
            continue
        unrecorded = Unrecorded(trace.pk, trace.trace_id, reading, len(spans), trace.run_id, new=False)
        if not traces_record(unrecorded=[unrecorded], user=trace.owner):
            done += 1
    if done:
        logger.warning("wrote the runs of %d OTLP trace(s) left behind their stored spans", done)
    return done


def _stored_spans(trace_pks: list[int]) -> dict[int, list[Span]]:
    """The spans stored for each of these traces (by their row's id), in the order they were stored."""
    stored: dict[int, list[Span]] = defaultdict(list)
    if trace_pks:
        batches = OtlpSpanBatch.objects.filter(trace__in=trace_pks).order_by("pk")
        for trace_pk, data in batches.values_list("trace_id", "data"):
            stored[trace_pk].extend(spans_unpacked(bytes(data)))
    return stored


def spans_packed(spans: list[Span]) -> bytes:
    """Spans as ``OtlpSpanBatch.data``: compact JSON, zlib-compressed (fast level: about 8× smaller).
    orjson encodes the spans (dataclasses of plain values, as ``wire`` decodes them) five times
    faster than ``json``; what it refuses (an integer beyond 64 bits from a JSON body) is encoded by
    ``json``, and either is read back by ``spans_unpacked``."""
    try:
        text = orjson.dumps(spans)
    except TypeError:
        text = json.dumps([s.to_dict() for s in spans], separators=(",", ":")).encode()
    return zlib.compress(text, 1)


def spans_unpacked(data: bytes) -> list[Span]:
    return [Span.from_dict(item) for item in json.loads(zlib.decompress(data))]


def _span_batch(trace: OtlpTrace, spans: list[Span]) -> OtlpSpanBatch:
    return OtlpSpanBatch(trace=trace, data=spans_packed(spans), span_count=len(spans))


def _arrival(item: Unrecorded, *, user, run_id: int | None = None) -> Arrival:
    """The trace's run as ``intake.record.runs_record`` writes it: its reading, owned by ``user``."""
    return dataclasses.replace(item.reading.arrival, owner=user, run_id=run_id)


def _traces_store_new(items: list[tuple[str, conventions.TraceReading, list[Span]]], *, user) -> list[Unrecorded]:
    """Store traces seen for the first time, all in one transaction: their rows and their spans, in
    multi-row INSERTs (``recording.rows_insert``). A trace another request started meanwhile fails
    them all (``IntegrityError``)."""
    with transaction.atomic():
        traces = [
            OtlpTrace(owner=user, trace_id=trace_id, span_count=len(fresh), complete=reading.complete)
            for trace_id, reading, fresh in items
        ]
        rows_insert(rows=traces)
        batches = [_span_batch(trace, fresh) for trace, (_, _, fresh) in zip(traces, items, strict=True)]
        rows_insert(rows=batches, returning=False)
    return [
        Unrecorded(trace.pk, trace_id, reading, len(fresh), None, new=True)
        for trace, (trace_id, reading, fresh) in zip(traces, items, strict=True)
    ]


def _trace_store(
    *, trace_id: str, trace: OtlpTrace | None, reading: conventions.TraceReading, fresh: list[Span], user
) -> Unrecorded:
    """Store the new spans of one trace, in one transaction: its row made (a request starting the same
    trace at once fails here) or its ``span_count`` moved on, guarded (``_Conflict`` when another
    request added spans since they were read), and its span batch."""
    with transaction.atomic():
        if trace is None:
            trace = OtlpTrace.objects.create(
                owner=user, trace_id=trace_id, span_count=len(fresh), complete=reading.complete
            )
            count, new = len(fresh), True
        else:
            count, new = trace.span_count + len(fresh), False
            if not OtlpTrace.objects.filter(pk=trace.pk, span_count=trace.span_count).update(
                span_count=count, complete=reading.complete, updated_at=timezone.now()
            ):
                raise _Conflict(trace_id)
        rows_insert(rows=[_span_batch(trace, fresh)], returning=False)
    return Unrecorded(trace.pk, trace_id, reading, count, trace.run_id, new=new)


def _runs_create(items: list[Unrecorded], *, user) -> None:
    """Write the runs of traces this request stored first, all in one transaction: the traces' rows
    locked first, none of them written meanwhile (a later request that read more of their spans
    waits, then writes over these; ``_Conflict`` when one was written already, and then each is
    written alone), their runs and steps in two multi-row INSERTs (``recording.runs_record_many``),
    then each trace marked recorded and linked to its run in one UPDATE."""
    with transaction.atomic():
        unwritten = OtlpTrace.objects.filter(pk__in=[item.trace_pk for item in items], recorded_spans=0)
        if len(unwritten.select_for_update().values_list("pk", flat=True)) != len(items):
            raise _Conflict("written meanwhile")
        runs = runs_record(arrivals=[_arrival(item, user=user) for item in items])
        _traces_recorded([(item.trace_pk, item.spans, run.pk) for item, run in zip(items, runs, strict=True)])


def _traces_recorded(rows: list[tuple[int, int, int]]) -> None:
    """Mark traces recorded and link each to its run, ``(trace pk, recorded_spans, run id)`` each, in
    one UPDATE from a VALUES list (``Case``/``When`` for a request's traces costs Django more to
    build than the runs' inserts)."""
    table = connection.ops.quote_name(OtlpTrace._meta.db_table)
    values = ", ".join(["(%s, %s, %s)"] * len(rows))
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH v (trace_id, recorded, run_id) AS (VALUES {values}) "
            f"UPDATE {table} SET recorded_spans = (SELECT recorded FROM v WHERE v.trace_id = {table}.id), "
            f"run_id = (SELECT run_id FROM v WHERE v.trace_id = {table}.id) "
            f"WHERE id IN (SELECT trace_id FROM v)",
            [value for row in rows for value in row],
        )


def _run_write(item: Unrecorded, *, user) -> None:
    """Write one trace's run from its reading, in one transaction: the trace marked recorded first (a
    run already written from as many of its spans or more is left as it is), then its run written
    again (``recording.imported_run_rewrite``) or, the first time, written and linked."""
    with transaction.atomic():
        if not OtlpTrace.objects.filter(pk=item.trace_pk, recorded_spans__lt=item.spans).update(
            recorded_spans=item.spans
        ):
            return
        run_id = item.run_id
        if run_id is None:
            run_id = (
                Run.objects.filter(source=Run.Source.OTLP, owner=user, external_id=item.trace_id)
                .values_list("pk", flat=True)
                .first()
            )
        if run_id is None:
            (run,) = runs_record(arrivals=[_arrival(item, user=user)])
            OtlpTrace.objects.filter(pk=item.trace_pk).update(run=run)
            return
        runs_record(arrivals=[_arrival(item, user=user, run_id=run_id)])
        if item.run_id is None:
            OtlpTrace.objects.filter(pk=item.trace_pk).update(run_id=run_id)
