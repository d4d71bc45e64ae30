"""One span of a trace read once, by whichever convention it carries, into what the run is made of:
a model call (``LlmCall``), a tool call (``ToolCall``), or neither. No database.

- OpenInference: ``openinference.span.kind`` (AGENT, CHAIN, LLM, TOOL), ``input.value`` and
  ``output.value``, ``tool.name``, ``llm.output_messages.0.message.*`` (text and ``tool_calls``),
  ``llm.token_count.prompt`` / ``completion``, ``llm.model_name``, ``metadata`` (JSON).
- OpenTelemetry GenAI: ``gen_ai.operation.name`` (``chat``, ``execute_tool``, ``invoke_agent``),
  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments`` / ``.result``,
  ``gen_ai.output.messages``, ``gen_ai.usage.input_tokens`` / ``output_tokens``, ``error.type``.

Labels (``rlt.*``, ``Labels``) are looked up on a span, then the root span, then the resource.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from openinference.semconv.trace import MessageAttributes, SpanAttributes, ToolCallAttributes
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as genai
from opentelemetry.semconv.attributes import error_attributes, exception_attributes
from pydantic import ValidationError

from agents.events import ModelAttempt
from agents.vocabulary import ErrorCategory, StopReason

from ...json_input import json_parse
from ...models import Step
from ..schema import ModelAttemptIn
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
    kind = attrs.get(SpanAttributes.OPENINFERENCE_SPAN_KIND)
    if isinstance(kind, str) and kind.upper() in (LLM, TOOL, AGENT):
        return kind.upper()
    op = attrs.get(genai.GEN_AI_OPERATION_NAME)
    if isinstance(op, str) and op in GENAI_KINDS:
        return GENAI_KINDS[op]
    if isinstance(kind, str):
        return OTHER
    if genai.GEN_AI_TOOL_NAME in attrs or SpanAttributes.TOOL_NAME in attrs:
        return TOOL
    return OTHER


def json_value(value: Any) -> Any:
    """A JSON string's value, or the value itself when it is not JSON."""
    if isinstance(value, str) and value[:1] in ("{", "[", '"'):
        return loads(value, default=value)
    return value


def loads(text: str, *, default: Any) -> Any:
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


def encoding_of(mime_type: Any) -> str | None:
    if mime_type == "application/json":
        return "json"
    if mime_type == "text/plain":
        return "text"
    return None


def decoded(value: Any, encoding: str | None) -> Any:
    """A value as sent: JSON when the sender says so (``*.mime_type``, ``rlt.result.encoding``), text
    when it says text, and when it says nothing, JSON if it reads as a JSON object, array or string."""
    if encoding == "text" or not isinstance(value, str):
        return value
    if encoding == "json":
        return loads(value, default=value)
    return json_value(value)


def metadata_of(span: Span) -> dict[str, Any]:
    meta = json_value(span.attributes.get(SpanAttributes.METADATA))
    return meta if isinstance(meta, dict) else {}


def text_of(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def int_of(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def bool_of(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


@dataclass
class LlmCall:
    """One model call as a span says it. Several spans may say the same call (OpenInference's LLM span
    and, inside it, the SDK's own ``chat`` span; OpenLLMetry's beside the SDK's, with the same
    ``gen_ai.response.id``): ``conventions`` merges them into one before anything is counted."""

    start_ns: int
    end_ns: int
    failed: bool
    span_id: str = ""
    parent_id: str = ""
    response_id: str = ""  # gen_ai.response.id: the Messages API's message id, the same on every span of a call
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"id", "name", "arguments"}
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""
    raw_request: Any = None  # input.value, read only when the conversation is needed
    raw_response: Any = None  # output.value
    raw_messages: Any = None  # gen_ai.input.messages, read only when the conversation is needed
    prompts: dict[str, Any] = field(default_factory=dict)  # the older gen_ai.prompt.N.* attributes
    tokens_used: bool = False  # already counted in a step
    finish_reason: str = ""  # why the model stopped, in the Messages API's spelling, when the span says
    finish_exact: bool = False  # the span said it in the API's own spelling (not translated from GenAI's)
    model_attempts: list[ModelAttempt] = field(default_factory=list)  # rlt.model_attempts, given to one step
    refused: list[str] = field(default_factory=list)  # what the span said that was not kept, and why

    @cached_property
    def request(self) -> dict[str, Any] | None:
        """The Messages API request the span carries in ``input.value``, if it is one (read once)."""
        request = json_value(self.raw_request)
        return request if isinstance(request, dict) and isinstance(request.get("messages"), list) else None

    @cached_property
    def response(self) -> dict[str, Any] | None:
        """Its response, from ``output.value``, if it is one (read once)."""
        response = json_value(self.raw_response)
        if isinstance(response, dict) and isinstance(response.get("content"), list) and response.get("role"):
            return response
        return None

    @cached_property
    def messages(self) -> list[Any] | None:
        """GenAI's ``gen_ai.input.messages``, if the span carries them (read once)."""
        messages = json_value(self.raw_messages)
        return messages if isinstance(messages, list) else None


# GenAI's finish reasons in the Messages API's spelling (an API-spelled one is kept as it is)
FINISH_REASONS = {
    "stop": "end_turn",
    "tool_call": "tool_use",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
API_FINISH_KEYS = ("anthropic.message.stop_reason", SpanAttributes.LLM_FINISH_REASON)


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
    refused: list[str] = field(default_factory=list)  # what the span said that was not kept, and why


OUT = SpanAttributes.LLM_OUTPUT_MESSAGES + ".0."  # OpenInference's first output message
OUT_CONTENT = OUT + MessageAttributes.MESSAGE_CONTENT
OUT_CONTENTS = OUT + MessageAttributes.MESSAGE_CONTENTS
OUT_TOOL_CALLS = OUT + MessageAttributes.MESSAGE_TOOL_CALLS
PROMPT = genai.GEN_AI_PROMPT + "."
COMPLETION = genai.GEN_AI_COMPLETION + ".0."


def llm_call(span: Span) -> LlmCall:
    a = span.attributes
    call = LlmCall(
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        failed=span.status_code == STATUS_ERROR,
        span_id=span.span_id,
        parent_id=span.parent_span_id,
        response_id=text_of(a.get(genai.GEN_AI_RESPONSE_ID)),
    )
    call.model = text_of(
        a.get(SpanAttributes.LLM_MODEL_NAME) or a.get(genai.GEN_AI_RESPONSE_MODEL) or a.get(genai.GEN_AI_REQUEST_MODEL)
    )
    call.input_tokens = int_of(a.get(SpanAttributes.LLM_TOKEN_COUNT_PROMPT, a.get(genai.GEN_AI_USAGE_INPUT_TOKENS)))
    call.output_tokens = int_of(
        a.get(SpanAttributes.LLM_TOKEN_COUNT_COMPLETION, a.get(genai.GEN_AI_USAGE_OUTPUT_TOKENS))
    )
    call.raw_request = a.get(SpanAttributes.INPUT_VALUE)
    call.raw_response = a.get(SpanAttributes.OUTPUT_VALUE)
    call.raw_messages = a.get(genai.GEN_AI_INPUT_MESSAGES)
    texts: list[str] = []
    # OpenInference: the first output message, its text and tool calls
    if isinstance(a.get(OUT_CONTENT), str):
        texts.append(a[OUT_CONTENT])
    j = 0
    while f"{OUT_CONTENTS}.{j}.message_content.type" in a or f"{OUT_CONTENTS}.{j}.message_content.text" in a:
        if a.get(f"{OUT_CONTENTS}.{j}.message_content.type", "text") == "text":
            texts.append(text_of(a.get(f"{OUT_CONTENTS}.{j}.message_content.text")))
        j += 1
    k = 0
    while f"{OUT_TOOL_CALLS}.{k}.tool_call.function.name" in a:
        tc = f"{OUT_TOOL_CALLS}.{k}."
        call.tool_calls.append(
            {
                "id": text_of(a.get(tc + ToolCallAttributes.TOOL_CALL_ID)),
                "name": text_of(a.get(tc + ToolCallAttributes.TOOL_CALL_FUNCTION_NAME)),
                "arguments": json_value(a.get(tc + ToolCallAttributes.TOOL_CALL_FUNCTION_ARGUMENTS_JSON)),
            }
        )
        k += 1
    # GenAI: gen_ai.output.messages (JSON), parts of type text and tool_call
    messages = json_value(a.get(genai.GEN_AI_OUTPUT_MESSAGES))
    if not texts and not call.tool_calls and isinstance(messages, list):
        for message in messages[:1]:
            for part in message.get("parts") or [] if isinstance(message, dict) else []:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "text":
                    texts.append(text_of(part.get("content")))
                elif part.get("type") == "tool_call":
                    call.tool_calls.append(
                        {
                            "id": text_of(part.get("id")),
                            "name": text_of(part.get("name")),
                            "arguments": json_value(part.get("arguments")),
                        }
                    )
    # The older GenAI attributes: gen_ai.prompt.N.role / .content, gen_ai.completion.0.*
    if PROMPT + "0.role" in a or COMPLETION + "role" in a:
        call.prompts = {key: value for key, value in a.items() if key.startswith(PROMPT)}
        if not texts and not call.tool_calls:
            _completion(a, call, texts)
    # The Messages API response itself, when no convention listed its blocks
    response = call.response if not texts and not call.tool_calls else None
    if response is not None:
        for block in response["content"]:
            if isinstance(block, dict) and block.get("type") == "text":
                texts.append(text_of(block.get("text")))
            elif isinstance(block, dict) and block.get("type") == "tool_use":
                call.tool_calls.append(
                    {"id": block.get("id", ""), "name": block.get("name", ""), "arguments": block.get("input")}
                )
    call.text = "\n".join(t for t in texts if t)
    call.finish_reason, call.finish_exact = finish_reason_of(a, messages, call)
    if len(call.finish_reason) > FINISH_REASON_MAX:
        call.refused.append(too_long("the model span's finish reason", FINISH_REASON_MAX, call.finish_reason))
        call.finish_reason, call.finish_exact = "", False
    if MODEL_ATTEMPTS in a:
        call.model_attempts = model_attempts_of(a[MODEL_ATTEMPTS])
    return call


def _completion(a: dict[str, Any], call: LlmCall, texts: list[str]) -> None:
    """The older ``gen_ai.completion.0.*``: its content (text, or the response's blocks as JSON) and tool calls."""
    content = json_value(a.get(COMPLETION + "content"))
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                texts.append(text_of(block.get("text")))
            elif isinstance(block, dict) and block.get("type") == "tool_use":
                call.tool_calls.append(
                    {
                        "id": text_of(block.get("id")),
                        "name": text_of(block.get("name")),
                        "arguments": block.get("input"),
                    }
                )
    k = 0
    while f"{COMPLETION}tool_calls.{k}.name" in a:
        tc = f"{COMPLETION}tool_calls.{k}."
        call.tool_calls.append(
            {
                "id": text_of(a.get(tc + "id")),
                "name": text_of(a.get(tc + "name")),
                "arguments": json_value(a.get(tc + "arguments")),
            }
        )
        k += 1


def model_attempts_of(value: Any) -> list[ModelAttempt]:
    """``rlt.model_attempts``' attempts, each read as the run document reads one; an entry that is not
    one is left out rather than refusing the trace for it."""
    items = json_value(value)
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


# The columns a span's tool name, call id and finish reason are kept in (Step's): a longer one is left
# out, with a warning in the response's partial_success, never cut.
TOOL_NAME_MAX = Step._meta.get_field("tool_name").max_length
CALL_ID_MAX = Step._meta.get_field("tool_use_id").max_length
FINISH_REASON_MAX = Step._meta.get_field("api_stop_reason").max_length


def too_long(what: str, limit: int, value: str) -> str:
    """The warning for a value left out because it is longer than its column."""
    return f"{what}: not kept, at most {limit} characters; got {len(value)}"


def finish_reason_of(a: dict[str, Any], messages: Any, call: LlmCall) -> tuple[str, bool]:
    """Why the model stopped, in the Messages API's spelling, and whether the span said it so: the SDK's
    ``anthropic.message.stop_reason`` or OpenInference's ``llm.finish_reason`` as they are; else
    ``gen_ai.response.finish_reasons``' first, the output message's ``finish_reason`` or the older
    ``gen_ai.completion.0.finish_reason``, GenAI's spelling translated (``stop`` → ``end_turn``,
    ``tool_call`` → ``tool_use``, ``length`` → ``max_tokens``…); else the Messages API response's
    ``stop_reason``. "" when the span names none."""
    for key in API_FINISH_KEYS:
        reason = a.get(key)
        if isinstance(reason, str) and reason:
            return reason, True
    said = None
    reasons = a.get(genai.GEN_AI_RESPONSE_FINISH_REASONS)
    if isinstance(reasons, (list, tuple)) and reasons and isinstance(reasons[0], str):
        said = reasons[0]
    elif isinstance(messages, list) and messages and isinstance(messages[0], dict):
        said = messages[0].get("finish_reason")
    if not (isinstance(said, str) and said):
        said = a.get(COMPLETION + "finish_reason")
    if isinstance(said, str) and said:
        return FINISH_REASONS.get(said, said), said not in FINISH_REASONS
    raw = call.raw_response
    if isinstance(raw, str) and "stop_reason" not in raw and "\\u" not in raw:
        return "", False  # no stop_reason key in its JSON (not even spelled with escapes): not read for nothing
    response = call.response
    reason = response.get("stop_reason") if response is not None else None
    return (reason, True) if isinstance(reason, str) else ("", False)


def error_message(span: Span) -> str:
    for event in span.events:
        if event.get("name") == "exception":
            message = event["attributes"].get(exception_attributes.EXCEPTION_MESSAGE)
            if message:
                return text_of(message)
    return span.status_message or text_of(span.attributes.get(error_attributes.ERROR_TYPE))


# Exception types that say a category by themselves (Python's own, and pydantic's, which a tool's input
# model raises): any other type says none, and the category stays unknown.
EXCEPTION_CATEGORIES = {
    "PermissionError": "permission",
    "TimeoutError": "transient",
    "ConnectionError": "transient",
    "ConnectionRefusedError": "transient",
    "ConnectionResetError": "transient",
    "ValidationError": "validation",
    "pydantic_core._pydantic_core.ValidationError": "validation",
    "pydantic.ValidationError": "validation",
}


def category_of(span: Span) -> str | None:
    """A failed span's category as its error says it, never guessed: ``error.type`` when it is one of the
    five categories (any case), else an ``exception`` event's ``exception.type`` when it is one of them
    or an exception type that names one (``EXCEPTION_CATEGORIES``); None otherwise."""
    said = [span.attributes.get(error_attributes.ERROR_TYPE)]
    said += [
        e["attributes"].get(exception_attributes.EXCEPTION_TYPE) for e in span.events if e.get("name") == "exception"
    ]
    for value in said:
        if not isinstance(value, str) or not value:
            continue
        if value.lower() in CATEGORIES:
            return value.lower()
        if value in EXCEPTION_CATEGORIES:
            return EXCEPTION_CATEGORIES[value]
    return None


def tool_call(span: Span, labels: Labels) -> ToolCall:
    a = span.attributes
    name = a.get(genai.GEN_AI_TOOL_NAME) or a.get(SpanAttributes.TOOL_NAME)
    if not name:
        name = span.name.removeprefix("execute_tool ").strip() or span.name
    if genai.GEN_AI_TOOL_CALL_ARGUMENTS in a:
        args = json_value(a[genai.GEN_AI_TOOL_CALL_ARGUMENTS])
    else:
        args = decoded(a.get(SpanAttributes.INPUT_VALUE), encoding_of(a.get(SpanAttributes.INPUT_MIME_TYPE)))
    if args is not None and not isinstance(args, dict):
        args = {"input": args}
    if genai.GEN_AI_TOOL_CALL_RESULT in a:
        result = decoded(a[genai.GEN_AI_TOOL_CALL_RESULT], a.get("rlt.result.encoding"))
    else:
        result = decoded(a.get(SpanAttributes.OUTPUT_VALUE), encoding_of(a.get(SpanAttributes.OUTPUT_MIME_TYPE)))
    failed = (
        span.status_code == STATUS_ERROR
        or bool(a.get(error_attributes.ERROR_TYPE))
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
        category = labels.first(span, "rlt.error.category") or metadata_of(span).get("error_category")
        if category not in CATEGORIES:
            category = structured.get("errorCategory") if structured.get("errorCategory") in CATEGORIES else None
        if category is None:
            category = category_of(span)
        retryable = bool_of(labels.first(span, "rlt.error.retryable"))
        if retryable is None:
            retryable = bool_of(structured.get("isRetryable"))
    message = error_message(span) if failed else ""
    if failed and not message and isinstance(structured.get("message"), str):
        message = structured["message"]  # a structured error the tool answered with, the span not marked failed
    if failed and result is None:
        result = message or "Error"
    refused: list[str] = []
    name = text_of(name)
    if len(name) > TOOL_NAME_MAX:
        refused.append(too_long("a tool span's name", TOOL_NAME_MAX, name))
        name = ""
    call_id = text_of(a.get(genai.GEN_AI_TOOL_CALL_ID) or a.get(ToolCallAttributes.TOOL_CALL_ID))
    if len(call_id) > CALL_ID_MAX:
        refused.append(too_long("a tool span's call id", CALL_ID_MAX, call_id))
        call_id = ""
    return ToolCall(
        refused=refused,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        name=name,
        call_id=call_id,
        input=args,
        result=result,
        is_error=failed,
        message=message,
        category=category if failed else None,
        retryable=retryable if failed else None,
        content=decoded(a["rlt.attempt.content"], "json") if "rlt.attempt.content" in a else result,
        empty=bool_of(a.get("rlt.attempt.empty")) or False,
        content_given="rlt.attempt.content" in a,
        extra={
            name: decoded(a[f"rlt.attempt.{name}"], "json")
            for name in EXTRA_ATTEMPT_FIELDS
            if f"rlt.attempt.{name}" in a
        },
    )


class Labels:
    """``rlt.*`` and friends, looked up on a span, then the root span, then the resource."""

    def __init__(self, spans: list[Span], root: Span | None) -> None:
        self.root = root
        self.resource = (root or spans[0]).resource if spans else {}
        self.root_meta = metadata_of(root) if root else {}

    def first(self, span: Span | None, key: str) -> Any:
        for source in (span.attributes if span else None, self.root.attributes if self.root else None, self.resource):
            if source and source.get(key) not in (None, ""):
                return source[key]
        return None

    def run_label(self, key: str, meta_key: str) -> str:
        value = self.first(None, key)
        if value in (None, ""):
            value = self.root_meta.get(meta_key)
        return text_of(value) if value not in (None, "") else ""
