"""The diagnosis corpus's runs, each sent the way an outside agent sends it.

A case (``Case``) is an agent's run told once: the task, what the model says turn by turn, and for each
tool call the harness's tries of it (the last is what the model is sent). ``record(case, source)``
makes the run through one of the product's ways in and returns the stored ``Run``:

- ``transcript``: the Messages transcript the loop exchanged, imported by ``manage.py import_traces``;
- ``openinference``: an ``anthropic`` SDK tool loop over a scripted Messages API (an httpx2 transport, as
  ``agents/llm/simulated.py`` plugs in) instrumented by OpenInference (``openinference-instrumentation-
  anthropic``), its spans encoded by the OTLP exporter's encoder and sent to ``/v1/traces``;
- ``genai``: the same loop traced by the SDK's own OpenTelemetry tracing (GenAI semantic conventions,
  content recorded), with an ``execute_tool`` span of the agent's for each try of a call (attribute
  names from ``opentelemetry-semantic-conventions``), sent to ``/v1/traces``;
- ``api``: the step API (``POST /api/runs``, its steps with every try as an attempt, ``finish``).

No span is written by hand but the agent's own ``execute_tool`` spans, as GenAI's conventions ask an
agent to write them. A source shows what it carries: a transcript and an LLM-only trace hold what the
model was sent, not the harness's tries before it.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import httpx2
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.test import Client
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as genai

from tracer.models import Run
from tracer.tokens import token_create

MODEL = "claude-haiku-4-5"
RAISED = KeyError("to_currency")  # a try whose content is None raised this through the loop
SOURCES = ("transcript", "openinference", "genai", "api")


@dataclass
class Call:
    """One tool_use the model sends, and the harness's tries of it: (ok, content), the last one sent."""

    tool: str
    input: dict[str, Any]
    tries: list[tuple[bool, Any]]
    backoff_s: float = 0.0


@dataclass
class Case:
    """A run told once. ``turns``: each model turn, its tool calls or (the last) its answer's text."""

    name: str
    task: str
    turns: list[list[Call] | str]
    tools: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str = ""  # the API's and the GenAI root's named stop, when the run did not end on an answer

    @property
    def answer(self) -> str:
        return self.turns[-1] if isinstance(self.turns[-1], str) else ""


def tool(name: str, description: str, properties: dict[str, Any] | None = None, **annotations: bool):
    """A tool definition as the Messages API takes it, with MCP annotations when given."""
    out: dict[str, Any] = {
        "name": name,
        "description": description,
        "input_schema": {"type": "object", "properties": properties or {}},
    }
    if annotations:
        out["annotations"] = annotations
    return out


def structured(category: str, message: str, retryable: bool | None = None) -> dict[str, Any]:
    """Lesson 002's structured failure."""
    flag = category == "transient" if retryable is None else retryable
    return {"isError": True, "error": {"errorCategory": category, "isRetryable": flag, "message": message}}


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content)


# --- the model's side: the loop's messages, and a scripted Messages API -------------------------------


def _uses(case: Case) -> list[list[tuple[str, Call]]]:
    """Each turn's tool_use ids and calls."""
    out, n = [], 0
    for turn in case.turns:
        if isinstance(turn, str):
            break
        row = []
        for call in turn:
            n += 1
            row.append((f"toolu_{n:02d}", call))
        out.append(row)
    return out


def _reply(case: Case, k: int) -> list[dict[str, Any]]:
    turn = case.turns[k]
    if isinstance(turn, str):
        return [{"type": "text", "text": turn}]
    return [{"type": "tool_use", "id": use_id, "name": c.tool, "input": c.input} for use_id, c in _uses(case)[k]]


def _usage(k: int) -> dict[str, int]:
    return {"input_tokens": 200 + 100 * k, "output_tokens": 40}


def transcript_of(case: Case) -> dict[str, Any]:
    """The Messages exchange the loop had: the task, each reply (with its usage), each result sent."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": case.task}]
    uses = _uses(case)
    for k in range(len(case.turns)):
        messages.append({"role": "assistant", "content": _reply(case, k), "usage": _usage(k)})
        if k < len(uses):
            results = []
            for use_id, call in uses[k]:
                ok, content = call.tries[-1]
                results.append(
                    {"type": "tool_result", "tool_use_id": use_id, "content": _text(content), "is_error": not ok}
                )
            messages.append({"role": "user", "content": results})
    return {"model": MODEL, "tools": case.tools, "messages": messages}


class _Model(httpx2.BaseTransport):
    """The scripted Messages API: each request gets the case's next turn as a real Messages response."""

    def __init__(self, case: Case) -> None:
        self.case, self.turn = case, 0

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        content = _reply(self.case, self.turn)
        body = {
            "id": f"msg_{self.turn:02d}",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": content,
            "stop_reason": "tool_use" if content[-1]["type"] == "tool_use" else "end_turn",
            "stop_sequence": None,
            "usage": _usage(self.turn),
        }
        self.turn += 1
        return httpx2.Response(200, json=body)


class _Router(SpanProcessor):
    """On the global provider: each span goes to the processor of the run under way, if any."""

    current: SpanProcessor | None = None

    def on_start(self, span, parent_context=None) -> None:
        if self.current is not None:
            self.current.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self.current is not None:
            self.current.on_end(span)

    def shutdown(self) -> None: ...

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


ROUTER = _Router()


def _global_provider() -> TracerProvider:
    """The process's one global provider (the SDK's own tracing uses it), with this module's router on it;
    OpenTelemetry lets a process set it once, so one another test module set is used as it is."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider(resource=Resource({"service.name": "corpus-agent"})))
        provider = trace.get_tracer_provider()
    if not getattr(provider, "_corpus_router", False):
        provider.add_span_processor(ROUTER)
        provider._corpus_router = True
    return provider


@contextlib.contextmanager
def _captured() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    ROUTER.current = SimpleSpanProcessor(memory)
    try:
        yield memory
    finally:
        ROUTER.current = None


def agent_spans(case: Case, *, source: str) -> list[ReadableSpan]:
    """Run the case's agent once with the SDK and the instrumentation of ``source``; its spans."""
    provider = _global_provider()
    instrumentor = None
    if source == "openinference":
        from openinference.instrumentation.anthropic import AnthropicInstrumentor

        instrumentor = AnthropicInstrumentor()
    traces = {"enabled": source == "genai", "content_mode": "content"}
    client = anthropic.Anthropic(
        api_key="sk-test",
        http_client=httpx2.Client(transport=_Model(case)),
        max_retries=0,
        open_telemetry={"traces": traces},
    )
    tracer = provider.get_tracer("corpus-agent")
    uses = _uses(case)
    with _captured() as memory:
        if instrumentor is not None:
            instrumentor.instrument(tracer_provider=provider)
        try:
            root_attrs = (
                {"openinference.span.kind": "AGENT", "input.value": case.task}
                if source == "openinference"
                else {genai.GEN_AI_OPERATION_NAME: "invoke_agent", genai.GEN_AI_AGENT_NAME: "corpus-agent"}
            )
            if case.stop_reason:
                root_attrs["rlt.stop_reason"] = case.stop_reason
            with tracer.start_as_current_span(f"agent {case.name}", attributes=root_attrs):
                messages: list[dict[str, Any]] = [{"role": "user", "content": case.task}]
                for k in range(len(case.turns)):
                    response = client.messages.create(
                        model=MODEL, max_tokens=1024, tools=case.tools or anthropic.NOT_GIVEN, messages=messages
                    )
                    messages.append({"role": "assistant", "content": [b.model_dump() for b in response.content]})
                    if k >= len(uses):
                        break
                    results = []
                    for (use_id, call), block in zip(
                        uses[k], [b for b in response.content if b.type == "tool_use"], strict=True
                    ):
                        assert block.id == use_id
                        if source == "genai":
                            for ok, content in call.tries:
                                raised = RAISED if content is None else None
                                _tool_span(tracer, block, ok, _text(content), raised)
                        ok, content = call.tries[-1]
                        results.append(
                            {
                                "type": "tool_result",
                                "tool_use_id": use_id,
                                "content": _text(content),
                                "is_error": not ok,
                            }
                        )
                    messages.append({"role": "user", "content": results})
        finally:
            if instrumentor is not None:
                instrumentor.uninstrument()
        return list(memory.get_finished_spans())


def _tool_span(tracer, block, ok: bool, said: str, raised: BaseException | None = None) -> None:
    attributes = {
        genai.GEN_AI_OPERATION_NAME: "execute_tool",
        genai.GEN_AI_TOOL_NAME: block.name,
        genai.GEN_AI_TOOL_CALL_ID: block.id,
        genai.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps(block.input),
    }
    with tracer.start_as_current_span(
        f"execute_tool {block.name}", attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        if raised is not None:  # the tool raised through the loop: no result, the exception recorded
            span.record_exception(raised)
            span.set_attribute("error.type", type(raised).__name__)
            span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(raised).__name__}: {raised}"))
            return
        span.set_attribute(genai.GEN_AI_TOOL_CALL_RESULT, said)
        if not ok:
            span.set_attribute("error.type", "tool_error")
            span.set_status(trace.Status(trace.StatusCode.ERROR, said[:200]))


# --- the product's side: each way in ---------------------------------------------------------------


def sender():
    """A user who may add runs, and an API token of theirs."""
    user = get_user_model().objects.create_user(username=f"corpus-{get_user_model().objects.count()}")
    user.user_permissions.add(Permission.objects.get(codename="add_run", content_type__app_label="tracer"))
    return user, token_create(user=user, name="corpus")[1]


def _steps(case: Case) -> list[dict[str, Any]]:
    steps = []
    uses = _uses(case)
    for k, row in enumerate(uses):
        for j, (use_id, call) in enumerate(row):
            attempts = [
                {
                    "number": n,
                    "ok": ok,
                    "content": content if ok else None,
                    "result_content": content,
                    "message": None if ok else _message(content),
                    "backoff_s": call.backoff_s if n > 1 else 0,
                }
                for n, (ok, content) in enumerate(call.tries, start=1)
            ]
            ok, content = call.tries[-1]
            usage = _usage(k) if j == 0 else {"input_tokens": 0, "output_tokens": 0}
            steps.append(
                {
                    "kind": "tool_use",
                    "tool_name": call.tool,
                    "tool_use_id": use_id,
                    "input": call.input,
                    "attempts": attempts,
                    "result_content": content,
                    "is_error": not ok,
                    **usage,
                }
            )
    if case.answer:
        steps.append({"kind": "final_answer", "text": case.answer, **_usage(len(uses))})
    return steps


def _message(content: Any) -> str:
    if isinstance(content, dict) and isinstance(content.get("error"), dict):
        return str(content["error"].get("message", ""))
    return _text(content)


def record(case: Case, source: str) -> Run:
    """The case sent through ``source``; the run it became, diagnosed when it ended."""
    user, secret = sender()
    client = Client()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    if source == "transcript":
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / f"{case.name}.json"
            path.write_text(json.dumps(transcript_of(case)))
            call_command(
                "import_traces",
                str(path),
                "--scenario",
                "corpus",
                "--policy",
                "outside",
                "--user",
                user.get_username(),
                stdout=io.StringIO(),
            )
    elif source in ("openinference", "genai"):
        body = encode_spans(agent_spans(case, source=source)).SerializeToString()
        response = client.post("/v1/traces", data=body, content_type="application/x-protobuf", **auth)
        assert response.status_code == 200, response.content
    elif source == "api":
        opened = client.post(
            "/api/runs",
            {"model": MODEL, "task": case.task, "scenario": "corpus"},
            content_type="application/json",
            **auth,
        )
        assert opened.status_code == 201, opened.content
        run_id = opened.json()["id"]
        steps = _steps(case)
        if steps:
            sent = client.post(f"/api/runs/{run_id}/steps", {"steps": steps}, content_type="application/json", **auth)
            assert sent.status_code == 200, sent.content
        end = {"stop_reason": case.stop_reason} if case.stop_reason else {}
        done = client.post(f"/api/runs/{run_id}/finish", end, content_type="application/json", **auth)
        assert done.status_code == 200, done.content
    else:
        raise ValueError(f"unknown source {source!r}; expected one of {', '.join(SOURCES)}")
    return Run.objects.get(owner=user)
