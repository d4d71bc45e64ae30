"""The spans of one trace, read as one run: its steps, how it ended and its labels. No database.

Two conventions are read, span by span, whichever a span carries:

- OpenInference: ``openinference.span.kind`` (AGENT, CHAIN, LLM, TOOL), ``input.value`` and
  ``output.value``, ``tool.name``, ``llm.output_messages.0.message.*`` (text and ``tool_calls``),
  ``llm.token_count.prompt`` / ``completion``, ``llm.model_name``, ``metadata`` (JSON).
- OpenTelemetry GenAI: ``gen_ai.operation.name`` (``chat``, ``execute_tool``, ``invoke_agent``),
  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments`` / ``.result``,
  ``gen_ai.output.messages``, ``gen_ai.usage.input_tokens`` / ``output_tokens``, ``error.type``.

A trace with tool spans (TOOL, ``execute_tool``) has one step per tool call: spans that share a
``gen_ai.tool.call.id`` are the attempts of one call (the harness retried it). A failed tool span
(status ERROR, ``error.type`` or an ``exception`` event) is a step with ``is_error``. A trace with
LLM spans only (an agent whose tools are not instrumented) has its steps in the conversation: the
last Messages API request and response (``input.value`` and ``output.value``, which keep each
tool_result's ``is_error``, unlike ``llm.input_messages``) are read as a transcript by
``tracer.ingest``, tool_use to tool_result by ``tool_use_id``.

Labels (``rlt.scenario``, ``rlt.policy``, ``rlt.verdict``, ``rlt.verdict.reason``,
``rlt.stop_reason``, ``rlt.error.category``, ``rlt.error.retryable``, ``rlt.model_retry_count``) are read
from the span, then the root span, then the resource; docs/otlp.md lists every name and its fallbacks.
A chat span's ``rlt.model_attempts`` (this tracer's export) are its call's HTTP attempts: on a
succeeded call, the step's; on a last call that failed (status ERROR), the call that ended the run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from pydantic import ValidationError

from agents.events import Attempt, ModelAttempt, StepEvent
from agents.vocabulary import API_STOPS_ENDING_A_RUN, ErrorCategory, StepKind, StopReason

from ..ingest import (
    FORMAT,
    INT_MAX,
    AttemptIn,
    ModelAttemptIn,
    RunDocument,
    RunMeta,
    document_validate,
    transcript_to_document,
)
from ..json_input import json_parse
from .wire import STATUS_ERROR, Span, clean

LLM = "LLM"
TOOL = "TOOL"
AGENT = "AGENT"
OTHER = "OTHER"

GENAI_KINDS = {
    "chat": LLM,
    "text_completion": LLM,
    "generate_content": LLM,
    "execute_tool": TOOL,
    "invoke_agent": AGENT,
    "create_agent": AGENT,
}
CATEGORIES = {c.value for c in ErrorCategory}
# Attempt fields no convention names, which the export writes as rlt.attempt.<name> (JSON) to read back
EXTRA_ATTEMPT_FIELDS = ("is_error", "transport", "mcp_result")
# A model call's HTTP attempts (status, request-id, wait…), which GenAI has no name for: a JSON list of
# ``agents.events.ModelAttempt`` on the chat span, written by the export and read back
MODEL_ATTEMPTS = "rlt.model_attempts"
# The run's model retries (a coordinator's include its sub-agents'), on the root span: no GenAI name either
MODEL_RETRY_COUNT = "rlt.model_retry_count"
STOP_REASONS = {r.value for r in StopReason}


def span_kind(span: Span) -> str:
    """LLM, TOOL, AGENT or OTHER, by OpenInference's span kind or GenAI's operation name."""
    attrs = span.attributes
    kind = attrs.get("openinference.span.kind")
    if isinstance(kind, str) and kind.upper() in (LLM, TOOL, AGENT):
        return kind.upper()
    op = attrs.get("gen_ai.operation.name")
    if isinstance(op, str) and op in GENAI_KINDS:
        return GENAI_KINDS[op]
    if isinstance(kind, str):
        return OTHER
    if "gen_ai.tool.name" in attrs or "tool.name" in attrs:
        return TOOL
    return OTHER


def _json(value: Any) -> Any:
    """A JSON string's value, or the value itself when it is not JSON."""
    if isinstance(value, str) and value[:1] in ("{", "[", '"'):
        return _loads(value, default=value)
    return value


def _loads(text: str, *, default: Any) -> Any:
    """``json_parse``, with NUL characters (``\\u0000``, which PostgreSQL cannot store) made U+FFFD."""
    try:
        value = json_parse(text)
    except ValueError:
        return default
    return _cleaned(value) if "\\u0000" in text else value


def _cleaned(value: Any) -> Any:
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, list):
        return [_cleaned(v) for v in value]
    if isinstance(value, dict):
        return {clean(k): _cleaned(v) for k, v in value.items()}
    return value


def _encoding_of(mime_type: Any) -> str | None:
    if mime_type == "application/json":
        return "json"
    if mime_type == "text/plain":
        return "text"
    return None


def _decoded(value: Any, encoding: str | None) -> Any:
    """A value as sent: JSON when the sender says so (``*.mime_type``, ``rlt.result.encoding``), text
    when it says text, and when it says nothing, JSON if it reads as a JSON object, array or string."""
    if encoding == "text" or not isinstance(value, str):
        return value
    if encoding == "json":
        return _loads(value, default=value)
    return _json(value)


def _metadata(span: Span) -> dict[str, Any]:
    meta = _json(span.attributes.get("metadata"))
    return meta if isinstance(meta, dict) else {}


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _int(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


@dataclass
class LlmCall:
    start_ns: int
    end_ns: int
    failed: bool
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"id", "name", "arguments"}
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""
    raw_request: Any = None  # input.value, read only when the conversation is needed
    raw_response: Any = None  # output.value
    tokens_used: bool = False  # already counted in a step
    finish_reason: str = ""  # why the model stopped (the Messages API's stop_reason), when the span says
    model_attempts: list[ModelAttempt] = field(default_factory=list)  # rlt.model_attempts, given to one step

    @cached_property
    def request(self) -> dict[str, Any] | None:
        """The Messages API request the span carries in ``input.value``, if it is one (read once)."""
        request = _json(self.raw_request)
        return request if isinstance(request, dict) and isinstance(request.get("messages"), list) else None

    @cached_property
    def response(self) -> dict[str, Any] | None:
        """Its response, from ``output.value``, if it is one (read once)."""
        response = _json(self.raw_response)
        if isinstance(response, dict) and isinstance(response.get("content"), list) and response.get("role"):
            return response
        return None


@dataclass
class ToolCall:
    start_ns: int
    end_ns: int
    name: str
    call_id: str
    input: Any
    result: Any
    is_error: bool
    message: str
    category: str | None
    retryable: bool | None
    content: Any = None  # what the tool itself produced (rlt.attempt.content), when it differs from result
    empty: bool = False  # ok, but nothing found (rlt.attempt.empty)
    content_given: bool = False  # the sender said what the tool produced (rlt.attempt.content)
    extra: dict[str, Any] = field(default_factory=dict)  # other Attempt fields, from rlt.attempt.<name>


def _llm_call(span: Span) -> LlmCall:
    a = span.attributes
    call = LlmCall(start_ns=span.start_ns, end_ns=span.end_ns, failed=span.status_code == STATUS_ERROR)
    call.model = _text(a.get("llm.model_name") or a.get("gen_ai.response.model") or a.get("gen_ai.request.model"))
    call.input_tokens = _int(a.get("llm.token_count.prompt", a.get("gen_ai.usage.input_tokens")))
    call.output_tokens = _int(a.get("llm.token_count.completion", a.get("gen_ai.usage.output_tokens")))
    call.raw_request = a.get("input.value")
    call.raw_response = a.get("output.value")
    # OpenInference: the first output message, its text and tool calls
    prefix = "llm.output_messages.0.message."
    texts = []
    if isinstance(a.get(prefix + "content"), str):
        texts.append(a[prefix + "content"])
    j = 0
    while f"{prefix}contents.{j}.message_content.type" in a or f"{prefix}contents.{j}.message_content.text" in a:
        if a.get(f"{prefix}contents.{j}.message_content.type", "text") == "text":
            texts.append(_text(a.get(f"{prefix}contents.{j}.message_content.text")))
        j += 1
    k = 0
    while f"{prefix}tool_calls.{k}.tool_call.function.name" in a:
        tc = f"{prefix}tool_calls.{k}.tool_call."
        call.tool_calls.append(
            {
                "id": _text(a.get(tc + "id")),
                "name": _text(a.get(tc + "function.name")),
                "arguments": _json(a.get(tc + "function.arguments")),
            }
        )
        k += 1
    # GenAI: gen_ai.output.messages (JSON), parts of type text and tool_call
    messages = _json(a.get("gen_ai.output.messages"))
    if not texts and not call.tool_calls and isinstance(messages, list):
        for message in messages[:1]:
            for part in message.get("parts") or [] if isinstance(message, dict) else []:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text":
                    texts.append(_text(part.get("content")))
                elif part.get("type") == "tool_call":
                    call.tool_calls.append(
                        {
                            "id": _text(part.get("id")),
                            "name": _text(part.get("name")),
                            "arguments": _json(part.get("arguments")),
                        }
                    )
    # The Messages API response itself, when neither convention listed its blocks
    response = call.response if not texts and not call.tool_calls else None
    if response is not None:
        for block in response["content"]:
            if isinstance(block, dict) and block.get("type") == "text":
                texts.append(_text(block.get("text")))
            elif isinstance(block, dict) and block.get("type") == "tool_use":
                call.tool_calls.append(
                    {"id": block.get("id", ""), "name": block.get("name", ""), "arguments": block.get("input")}
                )
    call.text = "\n".join(t for t in texts if t)
    call.finish_reason = _finish_reason(a, messages, call)
    if MODEL_ATTEMPTS in a:
        call.model_attempts = _model_attempts(a[MODEL_ATTEMPTS])
    return call


def _model_attempts(value: Any) -> list[ModelAttempt]:
    """``rlt.model_attempts``' attempts, each read as the run document reads one; an entry that is not
    one is left out rather than refusing the trace for it."""
    items = _json(value)
    attempts = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        try:
            known = {k: v for k, v in item.items() if k in ModelAttemptIn.model_fields}
            attempts.append(ModelAttemptIn.model_validate(known).to_model_attempt())
        except ValidationError:
            continue
    return attempts


def _take_model_attempts(call: LlmCall) -> list[ModelAttempt]:
    """The call's model attempts for the first step its reply made; none for the steps after it."""
    taken, call.model_attempts = call.model_attempts, []
    return taken


def _finish_reason(a: dict[str, Any], messages: Any, call: LlmCall) -> str:
    """``gen_ai.response.finish_reasons``' first, else the output message's ``finish_reason``, else the
    Messages API response's ``stop_reason``; "" when the span names none."""
    reasons = a.get("gen_ai.response.finish_reasons")
    if isinstance(reasons, (list, tuple)) and reasons and isinstance(reasons[0], str):
        return reasons[0][:40]
    if isinstance(messages, list) and messages and isinstance(messages[0], dict):
        reason = messages[0].get("finish_reason")
        if isinstance(reason, str) and reason:
            return reason[:40]
    raw = call.raw_response
    if isinstance(raw, str) and "stop_reason" not in raw and "\\u" not in raw:
        return ""  # no stop_reason key in its JSON (not even spelled with escapes): not read for nothing
    response = call.response
    reason = response.get("stop_reason") if response is not None else None
    return reason[:40] if isinstance(reason, str) else ""


def _answer_step(call: LlmCall, *, index: int, tokens: tuple[int, int]) -> StepEvent:
    """The step of a model call that ended the run: its final answer, or, when the API's stop reason
    says the reply was cut off or refused, the turn that ended it unexecuted (``model_stop``)."""
    if call.finish_reason not in API_STOPS_ENDING_A_RUN:
        return StepEvent(
            index=index,
            kind=StepKind.FINAL_ANSWER,
            text=call.text,
            input_tokens=tokens[0],
            output_tokens=tokens[1],
            api_stop_reason=call.finish_reason or None,
            model_attempts=_take_model_attempts(call),
        )
    cut = call.tool_calls[-1] if call.tool_calls else None  # the call it was writing, never run
    arguments = cut["arguments"] if cut else None
    return StepEvent(
        index=index,
        kind=StepKind.MODEL_STOP,
        tool_name=cut["name"] or None if cut else None,
        tool_use_id=cut["id"] or None if cut else None,
        input=(arguments if isinstance(arguments, dict) else {"input": arguments}) if cut else None,
        text=call.text or None,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        api_stop_reason=call.finish_reason,
        model_attempts=_take_model_attempts(call),
    )


def _ends_the_run(call: LlmCall) -> bool:
    """A model call whose reply is the run's last step: a text answer, or a turn the API cut off or
    refused (whatever it holds)."""
    return not call.failed and (
        (not call.tool_calls and bool(call.text)) or call.finish_reason in API_STOPS_ENDING_A_RUN
    )


def _error_message(span: Span) -> str:
    for event in span.events:
        if event.get("name") == "exception":
            message = event["attributes"].get("exception.message")
            if message:
                return _text(message)
    return span.status_message or _text(span.attributes.get("error.type"))


def _tool_call(span: Span, labels: Labels) -> ToolCall:
    a = span.attributes
    name = a.get("gen_ai.tool.name") or a.get("tool.name")
    if not name:
        name = span.name.removeprefix("execute_tool ").strip() or span.name
    if "gen_ai.tool.call.arguments" in a:
        args = _json(a["gen_ai.tool.call.arguments"])
    else:
        args = _decoded(a.get("input.value"), _encoding_of(a.get("input.mime_type")))
    if args is not None and not isinstance(args, dict):
        args = {"input": args}
    if "gen_ai.tool.call.result" in a:
        result = _decoded(a["gen_ai.tool.call.result"], a.get("rlt.result.encoding"))
    else:
        result = _decoded(a.get("output.value"), _encoding_of(a.get("output.mime_type")))
    failed = (
        span.status_code == STATUS_ERROR
        or bool(a.get("error.type"))
        or any(e.get("name") == "exception" for e in span.events)
    )
    # a structured error (lesson 002): isError, errorCategory, isRetryable, at the top or under "error"
    structured: dict[str, Any] = {}
    if isinstance(result, dict):
        structured = result.get("error") if isinstance(result.get("error"), dict) else result
        if result.get("isError") is True or structured.get("isError") is True:
            failed = True
    category = retryable = None  # kept for a failed call only: its metadata is read only then
    if failed:
        category = labels.first(span, "rlt.error.category") or _metadata(span).get("error_category")
        if category not in CATEGORIES:
            category = structured.get("errorCategory") if structured.get("errorCategory") in CATEGORIES else None
        retryable = _bool(labels.first(span, "rlt.error.retryable"))
        if retryable is None:
            retryable = _bool(structured.get("isRetryable"))
    message = _error_message(span) if failed else ""
    if failed and result is None:
        result = message or "Error"
    return ToolCall(
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        name=_text(name)[:100],
        call_id=_text(a.get("gen_ai.tool.call.id") or a.get("tool_call.id"))[:100],
        input=args,
        result=result,
        is_error=failed,
        message=message,
        category=category if failed else None,
        retryable=retryable if failed else None,
        content=_decoded(a["rlt.attempt.content"], "json") if "rlt.attempt.content" in a else result,
        empty=_bool(a.get("rlt.attempt.empty")) or False,
        content_given="rlt.attempt.content" in a,
        extra={
            name: _decoded(a[f"rlt.attempt.{name}"], "json")
            for name in EXTRA_ATTEMPT_FIELDS
            if f"rlt.attempt.{name}" in a
        },
    )


class Labels:
    """``rlt.*`` and friends, looked up on a span, then the root span, then the resource."""

    def __init__(self, spans: list[Span], root: Span | None) -> None:
        self.root = root
        self.resource = (root or spans[0]).resource if spans else {}
        self.root_meta = _metadata(root) if root else {}

    def first(self, span: Span | None, key: str) -> Any:
        for source in (span.attributes if span else None, self.root.attributes if self.root else None, self.resource):
            if source and source.get(key) not in (None, ""):
                return source[key]
        return None

    def run_label(self, key: str, meta_key: str) -> str:
        value = self.first(None, key)
        if value in (None, ""):
            value = self.root_meta.get(meta_key)
        return _text(value) if value not in (None, "") else ""


@dataclass
class TraceReading:
    """What a trace says about its run so far: the run's fields in ``tracer.ingest``'s run document
    terms (``meta``: status ``finished`` and how it ended once the root span is in, ``running``
    until then) and its steps."""

    complete: bool  # the root span has arrived
    meta: dict[str, Any]  # RunMeta's fields the trace says something about
    steps: list[StepEvent]
    _document: RunDocument | None = None

    def document(self) -> RunDocument:
        """The run document (``rlt.run/1``) of this reading, validated as any document is."""
        if self._document is None:
            steps = [s.to_dict() for s in self.steps]
            for step in steps:  # the document's schema knows the attempt fields it knows
                step["attempts"] = [
                    {k: v for k, v in a.items() if k in AttemptIn.model_fields} for a in step["attempts"]
                ]
            data = {"format": FORMAT, "run": self.meta, "steps": steps}
            self._document = document_validate(data)
        return self._document


def trace_read(trace_id: str, spans: list[Span]) -> TraceReading:
    """The run that ``spans`` (one trace's, in any order) describe. ``IngestError`` when what they
    say cannot be recorded (e.g. a conversation whose tool_result matches no tool_use)."""
    spans = sorted(spans, key=lambda s: (s.start_ns, s.end_ns, s.span_id))
    roots = [s for s in spans if not s.parent_span_id]
    root = roots[0] if roots else None
    labels = Labels(spans, root)
    llm_calls: list[LlmCall] = []
    tools: list[ToolCall] = []
    for span in spans:
        kind = span_kind(span)
        if kind == LLM:
            llm_calls.append(_llm_call(span))
        elif kind == TOOL:
            tools.append(_tool_call(span, labels))
    complete = root is not None
    service = _text(labels.resource.get("service.name"))
    meta: dict[str, Any] = {
        "external_id": trace_id,
        "scenario": labels.run_label("rlt.scenario", "scenario")[:100],
        "policy": (labels.run_label("rlt.policy", "policy") or service)[:40],
        "source": service[:200],
        # the model its calls name, else the one the root names (a run that made no call)
        "model": (
            next((c.model for c in reversed(llm_calls) if c.model), "")
            or _text(root.attributes.get("gen_ai.request.model") if root is not None else "")
        )[:100],
        "task": _task(root, llm_calls),
        "status": "finished" if complete else "running",
        "labels": _labels(labels),
    }
    started = root.start_ns if root is not None else (spans[0].start_ns if spans else 0)
    if started:
        meta["started_at"] = _when(started)
    verdict = _text(labels.first(None, "rlt.verdict")).lower()
    if verdict in ("pass", "fail"):
        meta["verdict"] = verdict
        meta["verdict_reason"] = _text(labels.first(None, "rlt.verdict.reason"))

    document = None
    final = None
    steps: list[StepEvent] = []
    if tools:
        steps, final = _steps_from_tool_spans(tools, llm_calls)
    elif llm_calls:
        transcript = _transcript(llm_calls, complete=complete)
        if transcript is not None:
            # the conversation, read as a Messages transcript by tracer.ingest
            document = transcript_to_document(transcript=transcript, meta=RunMeta(**_present(meta)))
            steps = [step.to_event(index=k) for k, step in enumerate(document.steps, start=1)]
            answers = [s.text or "" for s in steps if s.kind == StepKind.FINAL_ANSWER]
            final = answers[-1] if answers else None
            meta["model"] = meta["model"] or document.run.model
            meta["task"] = meta["task"] or document.run.task
            meta["transcript"] = transcript
        else:  # no Messages API request to read: the model's last words, if any
            last = llm_calls[-1]
            if _ends_the_run(last):
                steps = [_answer_step(last, index=1, tokens=(last.input_tokens, last.output_tokens))]
                final = last.text if steps[0].kind == StepKind.FINAL_ANSWER else None
    if document is None and final is None and root is not None and root.status_code != STATUS_ERROR:
        answer = _decoded(root.attributes.get("output.value"), _encoding_of(root.attributes.get("output.mime_type")))
        stop = labels.run_label("rlt.stop_reason", "stop_reason")
        if span_kind(root) == AGENT and answer not in (None, "") and stop in ("", StopReason.FINAL_ANSWER):
            final = _text(answer)
            steps.append(StepEvent(index=len(steps) + 1, kind=StepKind.FINAL_ANSWER, text=final))
    if complete:
        meta.update(_end(root, labels, final))
        meta.update(_model_calls_end(llm_calls, labels))
    meta = _present(meta)
    reading = TraceReading(complete=complete, meta=meta, steps=steps)
    if document is not None:
        reading._document = RunDocument(format=FORMAT, run=RunMeta(**meta), steps=document.steps)
    return reading


def _when(ns: int) -> datetime:
    """A span time in nanoseconds as a datetime, to the microsecond in integers (through a float, a
    time of this decade lands a microsecond off)."""
    return EPOCH + timedelta(microseconds=ns // 1000)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _present(meta: dict[str, Any]) -> dict[str, Any]:
    """The fields a trace said something about (a document's unset fields take its defaults)."""
    return {k: v for k, v in meta.items() if v not in ("", None)}


def _labels(labels: Labels) -> dict[str, Any]:
    """The run's labels: the root's ``rlt.labels`` (a JSON object of names and plain values, as this
    tracer's export writes a run's own labels) when it has one, else the sender's ``rlt.*``
    attributes (root span, then resource) and its service."""
    given = _json(labels.root.attributes.get("rlt.labels")) if labels.root else None
    if isinstance(given, dict):
        return {
            str(key)[:100]: value[:1000] if isinstance(value, str) else value
            for key, value in given.items()
            if value is None or isinstance(value, (str, int, float, bool))
        }
    out: dict[str, Any] = {}
    for source in (labels.resource, labels.root.attributes if labels.root else {}):
        for key, value in source.items():
            if (key.startswith("rlt.") or key == "service.name") and isinstance(value, (str, int, float, bool)):
                out[key[:100]] = value if not isinstance(value, str) else value[:1000]
    return out


def _transcript(calls: list[LlmCall], *, complete: bool) -> dict[str, Any] | None:
    """The conversation of an LLM-only trace: the last Messages API request and, once the trace is
    complete or when it asked for no tool, its response. Earlier assistant turns get the token
    counts of the LLM spans that produced them, in order."""
    asked = [(c, request) for c in calls if (request := c.request) is not None]
    if not asked:
        return None
    last, request = max(asked, key=lambda pair: (len(pair[1]["messages"]), pair[0].start_ns))
    messages = [dict(m) if isinstance(m, dict) else m for m in request["messages"]]
    turns = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"]
    earlier = [c for c in calls if c is not last and not c.failed and c.start_ns <= last.start_ns]
    if len(earlier) == len(turns):
        for i, call in zip(turns, earlier, strict=True):
            messages[i].setdefault("usage", {"input_tokens": call.input_tokens, "output_tokens": call.output_tokens})
    response = last.response
    if response is not None and (complete or not last.tool_calls):
        usage = response.get("usage") or {"input_tokens": last.input_tokens, "output_tokens": last.output_tokens}
        messages.append({"role": "assistant", "content": response["content"], "usage": usage})
    transcript = {"messages": messages}
    for key in ("model", "system", "tools"):
        if request.get(key) is not None:
            transcript[key] = request[key]
    return transcript


def _task(root: Span | None, llm_calls: list[LlmCall]) -> str:
    if root is not None:
        task = _json(root.attributes.get("input.value"))
        if isinstance(task, str) and task:
            return task
        messages = _json(root.attributes.get("gen_ai.input.messages"))
        for message in messages if isinstance(messages, list) else []:
            if isinstance(message, dict) and message.get("role") == "user":
                texts = [_text(p.get("content")) for p in message.get("parts") or [] if isinstance(p, dict)]
                if any(texts):
                    return "\n".join(t for t in texts if t)
        if isinstance(task, dict):
            for key in ("task", "input", "query", "question", "prompt"):
                if isinstance(task.get(key), str):
                    return task[key]
    for call in llm_calls:
        for message in (call.request or {}).get("messages", []):
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, str):
                    return content
                if isinstance(content, list):
                    texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
                    if texts:
                        return "\n".join(texts)
        break
    return ""


def _end(root: Span, labels: Labels, final: str | None) -> dict[str, Any]:
    """How the run ended: ``rlt.stop_reason`` (or the root's ``metadata.stop_reason``), a stop reason
    as the root's ERROR status, ``final_answer`` when there is one, else ``crashed``."""
    end: dict[str, Any] = {"finished_at": _when(root.end_ns or root.start_ns)}
    guard = _text(labels.first(None, "rlt.guard"))[:200]
    if guard:
        end["guard"] = guard
    named = labels.run_label("rlt.stop_reason", "stop_reason")
    if named in STOP_REASONS:
        end["stop_reason"] = named
        if named != StopReason.FINAL_ANSWER and root.status_message not in ("", named):
            end["error"] = root.status_message  # why it stopped: a crash's error, an interruption's reason
    elif root.status_code == STATUS_ERROR and root.status_message in STOP_REASONS:
        end["stop_reason"] = root.status_message
    elif final is not None:
        end["stop_reason"] = StopReason.FINAL_ANSWER
    else:
        end["stop_reason"] = StopReason.CRASHED
        message = _error_message(root) if root.status_code == STATUS_ERROR else ""
        end["error"] = message or "the trace ended without a final answer and named no stop reason (rlt.stop_reason)"
    if final is not None and end["stop_reason"] == StopReason.FINAL_ANSWER:
        end["final_answer"] = final
    return end


def _model_calls_end(calls: list[LlmCall], labels: Labels) -> dict[str, Any]:
    """The run's failed model call (the last model span, when it failed and carries ``rlt.model_attempts``:
    the call that ended the run) and the sender's ``rlt.model_retry_count``, when the trace says them."""
    out: dict[str, Any] = {}
    last = max(calls, key=lambda c: c.start_ns, default=None)
    if last is not None and last.failed and last.model_attempts:
        out["failed_model_call"] = [a.to_dict() for a in last.model_attempts]
    count = labels.first(None, MODEL_RETRY_COUNT)
    if isinstance(count, str) and count.isdigit():
        count = int(count)
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        out["model_retry_count"] = min(count, INT_MAX)
    return out


def _steps_from_tool_spans(tools: list[ToolCall], llm_calls: list[LlmCall]) -> tuple[list[StepEvent], str | None]:
    """One step per tool call (spans sharing a call id are its attempts), then the final answer."""
    groups: list[list[ToolCall]] = []
    by_id: dict[str, list[ToolCall]] = {}
    for tool in tools:
        if tool.call_id and tool.call_id in by_id:
            by_id[tool.call_id].append(tool)
            continue
        group = [tool]
        groups.append(group)
        if tool.call_id:
            by_id[tool.call_id] = group
    calls = sorted(llm_calls, key=lambda c: c.start_ns)
    steps: list[StepEvent] = []
    taken: set[tuple[int, int]] = set()  # (llm call, tool call) pairs already matched to a step

    def tokens_before(start_ns: int) -> tuple[int, int]:
        """Tokens of the LLM calls that ended before ``start_ns`` and are not counted yet."""
        tokens_in = tokens_out = 0
        for c in calls:
            if not c.tokens_used and c.end_ns <= start_ns:
                tokens_in += c.input_tokens
                tokens_out += c.output_tokens
                c.tokens_used = True
        return tokens_in, tokens_out

    # the LLM call that asked for each tool call: the last (by start) of those that answered and had
    # ended by the time the call started; one sweep over the answered calls by end, not a scan per call
    answered = sorted((c.end_ns, i) for i, c in enumerate(calls) if not c.failed)
    asking: dict[int, int | None] = {}
    latest, k = None, 0
    for start in sorted({group[0].start_ns for group in groups}):
        while k < len(answered) and answered[k][0] <= start:
            latest = answered[k][1] if latest is None else max(latest, answered[k][1])
            k += 1
        asking[start] = latest

    for group in groups:
        first, last = group[0], group[-1]
        llm_index = asking[first.start_ns]
        call_id, text = first.call_id, None
        if llm_index is not None:
            text = calls[llm_index].text or None
            if not call_id:
                for k, tc in enumerate(calls[llm_index].tool_calls):
                    if tc["name"] == first.name and (llm_index, k) not in taken:
                        taken.add((llm_index, k))
                        call_id = tc["id"]
                        break
        attempts = []
        previous_end = None
        for n, t in enumerate(group, start=1):
            attempts.append(
                Attempt(
                    number=n,
                    ok=not t.is_error,
                    content=t.content,
                    category=t.category,
                    retryable=t.retryable,
                    message=t.message or None,
                    backoff_s=round(max(0, t.start_ns - previous_end) / 1e9, 9) if previous_end else 0.0,
                    latency_ms=round(max(0, t.end_ns - t.start_ns) / 1e6, 6),
                    empty=t.empty,
                    # a span says only what went back to the model: that is the content, and the
                    # tool_result made of it is the same (None: stored once, not twice) unless the
                    # sender also said what the tool itself produced (rlt.attempt.content)
                    result_content=t.result if t.content_given else None,
                    **t.extra,  # rlt.attempt.* that this tracer's own export wrote (EXTRA_ATTEMPT_FIELDS)
                )
            )
            previous_end = t.end_ns
        tokens_in, tokens_out = tokens_before(first.start_ns)
        steps.append(
            StepEvent(
                index=len(steps) + 1,
                kind=StepKind.TOOL_USE,
                tool_name=first.name,
                tool_use_id=call_id or None,
                input=first.input,
                attempts=attempts,
                result_content=last.result,
                is_error=last.is_error,
                category=last.category,
                retryable=last.retryable,
                retry_count=len(group) - 1,
                latency_ms=round(sum(a.latency_ms + a.backoff_s * 1000 for a in attempts), 3),
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                text=text,
                api_stop_reason=(calls[llm_index].finish_reason or None) if llm_index is not None else None,
                model_attempts=_take_model_attempts(calls[llm_index]) if llm_index is not None else [],
            )
        )
    final = None
    last_tool_start = max((t.start_ns for t in tools), default=0)
    answers = [c for c in calls if _ends_the_run(c) and c.start_ns >= last_tool_start]
    if answers:
        answer = answers[-1]
        steps.append(_answer_step(answer, index=len(steps) + 1, tokens=tokens_before(answer.end_ns)))
        final = answer.text if steps[-1].kind == StepKind.FINAL_ANSWER else None
    elif steps:
        # tokens of model calls after the last step (e.g. one that asked for a call the run never made)
        tokens_in, tokens_out = tokens_before(max(c.end_ns for c in calls) if calls else 0)
        steps[-1].input_tokens += tokens_in
        steps[-1].output_tokens += tokens_out
    return steps, final
