"""Spans received at ``/v1/traces``, kept per trace, and each trace's run written through the recording path.

One trace is one run (``source`` otlp, ``external_id`` the trace id, ``owner`` the token's user). A
trace's spans may come in several requests and in any order: each request adds its spans to the
trace's stored ones (``OtlpSpanBatch``; a span sent again is taken once), reads the whole trace again
(``conventions.trace_read``) and records it through the recording path: traces seen for the first
time all together (``recording.runs_record_many``), a trace seen before by writing its run again
from all its spans (``recording.imported_run_rewrite``, keeping its id). There, the steps already
written as the trace now reads them stay, and only the ones that changed or are new are written, so
a live run grows step by step while its agent runs, and a late span that changes what was written
(it belongs before a written step, adds an attempt, or brings the root span's labels) rewrites
only what it changes. The run ends once the trace's root span is in.

Each trace is one transaction: its spans, its run and its steps land together or not at all, and a
trace that cannot be written is refused alone (its spans counted as rejected) while the others of
the request land. The new traces of a request share one transaction; when it fails they are written
again one by one, each in its own.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction

from agents.events import ModelAttempt, RunEnd, RunStart, Verdict
from agents.redaction import secret_name
from agents.vocabulary import StepKind

from .. import redaction
from ..ingest import IngestError
from ..models import OtlpSpanBatch, OtlpTrace, Run
from ..recording import DATABASE_LOST, RunRecord, imported_run_rewrite, rows_insert, runs_record_many
from . import conventions
from .wire import Span

logger = logging.getLogger(__name__)

CONFLICT_TRIES = 3


@dataclass
class Receipt:
    """What became of one request's spans."""

    accepted_spans: int = 0
    rejected_spans: int = 0
    errors: list[str] = field(default_factory=list)


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
    keys: dict[str, bool] = {}  # attribute key -> whether a span holding it must be walked
    for span in spans:
        strings = _span_strings(span, keys, redactor)
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


def _span_strings(span: Span, keys: dict[str, bool], redactor) -> list[str] | None:
    """The strings of ``span`` that redaction reads (its name, status message, attribute values and
    events' names, attribute keys and values), or None when it must be walked: a nested value, or a
    key named like a secret or holding one (``keys`` remembers each key's answer)."""
    strings = [span.name, span.status_message]
    for attributes in (span.attributes, *(event.get("attributes") or {} for event in span.events)):
        for key, value in attributes.items():
            walk = keys.get(key)
            if walk is None:
                walk = keys[key] = _key_walked(key, redactor)
            if walk:
                return None
            kind = type(value)
            if kind is str:
                strings.append(value)
            elif kind is list and all(type(v) in _PLAIN_ITEMS for v in value):
                strings += [v for v in value if type(v) is str]
            elif kind not in _PLAIN_ITEMS:
                return None
    strings += [event.get("name") or "" for event in span.events]
    return strings


_PLAIN_ITEMS = frozenset({str, int, float, bool, type(None)})


def _key_walked(key: str, redactor) -> bool:
    """Whether an attribute key makes its span walked: it is named like a secret (its string value is
    replaced whatever it says), or it holds a secret itself."""
    return secret_name(key) or redactor.text(key) != key


def spans_receive(*, spans: list[Span], user) -> Receipt:
    """Store ``spans`` with their traces and bring each trace's run up to date.

    Traces seen for the first time are written together, in one transaction (``_traces_create``);
    a trace already stored is updated in a transaction of its own (``_trace_update``). Either way a
    trace lands whole or not at all.
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
        stored: dict[int, list[Span]] = defaultdict(list)
        if traces:
            batches = OtlpSpanBatch.objects.filter(trace__in=[t.pk for t in traces.values()])
            for trace_pk, data in batches.values_list("trace_id", "data"):
                stored[trace_pk].extend(spans_unpacked(bytes(data)))
        retry: dict[str, list[Span]] = {}
        creating: list[tuple[str, conventions.TraceReading, list[Span]]] = []
        updating: list[tuple[str, OtlpTrace, conventions.TraceReading, list[Span]]] = []
        for trace_id, new in pending.items():
            trace = traces.get(trace_id)
            earlier = stored.get(trace.pk, []) if trace else []
            known = {s.span_id for s in earlier}
            fresh = list({s.span_id: s for s in reversed(new) if s.span_id not in known}.values())[::-1]
            if not fresh:
                receipt.accepted_spans += len(new)  # all sent before: nothing changes
                continue
            try:
                reading = conventions.trace_read(trace_id, earlier + fresh)
            except IngestError as exc:
                receipt.rejected_spans += len(new)
                problems = "; ".join(f"{e['path']}: {e['message']}" for e in exc.errors[:3])
                receipt.errors.append(f"trace {trace_id}: {problems}")
                continue
            if trace is None:
                creating.append((trace_id, reading, fresh))
            else:
                updating.append((trace_id, trace, reading, fresh))
        if creating and batch_first and len(creating) > 1:
            try:
                _traces_create(creating, user=user)
            except DATABASE_LOST:
                raise  # the whole request is answered 503, and the exporter sends it again
            except Exception:  # another request started one of them meanwhile, or one cannot be written
                batch_first = False
                retry.update({trace_id: by_trace[trace_id] for trace_id, _, _ in creating})
            else:
                receipt.accepted_spans += sum(len(by_trace[trace_id]) for trace_id, _, _ in creating)
        else:
            updating += [(trace_id, None, reading, fresh) for trace_id, reading, fresh in creating]
        for trace_id, trace, reading, fresh in updating:
            try:
                _trace_update(trace_id=trace_id, trace=trace, reading=reading, fresh=fresh, user=user)
            except (_Conflict, IntegrityError):
                retry[trace_id] = by_trace[trace_id]
                continue
            except IngestError as exc:
                receipt.rejected_spans += len(by_trace[trace_id])
                problems = "; ".join(f"{e['path']}: {e['message']}" for e in exc.errors[:3])
                receipt.errors.append(f"trace {trace_id}: {problems}")
                continue
            except DATABASE_LOST:
                raise  # the whole request is answered 503, and the exporter sends it again
            except Exception as exc:  # one trace that cannot be written is refused alone
                logger.exception("OTLP trace %s refused", trace_id)
                receipt.rejected_spans += len(by_trace[trace_id])
                receipt.errors.append(f"trace {trace_id}: {type(exc).__name__}: {exc}")
                continue
            receipt.accepted_spans += len(by_trace[trace_id])
        pending = retry
    for trace_id, new in pending.items():
        receipt.rejected_spans += len(new)
        receipt.errors.append(f"trace {trace_id}: written by other requests at the same time; send it again")
    return receipt


def spans_packed(spans: list[Span]) -> bytes:
    """Spans as ``OtlpSpanBatch.data``: compact JSON, zlib-compressed (fast level: about 8× smaller)."""
    text = json.dumps([s.to_dict() for s in spans], separators=(",", ":"))
    return zlib.compress(text.encode(), 1)


def spans_unpacked(data: bytes) -> list[Span]:
    return [Span.from_dict(item) for item in json.loads(zlib.decompress(data))]


def _span_batch(trace: OtlpTrace, spans: list[Span]) -> OtlpSpanBatch:
    return OtlpSpanBatch(trace=trace, data=spans_packed(spans), span_count=len(spans))


def _record(*, trace_id: str, reading: conventions.TraceReading, user) -> RunRecord:
    """A new trace's run for ``recording.runs_record_many``: the fields ``ingest.run_import`` gives a
    new run from the same document, so both paths write the same run."""
    meta = reading.meta
    run = Run(
        source=Run.Source.OTLP,
        source_detail=meta.get("source", "")[:200],
        external_id=trace_id,
        owner=user,
        labels=meta.get("labels", {}),
        model_backend=Run.ModelBackend.IMPORTED,
        started_at=meta.get("started_at"),
        status=Run.Status.QUEUED,
    )
    start = RunStart(
        scenario=meta.get("scenario", ""),
        policy_name=meta.get("policy", ""),
        policy_settings={},
        model_backend=Run.ModelBackend.IMPORTED,
        model_name=meta.get("model", ""),
        task=meta.get("task", ""),
    )
    end = None
    if reading.complete:
        answers = [s.text or "" for s in reading.steps if s.kind == StepKind.FINAL_ANSWER]
        verdict = meta.get("verdict")
        end = RunEnd(
            stop_reason=meta.get("stop_reason", ""),
            final_answer=meta.get("final_answer", answers[-1] if answers else ""),
            verdict=Verdict(passed=verdict == "pass", reason=meta.get("verdict_reason", "")) if verdict else None,
            error=meta.get("error", ""),
            guard=meta.get("guard", ""),
            transcript=meta.get("transcript") or [],
            model_attempts=[ModelAttempt.from_dict(a) for a in meta.get("failed_model_call", [])],
        )
    return RunRecord(
        run=run,
        start=start,
        steps=reading.steps,
        end=end,
        finished_at=meta.get("finished_at"),
        model_retry_count=meta.get("model_retry_count"),
    )


def _traces_create(items: list[tuple[str, conventions.TraceReading, list[Span]]], *, user) -> None:
    """Record traces seen for the first time, all in one transaction: their runs and steps
    (``recording.runs_record_many``), their trace rows and their spans, in multi-row INSERTs
    (``recording.rows_insert``)."""
    with transaction.atomic():
        runs = runs_record_many(records=[_record(trace_id=t, reading=r, user=user) for t, r, _ in items])
        traces = [
            OtlpTrace(owner=user, trace_id=trace_id, run=run, span_count=len(fresh), complete=reading.complete)
            for (trace_id, reading, fresh), run in zip(items, runs, strict=True)
        ]
        rows_insert(rows=traces)
        rows_insert(rows=[_span_batch(trace, fresh) for trace, (_, _, fresh) in zip(traces, items, strict=True)])


def _trace_update(
    *, trace_id: str, trace: OtlpTrace | None, reading: conventions.TraceReading, fresh: list[Span], user
) -> None:
    """Record one trace whose spans arrived before (or that collided with another request), in one
    transaction: its new spans, and its run written again from all of them
    (``recording.imported_run_rewrite``: the steps it had stay, the ones that changed or are new are
    written), or written for the first time."""
    record = _record(trace_id=trace_id, reading=reading, user=user)
    with transaction.atomic():
        if trace is None:
            # the row first: a request starting the same trace at once fails here, before any run
            trace = OtlpTrace.objects.create(
                owner=user, trace_id=trace_id, span_count=len(fresh), complete=reading.complete
            )
            run_id = (
                Run.objects.filter(source=Run.Source.OTLP, owner=user, external_id=trace_id)
                .values_list("pk", flat=True)
                .first()
            )
        else:
            if not OtlpTrace.objects.filter(pk=trace.pk, span_count=trace.span_count).update(
                span_count=trace.span_count + len(fresh), complete=reading.complete
            ):
                raise _Conflict(trace_id)  # another request added spans since they were read
            run_id = trace.run_id
        rows_insert(rows=[_span_batch(trace, fresh)], returning=False)
        if run_id is None:
            (run,) = runs_record_many(records=[record])
            OtlpTrace.objects.filter(pk=trace.pk).update(run=run)
        else:
            imported_run_rewrite(run_id=run_id, record=record)
            if trace.run_id != run_id:
                OtlpTrace.objects.filter(pk=trace.pk).update(run_id=run_id)
