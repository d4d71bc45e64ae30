"""A run read as the calls the model sent: who repeated what, and what the model was told each time.

A step's attempts are the harness's tries of one call, except where the run's transcript shows the
model sending the same call again after it failed (a Messages transcript read by the importer makes
those attempts of one step): then each of them is a call of its own, sent by the model. A later step
with the same tool and input right after a failed call is the model's repeat too. Either way the
diagnosis says who repeated the call and counts each repeat once.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..events import Attempt, RunEnd, RunStart, StepEvent
from ..vocabulary import ErrorCategory, StepKind
from .effects import Effects, effects_of
from .lint import category_from_words, says_nothing_found, structured_flags, text_of

# Failures that say the call itself was refused: sending it again unchanged gets the same answer.
REFUSALS = frozenset({ErrorCategory.VALIDATION, ErrorCategory.PERMISSION, ErrorCategory.BUSINESS})
CATEGORIES = frozenset(ErrorCategory)


def call_key(tool: str | None, call_input: Any) -> str:
    """Two calls are the same call when their tool and input are equal (keys in any order)."""
    try:
        spelled = orjson.dumps(call_input, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
    except TypeError:  # an integer beyond 64 bits
        spelled = json.dumps(call_input, sort_keys=True, ensure_ascii=False, default=str).encode()
    return f"{tool}\x1f{spelled.decode()}"


@dataclass
class Failure:
    """What one attempt's failure was, as far as the trace tells it, and where each part came from."""

    category: str | None  # a category, or None when nothing says
    retryable: bool | None
    basis: str  # "the tool", "the structured result", "the message's words ('timed out')", ""
    empty: bool = False  # "nothing found", reported as a failure or retried


@dataclass
class Call:
    """One tool_use the model sent, with the harness's attempts at it and what the model got back."""

    step: int  # the step it is (links point here)
    attempt_from: int  # its first attempt's number within the step (1 unless the step holds model repeats)
    tool: str
    input: Any
    attempts: list[Attempt]
    sent: Any  # the tool_result content the model got; None when none was sent (the run stopped there)
    sent_error: bool  # that tool_result's is_error (or what the result itself says)
    tokens: tuple[int, int]  # of the model response that made this call
    repeat_of: Call | None = None  # the model sent this same call again right after that one failed

    @functools.cached_property
    def sent_text(self) -> str:
        """The text the model read in the tool_result it was sent ("" when none was sent)."""
        return text_of(self.sent) if self.sent is not None else ""

    @functools.cached_property
    def key(self) -> str:
        return call_key(self.tool, self.input)

    @property
    def harness_retries(self) -> int:
        return len(self.attempts) - 1

    @property
    def delivered(self) -> bool:
        """A tool_result reached the model."""
        return self.sent is not None


@dataclass
class Trace:
    """A run as diagnosis reads it."""

    start: RunStart
    end: RunEnd | None
    steps: list[StepEvent]
    calls: list[Call]
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> definition
    _effects: dict[str, Effects] = field(default_factory=dict, repr=False)

    def effects(self, tool: str) -> Effects:
        """What the tool changes: from its definition when the trace carries one, else from its name."""
        if tool not in self._effects:
            self._effects[tool] = effects_of(self.tools.get(tool) or {"name": tool})
        return self._effects[tool]

    def schema(self, tool: str) -> dict[str, Any] | None:
        definition = self.tools.get(tool) or {}
        schema = definition.get("input_schema") or definition.get("inputSchema")
        return schema if isinstance(schema, dict) else None

    @property
    def settings(self) -> dict[str, Any]:
        return self.start.policy_settings or {}

    @property
    def harness_seen(self) -> bool:
        """Whether the trace shows the harness's own tries of each call. Not for a run from outside read
        from its Messages transcript (an import, or an LLM-only trace's conversation): that holds only
        what the model was sent, so a call the harness tried three times looks like one try."""
        return not (self.start.model_backend == "imported" and bool(self.end is not None and self.end.transcript))


def failure_of(attempt: Attempt, *, sent: Any = None) -> Failure:
    """An attempt's failure: the category the tool or the structured result gave, else the one its
    message's words name (``lint.category_from_words``), else unknown. Worked out once per attempt
    and ``sent`` (the rules and the rollups ask for the same ones again and again) and kept on the
    attempt beside the object it was asked with; treat it as read-only."""
    memo = attempt.__dict__.setdefault("_failures", {})
    seen = memo.get(id(sent))
    if seen is not None and seen[0] is sent:
        return seen[1]
    found = _failure_of(attempt, sent)
    memo[id(sent)] = (sent, found)  # ``sent`` kept with it, so its id cannot be another object's
    return found


def _failure_of(attempt: Attempt, sent: Any) -> Failure:
    text = attempt.message or text_of(attempt.content) or text_of(sent)
    empty = attempt.empty or (not attempt.ok and says_nothing_found(attempt.content, text))
    if attempt.category:
        carried, flag = structured_flags(sent if sent is not None else attempt.result_content)
        basis = "the structured result" if carried == attempt.category else "the tool"
        return Failure(attempt.category, attempt.retryable, basis, empty)
    carried, flag = structured_flags(
        attempt.content if attempt.content is not None else attempt.result_content if sent is None else sent
    )
    if carried in CATEGORIES:
        return Failure(carried, flag if flag is not None else attempt.retryable, "the structured result", empty)
    if empty and not attempt.ok:
        return Failure(None, attempt.retryable, "", True)
    words = category_from_words(text or "")
    if words is not None:
        category, said = words
        return Failure(category, attempt.retryable, f"the message's words ({said!r})", empty)
    return Failure(None, attempt.retryable, "", empty)


def _transcript_uses(transcript: Any) -> list[tuple[str, str]]:
    """The (tool_use id, call key) of every tool_use in a transcript, in order."""
    messages = transcript.get("messages") if isinstance(transcript, dict) else transcript
    out = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                out.append((str(block.get("id") or ""), call_key(block.get("name"), block.get("input", {}))))
    return out


def _model_sends(steps: Sequence[StepEvent], transcript: Any) -> dict[int, int]:
    """For each step, how many of its attempts the transcript shows the model sending (1: the harness
    made the rest)."""
    uses = _transcript_uses(transcript)
    where = {use_id: k for k, (use_id, _) in enumerate(uses) if use_id}
    step_ids = {s.tool_use_id for s in steps if s.tool_use_id}
    sends: dict[int, int] = {}
    for step in steps:
        if step.kind != StepKind.TOOL_USE or len(step.attempts) < 2 or step.tool_use_id not in where:
            continue
        key = call_key(step.tool_name, step.input)
        count = 1
        for use_id, other in uses[where[step.tool_use_id] + 1 :]:
            if count >= len(step.attempts):
                break
            if other == key and use_id not in step_ids:
                count += 1
        sends[step.index] = count
    return sends


def _sent_error(sent: Any, flagged: bool) -> bool:
    if flagged:
        return True
    carried, _ = structured_flags(sent)
    if isinstance(sent, dict) and sent.get("isError") is True:
        return True
    return carried is not None and carried != "empty" and isinstance(sent, dict) and "isError" in sent


def trace_read(*, start: RunStart, steps: Sequence[StepEvent], end: RunEnd | None = None) -> Trace:
    """The run as calls (module docstring), with its tools by name."""
    tools = {str(t.get("name")): t for t in start.tools or [] if isinstance(t, dict) and t.get("name")}
    transcript = end.transcript if end is not None else None
    if isinstance(transcript, dict) and isinstance(transcript.get("tools"), list):
        for t in transcript["tools"]:
            if isinstance(t, dict) and t.get("name"):
                tools.setdefault(str(t["name"]), t)
    sends = _model_sends(steps, transcript)
    calls: list[Call] = []
    for step in steps:
        if step.kind != StepKind.TOOL_USE:
            continue
        for call in _step_calls(step, by_model=sends.get(step.index, 1)):
            if calls and _repeats(calls[-1], call):
                call.repeat_of = calls[-1]
            calls.append(call)
    return Trace(start=start, end=end, steps=list(steps), calls=calls, tools=tools)


def _step_calls(step: StepEvent, *, by_model: int = 1) -> list[Call]:
    """A tool_use step as the calls the model sent: one, unless ``by_model`` of its attempts were the
    model's own sends (then the first send keeps the harness's attempts and each later send is one)."""
    attempts = list(step.attempts) or [
        Attempt(
            number=1,
            ok=not step.is_error,
            content=step.result_content,
            category=step.category,
            retryable=step.retryable,
            result_content=step.result_content,
            is_error=step.is_error,
        )
    ]
    cut = len(attempts) - by_model + 1
    groups = [attempts] if by_model == 1 else [attempts[:cut], *([a] for a in attempts[cut:])]
    calls = []
    for k, group in enumerate(groups):
        last = group[-1]
        if k == len(groups) - 1:
            sent, flagged = step.result_content, step.is_error
        else:
            sent = last.result_content if last.result_content is not None else last.content
            flagged = bool(last.is_error) or not last.ok
        tokens = (step.input_tokens, step.output_tokens) if k == 0 else (0, 0)
        if by_model > 1:  # the importer summed the model's repeats' tokens on the step: share them out
            tokens = (step.input_tokens // by_model, step.output_tokens // by_model)
        calls.append(
            Call(
                step=step.index,
                attempt_from=group[0].number,
                tool=step.tool_name or "",
                input=step.input,
                attempts=group,
                sent=sent,
                sent_error=_sent_error(sent, flagged),
                tokens=tokens,
            )
        )
    return calls


def _repeats(previous: Call, call: Call) -> bool:
    """A model repeat: ``call`` is the same call as ``previous``, the call just before it, sent again
    after ``previous`` failed or found nothing."""
    return (previous.sent_error or _found_nothing(previous)) and previous.key == call.key


def step_repeats(previous: StepEvent | None, step: StepEvent) -> bool:
    """Whether tool_use ``step`` is a model repeat (``_repeats``) of ``previous``, the tool_use step
    before it: what ``StepEvent.repeat_of`` and the stored step's ``repeat_of`` say, and what the
    Tools page counts as the model's repeats."""
    if previous is None or step.kind != StepKind.TOOL_USE or previous.kind != StepKind.TOOL_USE:
        return False
    return _repeats(_step_calls(previous)[-1], _step_calls(step)[0])


def wasted_repeat(previous: StepEvent) -> bool:
    """Whether the model's repeat of ``previous``'s call was wasted (``wasted_try`` of its last try)."""
    return wasted_try(_step_calls(previous)[-1].attempts[-1])


def wasted_try(attempt: Attempt) -> bool:
    """Whether trying the call again after ``attempt`` could not come out differently: it found
    nothing, or it failed in a way no retry fixes (a refusal, fatal, not retryable)."""
    if found_nothing(attempt):
        return True
    if attempt.ok:
        return False
    f = failure_of(attempt)
    return f.category in REFUSALS or f.category == ErrorCategory.FATAL or f.retryable is False or f.empty


def found_nothing(attempt: Attempt) -> bool:
    """An attempt that worked and found nothing: marked empty by its source, or an empty value
    (``[]``, ``{}``, an object whose lists are all empty) that its source did not mark. Kept on the
    attempt once worked out, as ``failure_of`` is."""
    if not attempt.ok:
        return False
    if attempt.empty:
        return True
    said = attempt.__dict__.get("_nothing")
    if said is None:
        said = attempt.__dict__["_nothing"] = says_nothing_found(attempt.content, "")
    return said


def _found_nothing(call: Call) -> bool:
    return found_nothing(call.attempts[-1])
