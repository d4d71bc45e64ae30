"""A timeline step is written in one Python call (``timeline_tags.step_item``): it shows everything a step
recorded, and everything from a trace in it is shown as text, never as markup."""

import pytest
from django.template import engines
from django.urls import reverse
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.events import Attempt, ModelAttempt
from tests.dom import Node, page, parse
from tests.factories import RunFactory, StepFactory, failed_attempt, final_step, ok_attempt, tool_step
from tracer.models import Run, Step
from tracer.reads.run_page import SubAgents

pytestmark = pytest.mark.django_db
SCRIPT = "<script>alert('x')</script>"


def run_page(client, run: Run) -> tuple[str, Node]:
    response = client.get(reverse("tracer:run", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode(), page(response)


def test_a_tool_step_shows_its_call_attempts_model_call_result_and_sub_agents(admin_client):
    run = RunFactory(policy_name="structured")
    attempts = [
        failed_attempt(1, category="transient", retryable=True, message="upstream returned 503", latency_ms=12.25),
        ok_attempt(2, {"orders": ["0871"]}, backoff_s=0.2, latency_ms=3.5),
    ]
    event = tool_step(1, attempts, tool="lookup_orders", input={"customer": "c-118"}, text="Let me look.")
    event.model_attempts = [
        ModelAttempt(number=1, status=529, error="overloaded (529)", latency_ms=40.0),
        ModelAttempt(number=2, status=200, request_id="req_abc", wait_s=0.5, latency_ms=812.35),
    ]
    StepFactory(run=run, event=event)
    refused = tool_step(2, [failed_attempt(1)], input={"order_id": "0871"}, result_content={"error": "too old"})
    StepFactory(run=run, event=refused)
    StepFactory(run=run, event=final_step(3, "Refund refused:\nthe order is 239 days old."))
    stock = RunFactory(
        parent=run,
        parent_step=1,
        label="check stock",
        step_count=2,
        error_count=1,
        failed_attempt_count=2,
        retry_count=1,
    )
    warehouse = RunFactory(
        parent=run, parent_step=1, label="from the warehouse", source=Run.Source.OTLP, model_backend="imported"
    )

    _, doc = run_page(admin_client, run)
    first, second, answer = doc.one("#step-1"), doc.one("#step-2"), doc.one("#step-3")
    assert {"step", "tool_use"} <= first.classes and "is-error" not in first.classes
    head = first.one(".step-head")
    assert head.one("code.tool").text == "lookup_orders"
    assert head.one("code.input").text == '{"customer": "c-118"}'
    # 12.25 + 200 ms backoff + 3.5, and the model call's 40 + 500 ms wait + 812.35; no price for its model
    assert head.one(".meta").text == "1 retry · 1.57 s · 10/5 tokens · unknown"
    assert "Model: Let me look." in first.one("p.said").text
    one, two = first.select("li.step > ol.attempts > li.attempt")
    assert {"attempt", "fail"} <= one.classes and {"attempt", "ok"} <= two.classes
    assert one.one(".n").text == "Attempt 1" and two.one(".n").text == "Retry · attempt 2"
    assert one.one(".outcome").text == "transient · retryable"
    assert one.one(".msg").text == "upstream returned 503"
    assert one.one(".meta").text == "12.2 ms"
    assert two.one(".backoff").text == "waited 0.200 s, then retried"
    assert '"orders"' in two.one("details pre").text
    model_call = first.one(".model-call")
    assert "this step's model call: 2 attempts" in model_call.one(".model-call-head").text
    assert model_call.one(".attempt.fail .badge.err").text == "529"
    assert model_call.one(".attempt.fail .msg").text == "overloaded (529)"
    assert "Model retry · attempt 2" in model_call.one(".attempt.ok").text
    assert "waited 0.5 s, then tried again" in model_call.one(".attempt.ok").text
    assert model_call.one(".attempt.ok code.request-id").text == "req_abc"
    assert model_call.one(".attempt.ok .meta").text == "812.4 ms"
    assert "tool_result sent to the model" in first.one("details.result summary").text
    children = first.select(".sub-agents li.sub-agent")
    assert "this call ran 2 sub-agents" in first.one(".sub-agents-head").text
    assert [a.text for a in first.select(".sub-agents li.sub-agent summary > a")] == [
        f"#{stock.pk} check stock",
        f"#{warehouse.pk} from the warehouse",
    ]
    assert children[0].one(".badge.sim").text == "simulated"
    assert children[1].one(".badge.imported").text.startswith("imported · OTLP")
    assert "2 steps · 1 failed step, 2 failed attempts · 1 retry · tokens 0 in · 0 out" in children[0].one(".meta").text

    assert "is-error" in second.classes
    assert [b.text for b in second.select(".step-head .badge")] == ["is_error", "business", "not retryable"]
    assert "cat-business" in second.one(".step-head .badge.cat-business").classes
    assert "0 retries" in second.one(".step-head .meta").text
    assert "(is_error: true)" in second.one("details.result summary").text
    assert second.one("details.result summary code").text == '{"error": "too old"}'
    assert second.one(".attempt.fail .outcome").text == "business · not retryable"

    assert answer.one(".step-head strong").text == "Final answer"
    assert answer.one("blockquote.answer").text == "Refund refused: the order is 239 days old."
    assert len(answer.select("blockquote.answer br")) == 1


def test_a_bare_policys_failed_attempt_says_what_the_tool_knew(admin_client):
    run = RunFactory(policy_name="starter")
    StepFactory(run=run, event=tool_step(1, [failed_attempt(1, category="business", message="too old")]))
    _, doc = run_page(admin_client, run)
    attempt = doc.one("#step-1 .attempt.fail")
    assert attempt.one(".outcome").text == 'bare "Error"'
    assert attempt.one(".msg").text == "tool knew: business · too old"


def test_an_mcp_attempt_says_what_the_server_and_the_harness_sent(admin_client):
    run = RunFactory()
    attempt = failed_attempt(1, category="validation", message="bad date", result_content="Error")
    attempt.transport, attempt.mcp_result, attempt.is_error = "mcp", {"isError": True}, True
    StepFactory(run=run, event=tool_step(1, [attempt]))
    _, doc = run_page(admin_client, run)
    assert doc.one("#step-1 .badge.transport").text == "MCP CallToolResult isError: true → tool_result is_error: true"


def test_a_step_the_run_ended_on_says_no_tool_result_was_sent_unless_the_run_was_imported(admin_client):
    executed = RunFactory(stop_reason=Run.StopReason.CRASHED)
    imported = RunFactory(source=Run.Source.IMPORT, model_backend="imported", stop_reason=Run.StopReason.CRASHED)
    for run in (executed, imported):
        StepFactory(run=run, event=tool_step(1, [failed_attempt(1, category="fatal")], result_content=None))
    _, doc = run_page(admin_client, executed)
    assert doc.one("#step-1 .step-head .badge.err").text == "run stopped · no tool_result"
    assert "No tool_result was sent to the model: the fatal error stopped the run here." in doc.one("#step-1").text
    _, doc = run_page(admin_client, imported)
    assert doc.one("#step-1 .step-head .badge.err").text == "is_error"
    assert doc.select("#step-1 details.result") != []


def test_a_model_stop_says_nothing_in_its_turn_was_executed(admin_client):
    run = RunFactory(stop_reason=Run.StopReason.MAX_TOKENS)
    StepFactory(run=run, event=tool_step(1, [ok_attempt(1)]), kind=Step.Kind.MODEL_STOP, api_stop_reason="max_tokens")
    _, doc = run_page(admin_client, run)
    step = doc.one("#step-1")
    assert step.one(".step-head strong").text == "Model stopped"
    assert step.one(".step-head .badge.err").text == "not executed"
    assert "· stop_reason max_tokens" in step.one(".step-head .meta").text
    assert "the reply was cut off (stop_reason max_tokens) while it wrote this call" in step.one("p.result").text


def test_what_a_trace_put_in_any_field_of_a_step_shows_as_text(admin_client):
    run = RunFactory(source=Run.Source.API, model_backend="imported", policy_settings={"error_format": "bare"})
    fail = failed_attempt(1, category=SCRIPT, message=SCRIPT, result_content=SCRIPT)
    fail.transport, fail.mcp_result = "mcp", {"isError": SCRIPT}
    ok = ok_attempt(2, {"html": SCRIPT}, result_content=SCRIPT)
    event = tool_step(1, [fail, ok], tool=SCRIPT, input={SCRIPT: SCRIPT}, result_content={"error": SCRIPT}, text=SCRIPT)
    event.model_attempts = [ModelAttempt(number=1, status=500, error=SCRIPT, request_id=SCRIPT)]
    StepFactory(run=run, event=event, category="<i>x</i>", api_stop_reason=SCRIPT)
    StepFactory(run=run, event=tool_step(2, [ok_attempt(1)], tool=SCRIPT), kind=Step.Kind.MODEL_STOP)
    StepFactory(run=run, event=final_step(3, f"{SCRIPT}\n{SCRIPT}"))
    RunFactory(parent=run, parent_step=1, label=SCRIPT, status=SCRIPT[:10], stop_reason=SCRIPT[:20])

    body, doc = run_page(admin_client, run)
    assert SCRIPT not in body and "<i>x</i>" not in body  # never the raw markup, in any form
    assert all(script.get("src") for script in doc.select("script"))  # no inline script appeared
    first = doc.one("#step-1")
    assert first.one("code.tool").text == SCRIPT
    assert first.one("code.input").text == f'{{"{SCRIPT}": "{SCRIPT}"}}'
    assert first.one(".step-head .badge[class*=cat-]").text == "<i>x</i>"
    assert f"stop_reason {SCRIPT}" in first.one(".step-head .meta").text
    assert first.one("p.said").text == f"Model: {SCRIPT}"
    tool_attempts = first.one("li.step > ol.attempts")
    assert tool_attempts.one(".attempt.fail .msg").text == f"tool knew: {SCRIPT} · {SCRIPT}"
    assert SCRIPT in tool_attempts.one(".attempt.ok details pre").text
    assert SCRIPT in first.one("details.result summary code").text and SCRIPT in first.one("details.result pre").text
    assert first.one(".model-call .msg").text == SCRIPT
    assert first.one(".model-call code.request-id").text == SCRIPT
    assert first.one(".sub-agents li.sub-agent summary > a").text.endswith(SCRIPT)
    assert doc.one("#step-2 code.tool").text == SCRIPT
    assert doc.one("#step-3 blockquote.answer").text == f"{SCRIPT} {SCRIPT}"


STEP_TEMPLATE = engines["django"].from_string("{% load timeline_tags %}{% step_items steps %}")
MARK = "<x-evil a='1'>\"&"
hostile = st.one_of(st.just(MARK), st.text(max_size=20).map(lambda t: t + MARK), st.none())
json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | hostile,
    lambda inner: st.lists(inner) | st.dictionaries(hostile.filter(bool), inner),
    max_leaves=6,
)


@given(
    texts=st.lists(hostile.map(lambda t: t or ""), min_size=8, max_size=8),
    values=st.lists(json_value, min_size=4, max_size=4),
    kind=st.sampled_from(list(Step.Kind.values)),
    is_error=st.booleans(),
    bare=st.booleans(),
)
@settings(max_examples=150, deadline=None)
def test_no_generated_text_in_a_step_becomes_markup(texts, values, kind, is_error, bare):
    tool, text, category, message, stop, label, request_id, error = texts
    attempt = Attempt(number=2, ok=not is_error, content=values[0], category=category, message=message, backoff_s=0.1)
    attempt_dict = attempt.to_dict() | {"transport": "mcp", "mcp_result": {"isError": values[1]}}
    step = Step(
        index=1,
        kind=kind,
        tool_name=tool,
        input=values[2],
        attempts=[attempt_dict, values[3]],
        result_content=values[3],
        is_error=is_error,
        category=category,
        text=text,
        api_stop_reason=stop,
        model_attempts=[ModelAttempt(number=1, error=error, request_id=request_id).to_dict(), {"number": 2}],
    )
    run = Run(pk=1, policy_settings={"error_format": "bare"} if bare else {})
    child = Run(pk=2, label=label, status=stop, stop_reason=stop, parent_step=1, source=Run.Source.API)
    sub_agents = SubAgents(runs=[child], by_step={1: [child]}, unplaced=[], tokens=(0, 0))
    html = STEP_TEMPLATE.render({"run": run, "steps": [step], "sub_agents": sub_agents})
    assert "<x-evil" not in html
    doc = parse(html)
    assert [n.tag for n in doc.descendants() if n.tag.startswith("x-")] == []
    assert doc.one("li.step")["id"] == "step-1"
