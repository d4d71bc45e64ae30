"""Spans received at ``/v1/traces``, kept per trace, and each trace's run written through the recording path.

One trace is one run (``source`` otlp, ``external_id`` the trace id, ``owner`` the token's user). A
trace's spans may come in several requests and in any order: each request adds its spans to the
trace's stored ones (``OtlpSpan``; a span sent again is taken once), reads the whole trace again
(``conventions.trace_read``, a run document) and records it with ``tracer.ingest.run_import_outcome``
through the recording path. When the steps read are the ones already written plus more, only the new
ones are written, so a live run grows step by step while its agent runs; when a late span changes
what was written (it belongs before a written step, adds an attempt, or brings the root span's
labels), the run is written again from the trace, keeping its id. The run ends once the trace's root
span is in.

Each trace is one transaction: its spans, its run and its steps land together or not at all, and a
trace that cannot be written is refused alone (its spans counted as rejected) while the others of
the request land.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction

from ..ingest import IngestError, run_import_outcome
from ..models import OtlpSpan, OtlpTrace, Run
from ..recording import DATABASE_LOST
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
    run_ids: list[int] = field(default_factory=list)


class _Conflict(Exception):
    """Another request wrote the same trace meanwhile: read it again and retry."""


def spans_receive(*, spans: list[Span], user) -> Receipt:
    """Store ``spans`` with their traces and bring each trace's run up to date, one transaction per trace."""
    receipt = Receipt()
    by_trace: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    pending = dict(by_trace)
    for _ in range(CONFLICT_TRIES):
        if not pending:
            break
        traces = {t.trace_id: t for t in OtlpTrace.objects.filter(owner=user, trace_id__in=list(pending))}
        stored: dict[int, list[Span]] = defaultdict(list)
        if traces:
            rows = OtlpSpan.objects.filter(trace__in=[t.pk for t in traces.values()]).values_list("trace_id", "data")
            for trace_pk, data in rows:
                stored[trace_pk].append(Span.from_dict(data))
        retry = {}
        for trace_id, new in pending.items():
            trace = traces.get(trace_id)
            try:
                run_id = _trace_write(
                    trace_id=trace_id, trace=trace, stored=stored.get(trace.pk, []) if trace else [], new=new, user=user
                )
            except (_Conflict, IntegrityError):
                retry[trace_id] = new
                continue
            except IngestError as exc:
                receipt.rejected_spans += len(new)
                receipt.errors.append(
                    f"trace {trace_id}: " + "; ".join(f"{e['path']}: {e['message']}" for e in exc.errors[:3])
                )
                continue
            except DATABASE_LOST:
                raise  # the whole request is answered 503, and the exporter sends it again
            except Exception as exc:  # one trace that cannot be written is refused alone
                logger.exception("OTLP trace %s refused", trace_id)
                receipt.rejected_spans += len(new)
                receipt.errors.append(f"trace {trace_id}: {type(exc).__name__}: {exc}")
                continue
            receipt.accepted_spans += len(new)
            if run_id is not None:
                receipt.run_ids.append(run_id)
        pending = retry
    for trace_id, new in pending.items():
        receipt.rejected_spans += len(new)
        receipt.errors.append(f"trace {trace_id}: written by other requests at the same time; send it again")
    return receipt


def _trace_write(*, trace_id: str, trace: OtlpTrace | None, stored: list[Span], new: list[Span], user) -> int | None:
    known = {s.span_id for s in stored}
    fresh: dict[str, Span] = {}
    for span in new:
        if span.span_id not in known:
            fresh.setdefault(span.span_id, span)
    if not fresh:
        return trace.run_id if trace else None  # all sent before: nothing changes
    reading = conventions.trace_read(trace_id, stored + list(fresh.values()))
    service = reading.document.run.source
    with transaction.atomic():
        if trace is None:
            # the row first: a request starting the same trace at once fails here, before any run
            trace = OtlpTrace.objects.create(owner=user, trace_id=trace_id, span_count=len(fresh))
        elif not OtlpTrace.objects.filter(pk=trace.pk, span_count=trace.span_count).update(
            span_count=trace.span_count + len(fresh)
        ):
            raise _Conflict(trace_id)  # another request added spans since they were read
        OtlpSpan.objects.bulk_create(
            [
                OtlpSpan(trace=trace, span_id=s.span_id, parent_span_id=s.parent_span_id, data=s.to_dict())
                for s in fresh.values()
            ]
        )
        outcome = run_import_outcome(
            document=reading.document, user=user, source=Run.Source.OTLP, source_detail=service
        )
        OtlpTrace.objects.filter(pk=trace.pk).update(run=outcome.run, complete=reading.complete)
    return outcome.run.pk
