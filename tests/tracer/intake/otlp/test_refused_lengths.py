"""What an OTLP trace says that is longer than the column it is kept in (a tool span's name and call id,
a model span's finish reason, a label's name and value, ``rlt.guard``) is left out with a warning in
``partial_success``, every span taken: never cut to fit."""

from __future__ import annotations

import json

import pytest

from tests.tracer.intake.otlp.test_receiver import Tracer, answer, importer, pb_body, post
from tracer.models import Run
from tracer.tokens import token_create

pytestmark = pytest.mark.django_db
ROOT = 100


@pytest.fixture
def sender():
    user = importer("agent-team")
    return token_create(user=user, name="ci agent")[1]


def chat(tr: Tracer, finish: str = "tool_use"):
    output = [
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "lookup", "arguments": {}}]}
    ]
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "claude-sonnet-4-5",
        "gen_ai.output.messages": json.dumps(output),
        "anthropic.message.stop_reason": finish,
    }
    return tr.span("chat claude", attrs, parent=ROOT)


def tool(tr: Tracer, *, name: str = "lookup", call_id: str = "call_1"):
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.call.arguments": '{"key": "A-1"}',
        "gen_ai.tool.call.result": "found",
    }
    return tr.span("execute_tool", attrs, parent=ROOT)


def root(tr: Tracer, **attrs):
    given = {"gen_ai.operation.name": "invoke_agent", "rlt.stop_reason": "consecutive_errors"} | attrs
    return tr.span("invoke_agent", given, span_id=ROOT, error="consecutive_errors")


def sent(client, secret, spans) -> tuple[str, Run]:
    response = post(client, secret, pb_body(spans))
    assert response.status_code == 200
    partial = answer(response).partial_success
    assert partial.rejected_spans == 0  # a warning: every span is taken
    return partial.error_message, Run.objects.get()


def test_a_tool_spans_over_long_name_is_left_out_with_a_warning_not_cut(client, sender):
    secret = sender
    tr = Tracer(resource={"service.name": "lookup-agent"})
    message, run = sent(client, secret, [chat(tr), tool(tr, name="t" * 101), root(tr)])
    assert "a tool span's name: not kept, at most 100 characters; got 101" in message
    assert run.steps.get().tool_name in ("", "lookup")  # the model's call names it, never a cut name


def test_a_tool_spans_over_long_call_id_is_left_out_with_a_warning_not_cut(client, sender):
    secret = sender
    tr = Tracer(resource={"service.name": "lookup-agent"})
    message, run = sent(client, secret, [chat(tr), tool(tr, call_id="c" * 101), root(tr)])
    assert "a tool span's call id: not kept, at most 100 characters; got 101" in message
    assert not run.steps.filter(tool_use_id__startswith="ccc").exists()


def test_a_model_spans_over_long_finish_reason_is_left_out_with_a_warning_not_cut(client, sender):
    secret = sender
    tr = Tracer(resource={"service.name": "lookup-agent"})
    message, run = sent(client, secret, [chat(tr, finish="f" * 41), tool(tr), root(tr)])
    assert "the model span's finish reason: not kept, at most 40 characters; got 41" in message
    assert not run.steps.filter(api_stop_reason__startswith="fff").exists()
    assert not run.api_stop_reason.startswith("fff")


def test_an_over_long_guard_is_left_out_with_a_warning_not_cut(client, sender):
    secret = sender
    tr = Tracer(resource={"service.name": "lookup-agent"})
    message, run = sent(client, secret, [chat(tr), tool(tr), root(tr, **{"rlt.guard": "g" * 201})])
    assert "rlt.guard: not kept, at most 200 characters; got 201" in message
    assert run.guard == ""


def test_over_long_label_names_and_values_are_left_out_with_a_warning_not_cut(client, sender):
    secret = sender
    tr = Tracer(resource={"service.name": "lookup-agent", "rlt.team": "v" * 1001, "rlt." + "k" * 97: "x"})
    message, run = sent(client, secret, [chat(tr), tool(tr), root(tr, **{"rlt.owner": "ops"})])
    assert "label rlt.team: not kept, at most 1000 characters; got 1001" in message
    assert "a label's name: not kept, at most 100 characters; got 101" in message
    assert run.labels["rlt.owner"] == "ops" and "rlt.team" not in run.labels
    assert all(len(key) <= 100 for key in run.labels)


def test_over_long_labels_in_rlt_labels_are_left_out_with_a_warning_not_cut(client, sender):
    secret = sender
    tr = Tracer(resource={"service.name": "lookup-agent"})
    labels = json.dumps({"team": "v" * 1001, "k" * 101: "x", "owner": "ops"})
    message, run = sent(client, secret, [chat(tr), tool(tr), root(tr, **{"rlt.labels": labels})])
    assert "label team: not kept, at most 1000 characters; got 1001" in message
    assert "a label's name: not kept, at most 100 characters; got 101" in message
    assert run.labels == {"owner": "ops"}
