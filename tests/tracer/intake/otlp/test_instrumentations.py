"""The same agents traced by every instrumentation there is for them (OpenInference, OpenLLMetry, the
anthropic SDK's own tracing, pydantic-ai's own; with and without the SDK's spans, with and without tool spans), sent in
protobuf and JSON, gzipped, one span at a time or by a batch processor: each run reads the same,
field by field (tests/tracer/intake/otlp/agents.py makes the spans; none is written by hand)."""

from __future__ import annotations

import json
import random

import pytest
from django.urls import reverse
from opentelemetry.sdk.trace import ReadableSpan

from tests.dom import page as page_of
from tests.tracer.intake.otlp import agents
from tests.tracer.intake.otlp.test_receiver import answer, importer, json_body, pb_body, post
from tracer.models import OtlpTrace, Run
from tracer.tokens import token_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def sender():
    user = importer("corpus-team")
    _, secret = token_create(user=user, name="corpus")
    return user, secret


def received(client, sender, spans, *, encoding: str = "protobuf", gzipped: bool = False) -> Run:
    user, secret = sender
    body = pb_body(spans) if encoding == "protobuf" else json_body(spans)
    kind = "application/x-protobuf" if encoding == "protobuf" else "application/json"
    response = post(client, secret, body, content_type=kind, gzipped=gzipped)
    assert response.status_code == 200, response.content
    (run,) = Run.objects.filter(source=Run.Source.OTLP, owner=user, external_id=f"{spans[0].context.trace_id:032x}")
    return run


def steps(run: Run) -> list[tuple]:
    return [
        (s.kind, s.tool_name, s.is_error, s.category or None, len(s.attempts or []), s.input_tokens, s.output_tokens)
        for s in run.steps.order_by("index")
    ]


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
@pytest.mark.parametrize("gzipped", [False, True])
def test_openinference_beside_the_sdks_own_spans_counts_each_model_call_once(client, sender, encoding, gzipped):
    refund = received(
        client,
        sender,
        agents.agent_run(agents.REFUND, instrumentation="openinference"),
        encoding=encoding,
        gzipped=gzipped,
    )
    assert (refund.input_tokens, refund.output_tokens) == (240, 60)
    assert steps(refund) == [
        ("tool_use", "process_refund", True, "business", 1, 120, 30),
        ("final_answer", "", False, None, 0, 120, 30),
    ]
    lookup = received(
        client, sender, agents.agent_run(agents.LOOKUP, instrumentation="openinference"), encoding=encoding
    )
    assert (lookup.input_tokens, lookup.output_tokens) == (360, 90)
    # the model sent the identical call again after the transient failure: a step of its own, marked as
    # a repeat of the first, as from every source (tests/tracer/intake/test_repeats.py)
    assert steps(lookup) == [
        ("tool_use", "lookup_orders", True, "transient", 1, 120, 30),
        ("tool_use", "lookup_orders", False, None, 1, 120, 30),
        ("final_answer", "", False, None, 0, 120, 30),
    ]
    assert [s.repeat_of for s in lookup.steps.order_by("index")] == [None, 1, None]
    assert (lookup.retry_count, lookup.error_count, lookup.failed_attempt_count) == (0, 1, 1)
    assert lookup.final_answer == "Customer c-7 has one order, 0871." and lookup.stop_reason == "final_answer"


def test_openllmetry_with_tool_spans_and_the_sdks_spans_counts_once_and_keeps_the_step_texts(client, sender):
    run = received(client, sender, agents.agent_run(agents.SUPPORT, instrumentation="openllmetry", tool_spans=True))
    assert (run.input_tokens, run.output_tokens) == agents.SUPPORT.tokens == (1600, 245)
    rows = list(run.steps.order_by("index"))
    assert [s.text for s in rows[:4]] == [
        "Looking the customer up.",
        "Refunding 0871.",
        "Resending the invoice.",
        "Trying the other address.",
    ]
    assert [(s.tool_name, s.is_error, s.category or None) for s in rows[:4]] == [
        ("lookup_orders", False, None),
        ("process_refund", True, "business"),
        ("send_invoice", True, None),  # the tool span marks it failed; nothing says its category
        ("send_invoice", False, None),
    ]
    assert [(s.input_tokens, s.output_tokens) for s in rows] == [(200, 40), (300, 45), (350, 50), (350, 50), (400, 60)]
    # the API's stop reasons in its own spelling, whoever traced them
    assert [s.api_stop_reason for s in rows] == ["tool_use"] * 4 + ["end_turn"]
    assert run.is_error_carried


@pytest.mark.parametrize("instrumentation", ["sdk", "openllmetry"])
def test_chat_spans_alone_give_every_tool_call_from_the_genai_messages(client, sender, admin_client, instrumentation):
    spans = agents.agent_run(agents.SUPPORT, instrumentation=instrumentation, content=True)
    run = received(client, sender, spans)
    assert (run.input_tokens, run.output_tokens) == (1600, 245)
    rows = list(run.steps.order_by("index"))
    assert [(s.kind, s.tool_name) for s in rows] == [
        ("tool_use", "lookup_orders"),
        ("tool_use", "process_refund"),
        ("tool_use", "send_invoice"),
        ("tool_use", "send_invoice"),
        ("final_answer", ""),
    ]
    # the structured failure is known; the plain "mailbox full" is not (GenAI's messages drop is_error)
    assert [(s.is_error, s.category or None) for s in rows[:4]] == [
        (False, None),
        (True, "business"),
        (False, None),
        (False, None),
    ]
    assert rows[1].retryable is False and rows[1].text == "Refunding 0871."
    assert [s.api_stop_reason for s in rows] == ["tool_use"] * 4 + ["end_turn"]
    assert not run.is_error_carried
    assert run.task == agents.SUPPORT.task and run.final_answer.startswith("No refund")
    note = page_of(admin_client.get(reverse("tracer:run", args=[run.pk]))).select(".is-error-note")
    assert note and "cannot carry" in note[0].text


@pytest.mark.parametrize("instrumentation", agents.INSTRUMENTATIONS)
@pytest.mark.parametrize("sdk_spans", [True, False], ids=["sdk-spans", "no-sdk-spans"])
@pytest.mark.parametrize("tool_spans", [True, False], ids=["tool-spans", "no-tool-spans"])
def test_every_instrumentation_gives_the_same_tool_calls_and_tokens(
    client, sender, instrumentation, sdk_spans, tool_spans
):
    if instrumentation == "sdk" and not sdk_spans and not tool_spans:
        pytest.skip("no instrumentation at all: the trace is its root span alone, nothing to compare")
    spans = agents.agent_run(
        agents.SUPPORT, instrumentation=instrumentation, sdk_spans=sdk_spans, tool_spans=tool_spans, content=True
    )
    run = received(client, sender, spans)
    rows = list(run.steps.order_by("index"))
    assert [s.tool_name for s in rows if s.kind == "tool_use"] == [
        "lookup_orders",
        "process_refund",
        "send_invoice",
        "send_invoice",
    ]
    model_spans = instrumentation != "sdk" or sdk_spans
    assert (run.input_tokens, run.output_tokens) == ((1600, 245) if model_spans else (0, 0))
    refund = rows[1]
    assert (refund.is_error, refund.category) == (True, "business")
    # a plain failure is known where a tool span marks it or OpenInference's input.value keeps is_error
    carried = tool_spans or instrumentation == "openinference"
    assert run.error_count == (2 if carried else 1) and run.is_error_carried == carried
    if model_spans:
        assert rows[-1].kind == "final_answer" and run.stop_reason == "final_answer"
        assert [s.api_stop_reason for s in rows] == ["tool_use"] * 4 + ["end_turn"]


def test_a_batch_processor_over_the_real_exporter_gzipped_gives_the_same_run(live_server):
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    user = importer("batch-team")
    _, secret = token_create(user=user, name="batch")
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces",
        headers={"Authorization": f"Bearer {secret}"},
        compression=Compression.Gzip,
    )
    agents.agent_run(
        agents.SUPPORT,
        instrumentation="openllmetry",
        tool_spans=True,
        processor=lambda e: BatchSpanProcessor(e, schedule_delay_millis=60_000),
        exporter=exporter,
    )
    run = Run.objects.get(source=Run.Source.OTLP, owner=user)
    assert run.status == Run.Status.FINISHED and (run.input_tokens, run.output_tokens) == (1600, 245)
    assert run.tool_call_count == 4 and run.error_count == 2


@pytest.mark.parametrize("instrumentation", agents.INSTRUMENTATIONS)
def test_a_tool_spans_error_type_or_exception_gives_its_category_and_an_unknown_one_stays_unknown(
    client, sender, instrumentation
):
    run = received(client, sender, agents.agent_run(agents.FAILURES, instrumentation=instrumentation, tool_spans=True))
    rows = list(run.steps.order_by("index"))
    assert [(s.tool_name, s.is_error, s.category or None) for s in rows[:3]] == [
        ("free_slots", True, "validation"),  # error.type
        ("book_slot", True, "permission"),  # an exception event's exception.type, PermissionError
        ("notify", True, None),  # RuntimeError says no category: unknown, never guessed
    ]
    assert rows[1].attempts[0]["message"] == "booking needs a manager"


def test_a_server_tools_error_is_a_step_with_its_error_code(client, sender):
    run = received(client, sender, agents.agent_run(agents.SEARCH, instrumentation="openinference"))
    search, answer = run.steps.order_by("index")
    assert (search.tool_name, search.is_error, search.attempts[0]["message"]) == (
        "web_search",
        True,
        "max_uses_exceeded",
    )
    assert answer.kind == "final_answer" and run.error_count == 1 and run.stop_reason == "final_answer"


def test_a_late_tool_span_that_started_inside_the_last_model_call_leaves_the_run_answered(client, sender):
    spans = agents.agent_run(agents.REFUND, instrumentation="openllmetry", tool_spans=True, late_tool=True)
    late = [s for s in spans if s.name == "execute_tool audit_log"]
    first = received(client, sender, [s for s in spans if s not in late])
    assert first.stop_reason == "final_answer"
    again = received(client, sender, late)
    assert again.pk == first.pk and again.stop_reason == "final_answer" and again.status == Run.Status.FINISHED
    assert again.final_answer == first.final_answer and not again.error
    assert [s.tool_name for s in again.steps.order_by("index")] == ["process_refund", "audit_log", ""]
    assert (again.input_tokens, again.output_tokens) == (240, 60)


def test_the_export_in_protobuf_or_json_reads_with_a_token_and_marks_model_calls_client(client, sender):
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    _, secret = sender
    run = received(client, sender, agents.agent_run(agents.SUPPORT, instrumentation="openllmetry", tool_spans=True))
    url = reverse("tracer:run-otlp", args=[run.pk])
    token = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    as_json = client.get(url, **token)
    assert as_json.status_code == 200 and as_json["Content-Type"] == "application/json"
    spans = as_json.json()["resourceSpans"][0]["scopeSpans"][0]["spans"]
    kinds = {s["name"].split()[0]: s["kind"] for s in spans}
    assert kinds == {"invoke_agent": 1, "chat": 3, "execute_tool": 1}  # INTERNAL, CLIENT, INTERNAL
    for asked in ({"format": "pb"}, {}):
        headers = token | ({} if asked else {"HTTP_ACCEPT": "application/x-protobuf"})
        as_pb = client.get(url, asked, **headers)
        assert as_pb.status_code == 200 and as_pb["Content-Type"] == "application/x-protobuf"
        decoded = json_format.MessageToDict(trace_service_pb2.ExportTraceServiceRequest.FromString(as_pb.content))
        assert len(decoded["resourceSpans"][0]["scopeSpans"][0]["spans"]) == len(spans)
    other = importer("someone-else")
    _, theirs = token_create(user=other, name="theirs")
    assert client.get(url, HTTP_AUTHORIZATION=f"Bearer {theirs}").status_code == 404  # not their run
    assert client.get(url).status_code == 302  # neither logged in nor a token: the login page


def test_a_runs_own_export_sent_back_by_its_sender_is_refused_plainly_and_the_run_unchanged(client, sender):
    user, secret = sender
    run = received(client, sender, agents.agent_run(agents.REFUND, instrumentation="openinference"))
    before = (run.input_tokens, run.output_tokens, run.step_count)
    export = client.get(reverse("tracer:run-otlp", args=[run.pk]), HTTP_AUTHORIZATION=f"Bearer {secret}")
    response = post(client, secret, export.content, content_type="application/json")
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert int(partial["rejectedSpans"]) > 0 and "not merged" in partial["errorMessage"]
    run.refresh_from_db()
    assert (run.input_tokens, run.output_tokens, run.step_count) == before == (240, 60, 2)
    assert Run.objects.filter(owner=user).count() == 1


@pytest.mark.parametrize("instrumentation", ["sdk", "openllmetry", "openinference"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_conversation_traces_spans_shuffled_over_requests_are_all_kept_and_give_the_same_run(
    client, sender, instrumentation, seed
):
    user, secret = sender
    spans = agents.agent_run(agents.SUPPORT, instrumentation=instrumentation, content=True)
    whole = received(client, sender, spans)
    want = steps(whole), whole.stop_reason, whole.final_answer, whole.input_tokens, whole.output_tokens
    whole.delete()
    OtlpTrace.objects.filter(owner=user).delete()
    shuffled = spans[:]
    random.Random(seed).shuffle(shuffled)  # a later call's conversation may come before the calls it follows
    for k in range(len(shuffled)):
        response = post(client, secret, pb_body(shuffled[k : k + 1]))
        assert response.status_code == 200 and not answer(response).HasField("partial_success"), response.content
    run = Run.objects.get(owner=user, source=Run.Source.OTLP)
    assert (steps(run), run.stop_reason, run.final_answer, run.input_tokens, run.output_tokens) == want
    assert OtlpTrace.objects.get(run=run).span_count == len(spans)


def test_a_whole_trace_whose_conversation_cannot_be_read_is_refused_and_nothing_of_it_stored(client, sender):
    user, secret = sender
    spans = agents.agent_run(agents.REFUND, instrumentation="openinference", sdk_spans=False)
    bad = json.dumps({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope"}]}]})
    broken = [
        ReadableSpan(
            name=s.name,
            context=s.context,
            parent=s.parent,
            resource=s.resource,
            kind=s.kind,
            attributes={**s.attributes, "input.value": bad} if s.attributes.get("input.value") else s.attributes,
            events=s.events,
            status=s.status,
            start_time=s.start_time,
            end_time=s.end_time,
            instrumentation_scope=s.instrumentation_scope,
        )
        for s in spans
    ]
    response = post(client, secret, pb_body(broken))
    partial = answer(response).partial_success
    assert response.status_code == 200 and partial.rejected_spans == len(spans)
    assert "matches no tool_use" in partial.error_message
    assert not Run.objects.filter(owner=user).exists() and not OtlpTrace.objects.filter(owner=user).exists()


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
@pytest.mark.parametrize("sdk_spans", [True, False], ids=["sdk-spans", "no-sdk-spans"])
def test_a_pydantic_ai_agent_whose_tool_fails_once_then_works_reads_as_every_other_source(
    client, sender, encoding, sdk_spans
):
    spans = agents.pydantic_ai_run(agents.LOOKUP, sdk_spans=sdk_spans)
    assert {s.instrumentation_scope.name for s in spans} == (
        {"pydantic-ai", "com.anthropic.sdk.python"} if sdk_spans else {"pydantic-ai"}
    )
    run = received(client, sender, spans, encoding=encoding)
    assert (run.input_tokens, run.output_tokens) == agents.LOOKUP.tokens == (360, 90)
    assert steps(run) == [
        ("tool_use", "lookup_orders", True, "transient", 1, 120, 30),
        ("tool_use", "lookup_orders", False, None, 1, 120, 30),
        ("final_answer", "", False, None, 0, 120, 30),
    ]
    rows = list(run.steps.order_by("index"))
    assert rows[0].retryable is True and rows[0].attempts[0]["message"] == "the orders service timed out (503)"
    assert [s.repeat_of for s in rows] == [None, 1, None]
    assert [s.api_stop_reason for s in rows] == ["tool_use", "tool_use", "end_turn"]
    assert (run.retry_count, run.error_count, run.failed_attempt_count) == (0, 1, 1)
    assert run.task == agents.LOOKUP.task and run.status == Run.Status.FINISHED
    assert run.final_answer == "Customer c-7 has one order, 0871." and run.stop_reason == "final_answer"


@pytest.mark.parametrize("sdk_spans", [True, False], ids=["sdk-spans", "no-sdk-spans"])
def test_a_pydantic_ai_agent_sent_by_the_real_exporter_keeps_its_texts_and_both_kinds_of_failure(
    live_server, sdk_spans
):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    user = importer("pydantic-ai-team")
    _, secret = token_create(user=user, name="pydantic-ai")
    exporter = OTLPSpanExporter(endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Bearer {secret}"})
    agents.pydantic_ai_run(agents.SUPPORT, sdk_spans=sdk_spans, exporter=exporter)
    run = Run.objects.get(source=Run.Source.OTLP, owner=user)
    assert (run.input_tokens, run.output_tokens) == (1600, 245)
    rows = list(run.steps.order_by("index"))
    assert [(s.kind, s.tool_name, s.text) for s in rows] == [
        ("tool_use", "lookup_orders", "Looking the customer up."),
        ("tool_use", "process_refund", "Refunding 0871."),
        ("tool_use", "send_invoice", "Resending the invoice."),
        ("tool_use", "send_invoice", "Trying the other address."),
        ("final_answer", "", "No refund (239 days old); the invoice went to billing."),
    ]
    # the structured error, returned as the tool's answer, and the plain one, which the tool raised as
    # ModelRetry and pydantic-ai's tool span records as an exception (no category in it)
    assert [(s.is_error, s.category or None) for s in rows[:4]] == [
        (False, None),
        (True, "business"),
        (True, None),
        (False, None),
    ]
    assert rows[2].attempts[0]["message"] == "mailbox full"
    assert [(s.input_tokens, s.output_tokens) for s in rows] == [(200, 40), (300, 45), (350, 50), (350, 50), (400, 60)]
    assert [s.api_stop_reason for s in rows] == ["tool_use"] * 4 + ["end_turn"]
    assert run.error_count == 2 and run.is_error_carried and run.stop_reason == "final_answer"
    assert run.status == Run.Status.FINISHED and run.final_answer == rows[-1].text
