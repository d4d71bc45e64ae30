"""A conversation with the model, read as a run's steps: what transcripts and OTLP traces share.

A conversation is a list of ``Turn``s: the model's (its text, the tool calls it asked for, its
tokens and stop reason) and the user's (its text, the tool results sent back). ``messages_turns``
reads the Messages API's ``messages`` (content blocks ``text``, ``tool_use``, ``tool_result``);
``turns_steps`` makes the steps, the same way whichever convention carried the conversation:

- each tool call and the result that answers it (matched by the call's id, in the next user turn)
  is one step with one attempt; a call identical (same tool, same input) to the one before it whose
  result was an error is the model sending it again: a step of its own, which the recorder marks as
  a repeat of the earlier one (``StepEvent.repeat_of``), as it does for every source;
- an attempt failed when its result says so: ``is_error`` (the API's spelling), an MCP
  ``CallToolResult``'s ``isError``, or a structured error's ``isError`` (lesson 002), whose
  ``errorCategory`` and ``isRetryable`` fill its category and retryable flag; an empty result (no
  error flag, nothing found) is an ok attempt marked empty, never an error;
- the model's text that came with a call is the step's text; the last model turn, when it asks for no
  tool, is the final answer.

Nothing here knows a source's format beyond the Messages API's blocks, and nothing touches the
database: a reading's problems are ``{"path", "message"}`` errors the caller raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.errors import is_empty
from agents.events import Attempt, StepEvent
from agents.vocabulary import ErrorCategory, StepKind

from ..json_input import json_parse
from .errors import shown

INT_MAX = 2_147_483_647
NAME_MAX = 100  # a step's tool name and tool_use id, as the Step row stores them
CATEGORIES = frozenset(c.value for c in ErrorCategory)


@dataclass(slots=True)
class Call:
    """A tool call the model asked for."""

    id: str
    name: str
    input: dict[str, Any]
    path: str = ""  # where the sender wrote it, for errors


@dataclass(slots=True)
class Result:
    """A tool's result sent back to the model: its content as sent (``raw``) and what it says."""

    call_id: str
    raw: Any
    is_error: bool = False  # the flag the sender's convention carries (the API's is_error)
    path: str = ""
    error_code: str = ""  # a server tool's error (web_search_tool_result_error's error_code)


@dataclass(slots=True)
class Turn:
    role: str  # "assistant" or "user"
    text: str = ""
    calls: list[Call] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)
    tokens: tuple[int, int] = (0, 0)  # the model turn's input and output tokens, when known
    stop_reason: str = ""  # the Messages API's stop_reason of a model turn, when known
    # Server tools the API ran within the model's turn (web search, code execution…), each with its result
    server: list[tuple[Call, Result | None]] = field(default_factory=list)


@dataclass(slots=True)
class Reading:
    """A conversation's steps, its task (the first user text) and whether it ended on an answer."""

    steps: list[StepEvent]
    task: str = ""
    final: str | None = None  # the final answer's text, when the last model turn asked for no tool


# --- the Messages API's blocks ----------------------------------------------------------------------


def _blocks(content: Any, path: str, errors: list[dict[str, str]]) -> list[tuple[dict[str, Any], str]]:
    """A message's content as (block, path) pairs: a string is one text block."""
    if isinstance(content, str):
        return [({"type": "text", "text": content}, path)]
    if not isinstance(content, list):
        errors.append({"path": path, "message": f"expected a string or a list of content blocks; got {shown(content)}"})
        return []
    out = []
    for k, block in enumerate(content):
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            errors.append({"path": f"{path}[{k}]", "message": 'expected a content block (an object with "type")'})
            continue
        out.append((block, f"{path}[{k}]"))
    return out


def usage_tokens(usage: Any) -> tuple[int, int]:
    """A Messages API ``usage``'s input and output tokens (0 for what it does not say well)."""
    if not isinstance(usage, Mapping):
        return 0, 0
    values = []
    for key in ("input_tokens", "output_tokens"):
        n = usage.get(key)
        values.append(n if isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= INT_MAX else 0)
    return values[0], values[1]


def messages_turns(messages: list[Any], errors: list[dict[str, str]], *, path: str = "messages") -> list[Turn]:
    """The Messages API's ``messages`` as turns; what is malformed is added to ``errors`` with its path."""
    turns: list[Turn] = []
    for i, message in enumerate(messages):
        where = f"{path}[{i}]"
        if not isinstance(message, Mapping):
            errors.append({"path": where, "message": "expected a message object with role and content"})
            continue
        role = message.get("role")
        if role not in ("user", "assistant"):
            errors.append({"path": f"{where}.role", "message": f"expected one of user, assistant; got {shown(role)}"})
            continue
        turn = Turn(role=role)
        texts = []
        for block, block_path in _blocks(message.get("content"), f"{where}.content", errors):
            kind = block["type"]
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "tool_use" and role == "assistant":
                call = _call(block, block_path, errors)
                if call is not None:
                    turn.calls.append(call)
            elif kind == "server_tool_use" and role == "assistant":
                call = _call(block, block_path, errors)
                if call is not None:
                    turn.server.append((call, None))
            elif kind.endswith("_tool_result") and role == "assistant":
                _server_result(turn, block, block_path)
            elif kind == "tool_result" and role == "user":
                use_id = block.get("tool_use_id")
                if not isinstance(use_id, str):
                    message_text = f"expected the id of a tool_use, a string; got {shown(use_id)}"
                    errors.append({"path": f"{block_path}.tool_use_id", "message": message_text})
                    continue
                flag = block.get("is_error", False)
                if not isinstance(flag, bool):
                    errors.append(
                        {"path": f"{block_path}.is_error", "message": f"expected true or false; got {shown(flag)}"}
                    )
                    flag = False
                turn.results.append(Result(call_id=use_id, raw=block.get("content"), is_error=flag, path=block_path))
        turn.text = "\n".join(texts).strip()
        if role == "assistant":
            turn.tokens = usage_tokens(message.get("usage"))
            reason = message.get("stop_reason")
            turn.stop_reason = reason if isinstance(reason, str) else ""
        turns.append(turn)
    return turns


def _server_result(turn: Turn, block: Mapping[str, Any], path: str) -> None:
    """A server tool's result block (``web_search_tool_result``…) given to its ``server_tool_use``: failed
    when its content is an ``…_tool_result_error`` (its ``error_code`` the message)."""
    content = block.get("content")
    code = ""
    if isinstance(content, Mapping) and str(content.get("type", "")).endswith("_error"):
        code = str(content.get("error_code") or content.get("type"))
    result = Result(
        call_id=str(block.get("tool_use_id", "")), raw=content, is_error=bool(code), path=path, error_code=code
    )
    for k, (call, answered) in enumerate(turn.server):
        if call.id == result.call_id and answered is None:
            turn.server[k] = (call, result)
            return


def genai_turns(messages: list[Any]) -> list[Turn]:
    """GenAI's ``gen_ai.input.messages`` / ``gen_ai.output.messages`` as turns: each message's ``parts``
    of type ``text`` (``content``), ``tool_call`` (``id``, ``name``, ``arguments``) and
    ``tool_call_response`` (``id``, ``response``), role ``tool`` or ``user`` for the results. GenAI
    has no ``is_error``: a result failed only where it says so itself (a structured ``isError``)."""
    turns: list[Turn] = []
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant", "tool"):
            continue
        role = "assistant" if message["role"] == "assistant" else "user"
        turn = Turn(role=role)
        texts = []
        for part in message.get("parts") or []:
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("content"), str):
                texts.append(part["content"])
            elif kind == "tool_call" and role == "assistant":
                arguments = part.get("arguments")
                if isinstance(arguments, str):
                    arguments = maybe_json(arguments)
                name, call_id = part.get("name"), part.get("id")
                if isinstance(name, str) and name and isinstance(call_id, str) and call_id:
                    given = (
                        arguments
                        if isinstance(arguments, Mapping)
                        else {}
                        if arguments is None
                        else {"input": arguments}
                    )
                    turn.calls.append(Call(id=call_id[:NAME_MAX], name=name[:NAME_MAX], input=dict(given)))
            elif kind == "tool_call_response" and isinstance(part.get("id"), str):
                turn.results.append(Result(call_id=part["id"][:NAME_MAX], raw=part.get("response")))
        turn.text = "\n".join(texts).strip()
        if role == "user" and turns and turns[-1].role == "user" and not turns[-1].text and turn.results:
            turns[-1].results += turn.results  # one tool message per result: the same user turn
            continue
        turns.append(turn)
    return turns


def _call(block: Mapping[str, Any], path: str, errors: list[dict[str, str]]) -> Call | None:
    use_id, name, tool_input = block.get("id"), block.get("name"), block.get("input", {})
    if not isinstance(use_id, str) or not use_id:
        errors.append({"path": f"{path}.id", "message": "expected the tool_use id, a string"})
        return None
    if not isinstance(name, str) or not name:
        errors.append({"path": f"{path}.name", "message": "expected the tool's name, a string"})
        return None
    if not isinstance(tool_input, Mapping):
        errors.append({"path": f"{path}.input", "message": f"expected an object; got {shown(tool_input)}"})
        return None
    for key, value in (("id", use_id), ("name", name)):
        if len(value) > NAME_MAX:
            errors.append(
                {"path": f"{path}.{key}", "message": f"expected at most {NAME_MAX} characters; got {len(value)}"}
            )
            return None
    return Call(id=use_id, name=name, input=dict(tool_input), path=path)


# --- results --------------------------------------------------------------------------------------------


def maybe_json(text: str) -> Any:
    """A text's JSON value when it is a JSON object or array, else the text."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json_parse(stripped)
        except ValueError:  # not JSON, or too deep to read: kept as the text it is
            return text
    return text


def result_value(content: Any) -> Any:
    """What a tool_result's content says: a string (JSON decoded when it is JSON), or its text blocks
    joined and decoded the same way; other blocks (images) are kept as they are."""
    if isinstance(content, str):
        return maybe_json(content)
    if isinstance(content, list):
        if content and all(isinstance(b, Mapping) and b.get("type") == "text" for b in content):
            return maybe_json("\n".join(str(b.get("text", "")) for b in content))
        return content
    return content


@dataclass(slots=True)
class ErrorFields:
    """What a structured error (lesson 002) says: ``isError``, ``errorCategory``, ``isRetryable``, ``message``."""

    is_error: bool
    category: str | None
    retryable: bool | None
    message: str | None
    empty: bool


def error_fields(value: Any) -> ErrorFields | None:
    """A structured error's fields, at the top of ``value`` or under ``"error"``; None when it has none."""
    if not isinstance(value, Mapping):
        return None
    inner = value.get("error") if isinstance(value.get("error"), Mapping) else value
    keys = ("isError", "errorCategory", "isRetryable")
    if not any(k in value for k in keys) and not any(k in inner for k in keys) and inner is value:
        return None
    category = inner.get("errorCategory", value.get("errorCategory"))
    retryable = inner.get("isRetryable", value.get("isRetryable"))
    message = inner.get("message", value.get("message"))
    flagged = value.get("isError") is True or inner.get("isError") is True
    return ErrorFields(
        is_error=flagged,
        category=category if category in CATEGORIES else None,
        retryable=retryable if isinstance(retryable, bool) else None,
        message=message if isinstance(message, str) else None,
        empty=category == "empty",
    )


def result_attempt(result: Result, number: int) -> Attempt:
    """One attempt made of a tool's result: failed when its flag, an MCP ``CallToolResult``'s
    ``isError`` or a structured error's ``isError`` says so; "nothing found" is not an error."""
    value = result_value(result.raw)
    mcp_flag = False
    # An MCP CallToolResult passed through as the content: {"content": [blocks], "isError": …}.
    if isinstance(value, Mapping) and isinstance(value.get("content"), list) and "isError" in value:
        mcp_flag = value.get("isError") is True
        structured = value.get("structuredContent")
        value = structured if structured is not None else result_value(value["content"])
    fields = error_fields(value)
    failed = result.is_error or mcp_flag or bool(fields and fields.is_error)
    message = fields.message if fields else None
    if failed and message is None and isinstance(value, str):
        message = value
    return Attempt(
        number=number,
        ok=not failed,
        content=value,
        category=fields.category if failed and fields else None,
        retryable=fields.retryable if failed and fields else None,
        message=message if failed else None,
        empty=bool(fields and fields.empty) or (not failed and is_empty(value)),
        result_content=result.raw,
    )


# --- turns to steps ---------------------------------------------------------------------------------------


def turns_steps(turns: list[Turn], errors: list[dict[str, str]]) -> Reading:
    """The steps a conversation's turns describe (see the module's docstring). A result that answers
    no call of the model turn before it, a second result for one call, and a call left without a
    result before the next model turn are added to ``errors``; calls of the last model turn that got no
    result (the conversation ends before them) stay as steps with no attempts."""
    steps: list[StepEvent] = []
    pending: dict[str, tuple[StepEvent, str]] = {}  # call id -> (step, path)
    answered: set[str] = set()
    task = ""
    final: Turn | None = None
    for turn in turns:
        if turn.role == "assistant":
            for use_id, (_, use_path) in pending.items():
                errors.append(
                    {"path": use_path, "message": f"tool_use {use_id!r} has no tool_result in the next user message"}
                )
            pending = {}
            final = turn if not turn.calls else None
            for call, result in turn.server:
                steps.append(_server_step(call, result, index=len(steps) + 1))
            for k, call in enumerate(turn.calls):
                first = k == 0
                step = StepEvent(
                    index=len(steps) + 1,
                    kind=StepKind.TOOL_USE.value,
                    tool_name=call.name,
                    tool_use_id=call.id,
                    input=call.input,
                    input_tokens=turn.tokens[0] if first else 0,
                    output_tokens=turn.tokens[1] if first else 0,
                    text=(turn.text or None) if first else None,
                    api_stop_reason=turn.stop_reason or None,
                )
                steps.append(step)
                pending[call.id] = (step, call.path)
            continue
        if not task and not turn.results:
            task = turn.text
        for result in turn.results:
            if result.call_id not in pending:
                again = result.call_id in answered
                errors.append(
                    {
                        "path": f"{result.path}.tool_use_id",
                        "message": (
                            f"a second tool_result for tool_use {shown(result.call_id)}"
                            if again
                            else f"{shown(result.call_id)} matches no tool_use of the assistant message before it"
                        ),
                    }
                )
                continue
            step, _ = pending.pop(result.call_id)
            answered.add(result.call_id)
            step.attempts.append(result_attempt(result, len(step.attempts) + 1))
    for step in steps:
        if step.attempts:
            last = step.attempts[-1]
            step.result_content = last.result_content
            step.is_error = not last.ok
            step.category = last.category
            step.retryable = last.retryable
            step.retry_count = len(step.attempts) - 1
    answer = None
    if final is not None:
        answer = final.text
        steps.append(
            StepEvent(
                index=len(steps) + 1,
                kind=StepKind.FINAL_ANSWER.value,
                text=final.text or None,
                input_tokens=final.tokens[0],
                output_tokens=final.tokens[1],
                api_stop_reason=final.stop_reason or None,
            )
        )
    return Reading(steps=steps, task=task, final=answer)


def _server_step(call: Call, result: Result | None, *, index: int) -> StepEvent:
    """A server tool the API ran (``server_tool_use``) as a step: its result an attempt, failed with its
    error code when the API said ``…_tool_result_error``."""
    attempts = []
    if result is not None:
        failed = result.is_error
        attempts.append(
            Attempt(
                number=1,
                ok=not failed,
                content=result.raw,
                message=result.error_code or None if failed else None,
                result_content=result.raw,
            )
        )
    return StepEvent(
        index=index,
        kind=StepKind.TOOL_USE.value,
        tool_name=call.name,
        tool_use_id=call.id,
        input=call.input,
        attempts=attempts,
        result_content=result.raw if result is not None else None,
        is_error=bool(result and result.is_error),
    )
