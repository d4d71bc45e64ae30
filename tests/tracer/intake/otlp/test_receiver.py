"""The OTLP/HTTP receiver at /v1/traces and the OTLP export of a run.

Spans are made with the OpenTelemetry SDK and encoded by the exporter's own encoder (protobuf), or
turned into OTLP JSON from that; the shared benchmark's spans come from ../shared/bench/otel_spans.py
and are checked against its workload. The acceptance test runs an agent loop on the official
anthropic SDK (its HTTP answered by a fake transport), instrumented by
openinference-instrumentation-anthropic, exporting with opentelemetry-exporter-otlp-proto-http to
the live server.
"""

from __future__ import annotations

import base64
import functools
import gzip
import importlib.util
import json
import random
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db.models import Sum
from django.urls import reverse
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from tests.dom import page as page_of
from tests.factories import RunFactory
from tracer.export import document as export_document
from tracer.intake import schema
from tracer.models import OtlpTrace, PolicyVariant, Run, Step
from tracer.reads import compare_page, stops_page
from tracer.reads.matrix import policy_matrix
from tracer.tokens import token_create, token_revoke

BENCH = Path(__file__).resolve().parents[5] / "shared" / "bench"


@functools.cache
def shared_bench(name: str):
    """A module of the shared benchmark (../shared/bench), which is no package.

    Only the tests that send the benchmark's spans need it: in a clone with no shared/ beside it they
    skip (CI lays shared/ beside the checkout, so they run there); every other test here still runs.
    """
    path = BENCH / f"{name}.py"
    if not path.is_file():
        pytest.skip(f"needs the shared benchmark's {name}.py, which is not beside this checkout ({BENCH})")
    spec = importlib.util.spec_from_file_location(f"shared_bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pytestmark = pytest.mark.django_db

URL = "/v1/traces"
PB = "application/x-protobuf"
SCOPE = InstrumentationScope("tests", "1")


# --- helpers -------------------------------------------------------------------------------------


def importer(username: str):
    """A user who may add runs (the import permission, as the upload page and the API ask)."""
    user = get_user_model().objects.create_user(username=username)
    user.user_permissions.add(Permission.objects.get(codename="add_run", content_type__app_label="tracer"))
    return user


@pytest.fixture
def sender():
    user = importer("agent-team")
    token, secret = token_create(user=user, name="ci agent")
    return user, token, secret


def post(client, secret: str | None, body: bytes, *, content_type: str = PB, gzipped: bool = False):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {secret}"} if secret else {}
    if gzipped:
        body = gzip.compress(body)
        headers["HTTP_CONTENT_ENCODING"] = "gzip"
    return client.post(URL, data=body, content_type=content_type, **headers)


def pb_body(spans: list[ReadableSpan]) -> bytes:
    return encode_spans(spans).SerializeToString()


def json_body(spans: list[ReadableSpan]) -> bytes:
    """OTLP JSON as the specification spells it: hex ids, integer enums, 64-bit integers as strings."""
    data = json_format.MessageToDict(encode_spans(spans), use_integers_for_enums=True)

    def hex_ids(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
                    node[key] = base64.b64decode(value).hex()
                else:
                    hex_ids(value)
        elif isinstance(node, list):
            for item in node:
                hex_ids(item)

    hex_ids(data)
    return json.dumps(data).encode()


def answer(response) -> trace_service_pb2.ExportTraceServiceResponse:
    assert response["Content-Type"] == PB
    return trace_service_pb2.ExportTraceServiceResponse.FromString(response.content)


def refusal(response) -> tuple[str, list[tuple[str, str]]]:
    """The message of a ``google.rpc.Status`` answer and its field violations (path, description)."""
    if response["Content-Type"] == PB:
        status = status_pb2.Status.FromString(response.content)
        violations = []
        for detail in status.details:
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            violations += [(v.field, v.description) for v in bad.field_violations]
        return status.message, violations
    data = json.loads(response.content)
    violations = [(v["field"], v["description"]) for d in data.get("details", []) for v in d["fieldViolations"]]
    return data["message"], violations


def bench_runs(n: int = 40) -> list[dict]:
    return list(shared_bench("workload").generate(n, 20240601))


def bench_spans(run: dict, resource: Resource | None = None) -> list[ReadableSpan]:
    otel_spans = shared_bench("otel_spans")  # the workload's runs as OpenInference spans
    return otel_spans.run_to_spans(run, resource or Resource({"service.name": "peers-bench"}), 0)


def expected(run: dict) -> dict:
    """What the workload says the run is, in this project's terms: a step per tool call, plus the answer."""
    tools = [s for s in run["steps"] if s["kind"] == "tool_call"]
    return {
        "steps": len(tools) + (run["stop_reason"] == "final_answer"),
        "tool_calls": len(tools),
        "errors": sum(s["is_error"] for s in tools),
        "stop_reason": run["stop_reason"],
        "final_answer": run["final_answer"] or "",
        "input_tokens": run["tokens_in"],
        "output_tokens": run["tokens_out"],
        "scenario": run["scenario"],
        "policy": run["policy"],
    }


def recorded(run: Run) -> dict:
    run.refresh_from_db()
    return {
        "steps": run.step_count,
        "tool_calls": run.tool_call_count,
        "errors": run.error_count,
        "stop_reason": run.stop_reason,
        "final_answer": run.final_answer,
        "input_tokens": run.input_tokens,
        "output_tokens": run.output_tokens,
        "scenario": run.scenario,
        "policy": run.policy_name,
    }


def steps_of(run: Run) -> list[dict]:
    return [schema.step_dict(s) for s in run.steps.order_by("index")]


class Tracer:
    """Hand-made spans of one trace, with ids and times of our choosing."""

    def __init__(self, trace_id: int = 0x5EED, resource: dict | None = None) -> None:
        self.trace_id = trace_id
        self.resource = Resource(resource or {"service.name": "hand-made"})
        self.next_id = 1
        self.t = 1_750_000_000_000_000_000

    def ctx(self, span_id: int) -> SpanContext:
        return SpanContext(self.trace_id, span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))

    def span(self, name, attrs, *, parent=None, error: str | None = None, events=(), duration_ms=10, span_id=None):
        span_id = span_id or self.next_id
        self.next_id += 1
        start = self.t
        self.t += duration_ms * 1_000_000
        status = Status(StatusCode.ERROR, error) if error is not None else Status(StatusCode.OK)
        return ReadableSpan(
            name=name,
            context=self.ctx(span_id),
            parent=self.ctx(parent) if parent else None,
            resource=self.resource,
            attributes=attrs,
            events=events,
            kind=SpanKind.INTERNAL,
            status=status,
            start_time=start,
            end_time=self.t,
            instrumentation_scope=SCOPE,
        )


def the_run(user) -> Run:
    return Run.objects.get(source=Run.Source.OTLP, owner=user)


# --- the shared benchmark's spans --------------------------------------------------------------


def test_bench_spans_record_each_run_as_the_workload_describes_it(client, sender):
    user, _, secret = sender
    runs = bench_runs(60)
    # every stop reason under both policies
    chosen = []
    for policy in ("starter", "structured"):
        for stop in ("final_answer", "consecutive_errors", "max_steps"):
            chosen.append(next(r for r in runs if r["policy"] == policy and r["stop_reason"] == stop))
    body = pb_body([span for run in chosen for span in bench_spans(run)])
    response = post(client, secret, body)
    assert response.status_code == 200
    assert not answer(response).HasField("partial_success")
    for run in chosen:
        row = Run.objects.get(source=Run.Source.OTLP, owner=user, external_id=run["trace_id"])
        assert recorded(row) == expected(run), run["run_id"]
        assert row.status == Run.Status.FINISHED
        assert row.is_imported and row.source_detail == "peers-bench"
        assert row.verdict == ""  # the sender gave none
        errors = [s for s in run["steps"] if s["kind"] == "tool_call" and s["is_error"]]
        failed = list(row.steps.filter(is_error=True).order_by("index"))
        assert [s.result_content for s in failed] == [s["error"] for s in errors]
        assert [s.category for s in failed] == [s["error_category"] for s in errors]
    # the guard stops are in the stop queue, the others not
    queued = set(stops_page.stop_queue().filter(owner=user).values_list("external_id", flat=True))
    assert queued == {r["trace_id"] for r in chosen if r["stop_reason"] != "final_answer"}


def test_json_and_gzip_bodies_record_the_same_run_as_protobuf(client):
    run = bench_runs(2)[0]
    spans = bench_spans(run)
    results = []
    for n, (body, content_type, gzipped) in enumerate(
        [
            (pb_body(spans), PB, False),
            (json_body(spans), "application/json", False),
            (pb_body(spans), PB, True),
            (json_body(spans), "application/json", True),
        ]
    ):
        user = importer(f"sender{n}")
        _, secret = token_create(user=user, name="t")
        response = post(client, secret, body, content_type=content_type, gzipped=gzipped)
        assert response.status_code == 200, response.content
        assert response["Content-Type"] == content_type
        row = the_run(user)
        results.append((recorded(row), steps_of(row)))
    assert recorded(the_run(user)) == expected(run)
    assert all(r == results[0] for r in results)


def test_spans_split_over_requests_in_shuffled_order_give_the_same_run_as_one_request(client):
    run, other = bench_runs(6)[4:6]
    spans = bench_spans(run)
    one = importer("one")
    _, one_secret = token_create(user=one, name="t")
    # two new traces in one request are written together (the batch path); the split ones one by one
    assert post(client, one_secret, pb_body(spans + bench_spans(other))).status_code == 200
    one_run = Run.objects.get(owner=one, external_id=run["trace_id"])

    for seed in (1, 2, 3):
        split = importer(f"split{seed}")
        _, secret = token_create(user=split, name="t")
        shuffled = spans[:]
        random.Random(seed).shuffle(shuffled)  # the root span may come first, last or between
        for k in range(0, len(shuffled), 3):
            response = post(client, secret, pb_body(shuffled[k : k + 3]))
            assert response.status_code == 200
            assert not answer(response).HasField("partial_success")
        assert recorded(the_run(split)) == recorded(one_run) == expected(run)
        assert steps_of(the_run(split)) == steps_of(one_run)
        assert export_document.run_meta_out(the_run(split)) == export_document.run_meta_out(one_run)
        assert the_run(split).search_text == one_run.search_text
        assert the_run(split).status == Run.Status.FINISHED
    # spans sent again change nothing
    assert post(client, one_secret, pb_body(spans)).status_code == 200
    assert Run.objects.filter(owner=one).count() == 2
    assert recorded(one_run) == expected(run)


def test_a_live_run_shows_its_steps_before_its_root_span_arrives(client, sender, admin_client):
    user, _, secret = sender
    run = next(r for r in bench_runs(10) if r["stop_reason"] == "final_answer")
    root, *children = bench_spans(run)
    half = len(children) // 2
    assert post(client, secret, pb_body(children[:half])).status_code == 200
    row = the_run(user)
    assert row.status == Run.Status.RUNNING and row.stop_reason == ""
    written = row.step_count
    assert written >= 1
    page = admin_client.get(reverse("tracer:run", args=[row.pk]))
    assert page.status_code == 200
    first_tool = next(s for s in run["steps"] if s["kind"] == "tool_call")
    assert first_tool["tool_name"] in page.content.decode()
    # the live fragment hands over only the steps after the ones the page has
    fragment = admin_client.get(
        reverse("tracer:run-steps", args=[row.pk]) + f"?after={written}", headers={"HX-Request": "true"}
    )
    assert fragment.status_code == 200
    assert post(client, secret, pb_body(children[half:])).status_code == 200
    row.refresh_from_db()
    assert row.status == Run.Status.RUNNING and row.step_count > written
    assert post(client, secret, pb_body([root])).status_code == 200
    assert recorded(row) == expected(run)
    assert row.status == Run.Status.FINISHED and row.finished_at is not None


def test_a_trace_split_over_requests_keeps_the_steps_it_had_and_rewrites_only_what_changed(client, sender):
    user, _, secret = sender
    run = next(r for r in bench_runs(20) if r["stop_reason"] == "final_answer" and len(r["steps"]) >= 12)
    root, *children = bench_spans(run)
    half = len(children) // 2
    assert post(client, secret, pb_body(children[:half])).status_code == 200
    row = the_run(user)
    first = {s.index: (s.pk, schema.step_dict(s)) for s in row.steps.all()}
    assert len(first) >= 3
    assert post(client, secret, pb_body([*children[half:], root])).status_code == 200
    after = list(the_run(user).steps.order_by("index"))
    # the same run as from one request, in the same rows where a step did not change: a live page
    # that shows the first steps shows them as they stay
    whole = importer("whole")
    _, whole_secret = token_create(user=whole, name="t")
    assert post(client, whole_secret, pb_body([root, *children])).status_code == 200
    assert [schema.step_dict(s) for s in after] == steps_of(the_run(whole))
    assert recorded(the_run(user)) == recorded(the_run(whole)) == expected(run)
    assert the_run(user).search_text == the_run(whole).search_text
    kept = [s.index for s in after if first.get(s.index, (None,))[0] == s.pk]
    unchanged = [i for i, (_, written) in first.items() if written == schema.step_dict(after[i - 1])]
    assert kept == list(range(1, len(kept) + 1))  # the steps before the first that changed
    assert kept == unchanged[: len(kept)] and len(kept) >= len(first) - 1


@pytest.mark.django_db(transaction=True)  # each trace's own transaction, not one of the test's savepoints
def test_receiving_takes_the_same_statements_whatever_the_steps_and_no_savepoint(client, sender, monkeypatch):
    """New traces are written together in a fixed number of statements per request, and a trace sent
    again in a fixed number per trace, however many spans and steps: multi-row writes in one
    transaction, without a savepoint inside it. (Diagnosing the runs that ended, once per request,
    has a test of its own in test_findings_stored.py; it is left out here.)"""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tracer import diagnosis

    monkeypatch.setattr(diagnosis, "runs_diagnose_safely", lambda **runs: None)

    user, _, secret = sender
    runs = sorted((r for r in bench_runs(60) if r["stop_reason"] == "final_answer"), key=lambda r: len(r["steps"]))
    shortest, longest = runs[:2], runs[-8:]
    assert sum(len(r["steps"]) for r in longest[1:3]) > 3 * sum(len(r["steps"]) for r in shortest)
    assert post(client, secret, pb_body(bench_spans(runs[2]))).status_code == 200  # the token marked used
    counts = []
    for chosen in (shortest, longest[:1], longest[1:3], longest[3:]):
        spans = [bench_spans(r) for r in chosen]
        with CaptureQueriesContext(connection) as new:  # every span but the root: new traces, running runs
            assert post(client, secret, pb_body([s for trace in spans for s in trace[1:]])).status_code == 200
        with CaptureQueriesContext(connection) as again:  # the roots: each run written again, and ended
            assert post(client, secret, pb_body([trace[0] for trace in spans])).status_code == 200
        statements = [q["sql"] for q in new.captured_queries + again.captured_queries]
        assert not [sql for sql in statements if "SAVEPOINT" in sql.upper()]
        counts.append((len(new.captured_queries), len(again.captured_queries)))
    (short_new, short_again), (_, one_again), (two_new, two_again), (five_new, five_again) = counts
    assert short_new == two_new == five_new  # 2 short, 2 long or 5 long new traces: the same statements
    assert short_again == two_again  # 2 traces sent again: the same, whatever their steps
    per_trace = two_again - one_again
    assert 0 < per_trace <= 10 and five_again == two_again + 3 * per_trace  # its spans stored, its run written
    assert Run.objects.filter(owner=user, status=Run.Status.FINISHED).count() == 11


def exported_while_the_writer_is_held(url: str, settings, *, username: str, runs: list[dict], batches: int) -> None:
    """Export ``runs``' spans to the server at ``url`` in ``batches`` batches (each one the receiver
    answers first) while its writer is held (``RLT_TEST_HOLD_FILE``): every batch is answered with
    all its spans stored and committed (read here on another connection) and no run yet. Then let go,
    every run is written as the workload describes it."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    from tests.conftest import ARTIFACTS, wait_until
    from tracer.intake.otlp.views import ANSWER_FIRST_SPANS, write_behind

    ARTIFACTS.mkdir(exist_ok=True)
    hold = ARTIFACTS / f"otlp-hold-{random.randrange(10**9)}"
    hold.touch()
    settings.RLT_TEST_HOLD_FILE = str(hold)
    user = importer(username)
    _, secret = token_create(user=user, name="t")
    size = -(-len(runs) // batches)
    parts = [[span for run in runs[k : k + size] for span in bench_spans(run)] for k in range(0, len(runs), size)]
    assert len(parts) == batches and min(map(len, parts)) >= ANSWER_FIRST_SPANS
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers={"Authorization": f"Bearer {secret}"}, timeout=30)
    try:
        for n, spans in enumerate(parts, 1):
            assert exporter.export(spans) == SpanExportResult.SUCCESS, f"batch {n} not answered"
            stored = OtlpTrace.objects.filter(owner=user).aggregate(n=Sum("span_count"))["n"]
            assert stored == sum(map(len, parts[:n]))
            assert not Run.objects.filter(owner=user).exists()
    finally:
        hold.unlink()
        exporter.shutdown()
    wait_until(
        lambda: Run.objects.filter(owner=user, status=Run.Status.FINISHED).count() == len(runs),
        timeout=30,
        what="the runs written after the answers",
    )
    for run in runs:
        assert recorded(Run.objects.get(owner=user, external_id=run["trace_id"])) == expected(run)
    write_behind.join(timeout=10)  # its connection closed before the test database goes


def test_a_batch_is_answered_once_its_spans_are_stored_and_its_runs_are_written_right_after(live_server, settings):
    """A batch exporter's request is answered before its runs are written: the exporter makes its next
    batch meanwhile. Against a real server, whose writer is held until the answer has arrived."""
    exported_while_the_writer_is_held(
        live_server.url, settings, username="batch-exporter", runs=bench_runs(12), batches=1
    )


def test_a_threaded_server_takes_the_next_batch_while_the_last_ones_runs_are_still_being_written(live_server, settings):
    """Under a threaded server a batch's runs are written by the process's writer thread, so the
    exporter's connection takes its next batch at once instead of waiting for them (the exporter
    would time out, its first batch's runs held): both batches are answered, then every run written."""
    exported_while_the_writer_is_held(live_server.url, settings, username="two-batches", runs=bench_runs(24), batches=2)


def test_runs_answered_but_not_written_when_the_process_died_are_written_by_the_sweep(client, sender, monkeypatch):
    """Nothing is lost if the process dies after the answer: the spans were committed before it, and
    the trace remembers its run is behind them (``OtlpTrace.recorded_spans``), for the sweep."""
    from datetime import timedelta

    from django.utils import timezone

    from tracer.execution import runs_sweep
    from tracer.intake.otlp import views

    user, _, secret = sender
    runs = bench_runs(12)
    spans = [span for run in runs for span in bench_spans(run)]
    assert len(spans) >= views.ANSWER_FIRST_SPANS
    monkeypatch.setattr(views, "_runs_write_after", lambda receipt, user: None)  # died right after answering
    response = post(client, secret, pb_body(spans))
    assert response.status_code == 200 and not answer(response).HasField("partial_success")
    monkeypatch.undo()
    assert not Run.objects.filter(owner=user).exists()
    assert runs_sweep().otlp_written == 0  # a writer may still be at it: the sweep leaves it a while
    later = timezone.now() + timedelta(minutes=1)
    assert runs_sweep(now=later).otlp_written == len(runs)
    for run in runs:
        assert recorded(Run.objects.get(owner=user, external_id=run["trace_id"])) == expected(run)
    assert runs_sweep(now=later).otlp_written == 0  # each written once
    # the exporter sending the same batch again (it never got the answer) changes nothing either
    assert post(client, secret, pb_body(spans)).status_code == 200
    assert Run.objects.filter(owner=user).count() == len(runs)


def test_a_request_that_died_before_writing_is_made_good_by_its_spans_sent_again(client, sender, monkeypatch):
    from tracer.intake.otlp import views

    user, _, secret = sender
    runs = bench_runs(12)
    spans = [span for run in runs for span in bench_spans(run)]
    monkeypatch.setattr(views, "_runs_write_after", lambda receipt, user: None)
    assert post(client, secret, pb_body(spans)).status_code == 200
    monkeypatch.undo()
    assert not Run.objects.filter(owner=user).exists()
    assert post(client, secret, pb_body(spans)).status_code == 200  # sent again: every run written now
    for run in runs:
        assert recorded(Run.objects.get(owner=user, external_id=run["trace_id"])) == expected(run)


def test_a_run_written_late_from_fewer_spans_does_not_undo_a_later_write(sender):
    """Two requests of one trace, the later one's run written first (another server process was
    quicker): the earlier, with fewer spans, arrives late and changes nothing."""
    from tracer.intake.otlp import receiver, wire

    user, _, _ = sender
    run = next(r for r in bench_runs(10) if r["stop_reason"] == "final_answer")
    root, *children = bench_spans(run)
    decoded = [wire.decode(pb_body(part), kind=wire.PROTOBUF).spans for part in (children[:3], [*children[3:], root])]
    first = receiver.spans_store(spans=decoded[0], user=user)
    second = receiver.spans_store(spans=decoded[1], user=user)
    assert not receiver.traces_record(unrecorded=second.unrecorded, user=user)
    whole = the_run(user)
    assert recorded(whole) == expected(run) and whole.status == Run.Status.FINISHED
    assert not receiver.traces_record(unrecorded=first.unrecorded, user=user)  # late: left as it is
    assert recorded(the_run(user)) == expected(run) and the_run(user).status == Run.Status.FINISHED
    assert steps_of(the_run(user)) == steps_of(whole)


def test_a_trace_whose_spans_stop_coming_ends_interrupted_and_a_late_span_writes_it_again(client, sender, settings):
    from datetime import timedelta

    from django.utils import timezone

    from tracer.execution import runs_sweep

    settings.RLT_OUTSIDE_IDLE_S = 600
    user, _, secret = sender
    run = next(r for r in bench_runs(10) if r["stop_reason"] == "final_answer")
    root, *children = bench_spans(run)
    assert post(client, secret, pb_body(children[:2])).status_code == 200
    row = the_run(user)
    assert runs_sweep(now=timezone.now() + timedelta(seconds=590)).idle_outside_ended == 0
    assert runs_sweep(now=timezone.now() + timedelta(seconds=610)).idle_outside_ended == 1
    row.refresh_from_db()
    assert (row.status, row.stop_reason) == (Run.Status.FINISHED, Run.StopReason.INTERRUPTED)
    assert "no step or span of this run arrived for 10 min" in row.error
    # the agent was only slow: the rest of its spans arrive, and the run is written again from all of them
    response = post(client, secret, pb_body([*children[2:], root]))
    assert response.status_code == 200 and not answer(response).HasField("partial_success")
    again = the_run(user)
    assert again.pk == row.pk
    assert recorded(again) == expected(run)
    assert (again.status, again.stop_reason, again.error) == (Run.Status.FINISHED, "final_answer", "")


def test_the_import_permission_is_asked_again_with_every_request(client, sender):
    user, _, secret = sender
    run = next(r for r in bench_runs(10) if r["stop_reason"] == "final_answer")
    root, *children = bench_spans(run)
    assert post(client, secret, pb_body(children[:2])).status_code == 200
    written = the_run(user).step_count
    user.user_permissions.clear()  # an administrator takes the permission away between two exports
    response = post(client, secret, pb_body(children[2:]))
    assert response.status_code == 403 and "tracer.add_run" in refusal(response)[0]
    assert the_run(user).step_count == written and OtlpTrace.objects.get(owner=user).span_count == 2
    user.user_permissions.add(Permission.objects.get(codename="add_run", content_type__app_label="tracer"))
    assert post(client, secret, pb_body([*children[2:], root])).status_code == 200
    assert recorded(the_run(user)) == expected(run)


def test_bench_pairs_compare_and_aggregate_like_built_in_runs(client, sender, admin_client):
    user, _, secret = sender
    runs = bench_runs(8)
    assert post(client, secret, pb_body([s for r in runs for s in bench_spans(r)])).status_code == 200
    starter, structured = runs[2], runs[3]
    assert starter["pair_id"] == structured["pair_id"]
    a = Run.objects.get(owner=user, external_id=starter["trace_id"])
    b = Run.objects.get(owner=user, external_id=structured["trace_id"])
    comparison = compare_page.run_compare(a_id=a.pk, b_id=b.pk)
    shared_tools = sum(1 for s in starter["steps"][: starter["diverged_at_step"]] if s["kind"] == "tool_call")
    assert comparison.divergence.split is not None
    assert comparison.divergence.split.row >= shared_tools  # the steps before the split are the same
    assert admin_client.get(reverse("tracer:compare") + f"?a={a.pk}&b={b.pk}").status_code == 200
    matrix = policy_matrix()
    cell = next(c for row in matrix.rows if row.scenario == starter["scenario"] for c in row.cells if c)
    assert cell.runs == 1


# --- the two conventions, hand-made ----------------------------------------------------------------


def test_openinference_tool_spans_make_steps_with_errors_and_the_final_answer(client, sender):
    user, _, secret = sender
    tr = Tracer(resource={"service.name": "refund-bot", "rlt.scenario": "refund-too-old", "rlt.policy": "mine"})
    root = 100
    llm = "llm.output_messages.0.message."
    spans = [
        tr.span(
            "llm",
            {
                "openinference.span.kind": "LLM",
                "llm.model_name": "claude-haiku-4-5",
                "llm.token_count.prompt": 120,
                "llm.token_count.completion": 30,
                f"{llm}role": "assistant",
                f"{llm}content": "Let me refund that.",
                f"{llm}tool_calls.0.tool_call.id": "toolu_1",
                f"{llm}tool_calls.0.tool_call.function.name": "process_refund",
                f"{llm}tool_calls.0.tool_call.function.arguments": '{"order_id": "0871"}',
            },
            parent=root,
        ),
        tr.span(
            "process_refund",
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "process_refund",
                "input.value": '{"order_id": "0871"}',
                "input.mime_type": "application/json",
                "output.value": '{"isError": true, "errorCategory": "business", "isRetryable": false, '
                '"message": "Refunds close after 30 days."}',
                "output.mime_type": "application/json",
            },
            parent=root,
            error="Refunds close after 30 days.",
            events=(
                Event(
                    "exception",
                    {"exception.type": "BusinessRuleViolation", "exception.message": "Refunds close after 30 days."},
                ),
            ),
        ),
        tr.span(
            "llm",
            {
                "openinference.span.kind": "LLM",
                "llm.token_count.prompt": 200,
                "llm.token_count.completion": 40,
                f"{llm}role": "assistant",
                f"{llm}contents.0.message_content.type": "text",
                f"{llm}contents.0.message_content.text": "I can't refund order 0871: it is 239 days old.",
            },
            parent=root,
        ),
    ]
    spans.append(
        tr.span(
            "agent",
            {"openinference.span.kind": "AGENT", "input.value": "Refund order 0871.", "rlt.verdict": "pass"},
            span_id=root,
        )
    )
    assert post(client, secret, pb_body(spans)).status_code == 200
    run = the_run(user)
    tool, final = run.steps.order_by("index")
    assert (tool.tool_name, tool.tool_use_id, tool.input) == ("process_refund", "toolu_1", {"order_id": "0871"})
    assert tool.is_error and tool.category == "business" and tool.retryable is False
    assert (tool.input_tokens, tool.output_tokens, tool.text) == (120, 30, "Let me refund that.")
    assert final.kind == Step.Kind.FINAL_ANSWER and (final.input_tokens, final.output_tokens) == (200, 40)
    assert run.final_answer == "I can't refund order 0871: it is 239 days old."
    assert (run.scenario, run.policy_name, run.task) == ("refund-too-old", "mine", "Refund order 0871.")
    assert run.stop_reason == "final_answer" and run.verdict == "pass"
    assert run.model_name == "claude-haiku-4-5" and run.model_backend == "imported"
    # its scenario key puts it in the matrix row of the built-in scenario, its label in a column
    RunFactory(scenario="refund-too-old", policy_name="structured")
    row = next(r for r in policy_matrix().rows if r.scenario == "refund-too-old")
    cells = {c.policy: c for c in row.cells if c}
    assert (cells["mine"].runs, cells["mine"].imported, cells["mine"].passes) == (1, 1, 1)
    assert (cells["structured"].runs, cells["structured"].imported) == (1, 0)


def test_genai_spans_read_tool_calls_retries_by_call_id_and_a_named_stop(client, sender):
    user, _, secret = sender
    tr = Tracer(resource={"service.name": "lookup-agent"})
    root = 100

    def chat(tokens, parts):
        return tr.span(
            "chat claude",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "claude-sonnet-4-5",
                "gen_ai.usage.input_tokens": tokens[0],
                "gen_ai.usage.output_tokens": tokens[1],
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}]),
            },
            parent=root,
        )

    def tool(call_id, result, error=None):
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": '{"key": "A-1"}',
            "gen_ai.tool.call.result": result,
        }
        if error:
            attrs["error.type"] = "TimeoutError"
            attrs["rlt.error.category"] = "transient"
            attrs["rlt.error.retryable"] = True
        return tr.span("execute_tool lookup", attrs, parent=root, error=error)

    spans = [
        chat((50, 10), [{"type": "tool_call", "id": "call_1", "name": "lookup", "arguments": {"key": "A-1"}}]),
        tool("call_1", "timed out", error="lookup timed out"),
        tool("call_1", "timed out", error="lookup timed out"),
        tool("call_1", "timed out", error="lookup timed out"),
        chat((80, 12), [{"type": "tool_call", "id": "call_2", "name": "lookup", "arguments": {"key": "A-1"}}]),
        tool("call_2", "timed out", error="lookup timed out"),
    ]
    spans.append(
        tr.span(
            "invoke_agent",
            {
                "gen_ai.operation.name": "invoke_agent",
                "rlt.scenario": "lookup-flaky-exhausted",
                "rlt.policy": "structured",
                "rlt.stop_reason": "consecutive_errors",
                "rlt.guard": "2 tool errors in a row",
            },
            span_id=root,
            error="consecutive_errors",
        )
    )
    assert post(client, secret, json_body(spans), content_type="application/json").status_code == 200
    run = the_run(user)
    first, second = run.steps.order_by("index")
    assert first.retry_count == 2 and [a["ok"] for a in first.attempts] == [False, False, False]
    assert first.is_error and first.category == "transient" and first.retryable is True
    assert first.tool_use_id == "call_1" and first.input == {"key": "A-1"}
    assert (first.input_tokens, second.input_tokens) == (50, 80)
    assert run.retry_count == 2 and run.error_count == 2 and run.tool_call_count == 2
    assert (run.stop_reason, run.guard, run.final_answer) == ("consecutive_errors", "2 tool errors in a row", "")
    assert (run.scenario, run.policy_name, run.source_detail) == (
        "lookup-flaky-exhausted",
        "structured",
        "lookup-agent",
    )
    assert run.verdict == ""


def test_llm_only_trace_reads_is_error_repeats_and_the_final_answer_from_input_value(client, sender):
    """An agent whose tools are not instrumented: the instrumentation flattens tool results into
    llm.input_messages and drops is_error there; input.value keeps the request as sent."""
    user, _, secret = sender
    tr = Tracer(resource={"service.name": "uninstrumented-tools"})
    root = 100
    task = {"role": "user", "content": "Refund order 0871."}
    use = {"type": "tool_use", "id": "toolu_1", "name": "process_refund", "input": {"order_id": "0871"}}
    use_again = dict(use, id="toolu_2")
    error = {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True, "content": "Error"}
    error_again = dict(error, tool_use_id="toolu_2")
    answer_text = "I could not refund order 0871."
    turns = [
        ([task], [use], (100, 20)),
        ([task, {"role": "assistant", "content": [use]}, {"role": "user", "content": [error]}], [use_again], (150, 20)),
        (
            [
                task,
                {"role": "assistant", "content": [use]},
                {"role": "user", "content": [error]},
                {"role": "assistant", "content": [use_again]},
                {"role": "user", "content": [error_again]},
            ],
            [{"type": "text", "text": answer_text}],
            (200, 30),
        ),
    ]
    spans = []
    for messages, content, (tin, tout) in turns:
        attrs = {
            "openinference.span.kind": "LLM",
            "llm.model_name": "claude-haiku-4-5",
            "input.value": json.dumps({"model": "claude-haiku-4-5", "max_tokens": 1024, "messages": messages}),
            "input.mime_type": "application/json",
            "output.value": json.dumps(
                {
                    "id": "msg",
                    "type": "message",
                    "role": "assistant",
                    "content": content,
                    "model": "claude-haiku-4-5",
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": tin, "output_tokens": tout},
                }
            ),
            "output.mime_type": "application/json",
            "llm.token_count.prompt": tin,
            "llm.token_count.completion": tout,
        }
        for i, m in enumerate(messages):  # the flattened form, without is_error
            attrs[f"llm.input_messages.{i}.message.role"] = m["role"]
        spans.append(tr.span("Messages", attrs, parent=root))
    spans.append(tr.span("agent", {"openinference.span.kind": "AGENT"}, span_id=root))
    assert post(client, secret, pb_body(spans)).status_code == 200
    run = the_run(user)
    tool, again, final = run.steps.order_by("index")
    assert tool.tool_name == "process_refund" and tool.is_error and tool.result_content == "Error"
    # the model repeated the failed call: a step of its own, marked as a repeat of the first
    assert (again.tool_name, again.is_error, again.repeat_of, again.retry_count) == ("process_refund", True, 1, 0)
    assert (tool.input_tokens, again.input_tokens, final.input_tokens) == (100, 150, 200)
    assert run.final_answer == answer_text and run.stop_reason == "final_answer"
    assert run.error_count == 2 and run.retry_count == 0 and run.failed_attempt_count == 2
    assert run.task == "Refund order 0871."


# --- bad input -----------------------------------------------------------------------------------


def test_a_request_without_an_active_token_is_401_and_without_the_import_permission_403(client, sender):
    user, token, secret = sender
    body = pb_body(bench_spans(bench_runs(1)[0]))
    response = post(client, None, body)
    assert response.status_code == 401 and "Bearer" in response["WWW-Authenticate"]
    assert "token" in refusal(response)[0]
    assert post(client, "rlt_not-a-real-token", body).status_code == 401
    token_revoke(user=user, token_id=token.pk)
    assert post(client, secret, body).status_code == 401
    # a reader's token: it may read, not add runs everyone sees
    reader = get_user_model().objects.create_user(username="reader")
    _, reader_secret = token_create(user=reader, name="t")
    response = post(client, reader_secret, body)
    assert response.status_code == 403 and "tracer.add_run" in refusal(response)[0]
    assert not Run.objects.filter(source=Run.Source.OTLP).exists()


def test_malformed_bodies_are_400_naming_the_field_and_what_was_expected(client, sender):
    _, _, secret = sender
    response = post(client, secret, b"\x0a\xff\xff\xff\xff")
    assert response.status_code == 400
    message, _ = refusal(response)
    assert "ExportTraceServiceRequest in protobuf" in message

    response = post(client, secret, b"{not json", content_type="application/json")
    assert response.status_code == 400 and "invalid JSON" in refusal(response)[0]

    good = json.loads(json_body(bench_spans(bench_runs(1)[0])))
    cases = [
        (("attributes", 0, "value"), {"intValue": "twelve"}, "attributes[0].value.intValue", "an integer"),
        (("name",), 5, ".name", "a string"),
        (("traceId",), 7, ".traceId", "a string"),  # a string that is no id is that span's refusal alone
        (("startTimeUnixNano",), "yesterday", ".startTimeUnixNano", "an integer"),
        (("status",), [], ".status", "an object"),
    ]
    for where, value, path_end, expected in cases:
        bad = json.loads(json.dumps(good))
        node = bad["resourceSpans"][0]["scopeSpans"][0]["spans"][2]
        for key in where[:-1]:
            node = node[key]
        node[where[-1]] = value
        response = post(client, secret, json.dumps(bad).encode(), content_type="application/json")
        assert response.status_code == 400
        message, violations = refusal(response)
        path = violations[0][0]
        assert path.startswith("resourceSpans[0].scopeSpans[0].spans[2]") and path.endswith(path_end), path
        assert f"expected {expected}" in message
    assert not Run.objects.filter(source=Run.Source.OTLP).exists()  # nothing half-written

    response = post(client, secret, b"hello", content_type="text/plain")
    assert response.status_code == 415
    chunked = {"CONTENT_LENGTH": "", "HTTP_TRANSFER_ENCODING": "chunked", "HTTP_AUTHORIZATION": f"Bearer {secret}"}
    response = client.post(URL, data=b"\x0a\x00", content_type=PB, **chunked)
    assert response.status_code == 411 and "Content-Length" in refusal(response)[0]
    response = client.post(
        URL, data=b"not gzip", content_type=PB, HTTP_AUTHORIZATION=f"Bearer {secret}", HTTP_CONTENT_ENCODING="gzip"
    )
    assert response.status_code == 400 and "gzip" in refusal(response)[0]


def test_without_a_policy_label_a_traces_run_takes_its_services_name_as_its_policy(client, sender):
    """docs/otlp.md "Labels": rlt.policy, else the root's metadata.policy, else service.name."""
    user, _, secret = sender
    for n, (resource, root_attrs, policy) in enumerate(
        [
            ({"service.name": "refund-bot"}, {}, "refund-bot"),
            ({"service.name": "refund-bot"}, {"metadata": '{"policy": "from-metadata"}'}, "from-metadata"),
            ({"service.name": "refund-bot", "rlt.policy": "labelled"}, {}, "labelled"),
        ]
    ):
        tr = Tracer(trace_id=0xB0B0 + n, resource=resource)
        root = tr.span("agent", {"openinference.span.kind": "AGENT", **root_attrs}, span_id=100)
        answer = tr.span(
            "llm", {"openinference.span.kind": "LLM", "llm.output_messages.0.message.content": "ok"}, parent=100
        )
        assert post(client, secret, pb_body([answer, root])).status_code == 200
        run = Run.objects.get(owner=user, external_id=f"{0xB0B0 + n:032x}")
        assert (run.policy_name, run.source_detail) == (policy, "refund-bot")


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_a_double_that_is_not_a_number_is_kept_as_null_and_the_run_is_written_all_the_same(client, encoding):
    """OTLP doubles may be NaN or infinite (protobuf JSON spells them "NaN", "Infinity"); JSON, which
    runs and stored spans are written as, has no such number: they are kept as null (a run holding
    one could not be written before), and reading the trace again from storage (a late span) gives
    the same labels."""
    user = importer(f"nan-{encoding}")
    _, secret = token_create(user=user, name="t")
    tr = Tracer(resource={"service.name": "odd-numbers", "rlt.policy": "p"})
    root = tr.span(
        "agent",
        {"openinference.span.kind": "AGENT", "rlt.score": float("nan"), "rlt.ratio": float("inf"), "rlt.ok": 0.5},
        span_id=100,
    )
    answer = tr.span(
        "llm",
        {"openinference.span.kind": "LLM", "llm.output_messages.0.message.content": "Done.", "rlt.cost": -float("inf")},
        parent=100,
    )
    encode, kind = (pb_body, PB) if encoding == "protobuf" else (json_body, "application/json")
    response = post(client, secret, encode([answer, root]), content_type=kind)
    assert response.status_code == 200 and not answer_of(response, kind), response.content
    run = the_run(user)
    assert run.status == Run.Status.FINISHED and run.final_answer == "Done."
    # a null label says nothing: left out, as any attribute without a value
    assert {k: run.labels.get(k, "absent") for k in ("rlt.score", "rlt.ratio", "rlt.ok")} == {
        "rlt.score": "absent",
        "rlt.ratio": "absent",
        "rlt.ok": 0.5,
    }
    late = tr.span("retriever", {"openinference.span.kind": "CHAIN", "input.value": "x"}, parent=100)
    assert post(client, secret, encode([late]), content_type=kind).status_code == 200
    again = the_run(user)
    assert again.pk == run.pk and again.labels == run.labels and again.final_answer == "Done."
    assert OtlpTrace.objects.get(owner=user).recorded_spans == 3  # written again from all three, as stored


def answer_of(response, kind: str):
    """What a 200 answer says besides success: its partial_success, if any."""
    if kind == PB:
        return answer(response).HasField("partial_success")
    return json.loads(response.content)


def test_an_oversized_body_is_413_naming_the_limit(client, sender, settings):
    _, _, secret = sender
    settings.RLT_OTLP_MAX_BYTES = 2000
    body = pb_body(bench_spans(bench_runs(1)[0]))
    assert len(body) > 2000
    response = post(client, secret, body)
    assert response.status_code == 413
    assert "2000 bytes" in refusal(response)[0] and "RLT_OTLP_MAX_BYTES" in refusal(response)[0]
    # a small gzip body that inflates past the limit
    response = post(client, secret, b"\x00" * 50_000, gzipped=True)
    assert response.status_code == 413 and "decompressed" in refusal(response)[0]
    assert not Run.objects.filter(source=Run.Source.OTLP).exists()


def test_spans_with_invalid_ids_are_refused_alone_with_partial_success(client, sender):
    user, _, secret = sender
    runs = bench_runs(2)
    good = json.loads(json_body(bench_spans(runs[0])))
    spans = good["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.append(dict(spans[1], traceId="0" * 32))
    response = post(client, secret, json.dumps(good).encode(), content_type="application/json")
    assert response.status_code == 200
    partial = json.loads(response.content)["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and "all zeros" in partial["errorMessage"]
    assert recorded(the_run(user)) == expected(runs[0])


def test_a_json_span_with_a_wrong_length_or_non_hex_id_is_refused_alone_not_the_request(client, sender):
    user, _, secret = sender
    runs = bench_runs(2)
    good = json.loads(json_body(bench_spans(runs[0])))
    spans = good["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.append(dict(spans[1], traceId="abc123"))  # wrong length
    spans.append(dict(spans[1], spanId="zz" * 8))  # not hex
    response = post(client, secret, json.dumps(good).encode(), content_type="application/json")
    assert response.status_code == 200
    partial = json.loads(response.content)["partialSuccess"]
    assert partial["rejectedSpans"] == "2"
    assert ".traceId: expected 32 hex digits" in partial["errorMessage"]
    assert ".spanId: expected 16 hex digits" in partial["errorMessage"]
    assert recorded(the_run(user)) == expected(runs[0])


def test_a_traces_model_spans_sent_before_its_tool_spans_are_kept_and_read_once_the_rest_arrives(client, sender):
    # An exporter may send a trace's model calls in one request and its tool calls and root in later ones:
    # the model calls alone read as a conversation the receiver cannot pair yet, and refusing them then
    # would lose them for good (exporters count a partial success as sent).
    user, _, secret = sender
    runs = bench_runs(6)
    for run in runs:
        spans = bench_spans(run)
        llm = [s for s in spans if s.attributes.get("openinference.span.kind") == "LLM"]
        rest = [s for s in spans if s not in llm]
        for part in (llm, rest):
            response = post(client, secret, pb_body(part))
            assert response.status_code == 200 and not answer(response).HasField("partial_success"), response.content
    for run in runs:
        stored = Run.objects.get(owner=user, external_id=run["trace_id"])
        assert recorded(stored) == expected(run)
        assert OtlpTrace.objects.get(run=stored).span_count == len(bench_spans(run))


def test_a_whole_trace_the_recorder_refuses_is_rejected_alone(client, sender):
    user, _, secret = sender
    runs = bench_runs(2)
    tr = Tracer()
    root = tr.span("agent", {"openinference.span.kind": "AGENT"}, span_id=7)
    bad = tr.span(
        "llm",
        {
            "openinference.span.kind": "LLM",
            "input.value": json.dumps(
                {
                    "messages": [
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "x"}]}
                    ]
                }
            ),
            "input.mime_type": "application/json",
        },
        parent=7,
    )
    response = post(client, secret, pb_body([*bench_spans(runs[0]), bad, root]))
    partial = answer(response).partial_success
    assert response.status_code == 200 and partial.rejected_spans == 2
    assert "matches no tool_use" in partial.error_message
    assert Run.objects.filter(owner=user).count() == 1


def test_text_from_a_trace_is_escaped_on_the_pages(client, sender, admin_client):
    user, _, secret = sender
    tr = Tracer(resource={"service.name": "<b>svc</b>", "rlt.scenario": "<script>alert(1)</script>"})
    spans = [
        tr.span(
            "<img src=x onerror=alert(2)>",
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "<i>tool</i>",
                "output.value": "<script>alert(3)</script>",
            },
            parent=9,
        ),
        tr.span("root", {"openinference.span.kind": "AGENT", "output.value": "<script>alert(4)</script>"}, span_id=9),
    ]
    assert post(client, secret, pb_body(spans)).status_code == 200
    run = the_run(user)
    for url in (reverse("tracer:run", args=[run.pk]), reverse("tracer:runs")):
        html = admin_client.get(url).content.decode()
        assert "<script>alert" not in html and "<i>tool</i>" not in html and "<b>svc</b>" not in html
        assert "imported · OTLP" in html  # never presented as executed here


# --- export --------------------------------------------------------------------------------------


@pytest.mark.parametrize("cut_off", ["text", "tool_use"])
def test_a_claude_run_the_api_cut_off_keeps_its_stop_reasons_through_otlp(
    client, sender, admin_client, fake_api, settings, cut_off
):
    """The chat span's finish reason is the API's stop_reason; read back, a cut-off turn is again the
    model_stop step that ended the run, not a final answer."""
    from tests.fake_messages_api import truncated_text, truncated_tool_use
    from tracer.execution import run_execute
    from tracer.experiments import run_create

    settings.ANTHROPIC_API_KEY = fake_api.key
    fake_api.script(None if cut_off == "tool_use" else truncated_text("The value st"))
    if cut_off == "tool_use":  # a call that ran, then one cut off
        fake_api.script(truncated_tool_use("process_refund"))
    user, _, secret = sender
    original = run_create(scenario="refund-too-old", policy=PolicyVariant.objects.get(name="structured"))
    original.model_backend = "claude"
    original.save(update_fields=["model_backend"])
    original = run_execute(run_id=original.pk)
    assert original.stop_reason == "max_tokens"
    download = admin_client.get(reverse("tracer:run-otlp", args=[original.pk]))
    assert post(client, secret, download.content, content_type="application/json").status_code == 200
    back = Run.objects.get(source=Run.Source.OTLP, owner=user)
    assert (back.stop_reason, back.api_stop_reason, back.final_answer) == ("max_tokens", "", "")
    assert [(s.kind, s.api_stop_reason) for s in back.steps.order_by("index")] == [
        (s.kind, s.api_stop_reason) for s in original.steps.order_by("index")
    ]
    assert back.steps.order_by("index").last().kind == "model_stop"


def test_model_attempts_a_sender_spells_wrong_are_left_out_not_a_refused_trace(client, sender, admin_client):
    user, _, secret = sender
    tr = Tracer(resource={"service.name": "hand-made"})
    attempts = [
        {"number": "first", "status": 529},  # not a number
        7,
        {"number": 1, "status": 529, "error": "<b>was overloaded</b> (529)", "request_id": "req_1"},
        {"number": 2, "status": 200, "wait_s": 0.5, "request_id": "req_2"},
        {"number": 3, "status": 999},  # no such status
    ]
    spans = [
        tr.span(
            "chat claude",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "42."}]}]
                ),
                "rlt.model_attempts": json.dumps(attempts),
            },
            parent=100,
        ),
        tr.span("invoke_agent hand-made", {"gen_ai.operation.name": "invoke_agent"}, span_id=100),
    ]
    assert post(client, secret, pb_body(spans)).status_code == 200
    run = the_run(user)
    (step,) = run.steps.all()
    assert [(a["number"], a["status"]) for a in step.model_attempts] == [(1, 529), (2, 200)]
    assert run.model_retry_count == 1
    shown = page_of(admin_client.get(reverse("tracer:run", args=[run.pk]))).one("#step-1 .model-call")
    assert "<b>was overloaded</b> (529)" in shown.text  # escaped: text, not markup


@pytest.mark.parametrize(("count", "stored"), [("lots", 1), (7, 7)], ids=["not a count", "the sender's count"])
def test_a_last_chat_span_that_failed_is_the_call_that_ended_the_run(client, sender, admin_client, count, stored):
    user, _, secret = sender
    tr = Tracer(resource={"service.name": "hand-made"})
    failed = [
        {"number": 1, "status": 529, "error": "<b>was overloaded</b> (529)", "error_type": "overloaded_error"},
        {"number": "second", "status": 529},  # not an attempt: left out
        {"number": 2, "status": 529, "error": "was overloaded (529)", "wait_s": 0.5, "request_id": "req_9"},
    ]
    spans = [
        tr.span(
            "execute_tool lookup", {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}, parent=100
        ),
        tr.span(
            "chat claude",
            {
                "gen_ai.operation.name": "chat",
                "error.type": "overloaded_error",
                "rlt.model_attempts": json.dumps(failed),
            },
            parent=100,
            error="the model API was overloaded (529)",
        ),
        tr.span(
            "invoke_agent hand-made",
            {"gen_ai.operation.name": "invoke_agent", "rlt.stop_reason": "crashed", "rlt.model_retry_count": count},
            span_id=100,
            error="the model API was overloaded (529) twice",
        ),
    ]
    assert post(client, secret, pb_body(spans)).status_code == 200
    run = the_run(user)
    assert run.stop_reason == "crashed" and run.step_count == 1
    assert [(a["number"], a["status"], a["request_id"]) for a in run.failed_model_call] == [
        (1, 529, None),
        (2, 529, "req_9"),
    ]
    assert run.model_retry_count == stored  # the failed call's one retry, unless the sender counted
    banner = page_of(admin_client.get(reverse("tracer:run", args=[run.pk]))).one("#run-status .banner")
    assert banner.texts(".model-call .attempt .badge") == ["529", "529"]
    assert "<b>was overloaded</b> (529)" in banner.one(".model-call").text  # escaped: text, not markup


def test_a_run_exported_as_otlp_and_sent_back_gives_the_same_steps(client, sender, admin_client):
    from tracer.execution import run_execute
    from tracer.experiments import run_create

    user, _, secret = sender
    for scenario, policy in (
        ("refund-too-old", "starter"),
        ("lookup-flaky", "structured"),
        ("refund-too-old", "structured"),
    ):
        original = run_create(scenario=scenario, policy=PolicyVariant.objects.get(name=policy))
        run_execute(run_id=original.pk)
        original.refresh_from_db()
        assert original.status == Run.Status.FINISHED and original.step_count
        page = admin_client.get(reverse("tracer:run", args=[original.pk])).content.decode()
        assert f'href="{reverse("tracer:run-otlp", args=[original.pk])}"' in page  # the run page links it
        download = admin_client.get(reverse("tracer:run-otlp", args=[original.pk]))
        assert download.status_code == 200 and "attachment" in download["Content-Disposition"]
        response = post(client, secret, download.content, content_type="application/json")
        assert response.status_code == 200 and json.loads(response.content) == {}
        back = Run.objects.get(source=Run.Source.OTLP, owner=user, scenario=scenario, policy_name=policy)
        assert steps_of(back) == steps_of(original)
        for field in (
            "stop_reason",
            "final_answer",
            "verdict",
            "guard",
            "step_count",
            "error_count",
            "retry_count",
            "wasted_retry_count",
            "input_tokens",
            "output_tokens",
            "model_name",
            "task",
        ):
            assert getattr(back, field) == getattr(original, field), field
        # and the imported run exports as the same trace
        again = admin_client.get(reverse("tracer:run-otlp", args=[back.pk])).json()
        assert again["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] == back.external_id
    assert Run.objects.filter(source=Run.Source.OTLP).aggregate(n=Sum("step_count"))["n"] > 3


# --- a real client: the anthropic SDK, OpenInference's instrumentation, the OTLP/HTTP exporter ------------


class ScriptedModel:
    """The Messages API for the acceptance test, as an httpx2 transport (as agents/llm/simulated.py
    plugs in): looks the order up, tries the refund, repeats it once after the refusal, then answers."""

    TURNS = [
        [{"type": "tool_use", "id": "toolu_01", "name": "lookup_order", "input": {"order_id": "0871"}}],
        [
            {"type": "text", "text": "The order exists; refunding it."},
            {"type": "tool_use", "id": "toolu_02", "name": "process_refund", "input": {"order_id": "0871"}},
        ],
        [{"type": "tool_use", "id": "toolu_03", "name": "process_refund", "input": {"order_id": "0871"}}],
        [{"type": "text", "text": "I can't refund order 0871: refunds close after 30 days and it is 239 days old."}],
    ]

    def __init__(self) -> None:
        import httpx2

        self.httpx2 = httpx2
        self.turn = 0

    def transport(self):
        model = self

        class Transport(self.httpx2.BaseTransport):
            def handle_request(self, request):
                content = model.TURNS[model.turn]
                model.turn += 1
                body = {
                    "id": f"msg_{model.turn:02d}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-haiku-4-5",
                    "content": content,
                    "stop_reason": "tool_use" if content[-1]["type"] == "tool_use" else "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": 100 * model.turn, "output_tokens": 10 * model.turn},
                }
                return model.httpx2.Response(200, json=body)

        return Transport()


def refund_tools(name: str, args: dict) -> tuple[bool, str]:
    if name == "lookup_order":
        return True, json.dumps({"order_id": args["order_id"], "age_days": 239})
    refusal_ = {
        "isError": True,
        "errorCategory": "business",
        "isRetryable": False,
        "message": "Refunds close after 30 days.",
    }
    return False, json.dumps(refusal_)


def test_an_anthropic_agent_instrumented_by_openinference_exports_its_run_live(live_server):
    import anthropic
    import httpx2
    from openinference.instrumentation.anthropic import AnthropicInstrumentor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    user = importer("refund-team")
    _, secret = token_create(user=user, name="refund agent")
    resource = Resource({"service.name": "refund-agent", "rlt.scenario": "refund-too-old", "rlt.policy": "my-harness"})
    provider = TracerProvider(resource=resource)
    exporter = OTLPSpanExporter(endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Bearer {secret}"})
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    seen_live = []
    try:
        model = ScriptedModel()
        client = anthropic.Anthropic(
            api_key="sk-test", http_client=httpx2.Client(transport=model.transport()), max_retries=0
        )
        task = "Please refund order 0871."
        tools = [
            {
                "name": n,
                "description": n,
                "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
            }
            for n in ("lookup_order", "process_refund")
        ]
        tracer = provider.get_tracer("refund-agent")
        with tracer.start_as_current_span("refund-agent", attributes={"openinference.span.kind": "AGENT"}) as root:
            root.set_attribute("input.value", task)
            messages = [{"role": "user", "content": task}]
            while True:
                response = client.messages.create(
                    model="claude-haiku-4-5", max_tokens=1024, tools=tools, messages=messages
                )
                run = Run.objects.filter(source=Run.Source.OTLP, owner=user).first()
                if run is not None:
                    seen_live.append((run.status, run.step_count))
                messages.append({"role": "assistant", "content": [b.model_dump() for b in response.content]})
                uses = [b for b in response.content if b.type == "tool_use"]
                if not uses:
                    break
                results = []
                for use in uses:
                    ok, content = refund_tools(use.name, use.input)
                    results.append(
                        {"type": "tool_result", "tool_use_id": use.id, "content": content, "is_error": not ok}
                    )
                messages.append({"role": "user", "content": results})
            root.set_attribute("output.value", response.content[0].text)
    finally:
        instrumentor.uninstrument()
        provider.shutdown()

    # while the agent ran, its run was there and growing, before the root span ended
    assert seen_live and all(status == Run.Status.RUNNING for status, _ in seen_live)
    assert seen_live[-1][1] >= 2
    run = Run.objects.get(source=Run.Source.OTLP, owner=user)
    lookup, refund, again, final = run.steps.order_by("index")
    assert (lookup.tool_name, lookup.tool_use_id, lookup.is_error) == ("lookup_order", "toolu_01", False)
    assert (refund.tool_name, refund.is_error, refund.category, refund.retryable) == (
        "process_refund",
        True,
        "business",
        False,
    )
    assert refund.retry_count == 0 and refund.text == "The order exists; refunding it."
    # the model sent the refused refund again: a repeat of step 2, wasted (no retry fixes a refusal)
    assert (again.tool_name, again.is_error, again.repeat_of) == ("process_refund", True, 2)
    assert final.kind == Step.Kind.FINAL_ANSWER
    assert run.status == Run.Status.FINISHED and run.stop_reason == "final_answer"
    assert run.final_answer.startswith("I can't refund order 0871")
    assert (run.scenario, run.policy_name, run.source_detail, run.task) == (
        "refund-too-old",
        "my-harness",
        "refund-agent",
        task,
    )
    assert (run.error_count, run.failed_attempt_count, run.retry_count, run.wasted_retry_count) == (2, 2, 0, 1)
    assert (run.input_tokens, run.output_tokens) == (100 + 200 + 300 + 400, 10 + 20 + 30 + 40)
    assert run.model_name == "claude-haiku-4-5" and run.verdict == ""


def test_a_secret_in_spans_is_stored_nowhere(client, sender):
    user, _, secret = sender
    key = "sk-ant-api03-" + "Zq9" * 12
    tr = Tracer(resource={"service.name": "leaky-agent", "deployment.token": key})
    spans = [
        tr.span(
            "call_api",
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "call_api",
                "input.value": json.dumps({"url": "https://api.example.com", "api_key": key}),
                "input.mime_type": "application/json",
                "output.value": f"401: the key {key} was refused",
                "http.request.header.authorization": "opaque-value-1234",  # named like a secret
                "retry.urls": ["https://api.example.com", f"https://u:{key}@proxy.example.com"],
            },
            parent=9,
            error=f"refused {key}",
            events=[Event("exception", {"exception.message": f"HTTP 401 for {key}"})],
        ),
        tr.span("plain", {"openinference.span.kind": "CHAIN", "input.value": "nothing secret here"}, parent=9),
        tr.span("root", {"openinference.span.kind": "AGENT", "input.value": f"use {key}"}, span_id=9),
    ]
    assert post(client, secret, pb_body(spans)).status_code == 200
    run = the_run(user)
    from tracer.intake.otlp.receiver import spans_unpacked
    from tracer.models import OtlpSpanBatch

    stored = [
        json.dumps(export_document.run_export(run=run)),
        run.search_text,
        json.dumps(run.labels),
        *(json.dumps([s.to_dict() for s in spans_unpacked(bytes(b.data))]) for b in OtlpSpanBatch.objects.all()),
    ]
    assert all(key not in text and "opaque-value-1234" not in text for text in stored)
    assert "[redacted" in stored[0] and "[redacted" in stored[-1]
    assert "nothing secret here" in stored[-1]


# --- hostile bodies ----------------------------------------------------------------------------------

hostile_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**80), max_value=2**80),
        st.floats(allow_nan=False),
        st.text(max_size=20),
        st.sampled_from(
            ["", "0" * 32, "zz" * 16, "AAAAAAAAAAAAAAAAAAAAAA==", "\x00", "1e400", "-1", "SPAN_KIND_SERVER"]
        ),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=12), inner, max_size=3)),
    max_leaves=8,
)


def _mutated(document, data):
    """``document`` with one value somewhere in it replaced by a hostile one."""
    node = document
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            return document
        key = data.draw(st.sampled_from(keys), label="key")
        child = node[key]
        if not isinstance(child, (dict, list)) or not child or data.draw(st.booleans(), label="stop here"):
            node[key] = data.draw(hostile_json, label="value")
            return document
        node = child


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hostile_bodies_are_refused_or_taken_never_a_server_error(client, sender, data):
    _, _, secret = sender
    spans = bench_spans(bench_runs(1)[0])[:4]
    kind = data.draw(st.sampled_from(["json", "protobuf", "bytes"]), label="kind")
    if kind == "json":
        body = json.dumps(_mutated(json.loads(json_body(spans)), data)).encode()
        content_type = "application/json"
    elif kind == "protobuf":
        good = bytearray(pb_body(spans))
        for _ in range(data.draw(st.integers(1, 4), label="flips")):
            good[data.draw(st.integers(0, len(good) - 1), label="at")] ^= data.draw(st.integers(1, 255), label="bits")
        body = bytes(good[: data.draw(st.integers(1, len(good)), label="cut")])
        content_type = PB
    else:
        body = data.draw(st.binary(min_size=1, max_size=200), label="body")  # the test client sends no type without one
        content_type = data.draw(st.sampled_from([PB, "application/json"]), label="type")
    response = post(client, secret, body, content_type=content_type, gzipped=data.draw(st.booleans(), label="gzip"))
    assert response.status_code in (200, 400), response.content[:300]
    if response.status_code == 400:
        assert refusal(response)[0]


def test_the_writer_thread_keeps_order_writes_inline_when_full_or_unstartable_and_ends_when_idle(monkeypatch):
    """``WriteBehind``: queued writes done in the order answered; with ``depth`` waiting, the next
    answer's request thread writes its runs itself (several exporters still write in parallel, a
    faster one waits for its own write); so does one when no thread can start; the thread ends once
    idle, and the next write starts another."""
    import threading
    import time

    from tracer.intake.otlp.views import WriteBehind

    writer = WriteBehind(depth=1, idle_s=0.1)
    done: list[tuple[int, str]] = []
    gate = threading.Event()

    def job(n: int):
        def run():
            gate.wait(10)
            done.append((n, threading.current_thread().name))

        return run

    writer.submit(job(1))  # taken by the thread, held at the gate
    time.sleep(0.1)
    writer.submit(job(2))  # waits in the one place
    third = threading.Thread(target=writer.submit, args=(job(3),), name="request-3")
    third.start()
    third.join(0.3)
    assert third.is_alive(), "the third answer's thread should be writing its own runs, held at the gate"
    gate.set()
    third.join(5)
    writer.join(5)
    assert not writer._thread and not any(t.name == "otlp-runs-writer" for t in threading.enumerate())
    assert [n for n, name in done if name == "otlp-runs-writer"] == [1, 2]
    assert (3, "request-3") in done

    def no_thread(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    writer.submit(job(4))  # written here, not left queued for a thread that never came
    assert done[-1] == (4, threading.current_thread().name)
    monkeypatch.undo()
    writer.submit(job(5))
    writer.join(5)
    assert done[-1] == (5, "otlp-runs-writer") and writer._jobs.empty()


def test_a_coordinators_export_nests_its_sub_agents_under_the_calls_that_ran_them_and_reads_back_its_own_steps(
    client, sender, admin_client
):
    from tracer.execution import run_execute
    from tracer.experiments import run_create

    user, _, secret = sender
    coordinator = run_create(scenario="coordinator-partial", policy=PolicyVariant.objects.get(name="structured"))
    run_execute(run_id=coordinator.pk)
    coordinator.refresh_from_db()
    children = list(Run.objects.filter(parent=coordinator))
    assert children
    exported = admin_client.get(reverse("tracer:run-otlp", args=[coordinator.pk])).json()
    spans = exported["resourceSpans"][0]["scopeSpans"][0]["spans"]
    by_id = {s["spanId"]: s for s in spans}
    agents_below = [s for s in spans if s["name"].startswith("invoke_agent") and s["parentSpanId"]]
    assert len(agents_below) == len(children)
    for agent in agents_below:  # each under the execute_tool span of the step that ran it, and inside its time
        call = by_id[agent["parentSpanId"]]
        assert call["name"].startswith("execute_tool")
        assert int(call["startTimeUnixNano"]) <= int(agent["startTimeUnixNano"])
        assert int(agent["endTimeUnixNano"]) <= int(call["endTimeUnixNano"]), f"{agent['name']} outlasts its call"

    def below(span_id: str) -> list[dict]:
        kids = [s for s in spans if s["parentSpanId"] == span_id]
        return kids + [d for k in kids for d in below(k["spanId"])]

    # and each sub-agent's own tool calls are spans inside its invoke_agent span, attempts and all
    by_label = {c.label: c for c in children}
    for agent in agents_below:
        child = by_label[agent["name"].removeprefix("invoke_agent ")]
        calls = [s for s in below(agent["spanId"]) if s["name"].startswith("execute_tool")]
        assert len(calls) == sum(len(s.attempts) for s in child.steps.filter(kind="tool_use"))
        assert {c["name"] for c in calls} == {
            f"execute_tool {s.tool_name}" for s in child.steps.filter(kind="tool_use")
        }
    assert any(
        by_id.get(s["parentSpanId"], {}).get("name", "").startswith("invoke_agent") for s in spans if s["parentSpanId"]
    )
    response = post(client, secret, json.dumps(exported).encode(), content_type="application/json")
    assert response.status_code == 200 and json.loads(response.content) == {}
    back = Run.objects.get(source=Run.Source.OTLP, owner=user)
    assert steps_of(back) == steps_of(coordinator)  # the sub-agents' calls are not the coordinator's steps
    assert back.measured_ms == pytest.approx(coordinator.measured_ms, abs=0.01)  # the calls' spans hold them
