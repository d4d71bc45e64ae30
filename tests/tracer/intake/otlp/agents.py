"""Real agents traced by real instrumentation, for the OTLP corpus: an ``anthropic`` SDK tool loop over a
scripted Messages API (an httpx2 transport, as ``agents/llm/simulated.py`` plugs in), traced by
OpenInference (``openinference-instrumentation-anthropic``), OpenLLMetry
(``opentelemetry-instrumentation-anthropic``) and/or the SDK's own tracing (on by default once a
tracer provider is set; ``ANTHROPIC_OPEN_TELEMETRY=false`` turns it off,
``ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content`` carries the messages), with or without
``execute_tool`` spans of the agent's own; and a pydantic-ai ``Agent`` over the same scripted API,
traced by pydantic-ai's own instrumentation (``pydantic_ai_run``). No span here is written by hand:
the spans are what the packages make.

The SDK's tracing uses the global tracer provider, which OpenTelemetry lets a process set once: it
is set here, once, to a provider whose processor hands each span to the exporter of the agent run
under way (``traced``).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx2
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as genai

MODEL = "claude-haiku-4-5"


@dataclass
class Turn:
    """One scripted reply: its content blocks (text, tool_use, server tool blocks) and usage."""

    content: list[dict[str, Any]]
    input_tokens: int
    output_tokens: int
    stop_reason: str | None = None  # default: tool_use when it calls a tool, else end_turn


@dataclass
class Script:
    """What the model says, turn by turn, and what each tool answers, call by call (in order)."""

    task: str
    turns: list[Turn]
    # tool -> [(ok, content)], or (ok, content, how the tool span says it failed: an error.type, or an
    # exception it records)
    results: dict[str, list[tuple]] = field(default_factory=dict)

    @property
    def tokens(self) -> tuple[int, int]:
        return sum(t.input_tokens for t in self.turns), sum(t.output_tokens for t in self.turns)


def use(use_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": name, "input": args}


def text(words: str) -> dict[str, Any]:
    return {"type": "text", "text": words}


def structured(category: str, message: str, retryable: bool = False) -> str:
    return json.dumps({"isError": True, "errorCategory": category, "isRetryable": retryable, "message": message})


TOO_OLD = "Refunds close after 30 days. This order is 239 days old."

# A refund the tool refuses (business, structured), then the answer: 2 calls, 240/60 in all.
REFUND = Script(
    task="Please refund order 0871, the laptop stand is wobbly.",
    turns=[
        Turn([text("Refunding it."), use("toolu_r1", "process_refund", order_id="0871")], 120, 30),
        Turn([text("I couldn't refund order 0871: refunds close after 30 days; it is 239 days old.")], 120, 30),
    ],
    results={"process_refund": [(False, structured("business", TOO_OLD))]},
)

# A flaky lookup: a transient failure, the model sends the identical call again, it works, the answer:
# 3 calls, 360/90.
LOOKUP = Script(
    task="What orders does customer c-7 have?",
    turns=[
        Turn([use("toolu_l1", "lookup_orders", customer="c-7")], 120, 30),
        Turn([use("toolu_l2", "lookup_orders", customer="c-7")], 120, 30),
        Turn([text("Customer c-7 has one order, 0871.")], 120, 30),
    ],
    results={
        "lookup_orders": [
            (False, structured("transient", "the orders service timed out (503)", True)),
            (True, json.dumps({"orders": [{"id": "0871"}]})),
        ]
    },
)

# Four tool calls over four model calls, two of them failing (one says so in a structured error, the
# other only in the tool_result's is_error, which GenAI's messages drop), then the answer: 1600/245.
SUPPORT = Script(
    task="Customer c-7 wants order 0871 refunded and its invoice resent.",
    turns=[
        Turn([text("Looking the customer up."), use("toolu_s1", "lookup_orders", customer="c-7")], 200, 40),
        Turn([text("Refunding 0871."), use("toolu_s2", "process_refund", order_id="0871")], 300, 45),
        Turn([text("Resending the invoice."), use("toolu_s3", "send_invoice", order_id="0871")], 350, 50),
        Turn(
            [text("Trying the other address."), use("toolu_s4", "send_invoice", order_id="0871", to="billing")], 350, 50
        ),
        Turn([text("No refund (239 days old); the invoice went to billing.")], 400, 60),
    ],
    results={
        "lookup_orders": [(True, json.dumps({"orders": [{"id": "0871", "age_days": 239}]}))],
        "process_refund": [(False, structured("business", TOO_OLD))],
        "send_invoice": [(False, "mailbox full"), (True, json.dumps({"sent": True}))],
    },
)


# Three failures said only by the tool span: error.type "validation", a PermissionError recorded as an
# exception, a RuntimeError (which says no category), then the answer.
FAILURES = Script(
    task="Book room 4 for Friday.",
    turns=[
        Turn([use("toolu_f1", "free_slots", date="Friday")], 100, 10),
        Turn([use("toolu_f2", "book_slot", room="4")], 100, 10),
        Turn([use("toolu_f3", "notify", room="4")], 100, 10),
        Turn([text("I could not book room 4.")], 100, 10),
    ],
    results={
        "free_slots": [(False, "date must be YYYY-MM-DD", "validation")],
        "book_slot": [(False, "booking needs a manager", PermissionError("booking needs a manager"))],
        "notify": [(False, "notifier crashed", RuntimeError("notifier crashed"))],
    },
)


# A web search the API ran itself (a server tool) and that failed, then the answer without it.
SEARCH = Script(
    task="What is the refund window at Lumen Supply?",
    turns=[
        Turn(
            [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_01",
                    "name": "web_search",
                    "input": {"query": "Lumen refund"},
                },
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_01",
                    "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
                },
                text("I could not search the web; refunds usually close after 30 days."),
            ],
            150,
            40,
        ),
    ],
)


class _Transport(httpx2.BaseTransport):
    """The scripted Messages API: each request gets the script's next turn as a real Messages response."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.turn = 0

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        reply = self.script.turns[self.turn]
        self.turn += 1
        calls = any(b["type"] == "tool_use" for b in reply.content)
        body = {
            "id": f"msg_{id(self.script) % 10_000:04d}_{self.turn:02d}",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": reply.content,
            "stop_reason": reply.stop_reason or ("tool_use" if calls else "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
        }
        return httpx2.Response(200, json=body)


class _AsyncTransport(httpx2.AsyncBaseTransport):
    """The scripted Messages API for an ``AsyncAnthropic`` client (pydantic-ai's)."""

    def __init__(self, script: Script) -> None:
        self.scripted = _Transport(script)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        reply = self.scripted.handle_request(request)
        return httpx2.Response(reply.status_code, content=reply.content, headers=reply.headers)


class _Router(SpanProcessor):
    """The global provider's one processor: each span goes to the processor of the run under way."""

    current: SpanProcessor | None = None

    def on_start(self, span, parent_context=None) -> None:
        if self.current is not None:
            self.current.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self.current is not None:
            self.current.on_end(span)

    def shutdown(self) -> None: ...

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.current.force_flush(timeout_millis) if self.current is not None else True


ROUTER = _Router()
_GLOBAL = TracerProvider(resource=Resource({"service.name": "support-agent", "rlt.scenario": "corpus"}))
_GLOBAL.add_span_processor(ROUTER)
trace.set_tracer_provider(_GLOBAL)


@contextlib.contextmanager
def traced(processor: SpanProcessor | None = None) -> Iterator[InMemorySpanExporter]:
    """Spans of the run in the block go to ``processor`` (default: simple, into the exporter given)."""
    exporter = InMemorySpanExporter()
    ROUTER.current = processor or SimpleSpanProcessor(exporter)
    try:
        yield exporter
    finally:
        ROUTER.current.force_flush()
        ROUTER.current = None


INSTRUMENTATIONS = ("openinference", "openllmetry", "sdk")


@contextlib.contextmanager
def instrumented(name: str) -> Iterator[None]:
    """The named instrumentation on for the block ("sdk": none but the SDK's own)."""
    if name == "openinference":
        from openinference.instrumentation.anthropic import AnthropicInstrumentor
    elif name == "openllmetry":
        from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor
    else:
        yield
        return
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument(tracer_provider=_GLOBAL)
    try:
        yield
    finally:
        instrumentor.uninstrument()


def agent_run(
    script: Script,
    *,
    instrumentation: str,
    sdk_spans: bool = True,
    content: bool = False,
    tool_spans: bool = False,
    processor: Callable[[SpanExporter], SpanProcessor] | None = None,
    exporter: SpanExporter | None = None,
    late_tool: bool = False,
    conversation: list[dict[str, Any]] | None = None,
) -> list[ReadableSpan]:
    """Run ``script``'s agent once under ``instrumentation`` and return its spans: an ``invoke_agent``
    root, whatever the instrumentations made of each ``messages.create``, and with ``tool_spans`` an
    ``execute_tool`` span per call (status ERROR and ``error.type`` when it failed). ``sdk_spans``:
    the SDK's own tracing (its default) or off, as ``ANTHROPIC_OPEN_TELEMETRY=false`` turns it off;
    ``content``: its content mode. ``processor``/``exporter``: send the spans as they end (a batch
    processor over the OTLP exporter) instead of only keeping them. ``late_tool``: the agent also
    traces an ``audit_log`` tool call it started while the last model call was under way.
    ``conversation``: filled with the agent's messages as a Messages transcript holds them (each
    assistant message with its response's usage and stop reason)."""
    traces: dict[str, Any] = {"enabled": sdk_spans}
    if content:
        traces["content_mode"] = "content"
    transport = _Transport(script)
    client = anthropic.Anthropic(
        api_key="sk-test",
        http_client=httpx2.Client(transport=transport),
        max_retries=0,
        open_telemetry={"traces": traces},
    )
    tools = [
        {"name": name, "description": name, "input_schema": {"type": "object"}}
        for name in ("lookup_orders", "process_refund", "send_invoice", "free_slots", "book_slot", "notify")
    ]
    results = {name: list(answers) for name, answers in script.results.items()}
    memory = InMemorySpanExporter()
    sending = processor(exporter) if processor is not None and exporter is not None else None
    tee = _Tee([SimpleSpanProcessor(memory), *([sending] if sending else [])])
    tracer = _GLOBAL.get_tracer("support-agent")
    with traced(tee), instrumented(instrumentation):
        attributes = {genai.GEN_AI_OPERATION_NAME: "invoke_agent", genai.GEN_AI_AGENT_NAME: "support-agent"}
        with tracer.start_as_current_span("invoke_agent support-agent", attributes=attributes):
            messages: list[dict[str, Any]] = [{"role": "user", "content": script.task}]
            if conversation is not None:
                conversation[:] = [messages[0]]
            while True:
                asked_ns = time.time_ns()
                response = client.messages.create(model=MODEL, max_tokens=1024, tools=tools, messages=messages)
                answered_ns = time.time_ns()
                messages.append({"role": "assistant", "content": [b.model_dump() for b in response.content]})
                if conversation is not None:
                    usage = {"input_tokens": response.usage.input_tokens, "output_tokens": response.usage.output_tokens}
                    conversation.append({**messages[-1], "usage": usage, "stop_reason": response.stop_reason})
                uses = [b for b in response.content if b.type == "tool_use"]
                if not uses:
                    break
                answers = []
                for block in uses:
                    ok, said, *how = results[block.name].pop(0)
                    if tool_spans:
                        _tool_span(tracer, block, ok, said, how[0] if how else "tool_error")
                    answers.append(
                        {"type": "tool_result", "tool_use_id": block.id, "content": said, "is_error": not ok}
                    )
                messages.append({"role": "user", "content": answers})
                if conversation is not None:
                    conversation.append(messages[-1])
            if late_tool:
                attributes = {genai.GEN_AI_OPERATION_NAME: "execute_tool", genai.GEN_AI_TOOL_NAME: "audit_log"}
                late = tracer.start_span(
                    "execute_tool audit_log", attributes=attributes, start_time=(asked_ns + answered_ns) // 2
                )
                late.set_attribute(genai.GEN_AI_TOOL_CALL_RESULT, json.dumps({"logged": True}))
                late.end()
    return list(memory.get_finished_spans())


def _tool_span(tracer, block, ok: bool, said: str, how: str | BaseException) -> None:
    attributes = {
        genai.GEN_AI_OPERATION_NAME: "execute_tool",
        genai.GEN_AI_TOOL_NAME: block.name,
        genai.GEN_AI_TOOL_CALL_ID: block.id,
        genai.GEN_AI_TOOL_CALL_ARGUMENTS: json.dumps(block.input),
    }
    with tracer.start_as_current_span(f"execute_tool {block.name}", attributes=attributes) as span:
        span.set_attribute(genai.GEN_AI_TOOL_CALL_RESULT, said)
        if not ok:
            if isinstance(how, BaseException):
                span.record_exception(how)
            else:
                span.set_attribute("error.type", how)
            span.set_status(trace.Status(trace.StatusCode.ERROR, said[:200]))


class _Tee(SpanProcessor):
    def __init__(self, processors: list[SpanProcessor]) -> None:
        self.processors = processors

    def on_start(self, span, parent_context=None) -> None:
        for p in self.processors:
            p.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        for p in self.processors:
            p.on_end(span)

    def shutdown(self) -> None:
        for p in self.processors:
            p.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all(p.force_flush(timeout_millis) for p in self.processors)


def pydantic_ai_run(
    script: Script, *, sdk_spans: bool = True, exporter: SpanExporter | None = None
) -> list[ReadableSpan]:
    """Run ``script`` as a pydantic-ai ``Agent`` over an ``AnthropicModel`` whose ``AsyncAnthropic``
    client talks to the scripted API, instrumented by pydantic-ai itself (its ``Instrumentation``
    capability, GenAI conventions, over the tracer provider here), and return its spans: its
    ``invoke_agent`` root, a ``chat`` span per model call and an ``execute_tool`` span per tool call,
    with the SDK's own ``chat`` spans inside its own when ``sdk_spans``. A tool answers with the
    script's results in order: a structured error is returned as the tool's answer; a plain failure
    raises ``ModelRetry``, as a pydantic-ai tool asks the model to try again. ``exporter``: also send
    each span to it as it ends."""
    from pydantic_ai import Agent, ModelRetry, Tool
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.providers.anthropic import AnthropicProvider

    results = {name: list(answers) for name, answers in script.results.items()}

    def tool(name: str) -> Tool:
        def answer(**args: Any) -> str:
            ok, said, *_ = results[name].pop(0)
            if not ok and not json_value_is_error(said):
                raise ModelRetry(said)
            return said

        return Tool.from_schema(answer, name=name, description=name, json_schema={"type": "object"})

    client = anthropic.AsyncAnthropic(
        api_key="sk-test",
        http_client=httpx2.AsyncClient(transport=_AsyncTransport(script)),
        max_retries=0,
        open_telemetry={"traces": {"enabled": sdk_spans}},
    )
    agent = Agent(
        AnthropicModel(MODEL, provider=AnthropicProvider(anthropic_client=client)),
        name="support-agent",
        tools=[tool(name) for name in script.results],
        capabilities=[Instrumentation(settings=InstrumentationSettings(tracer_provider=_GLOBAL))],
    )
    memory = InMemorySpanExporter()
    sending = [SimpleSpanProcessor(exporter)] if exporter is not None else []
    with traced(_Tee([SimpleSpanProcessor(memory), *sending])):
        # a max_tokens this small keeps the request unstreamed, as the scripted API answers
        agent.run_sync(script.task, model_settings={"max_tokens": 1024})
    return list(memory.get_finished_spans())


def json_value_is_error(said: str) -> bool:
    """Whether a tool's answer is a structured error (``isError``), which a tool returns as its answer."""
    try:
        value = json.loads(said)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("isError") is True
