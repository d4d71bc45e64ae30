"""The OTLP receiver's writer thread under a real gunicorn (``config/gunicorn.py``, as ``./rlt up``
serves): a batch is answered once its spans are stored and its runs are written after, by one thread
of the worker process (``tracer.otlp.views.WriteBehind``). Killed before it wrote them, nothing is
lost: the sweep writes every run from the stored spans. Stopped gracefully, the worker finishes the
writes it had queued before it exits.

The writer is held (``RLT_TEST_HOLD_FILE``) until the test lets it go, so the fault falls between the
answer and the write every time.
"""

from __future__ import annotations

import signal
from datetime import timedelta

import psutil
import pytest
from django.db.models import F, Sum
from django.utils import timezone
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.conftest import wait_until
from tests.tracer.test_otlp import bench_runs, bench_spans, expected, importer, recorded
from tracer.execution import runs_sweep
from tracer.models import OtlpTrace, Run
from tracer.otlp.views import ANSWER_FIRST_SPANS
from tracer.tokens import token_create

from .conftest import Served

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def served():
    server = Served(held=True)
    yield server
    server.stop()


def _a_batch_answered(served: Served, username: str):
    """12 runs' spans (one batch of the size an exporter sends, answered first), answered while the
    writer is held: all spans stored, no run written."""
    user = importer(username)
    _, secret = token_create(user=user, name="t")
    runs = bench_runs(12)
    spans = [span for run in runs for span in bench_spans(run)]
    assert len(spans) >= ANSWER_FIRST_SPANS
    exporter = OTLPSpanExporter(
        endpoint=f"http://127.0.0.1:{served.port}/v1/traces", headers={"Authorization": f"Bearer {secret}"}, timeout=20
    )
    try:
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    traces = OtlpTrace.objects.filter(owner=user)
    assert traces.aggregate(n=Sum("span_count"))["n"] == len(spans)
    assert not Run.objects.filter(owner=user).exists()
    return user, runs


def test_runs_of_a_batch_answered_before_the_server_was_killed_are_written_by_the_sweep(served):
    user, runs = _a_batch_answered(served, "killed-server")
    for proc in [*psutil.Process(served.proc.pid).children(recursive=True), psutil.Process(served.proc.pid)]:
        proc.send_signal(signal.SIGKILL)  # the worker and its held writer thread die with the batch unwritten
    served.proc.wait(10)
    served.release()
    traces = OtlpTrace.objects.filter(owner=user)
    assert traces.count() == len(runs)
    assert traces.filter(recorded_spans__lt=F("span_count")).count() == len(runs)  # behind their spans
    assert not Run.objects.filter(owner=user).exists()

    assert runs_sweep(now=timezone.now() + timedelta(minutes=1)).otlp_written == len(runs)
    for run in runs:
        assert recorded(Run.objects.get(owner=user, external_id=run["trace_id"])) == expected(run)
    assert not traces.filter(recorded_spans__lt=F("span_count")).exists()


def test_a_server_stopped_gracefully_writes_the_runs_it_had_answered_for_before_it_exits(served):
    user, runs = _a_batch_answered(served, "stopped-server")
    served.proc.send_signal(signal.SIGTERM)  # gunicorn stops its worker, whose writer is still held
    wait_until(lambda: "Handling signal: term" in served.log_path.read_text(), timeout=10, what="the stop")
    served.release()
    assert served.proc.wait(15) == 0
    assert Run.objects.filter(owner=user, status=Run.Status.FINISHED).count() == len(runs)  # no sweep needed
    for run in runs:
        assert recorded(Run.objects.get(owner=user, external_id=run["trace_id"])) == expected(run)
