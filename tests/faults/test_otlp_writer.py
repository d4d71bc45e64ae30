"""The OTLP receiver's writer thread under a real gunicorn (``config/gunicorn.py``, as ``./rlt up``
serves): a batch is answered once its spans are stored and its runs are written after, by one thread
of the worker process (``tracer.intake.otlp.views.WriteBehind``). Killed before it wrote them, nothing is
lost: the sweep writes every run from the stored spans. Stopped gracefully, the worker finishes the
writes it had queued before it exits.

The writer is held (``RLT_TEST_HOLD_FILE``) until the test lets it go, so the fault falls between the
answer and the write every time.
"""

from __future__ import annotations

import random
import signal
import threading
from datetime import timedelta

import psutil
import pytest
from django.db.models import F, Sum
from django.utils import timezone
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.conftest import wait_until
from tests.tracer.intake.otlp.test_receiver import bench_runs, bench_spans, expected, importer, recorded
from tracer.execution import runs_sweep
from tracer.intake.otlp.views import ANSWER_FIRST_SPANS
from tracer.models import OtlpTrace, Run
from tracer.tokens import token_create

from .conftest import Served

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

EXPORTERS = 4
RUNS_PER_EXPORTER = 30
BATCH_SPANS = 100  # an exporter's batch: answered once stored, its runs written after


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


def test_four_exporters_lose_no_run_when_a_web_process_is_killed_under_them():
    """Four OTLP exporters at once against two web processes (one sends every batch twice, one sends
    its runs in reversed and shuffled order, each run's spans root first), and one process SIGKILLed
    while they send: the exporters send
    again what was cut off, gunicorn starts another process, the sweep writes what the dead one had
    answered for, and every run is recorded exactly as the workload says."""
    served = Served(workers=2)
    try:
        user = importer("four-exporters")
        _, secret = token_create(user=user, name="t")
        runs = bench_runs(EXPORTERS * RUNS_PER_EXPORTER)
        plans = []
        for k in range(EXPORTERS):
            mine = runs[k::EXPORTERS]
            if k == 2:  # its runs in reversed, then shuffled order, each run's spans root first
                mine = mine[::-1]
                random.Random(k).shuffle(mine)
            spans = [span for run in mine for span in (bench_spans(run)[::-1] if k == 2 else bench_spans(run))]
            batches = [spans[i : i + BATCH_SPANS] for i in range(0, len(spans), BATCH_SPANS)]
            plans.append([b for batch in batches for b in ([batch, batch] if k == 1 else [batch])])
        results: list[SpanExportResult] = []
        sent = threading.Semaphore(0)

        def export(batches) -> None:
            exporter = OTLPSpanExporter(
                endpoint=f"{served.url}/v1/traces", headers={"Authorization": f"Bearer {secret}"}, timeout=30
            )
            try:
                for batch in batches:
                    results.append(exporter.export(batch))
                    sent.release()
            finally:
                exporter.shutdown()

        threads = [threading.Thread(target=export, args=(plan,)) for plan in plans]
        for t in threads:
            t.start()
        for _ in range(2):  # two batches in, while the others are being sent, one web process dies
            sent.acquire(timeout=60)
        victim = psutil.Process(served.proc.pid).children()[0]
        victim.send_signal(signal.SIGKILL)
        for t in threads:
            t.join(120)
        assert victim.pid not in [c.pid for c in psutil.Process(served.proc.pid).children()]
        assert results.count(SpanExportResult.SUCCESS) == len(results) == sum(len(p) for p in plans)
        runs_sweep(now=timezone.now() + timedelta(minutes=1))  # the runs the killed process had answered for
        for run in runs:
            assert recorded(Run.objects.get(owner=user, external_id=run["trace_id"])) == expected(run)
        print(
            f"\n[faults] {EXPORTERS} OTLP exporters, a web process SIGKILLed: {len(results)} exports succeeded, "
            f"{len(runs)} of {len(runs)} runs recorded as the workload says"
        )
    finally:
        served.stop()
