"""The spans of one trace, read as one run: its steps, how it ended and its labels, as the typed
values every source maps to (``intake.record.Arrival``). No database; each span is read by
``spans``.

A trace with tool spans (TOOL, ``execute_tool``) has one step per tool call: spans that share a
``gen_ai.tool.call.id`` are the attempts of one call (the harness retried it). A failed tool span
(status ERROR, ``error.type`` or an ``exception`` event) is a step with ``is_error``. A trace with
LLM spans only (an agent whose tools are not instrumented) has its steps in the conversation: the
last Messages API request and response (``input.value`` and ``output.value``, which keep each
tool_result's ``is_error``, unlike ``llm.input_messages``) are read by ``intake.conversation``, as a
transcript's are, tool_use to tool_result by ``tool_use_id``.

Labels (``rlt.scenario``, ``rlt.policy``, ``rlt.verdict``, ``rlt.verdict.reason``,
``rlt.stop_reason``, ``rlt.error.category``, ``rlt.error.retryable``, ``rlt.model_retry_count``) are read
from the span, then the root span, then the resource; docs/otlp.md lists every name and its fallbacks.
A chat span's ``rlt.model_attempts`` (this tracer's export) are its call's HTTP attempts: on a
succeeded call, the step's; on a last call that failed (status ERROR), the call that ended the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from agents import names
from agents.events import Attempt, ModelAttempt, RunEnd, StepEvent, Verdict
from agents.vocabulary import API_STOPS_ENDING_A_RUN, StepKind, StopReason

from ...models import Run
from .. import conversation
from ..errors import IngestError
from ..record import Arrival, run_start_of
from ..schema import INT_MAX
from .spans import (
    AGENT,
    EXTRA_ATTEMPT_FIELDS,
    LLM,
    MODEL_ATTEMPTS,
    MODEL_RETRY_COUNT,
    STOP_REASONS,
    TOOL,
    Labels,
    LlmCall,
    ToolCall,
    decoded,
    encoding_of,
    error_message,
    json_value,
    llm_call,
    span_kind,
    text_of,
    tool_call,
)
from .wire import STATUS_ERROR, Span

__all__ = ["EPOCH", "EXTRA_ATTEMPT_FIELDS", "MODEL_ATTEMPTS", "MODEL_RETRY_COUNT", "TraceReading", "trace_read"]


def _take_model_attempts(call: LlmCall) -> list[ModelAttempt]:
    """The call's model attempts for the first step its reply made; none for the steps after it."""
    taken, call.model_attempts = call.model_attempts, []
    return taken


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


@dataclass
class TraceReading:
    """What a trace says about its run so far: the run as the typed values every source maps to
    (``arrival``: its end once the root span is in, none until then) and whether the root is in."""

    complete: bool  # the root span has arrived
    arrival: Arrival
    # what of the trace was refused while the rest is imported: "rlt.policy: expected …"
    warnings: list[str] = field(default_factory=list)


def trace_read(trace_id: str, spans: list[Span], *, unreadable_ok: bool = False) -> TraceReading:
    """The run that ``spans`` (one trace's, in any order) describe. ``IngestError`` when what they
    say cannot be recorded (e.g. a conversation whose tool_result matches no tool_use), unless
    ``unreadable_ok``: then the conversation is left unread (its steps wait for the spans that make it
    readable) and, once the root is in, the run's error says what could not be read."""
    spans = sorted(spans, key=lambda s: (s.start_ns, s.end_ns, s.span_id))
    roots = [s for s in spans if not s.parent_span_id]
    root = roots[0] if roots else None
    labels = Labels(spans, root)
    llm_calls: list[LlmCall] = []
    tools: list[ToolCall] = []
    kinds = [span_kind(span) for span in spans]
    nested = _sub_agents_spans(spans, kinds, root)
    for span, kind in zip(spans, kinds, strict=True):
        if nested and span.span_id in nested:
            continue  # a sub-agent's: its run's, not this one's steps
        if kind == LLM:
            llm_calls.append(llm_call(span))
        elif kind == TOOL:
            tools.append(tool_call(span, labels))
    complete = root is not None
    # what spans said that was not kept (spans.too_long), each said once
    refused = list(dict.fromkeys(w for part in (*llm_calls, *tools) for w in part.refused))
    service = text_of(labels.resource.get("service.name"))
    # the model its calls name, else the one the root names (a run that made no call)
    model = next((c.model for c in reversed(llm_calls) if c.model), "") or text_of(
        root.attributes.get("gen_ai.request.model") if root is not None else ""
    )
    task = _task(root, llm_calls)
    started = root.start_ns if root is not None else (spans[0].start_ns if spans else 0)

    llm_calls = calls_merged(llm_calls)
    conversation_read = False
    unreadable = ""  # what of the conversation could not be read (unreadable_ok)
    carried = True  # whether the trace could say a tool_result's is_error
    final = None
    steps: list[StepEvent] = []
    transcript: dict[str, Any] | None = None
    if tools:
        steps, final = _steps_from_tool_spans(tools, llm_calls)
    elif llm_calls:
        try:
            talk = _conversation(llm_calls, complete=complete)
            if talk is not None:
                # the conversation, read as every source's conversation is (intake.conversation)
                turns, transcript, carried = talk
                errors: list[dict[str, str]] = []
                reading = conversation.turns_steps(turns, errors)
                if errors:
                    raise IngestError(errors)
        except IngestError as exc:
            if not unreadable_ok:
                raise
            # no steps from it until the spans that make it readable arrive
            talk, transcript = None, None
            unreadable = "; ".join(f"{e['path']}: {e['message']}" for e in exc.errors[:3])
        if talk is not None:
            conversation_read = True
            steps, final = reading.steps, reading.final
            model = model or text_of(transcript.get("model"))
            task = task or reading.task
        elif not unreadable:  # no conversation to read: the model's last words, if any
            last = llm_calls[-1]
            if _ends_the_run(last):
                steps = [_answer_step(last, index=1, tokens=(last.input_tokens, last.output_tokens))]
                final = last.text if steps[0].kind == StepKind.FINAL_ANSWER else None
    if not conversation_read and final is None and root is not None and root.status_code != STATUS_ERROR:
        answer = decoded(root.attributes.get("output.value"), encoding_of(root.attributes.get("output.mime_type")))
        stop = labels.run_label("rlt.stop_reason", "stop_reason")
        if span_kind(root) == AGENT and answer not in (None, "") and stop in ("", StopReason.FINAL_ANSWER):
            final = text_of(answer)
            steps.append(StepEvent(index=len(steps) + 1, kind=StepKind.FINAL_ANSWER, text=final))
    warnings: list[str] = refused
    scenario = _name_taken(labels.run_label("rlt.scenario", "scenario"), "rlt.scenario", "scenario key", warnings)
    policy = labels.run_label("rlt.policy", "policy")
    if policy:
        policy = _name_taken(policy, "rlt.policy", "policy label", warnings)
    elif service and not names.name_problem(service, limit=names.POLICY_NAME_MAX):
        policy = service  # no policy label: the service's name stands for one, when it is such a name
    arrival = Arrival(
        source=Run.Source.OTLP,
        external_id=trace_id,
        source_detail=_text_taken(service, "service.name", SOURCE_DETAIL_MAX, warnings),
        labels=_labels(labels, warnings),
        started_at=_when(started) if started else None,
        start=run_start_of(
            scenario=scenario,
            policy=policy,
            model=_text_taken(model, "gen_ai.request.model", MODEL_NAME_MAX, warnings),
            task=task,
        ),
        steps=steps,
        is_error_carried=carried,
    )
    if complete:
        arrival.end, arrival.finished_at = _end(root, labels, final, steps, warnings)
        failed_call, arrival.model_retry_count = _model_calls_end(llm_calls, labels)
        arrival.end.model_attempts = failed_call
        if transcript is not None and conversation_read:
            arrival.end.transcript = transcript
        if unreadable:
            note = f"the conversation its spans carry could not be read as steps ({unreadable})"
            arrival.end.error = f"{arrival.end.error}; {note}" if arrival.end.error else note
    return TraceReading(complete=complete, arrival=arrival, warnings=warnings)


SOURCE_DETAIL_MAX = Run._meta.get_field("source_detail").max_length
MODEL_NAME_MAX = Run._meta.get_field("model_name").max_length


def _name_taken(value: str, key: str, what: str, warnings: list[str]) -> str:
    """``value`` as the run's scenario key or policy label (``agents.names``), or "" with a warning
    saying why it was refused: the trace is imported without it, never with it cut or as given."""
    limit = names.SCENARIO_KEY_MAX if key == "rlt.scenario" else names.POLICY_NAME_MAX
    problem = names.name_problem(value, limit=limit) if value else ""
    if problem:
        warnings.append(f"{key}: not taken as the run's {what}, {problem}; the run is imported without one")
        return ""
    return value


def _text_taken(value: str, key: str, limit: int, warnings: list[str]) -> str:
    """``value`` when it fits in ``limit`` characters, else "" with a warning naming the limit."""
    if len(value) > limit:
        warnings.append(f"{key}: not kept, at most {limit} characters; got {len(value)}")
        return ""
    return value


def _sub_agents_spans(spans: list[Span], kinds: list[str], root: Span | None) -> set[str]:
    """The ids of spans inside a sub-agent's ``invoke_agent`` / AGENT span below the root (a coordinator's
    sub-agents, as this tracer's export lays them): their calls are the sub-agent's, not the run's steps."""
    agents = {
        s.span_id for s, kind in zip(spans, kinds, strict=True) if kind == AGENT and s is not root and s.parent_span_id
    }
    if not agents:
        return set()
    parent = {s.span_id: s.parent_span_id for s in spans}
    inside: set[str] = set()
    for span in spans:
        node = span.parent_span_id
        seen = 0
        while node and seen < 1000:
            if node in agents:
                inside.add(span.span_id)
                break
            node = parent.get(node, "")
            seen += 1
    return inside


def _when(ns: int) -> datetime:
    """A span time in nanoseconds as a datetime, to the microsecond in integers (through a float, a
    time of this decade lands a microsecond off)."""
    return EPOCH + timedelta(microseconds=ns // 1000)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


LABEL_NAME_MAX = 100
LABEL_VALUE_MAX = 1000
GUARD_MAX = Run._meta.get_field("guard").max_length


def _labels(labels: Labels, warnings: list[str]) -> dict[str, Any]:
    """The run's labels: the root's ``rlt.labels`` (a JSON object of names and plain values, as this
    tracer's export writes a run's own labels) when it has one, else the sender's ``rlt.*``
    attributes (root span, then resource) and its service. A label whose name is over
    ``LABEL_NAME_MAX`` characters or whose text is over ``LABEL_VALUE_MAX`` is left out with a warning."""
    given = json_value(labels.root.attributes.get("rlt.labels")) if labels.root else None
    if isinstance(given, dict):
        found = [
            (str(key), value)
            for key, value in given.items()
            if value is None or isinstance(value, (str, int, float, bool))
        ]
    else:
        found = []
        for source in (labels.resource, labels.root.attributes if labels.root else {}):
            for key, value in source.items():
                if (key.startswith("rlt.") or key == "service.name") and isinstance(value, (str, int, float, bool)):
                    found.append((key, value))
    out: dict[str, Any] = {}
    for key, value in found:
        if len(key) > LABEL_NAME_MAX:
            warnings.append(f"a label's name: not kept, at most {LABEL_NAME_MAX} characters; got {len(key)}")
        elif isinstance(value, str) and len(value) > LABEL_VALUE_MAX:
            warnings.append(f"label {key}: not kept, at most {LABEL_VALUE_MAX} characters; got {len(value)}")
        else:
            out[key] = value
    return out


def calls_merged(calls: list[LlmCall]) -> list[LlmCall]:
    """The model calls of a trace, each once however many instrumentations traced it: spans with the
    same ``gen_ai.response.id`` (OpenLLMetry's and the SDK's, side by side), and a model span inside
    another (the SDK's ``chat`` span under OpenInference's LLM span), are one call. The call keeps what
    any of its spans said (text, tool calls, the conversation, the API's own finish reason over GenAI's
    translated one), its tokens once, and the time from its first span's start to its last one's end."""
    if len(calls) < 2:
        return calls
    by_span = {c.span_id: c for c in calls if c.span_id}
    owner: dict[int, int] = {}  # id(call) -> id(the call it is merged into)

    def top(call: LlmCall) -> LlmCall:
        while id(call) in owner:
            call = owner_of[owner[id(call)]]
        return call

    owner_of = {id(c): c for c in calls}
    by_response: dict[str, LlmCall] = {}
    for call in calls:  # sorted by start: an outer span comes before the spans inside it
        parent = by_span.get(call.parent_id)
        into = top(parent) if parent is not None else None
        if into is None and call.response_id:
            into = by_response.get(call.response_id)
        if into is not None and into is not call:
            owner[id(call)] = id(into)
        if call.response_id:
            by_response.setdefault(call.response_id, top(call))
    groups: dict[int, list[LlmCall]] = {}
    for call in calls:
        groups.setdefault(id(top(call)), []).append(call)
    return [_merged(group) for group in groups.values()]


def _merged(group: list[LlmCall]) -> LlmCall:
    if len(group) == 1:
        return group[0]
    first = group[0]
    said = next((c for c in group if c.text or c.tool_calls), first)
    exact = next((c for c in group if c.finish_exact), None)
    reason = exact or next((c for c in group if c.finish_reason), first)
    return LlmCall(
        start_ns=min(c.start_ns for c in group),
        end_ns=max(c.end_ns for c in group),
        failed=all(c.failed for c in group),
        span_id=first.span_id,
        parent_id=first.parent_id,
        response_id=next((c.response_id for c in group if c.response_id), ""),
        text=said.text,
        tool_calls=said.tool_calls,
        input_tokens=max(c.input_tokens for c in group),
        output_tokens=max(c.output_tokens for c in group),
        model=next((c.model for c in group if c.model), ""),
        raw_request=next((c.raw_request for c in group if c.raw_request is not None), None),
        raw_response=next((c.raw_response for c in group if c.raw_response is not None), None),
        raw_messages=next((c.raw_messages for c in group if c.raw_messages is not None), None),
        prompts=next((c.prompts for c in group if c.prompts), {}),
        finish_reason=reason.finish_reason,
        finish_exact=reason.finish_exact,
        model_attempts=next((c.model_attempts for c in group if c.model_attempts), []),
    )


def _conversation(
    calls: list[LlmCall], *, complete: bool
) -> tuple[list[conversation.Turn], dict[str, Any], bool] | None:
    """The conversation of an LLM-only trace as turns, what to keep of it on the run, and whether its
    convention carries a tool_result's ``is_error``: the last model call's request (OpenInference's
    ``input.value``, the Messages API request; GenAI's ``gen_ai.input.messages``; the older
    ``gen_ai.prompt.N.*``) and, once the trace is complete or when it asked for no tool, its reply.
    Earlier model turns get the tokens and finish reasons of the calls that produced them, in order."""
    asked = []
    for call in calls:
        if (request := call.request) is not None:
            asked.append((len(request["messages"]), call.start_ns, call, "messages", request))
        elif (messages := call.messages) is not None:
            asked.append((len(messages), call.start_ns, call, "gen_ai", messages))
        elif call.prompts:
            messages = _prompt_messages(call.prompts)
            asked.append((len(messages), call.start_ns, call, "prompts", messages))
    if not asked:
        return None
    _, _, last, how, said = max(asked, key=lambda item: item[:2])
    errors: list[dict[str, str]] = []
    if how == "messages":
        turns = conversation.messages_turns(said["messages"], errors)
        transcript = {"messages": said["messages"]}
        transcript.update({key: said[key] for key in ("model", "system", "tools") if said.get(key) is not None})
        carried = True
    elif how == "gen_ai":
        turns = conversation.genai_turns(said)
        transcript = {"gen_ai.input.messages": said}
        carried = False  # GenAI's messages have no is_error: only a structured result says it failed
    else:
        turns = conversation.messages_turns(said, errors)
        transcript = {"messages": said}
        carried = any(isinstance(r.raw, dict) or r.is_error for t in turns for r in t.results)
    if errors:
        raise IngestError(errors)
    spoken = [t for t in turns if t.role == "assistant"]
    earlier = [c for c in calls if c is not last and not c.failed and c.start_ns <= last.start_ns]
    if len(earlier) == len(spoken):
        for turn, call in zip(spoken, earlier, strict=True):
            if turn.tokens == (0, 0):
                turn.tokens = (call.input_tokens, call.output_tokens)
            turn.stop_reason = turn.stop_reason or call.finish_reason
    if complete or not last.tool_calls:
        reply = _reply(last)
        if reply is not None:
            turns.append(reply)
            transcript["reply"] = last.response or {"text": last.text, "tool_calls": last.tool_calls}
    return turns, transcript, carried


def _reply(call: LlmCall) -> conversation.Turn | None:
    """A model call's reply as the conversation's last model turn: the Messages API response when the
    span carries it (its server tools' blocks too), else the text and tool calls its spans named."""
    response = call.response
    tokens = (call.input_tokens, call.output_tokens)
    if response is not None:
        (turn,) = conversation.messages_turns([{"role": "assistant", "content": response["content"]}], [])
        usage = conversation.usage_tokens(response.get("usage"))
        turn.tokens = usage if usage != (0, 0) else tokens
    elif call.text or call.tool_calls:
        turn = conversation.Turn(role="assistant", text=call.text, tokens=tokens)
        for tc in call.tool_calls:
            arguments = tc["arguments"]
            given = arguments if isinstance(arguments, dict) else {} if arguments is None else {"input": arguments}
            turn.calls.append(conversation.Call(id=tc["id"] or f"call-{len(turn.calls)}", name=tc["name"], input=given))
    else:
        return None
    turn.stop_reason = call.finish_reason
    return turn


def _prompt_messages(prompts: dict[str, Any]) -> list[dict[str, Any]]:
    """The older ``gen_ai.prompt.N.role`` / ``.content`` as Messages API messages (a content that is a JSON
    list of blocks is read as those blocks)."""
    messages = []
    n = 0
    while f"gen_ai.prompt.{n}.role" in prompts:
        content = json_value(prompts.get(f"gen_ai.prompt.{n}.content"))
        role = prompts[f"gen_ai.prompt.{n}.role"]
        if role in ("user", "assistant"):
            messages.append(
                {"role": role, "content": content if isinstance(content, (str, list)) else text_of(content)}
            )
        n += 1
    return messages


def _task(root: Span | None, llm_calls: list[LlmCall]) -> str:
    if root is not None:
        task = json_value(root.attributes.get("input.value"))
        if isinstance(task, str) and task:
            return task
        messages = json_value(root.attributes.get("gen_ai.input.messages"))
        for message in messages if isinstance(messages, list) else []:
            if isinstance(message, dict) and message.get("role") == "user":
                texts = [text_of(p.get("content")) for p in message.get("parts") or [] if isinstance(p, dict)]
                if any(texts):
                    return "\n".join(t for t in texts if t)
        if isinstance(task, dict):
            for key in ("task", "input", "query", "question", "prompt"):
                if isinstance(task.get(key), str):
                    return task[key]
    for call in llm_calls:
        if call.request is None and call.messages is not None:
            user = next((t for t in conversation.genai_turns(call.messages) if t.role == "user"), None)
            return user.text if user is not None else ""
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


def _end(
    root: Span, labels: Labels, final: str | None, steps: list[StepEvent], warnings: list[str]
) -> tuple[RunEnd, datetime]:
    """How the run ended, and when: ``rlt.stop_reason`` (or the root's ``metadata.stop_reason``), a
    stop reason as the root's ERROR status, ``final_answer`` when there is one, else ``crashed``;
    the verdict ``rlt.verdict`` (``pass`` or ``fail``; else unknown) with ``rlt.verdict.reason``."""
    end = RunEnd(
        stop_reason="",
        error="",
        guard=_text_taken(text_of(labels.first(None, "rlt.guard")), "rlt.guard", GUARD_MAX, warnings),
    )
    named = labels.run_label("rlt.stop_reason", "stop_reason")
    if named in STOP_REASONS:
        end.stop_reason = named
        if named != StopReason.FINAL_ANSWER and root.status_message not in ("", named):
            end.error = root.status_message  # why it stopped: a crash's error, an interruption's reason
    elif root.status_code == STATUS_ERROR and root.status_message in STOP_REASONS:
        end.stop_reason = root.status_message
    elif final is not None:
        end.stop_reason = StopReason.FINAL_ANSWER
    else:
        end.stop_reason = StopReason.CRASHED
        message = error_message(root) if root.status_code == STATUS_ERROR else ""
        end.error = message or "the trace ended without a final answer and named no stop reason (rlt.stop_reason)"
    if final is not None and end.stop_reason == StopReason.FINAL_ANSWER:
        end.final_answer = final
    else:
        answers = [s.text or "" for s in steps if s.kind == StepKind.FINAL_ANSWER]
        end.final_answer = answers[-1] if answers else ""
    verdict = text_of(labels.first(None, "rlt.verdict")).lower()
    if verdict in ("pass", "fail"):
        end.verdict = Verdict(passed=verdict == "pass", reason=text_of(labels.first(None, "rlt.verdict.reason")))
    return end, _when(root.end_ns or root.start_ns)


def _model_calls_end(calls: list[LlmCall], labels: Labels) -> tuple[list[ModelAttempt], int | None]:
    """The run's failed model call (the last model span, when it failed and carries ``rlt.model_attempts``:
    the call that ended the run) and the sender's ``rlt.model_retry_count``, when the trace says them."""
    last = max(calls, key=lambda c: c.start_ns, default=None)
    failed = list(last.model_attempts) if last is not None and last.failed else []
    count = labels.first(None, MODEL_RETRY_COUNT)
    if isinstance(count, str) and count.isdigit():
        count = int(count)
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return failed, min(count, INT_MAX)
    return failed, None


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
    # the call that answered: one that ended the run after the last tool call started (a tool call the
    # agent made while that call was under way, sent late, does not undo the answer)
    answers = [c for c in calls if _ends_the_run(c) and c.end_ns >= last_tool_start]
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
