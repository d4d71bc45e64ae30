"""The agent loop: model turns through the SDK, tool calls through ``run_tool``, the policy in between.

Each tool_use becomes one step. The harness runs the tool, retries it in code when the policy says a
retry can help (waiting the policy's backoff on a clock: virtual for offline models, real for
Claude), turns the last outcome into a tool_result matched by ``tool_use_id``, applies the guards,
and reports every step to the recorder as soon as it is done.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .diagnosis.calls import call_key
from .diagnosis.effects import IDEMPOTENCY_FIELD, effects_of
from .diagnosis.effects import MCP as EFFECTS_MCP
from .diagnosis.effects import PACK as EFFECTS_DECLARED
from .diagnosis.lint import clean_error_text
from .errors import error_json
from .events import Attempt, ModelVerdict, Recorder, RunAborted, RunEnd, RunStart, StepEvent, Verdict
from .llm.base import ModelBackend, ModelClient, ModelError
from .llm.replay import ReplayMismatch
from .persona import Persona
from .policies import Policy
from .policy_code import says_error
from .runner import Outcome
from .tools import Toolbox
from .vocabulary import API_STOPS_ENDING_A_RUN, ApiStopReason, ErrorCategory, ErrorFormat, StepKind, StopReason

MAX_TOKENS = 1024
MAX_PAUSES = 10  # pause_turn continuations of one turn before a guard stops the run
EXHAUSTED_ADVICE = "try again later or use another source"
SWALLOWED: list[Any] = []  # what a harness that swallows failures sends: "no results", as if it worked


class VirtualClock:
    """Time that passes only when the harness waits: offline runs never sleep. Its ``now`` is real
    time plus the waits it skipped, so a tool call that waited on it (one that ran a sub-agent, whose
    retries waited) measures those waits as its own time, as it would have under a real clock."""

    def __init__(self) -> None:
        self.skipped_s = 0.0

    def sleep(self, seconds: float) -> None:
        self.skipped_s += seconds

    def now(self) -> float:
        return time.perf_counter() + self.skipped_s


class RealClock:
    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def now(self) -> float:
        return time.perf_counter()


@dataclass
class AgentSpec:
    """One agent: its task, its tools, and what the simulated model brings to it."""

    scenario: str
    task: str
    system: str
    toolbox: Toolbox
    persona: Persona


@dataclass
class RunResult:
    start: RunStart
    steps: list[StepEvent]
    end: RunEnd
    children: list[RunResult] = field(default_factory=list)
    label: str = ""


class Session:
    """What a run shares with the sub-agents it starts: model backend, clock, randomness, recorder,
    and when it must end: ``deadline`` (a ``time.monotonic()`` value) after ``time_limit_s``, which
    bounds every model call (``agents.llm.base.ModelClient``); None: unbounded."""

    def __init__(
        self,
        *,
        backend: ModelBackend,
        policy: Policy,
        recorder: Recorder,
        seed: int = 0,
        deadline: float | None = None,
        time_limit_s: float | None = None,
    ) -> None:
        self.backend = backend
        self.policy = policy
        self.recorder = recorder
        self.clock = RealClock() if backend.real_time else VirtualClock()
        self.rng = random.Random(seed)
        self.children: list[RunResult] = []
        self.time_limit_s = time_limit_s
        if deadline is None and time_limit_s is not None:
            deadline = time.monotonic() + time_limit_s
        self.deadline = deadline

    def spawn(self, *, label: str, spec: AgentSpec, policy: Policy) -> RunResult:
        """Run a sub-agent as a child run, reported to ``recorder.child(label=...)``. A ``RunAborted``
        from it goes on to the parent naming this sub-agent (the innermost one, when nested deeper)."""
        try:
            child = run_agent(spec, policy=policy, session=self, recorder=self.recorder.child(label=label), nested=True)
        except RunAborted as exc:
            exc.sub_agent = exc.sub_agent or label
            raise
        child.label = label
        self.children.append(child)
        return child


def as_text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def format_result(
    policy: Policy,
    outcome: Outcome,
    *,
    attempts: int,
    tool: str,
    final: bool = True,
    removed: list[str] | None = None,
) -> tuple[Any, bool]:
    """The tool_result content and ``is_error`` flag that ``policy`` makes of an outcome.

    ``final``: no retry follows this attempt. Only then does a transient failure that was tried more
    than once say so and what to do next; an attempt the harness retries never says "try again later".
    Under ``clean_error_text`` the failure's message loses its internal details first; what was taken
    out is added to ``removed`` when given.
    """
    if policy.policy_code is not None:
        return code_result(policy, outcome, attempts=attempts, tool=tool, final=final)
    empty_error = outcome.ok and outcome.empty and policy.empty_is_error
    if outcome.ok and not empty_error:
        return outcome.content, False
    if policy.swallow_errors and not outcome.ok:
        return SWALLOWED, False
    if policy.error_format in (ErrorFormat.BARE, ErrorFormat.RAISE):
        return {"error": {"message": "Error"}}, True
    if empty_error:
        found = outcome.content.get("message") if isinstance(outcome.content, dict) else None
        message = found or f"{tool} found nothing"
        if policy.error_format == ErrorFormat.MESSAGE:
            return message, True
        return error_json("empty", message, retryable=False), True
    message = failure_message(outcome, attempts=attempts, final=final, clean=policy.clean_error_text, removed=removed)
    if policy.error_format == ErrorFormat.MESSAGE:
        return message, True
    return error_json(outcome.category or ErrorCategory.BUSINESS, message, retryable=outcome.retryable), True


def failure_message(
    outcome: Outcome, *, attempts: int, final: bool, clean: bool = False, removed: list[str] | None = None
) -> str:
    """The message a failure's tool_result carries: the tool's, saying so when retries of a transient
    failure ran out. ``clean``: its internal details taken out first, named in ``removed`` when given."""
    message = outcome.message or "the tool failed without a message"
    if clean:
        message, taken = clean_error_text(message)
        if removed is not None:
            removed.extend(w for w in taken if w not in removed)
    if final and outcome.category == ErrorCategory.TRANSIENT and attempts > 1:
        message = f"still failing after {attempts} attempts: {message}; {EXHAUSTED_ADVICE}"
    return message


def code_result(policy: Policy, outcome: Outcome, *, attempts: int, tool: str, final: bool) -> tuple[Any, bool]:
    """The tool_result of a policy with code: the module's ``fail(category, message)`` for a failure, and
    ``fail("empty", message)`` for a call that found nothing; an error when what it built says so."""
    code = policy.policy_code
    assert code is not None
    if outcome.ok and not outcome.empty:
        return outcome.content, False
    if outcome.ok:
        found = outcome.content.get("message") if isinstance(outcome.content, dict) else None
        result = code.fail("empty", found or f"{tool} found nothing")
    else:
        category = outcome.category or ErrorCategory.BUSINESS
        result = code.fail(str(category), failure_message(outcome, attempts=attempts, final=final))
    return result, says_error(result)


def idempotency_field(toolbox: Toolbox, name: str) -> str | None:
    """The input field of tool ``name`` that takes an idempotency key, when its schema has one."""
    schema = next((s.get("input_schema") for s in toolbox.schemas() if s.get("name") == name), None)
    props = schema.get("properties") if isinstance(schema, dict) else None
    return next((k for k in props or {} if IDEMPOTENCY_FIELD.search(k)), None)


def _quote(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


@dataclass
class ModelTurn:
    """One assistant turn (one response, or a paused one and its continuations): its content blocks,
    tokens summed over its responses, and the API's stop_reason of the last of them."""

    content: list[dict[str, Any]]
    tokens: tuple[int, int] = (0, 0)
    api_stop_reason: str | None = None
    pauses: int = 0

    def add(self, reply: dict[str, Any]) -> None:
        usage = reply.get("usage") or {}
        self.tokens = (
            self.tokens[0] + int(usage.get("input_tokens") or 0),
            self.tokens[1] + int(usage.get("output_tokens") or 0),
        )
        self.api_stop_reason = reply.get("stop_reason")

    @property
    def text(self) -> str | None:
        return "\n".join(b.get("text", "") for b in self.content if b.get("type") == "text") or None

    @property
    def uses(self) -> list[dict[str, Any]]:
        return [b for b in self.content if b.get("type") == "tool_use"]


class _Run:
    def __init__(
        self, spec: AgentSpec, policy: Policy, session: Session, recorder: Recorder, client: ModelClient
    ) -> None:
        self.spec = spec
        self.policy = policy
        self.session = session
        self.recorder = recorder
        self.client = client
        self.tools = spec.toolbox.schemas()
        self.effects = {str(d.get("name")): effects_of(d) for d in spec.toolbox.definitions()}
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": spec.task}]
        self.steps: list[StepEvent] = []
        self.api_stop_reason: str | None = None  # of the last model response

    def record(self, step: StepEvent) -> None:
        step.model_attempts = self.client.take_attempts()  # those of the call that produced it; [] after the first
        self.steps.append(step)
        self.recorder.step_recorded(step)

    def request(self) -> dict[str, Any]:
        return {
            "model": self.session.backend.model,
            "max_tokens": MAX_TOKENS,
            "system": self.policy.system_prompt(self.spec.system),
            "tools": self.tools,
            "messages": self.messages,
        }

    def model_turn(self) -> ModelTurn:
        """One assistant turn: a response, continued while the API pauses it (``pause_turn``).

        A paused turn's content goes back as the last (assistant) message and the API continues it; the
        continuation's content is appended to that same message, so the conversation still alternates.
        """
        reply = self.client.create(self.request())
        content = list(reply.get("content") or [])
        self.messages.append({"role": "assistant", "content": content})
        turn = ModelTurn(content=content)
        turn.add(reply)
        while turn.api_stop_reason == ApiStopReason.PAUSE_TURN:
            if turn.pauses >= MAX_PAUSES:
                return turn
            turn.pauses += 1
            reply = self.client.create(self.request(), continuation=True)
            content.extend(reply.get("content") or [])
            turn.add(reply)
        return turn

    def drive(self) -> RunEnd:
        policy = self.policy
        tool_steps = consecutive = 0
        sent: list[str] = []  # every tool_result's text so far, for a policy module's guard
        while True:
            turn = self.model_turn()
            self.api_stop_reason = turn.api_stop_reason
            text, tokens, uses = turn.text, turn.tokens, turn.uses
            if turn.api_stop_reason in API_STOPS_ENDING_A_RUN:  # pause_turn: only once MAX_PAUSES ran out
                return self.model_stop(turn)
            if not uses:
                self.record(
                    StepEvent(
                        index=len(self.steps) + 1,
                        kind=StepKind.FINAL_ANSWER,
                        text=text or "",
                        input_tokens=tokens[0],
                        output_tokens=tokens[1],
                        api_stop_reason=turn.api_stop_reason,
                    )
                )
                return RunEnd(StopReason.FINAL_ANSWER, final_answer=text or "")
            results = []
            for k, use in enumerate(uses):
                if tool_steps >= policy.max_steps:
                    return RunEnd(StopReason.MAX_STEPS, guard=f"stopped at the {policy.max_steps}-step limit")
                tool_steps += 1
                # A response's tokens are counted once, on its first step.
                step = self.tool_step(
                    use, text if k == 0 else None, tokens if k == 0 else (0, 0), api_stop_reason=turn.api_stop_reason
                )
                last = step.attempts[-1]
                if last.category == ErrorCategory.FATAL and policy.stop_on_fatal:
                    return RunEnd(
                        StopReason.FATAL_ERROR,
                        error=f"{use.get('name')} reported a fatal error, so the run stopped: {last.message}",
                    )
                results.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": use.get("id"),
                        "content": as_text(step.result_content),
                        "is_error": step.is_error,
                    }
                )
                consecutive = consecutive + 1 if step.is_error else 0
                code = policy.policy_code
                if code is not None and code.guard_fn is not None:
                    sent.append(results[-1]["content"])
                    said = code.guard(sent)
                    if said:
                        return RunEnd(StopReason.CONSECUTIVE_ERRORS, guard=said)
                elif policy.consecutive_error_limit and consecutive >= policy.consecutive_error_limit:
                    return RunEnd(
                        StopReason.CONSECUTIVE_ERRORS, guard=f"{policy.consecutive_error_limit} tool errors in a row"
                    )
            self.messages.append({"role": "user", "content": results})

    def model_stop(self, turn: ModelTurn) -> RunEnd:
        """A turn the API cut off (max_tokens), the model refused, or the API kept pausing: recorded as it
        came (its tokens count), nothing in it executed (a tool_use cut off mid-input would run with a
        partial input), and the run ends."""
        cut = turn.uses[-1] if turn.uses else None
        raw_input = cut.get("input") if cut else None
        self.record(
            StepEvent(
                index=len(self.steps) + 1,
                kind=StepKind.MODEL_STOP,
                tool_name=cut.get("name") if cut else None,
                tool_use_id=cut.get("id") if cut else None,
                input=(raw_input if isinstance(raw_input, dict) else {"input": raw_input}) if cut else None,
                text=turn.text,
                input_tokens=turn.tokens[0],
                output_tokens=turn.tokens[1],
                api_stop_reason=turn.api_stop_reason,
            )
        )
        said = f": {_quote(turn.text)}" if turn.text else ""
        if turn.api_stop_reason == ApiStopReason.PAUSE_TURN:
            return RunEnd(
                StopReason.MAX_STEPS, guard=f"the API paused one turn {turn.pauses + 1} times in a row (pause_turn)"
            )
        if turn.api_stop_reason == ApiStopReason.REFUSAL:
            return RunEnd(StopReason.REFUSAL, error=f"the model declined to go on (stop_reason refusal){said}")
        limit = (
            f"the {MAX_TOKENS}-token limit of a reply"
            if turn.api_stop_reason == ApiStopReason.MAX_TOKENS
            else "the model's context window"
        )
        what = (
            f"while writing a call to {cut.get('name')}, which was not executed"
            if cut
            else f"after{said}"
            if said
            else "before it wrote anything"
        )
        return RunEnd(
            StopReason.MAX_TOKENS,
            error=f"the model's reply was cut off at {limit} (stop_reason {turn.api_stop_reason}) {what}",
        )

    def tool_step(
        self, use: dict[str, Any], text: str | None, tokens: tuple[int, int], *, api_stop_reason: str | None = None
    ) -> StepEvent:
        policy, name = self.policy, str(use.get("name"))
        raw_input = use.get("input")
        step = StepEvent(
            index=len(self.steps) + 1,
            kind=StepKind.TOOL_USE,
            tool_name=name,
            tool_use_id=use.get("id"),
            input=raw_input if isinstance(raw_input, dict) else {"input": raw_input},
            text=text,
            input_tokens=tokens[0],
            output_tokens=tokens[1],
            api_stop_reason=api_stop_reason,
        )
        raw_input, may_retry = self.write_guard(name, raw_input)
        if isinstance(raw_input, dict):
            step.input = raw_input
        backoff = 0.0
        while True:
            # on the run's clock: a sub-agent the call runs waits on it, and those waits are the call's time
            began = self.session.clock.now()
            outcome = self.spec.toolbox.call(name, raw_input)
            latency_ms = (self.session.clock.now() - began) * 1000
            number = len(step.attempts) + 1
            removed: list[str] = []
            result, is_error = format_result(policy, outcome, attempts=number, tool=name, final=False, removed=removed)
            step.attempts.append(
                Attempt(
                    number=number,
                    ok=outcome.ok,
                    content=outcome.content,
                    category=outcome.category,
                    retryable=outcome.retryable,
                    message=outcome.message,
                    backoff_s=backoff,
                    latency_ms=round(latency_ms, 3),
                    empty=outcome.empty,
                    result_content=result,
                    is_error=is_error,
                    transport=self.spec.toolbox.transport,
                    mcp_result=outcome.mcp_result,
                    removed=removed,
                )
            )
            if not outcome.ok and outcome.category == ErrorCategory.FATAL and policy.stop_on_fatal:
                # The run stops here: no tool_result is sent, so none is recorded.
                step.attempts[-1].result_content = None
                self.finish_step(step, None, True)
                return step
            if not is_error:
                break
            if policy.error_format == ErrorFormat.RAISE:
                step.attempts[-1].result_content = None
                self.finish_step(step, None, True)
                raise outcome.exception or LookupError(f"{name} found nothing")
            if not may_retry or not policy.should_retry(
                result=result, is_error=is_error, category=outcome.category, attempt=number
            ):
                # The last attempt: its tool_result goes to the model, saying so when retries ran out.
                result, is_error = format_result(policy, outcome, attempts=number, tool=name)
                step.attempts[-1].result_content = result
                break
            backoff = policy.backoff(attempt=number, rng=self.session.rng)
            self.session.clock.sleep(backoff)
        self.finish_step(step, result, is_error)
        return step

    def write_guard(self, name: str, raw_input: Any) -> tuple[Any, bool]:
        """The input to call ``name`` with, and whether a failed call of it may be retried at all: a tool
        that declares it changes something and is not safe to repeat (pack flags or MCP annotations) is
        retried only under ``write_retries: blind``, or under ``idempotency_key`` with the key the
        harness fills into the tool's idempotency field (the same on every attempt of the call)."""
        effects = self.effects.get(name)
        declared = effects is not None and effects.basis in (EFFECTS_DECLARED, EFFECTS_MCP)
        if not declared or effects.changes is not True or effects.idempotent is True:
            return raw_input, True
        mode = self.policy.write_retries
        if mode == "blind":
            return raw_input, True
        if mode == "never" or not isinstance(raw_input, dict):
            return raw_input, False
        field_name = idempotency_field(self.spec.toolbox, name)
        if field_name is None:
            return raw_input, False
        if raw_input.get(field_name) in (None, ""):
            # One key per change: the same call sent again (by the model, after a timeout) carries it too.
            digest = hashlib.sha256(call_key(name, raw_input).encode()).hexdigest()[:16]
            raw_input = {**raw_input, field_name: f"rlt-{digest}"}
        return raw_input, True

    def finish_step(self, step: StepEvent, result: Any, is_error: bool) -> None:
        last = step.attempts[-1]
        step.result_content = result
        step.is_error = is_error
        step.category = None if last.ok else last.category
        step.retryable = None if last.ok else last.retryable
        step.retry_count = len(step.attempts) - 1
        step.latency_ms = round(sum(a.latency_ms + a.backoff_s * 1000 for a in step.attempts), 3)
        self.record(step)


def done_before(steps: list[StepEvent], *, under_way: str = "") -> str:
    """What a run had done when it stopped, for its crash reason: a side effect (a refund paid) stays
    done whatever stopped the run after it. ``under_way``: the call it stopped in, when one was."""
    calls = [s for s in steps if s.kind == StepKind.TOOL_USE]
    if not calls:
        return (
            f"No tool call had finished yet; {under_way} was under way."
            if under_way
            else "No tool had been called yet."
        )
    done = "; ".join(
        f"step {s.index} {s.tool_name} {'failed' if s.is_error else 'succeeded'}"
        + (f" after {len(s.attempts)} attempts" if len(s.attempts) > 1 else "")
        for s in calls
    )
    return f"Done before it stopped: {done}" + (f"; then {under_way} was under way." if under_way else ".")


def run_agent(
    spec: AgentSpec,
    *,
    policy: Policy,
    session: Session,
    recorder: Recorder,
    judge: Callable[[RunResult], Verdict] | None = None,
    nested: bool = False,
    model_judge: Callable[[RunResult], ModelVerdict] | None = None,
) -> RunResult:
    """Run one agent to its end. Never raises for what happens inside the run: a crash is a stop reason.

    ``model_judge`` (``agents.model_judge``), when given, judges the run too once ``judge`` has, its
    verdict kept beside the rules' one.

    A sub-agent (``nested``) whose model cannot be reached, or whose replay no longer matches, ends
    crashed and then raises ``RunAborted`` so that its parent run stops with it.
    """
    backend = session.backend
    start = RunStart(
        scenario=spec.scenario,
        policy_name=policy.name,
        policy_settings=policy.settings(),
        model_backend=backend.kind,
        model_name=backend.model,
        task=spec.task,
        system=policy.system_prompt(spec.system),
        tools=spec.toolbox.definitions(),
    )
    recorder.run_started(start)
    run = _Run(spec, policy, session, recorder, backend.client_for(spec.persona, session=session))
    children_before = len(session.children)
    aborted: RunAborted | None = None
    try:
        end = run.drive()
    except RunAborted as exc:
        if exc.model_failure:  # a sub-agent's model call failed: said as such, with what this run had done
            end = RunEnd(
                StopReason.CRASHED,
                error=f"its sub-agent's model call failed ({exc.sub_agent}): {exc.model_failure}. "
                f"{done_before(run.steps, under_way='the call that started the sub-agent')}",
                model_attempts=exc.model_attempts,
                model_call_of=exc.sub_agent,
            )
        else:
            end = RunEnd(StopReason.CRASHED, error=str(exc))
        aborted = exc
    except ModelError as exc:  # the model API failed, retries included: said for a person, with what was done
        # The attempts not yet on a step: the failed call's, after a paused turn's responses when it continued one.
        attempts = run.client.take_attempts() or exc.attempts
        end = RunEnd(StopReason.CRASHED, error=f"{exc}. {done_before(run.steps)}", model_attempts=attempts)
        aborted = RunAborted(end.error, model_failure=str(exc), model_attempts=attempts)
    except Exception as exc:  # the fragile policy's exception, a replay failure
        end = RunEnd(StopReason.CRASHED, error=f"{type(exc).__name__}: {exc}")
        if isinstance(exc, ReplayMismatch):
            aborted = RunAborted(end.error)
    end.transcript = run.messages
    end.api_stop_reason = run.api_stop_reason
    result = RunResult(start=start, steps=run.steps, end=end, children=session.children[children_before:])
    if judge is not None:
        end.verdict = judge(result)
        if model_judge is not None:
            end.model_verdict = model_judge(result)
    recorder.run_finished(end)
    if aborted is not None and nested:
        raise aborted
    return result
