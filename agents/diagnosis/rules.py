"""The rules: each kind of ``kinds.KINDS`` found in one run, with its evidence, fix and cost.

``diagnose(start=…, steps=…, end=…)`` returns the run's findings, in step order. Each rule reads only
what the trace carries (``calls.Trace``) and makes no finding where the trace cannot tell: a failure
whose category nothing names is never called a refusal, a tool whose effects nothing says is never
called a write. A finding quotes the message the model was sent, says who repeated a call (the harness
or the model), names the policy setting that changes it (with its value in this run, when the run
carries its policy's settings), and counts what it cost: tool calls, the model's tokens and their
price (``agents.prices``), and the time spent.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from .. import prices
from ..events import Attempt, RunEnd, RunStart, StepEvent
from ..vocabulary import ErrorCategory, StopReason
from . import lint as lint_mod
from .calls import REFUSALS, Call, Failure, Trace, failure_of, found_nothing, trace_read
from .effects import idempotency_key_in
from .kinds import BY_KEY

GUARD_LIMIT = 3  # lesson 001's too_many_errors(limit=3)


@dataclass
class Finding:
    """One mistake seen in one run."""

    kind: str  # a kinds.KEYS key
    tool: str
    steps: list[int]  # the steps that show it, in order
    message: str  # what happened, with its numbers: the finding's sentence
    evidence: str  # the message the model was sent (or what the trace shows), quoted as it was
    fix: str  # what to change, in words
    setting: dict[str, Any] = field(default_factory=dict)  # the policy setting(s) the fix names: name -> value
    rewrite: str | None = None  # for a message: a rewrite that follows what / why / what instead
    basis: str = ""  # where the facts came from (the tool's category, MCP annotations, the message's words…)
    wasted_calls: int = 0  # tool calls that could not have come out differently
    wasted_input_tokens: int = 0  # model tokens spent on them
    wasted_output_tokens: int = 0
    wasted_ms: float = 0.0  # tool time and backoff spent on them
    cost: Decimal | None = None  # the wasted tokens' price; None: the model has no price
    price_basis: str = ""  # Price.basis, or why there is none
    template: str = ""  # the message's template (lint.template), for a message finding

    @property
    def lesson(self) -> str:
        return BY_KEY[self.kind].lesson

    @property
    def why(self) -> str:
        return BY_KEY[self.kind].why

    @property
    def wasted_tokens(self) -> int:
        return self.wasted_input_tokens + self.wasted_output_tokens

    def to_dict(self) -> dict[str, Any]:
        """The finding as JSON (the CLI's JSON Lines, the API, storage)."""
        return {
            "kind": self.kind,
            "tool": self.tool,
            "steps": self.steps,
            "message": self.message,
            "evidence": self.evidence,
            "fix": self.fix,
            "setting": self.setting,
            "rewrite": self.rewrite,
            "basis": self.basis,
            "lesson": self.lesson,
            "why": self.why,
            "wasted_calls": self.wasted_calls,
            "wasted_input_tokens": self.wasted_input_tokens,
            "wasted_output_tokens": self.wasted_output_tokens,
            "wasted_ms": round(self.wasted_ms, 3),
            "cost_usd": None if self.cost is None else str(self.cost),
            "price_basis": self.price_basis,
            "template": self.template,
        }


# --- helpers ------------------------------------------------------------------------------------


def _quote(text: str, limit: int = 160) -> str:
    text = " ".join((text or "").split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _steps_said(steps: Sequence[int]) -> str:
    unique = sorted(set(steps))
    return ("step " if len(unique) == 1 else "steps ") + ", ".join(str(s) for s in unique)


# What a policy module's function does in place of each setting it replaces (agents.policy_code).
CODE_FIXES = {
    "retry_on": "should_retry",
    "retry_flag_path": "should_retry",
    "error_format": "fail",
    "empty_is_error": "fail",
    "swallow_errors": "fail",
}
CODE_ADVICE = {
    "should_retry": "retry only a failure whose error says isRetryable: true, read from the error it is handed",
    "fail": "return isError: true with errorCategory, isRetryable (true for transient only) and the tool's "
    'message; for "empty", the empty list and no error',
}


def _setting(trace: Trace, name: str, value: Any) -> tuple[str, dict[str, Any]]:
    """``name: value``, with the run's own value before it when its policy's settings say it. Under a
    policy module, which replaces that setting, the module's function and what it should do."""
    module = trace.settings.get("code")
    if module and name in CODE_FIXES:
        fn = CODE_FIXES[name]
        return f"`{fn}` in `{module}` (this run's policy code): {CODE_ADVICE[fn]}", {name: value}
    now = trace.settings.get(name, "not known")
    shown = "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    if name in trace.settings:
        was = "null" if now is None else str(now).lower() if isinstance(now, bool) else str(now)
        if was != shown:
            return f"`{name}: {shown}` (this run's policy has {was})", {name: value}
    return f"`{name}: {shown}`", {name: value}


def _failed_tries(call: Call, trace: Trace) -> list[tuple[Attempt, Failure]]:
    out = []
    for a in call.attempts:
        f = failure_of(a, sent=call.sent if a is call.attempts[-1] else None)
        out.append((a, f))
    return out


def _who(harness: int, model: int) -> str:
    parts = []
    if harness:
        parts.append(f"the harness retried it {_times(harness)}")
    if model:
        parts.append(f"the model sent it again {_times(model)}")
    return " and ".join(parts)


def _chains(trace: Trace) -> list[list[Call]]:
    """Runs of the same call: a call and the model's repeats of it that followed."""
    chains: list[list[Call]] = []
    for call in trace.calls:
        if call.repeat_of is not None and chains and chains[-1][-1] is call.repeat_of:
            chains[-1].append(call)
        else:
            chains.append([call])
    return chains


@dataclass
class _Waste:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    ms: float = 0.0
    harness: int = 0
    model: int = 0
    steps: list[int] = field(default_factory=list)

    def add_attempt(self, call: Call, attempt: Attempt, *, by_model: bool) -> None:
        self.calls += 1
        self.ms += attempt.latency_ms + attempt.backoff_s * 1000
        self.steps.append(call.step)
        if by_model:
            self.model += 1
            self.input_tokens += call.tokens[0]
            self.output_tokens += call.tokens[1]
        else:
            self.harness += 1

    def on(self, finding: Finding) -> Finding:
        finding.wasted_calls = self.calls
        finding.wasted_input_tokens = self.input_tokens
        finding.wasted_output_tokens = self.output_tokens
        finding.wasted_ms = self.ms
        return finding


def _chains_tried(trace: Trace) -> list[tuple[list[Call], list[tuple[Call, Attempt, bool]]]]:
    """Each of ``_chains`` with its ``_tries``, worked out once per trace: four rules read them."""
    tried = trace.__dict__.get("_chains_tried")
    if tried is None:
        tried = trace.__dict__["_chains_tried"] = [(chain, _tries(chain)) for chain in _chains(trace)]
    return tried


def _tries(chain: list[Call]) -> list[tuple[Call, Attempt, bool]]:
    """Every try of a chain in order: (call, attempt, whether the model sent it)."""
    out = []
    for k, call in enumerate(chain):
        for j, attempt in enumerate(call.attempts):
            out.append((call, attempt, j == 0 and k > 0))
    return out


def _cost_said(waste: _Waste) -> str:
    parts = [f"{waste.calls} wasted tool call{'s' if waste.calls != 1 else ''}"]
    if waste.input_tokens or waste.output_tokens:
        parts.append(f"{waste.input_tokens + waste.output_tokens:,} model tokens")
    return ", ".join(parts)


def _failure_said(f: Failure) -> str:
    """ "business, not retryable, as the tool said"."""
    what = f.category or "category not known"
    flag = "" if f.retryable is None else (", retryable" if f.retryable else ", not retryable")
    return f"{what}{flag}" + (f", as {f.basis} said" if f.basis else "")


# --- the rules --------------------------------------------------------------------------------------


def _refusal(f: Failure) -> bool:
    if f.empty or f.category in (ErrorCategory.FATAL,):
        return False
    if f.category in REFUSALS:
        return True
    return f.retryable is False and f.category is not None


def retried_refusal(trace: Trace) -> list[Finding]:
    out = []
    for _, tries in _chains_tried(trace):
        if len(tries) < 2:  # the failure must be followed by a try
            continue
        waste, cause, cause_call = _Waste(), None, None
        for k, (call, attempt, by_model) in enumerate(tries):
            if cause is not None:
                waste.add_attempt(call, attempt, by_model=by_model)
            if cause is None and not attempt.ok:
                f = failure_of(attempt, sent=call.sent if attempt is call.attempts[-1] else None)
                if _refusal(f) and k < len(tries) - 1:
                    cause, cause_call = f, call
        if cause is None or not waste.calls:
            continue
        if not waste.harness and trace.end is not None and trace.end.stop_reason == StopReason.CONSECUTIVE_ERRORS:
            continue  # the model's repeats, cut off by the run's consecutive-error guard: lesson 001's own remedy
        first = cause_call
        tool = first.tool
        said = first.sent_text or text_of_attempt(first.attempts[-1])
        fixes, setting = [], {}
        if waste.harness:
            settings = trace.settings
            if settings.get("retry_on") == "transient" and settings.get("error_format") != "structured":
                text, s = _setting(trace, "error_format", "structured")
                fixes.append(
                    f"{text}: under {settings.get('error_format')} the harness retries by category and never reads "
                    "isRetryable, so a failure that says no retry can help is retried anyway"
                )
            else:
                text, s = _setting(trace, "retry_on", "transient")
                fixes.append(f"{text}: the harness retries only what says a retry can help")
            setting.update(s)
        if waste.model:
            structured = lint_mod.structured_flags(first.sent)[1] is False
            if structured:
                text, s = _setting(trace, "consecutive_error_limit", GUARD_LIMIT)
                fixes.append(
                    f"the model was told isRetryable false and sent it again: say what to do instead in the "
                    f"message, and stop a repeat with {text}"
                )
            else:
                text, s = _setting(trace, "error_format", "structured")
                fixes.append(
                    f"{text}: the model is told the category and isRetryable false, so it explains instead of repeating"
                )
            setting.update(s)
        message = (
            f"{tool} was tried {waste.calls + 1} times after a failure no retry can fix ({_failure_said(cause)}): "
            f"{_who(waste.harness, waste.model)}, for an answer that could not change ({_cost_said(waste)})"
        )
        out.append(
            waste.on(
                Finding(
                    kind="retried-refusal",
                    tool=tool,
                    steps=sorted(set([first.step, *waste.steps])),
                    message=message,
                    evidence=f"sent to the model: {_quote(said)}",
                    fix="; ".join(fixes),
                    setting=setting,
                    basis=f"category from {cause.basis}" if cause.basis else "",
                )
            )
        )
    return out


def text_of_attempt(attempt: Attempt) -> str:
    """What the tool said of one attempt: its message, else what it returned (an ok attempt's content)."""
    if attempt.message:
        return attempt.message
    if attempt.ok or attempt.result_content is None:
        return lint_mod.text_of(attempt.content)
    return lint_mod.text_of(attempt.result_content)


def _failed_deliveries(trace: Trace) -> list[Call]:
    return [c for c in trace.calls if c.delivered and c.sent_error]


def _by_template(calls: Sequence[Call]) -> dict[tuple[str, str], list[Call]]:
    groups: dict[tuple[str, str], list[Call]] = {}
    for c in calls:
        groups.setdefault((c.tool, lint_mod.template(c.sent_text)), []).append(c)
    return groups


def _known_message(call: Call) -> str | None:
    """The tool's own message when the harness sent the model something else (a bare "Error")."""
    last = call.attempts[-1]
    if last.message and last.message.strip() != call.sent_text.strip():
        return last.message
    return None


def vague_error(trace: Trace) -> list[Finding]:
    out = []
    vague = []
    for c in _failed_deliveries(trace):
        if c.attempts[-1].ok:  # nothing found, sent as a failure: empty-as-error's, whose fix is no error at all
            continue
        scored = lint_mod.lint(c.sent_text, call_input=c.input, schema=trace.schema(c.tool))
        if scored.vague:
            vague.append(c)
    for (tool, tpl), calls in _by_template(vague).items():
        first = calls[0]
        failure = failure_of(first.attempts[-1], sent=first.sent)
        known = _known_message(first)
        better = known is not None and not lint_mod.lint(known, call_input=first.input, schema=trace.schema(tool)).vague
        suggested = lint_mod.rewrite(
            tool=tool,
            call_input=first.input,
            schema=trace.schema(tool),
            category=failure.category,
            sent=first.sent_text,
            known=known,
        )
        if better:
            text, setting = _setting(trace, "error_format", "structured")
            fix = (
                f"{text}: the tool said {_quote(known)} and the harness sent the model {_quote(first.sent_text)}; "
                "send the tool's message with its category and isRetryable"
            )
        else:
            setting = {}
            fix = f"rewrite {tool}'s failure message to say what went wrong, why and what to do instead"
        repeated = sum(1 for c in trace.calls if c.repeat_of in calls)
        message = (
            f"{tool} sent the model {_quote(first.sent_text, 60)} {_times(len(calls))}: it says nothing of what went "
            "wrong, why or what to do"
            + (f"; the model then sent the same call again {_times(repeated)}, blind" if repeated else "")
        )
        out.append(
            Finding(
                kind="vague-error",
                tool=tool,
                steps=sorted({c.step for c in calls}),
                message=message,
                evidence=f"sent to the model: {_quote(first.sent_text)}",
                fix=fix,
                setting=setting,
                rewrite=suggested.message,
                basis="rewrite from " + ", ".join(suggested.basis),
                template=tpl,
            )
        )
    return out


def _later_turns(trace: Trace, call: Call) -> int:
    """Model responses after ``call``: each re-reads what the model was sent."""
    later = {c.step for c in trace.calls if c.step > call.step and (c.tokens[0] or c.tokens[1] or c.attempt_from == 1)}
    answers = sum(1 for s in trace.steps if s.index > call.step and s.kind != "tool_use")
    return len(later) + answers


def internal_detail_leak(trace: Trace) -> list[Finding]:
    out = []
    leaking = [c for c in _failed_deliveries(trace) if lint_mod.leaks(c.sent_text)]
    for (tool, tpl), calls in _by_template(leaking).items():
        first = calls[0]
        found = lint_mod.leaks(first.sent_text)
        what = ", ".join(w for w, _ in found)
        failure = failure_of(first.attempts[-1], sent=first.sent)
        suggested = lint_mod.rewrite(
            tool=tool,
            call_input=first.input,
            schema=trace.schema(tool),
            category=failure.category,
            sent=first.sent_text,
            known=None,
        )
        tokens = sum(math.ceil(len(c.sent_text) / 4) * max(_later_turns(trace, c), 1) for c in calls)
        message = (
            f"{tool} sent the model {what} in its failure message {_times(len(calls))} "
            f"(about {tokens:,} input tokens as the conversation went on)"
        )
        out.append(
            Finding(
                kind="internal-detail-leak",
                tool=tool,
                steps=sorted({c.step for c in calls}),
                message=message,
                evidence="sent to the model: " + "; ".join(f"{w}: {_quote(m, 60)}" for w, m in found),
                fix=f"log {what} where operators read it, and send the model only what went wrong, why and what "
                "to do instead",
                rewrite=suggested.message,
                basis="found by pattern: " + what,
                wasted_input_tokens=tokens,
                template=tpl,
            )
        )
    return out


def _transient(f: Failure) -> bool:
    return f.category == ErrorCategory.TRANSIENT


def transient_to_model(trace: Trace) -> list[Finding]:
    out = []
    for chain, _ in _chains_tried(trace):
        if len(chain) < 2:
            continue
        first = chain[0]
        f = failure_of(first.attempts[-1], sent=first.sent)
        if not (first.sent_error and _transient(f)):
            continue
        waste = _Waste()
        for call in chain[1:]:
            for j, attempt in enumerate(call.attempts):
                waste.add_attempt(call, attempt, by_model=j == 0)
        fixes, setting = [], {}
        if first.harness_retries:
            text, s = _setting(trace, "max_attempts", max(first.harness_retries + 2, 3))
            fixes.append(
                f"the harness gave up after {first.harness_retries + 1} attempts and the model tried again: "
                f"{text}, and say in the exhausted message to try later or use another source"
            )
        else:
            text, s = _setting(trace, "retry_on", "transient")
            fixes.append(f"{text} with `max_attempts: 3` and backoff: retry in code, where it costs one tool call")
            s["max_attempts"] = 3
        setting.update(s)
        if trace.settings.get("ask_model_to_retry"):
            text, s = _setting(trace, "ask_model_to_retry", False)
            fixes.append(f"{text}: the system prompt asked the model to retry")
            setting.update(s)
        message = (
            f"{first.tool} failed with a transient error ({_failure_said(f)}) that went to the model, which sent the "
            f"same call {_times(waste.model)} more ({_cost_said(waste)})"
        )
        out.append(
            waste.on(
                Finding(
                    kind="transient-to-model",
                    tool=first.tool,
                    steps=sorted({c.step for c in chain}),
                    message=message,
                    evidence=f"sent to the model: {_quote(first.sent_text)}",
                    fix="; ".join(fixes),
                    setting=setting,
                    basis=f"category from {f.basis}" if f.basis else "",
                )
            )
        )
    return out


# A failure that says it was tried again already (lesson 001's retry_transient: "still failing after 3
# attempts"), whatever the trace shows of the tries.
_RETRIED_ALREADY = re.compile(
    r"still failing after|after \d+ (?:attempts|tries|retries)|(?:re)?tried \d+ times|\bretries (?:ran|run) out",
    re.IGNORECASE,
)


def transient_not_retried(trace: Trace) -> list[Finding]:
    if not trace.harness_seen:
        return []  # a transcript cannot say whether the harness tried before the model was told
    out = []
    repeated = {id(c.repeat_of) for c in trace.calls if c.repeat_of is not None}
    for call in trace.calls:
        if call.harness_retries or not call.delivered or not call.sent_error or id(call) in repeated:
            continue
        if call.repeat_of is not None:
            continue
        f = failure_of(call.attempts[-1], sent=call.sent)
        if not _transient(f) or f.retryable is False or _RETRIED_ALREADY.search(call.sent_text):
            continue
        effects = trace.effects(call.tool)
        if effects.changes is True and effects.idempotent is not True:
            continue  # a write not safe to repeat: not retrying it is right (unsafe-write-retry says the fix)
        settings = trace.settings
        if settings.get("retry_on") == "transient" and settings.get("retry_flag_path") == "isRetryable":
            text, setting = _setting(trace, "retry_flag_path", "error.isRetryable")
            fix = (
                f"{text}: the harness reads isRetryable at the top of the result, where it never is (lesson 002's "
                "spot-the-bug), so no transient failure is retried"
            )
        elif settings.get("max_attempts") == 1:
            text, setting = _setting(trace, "max_attempts", 3)
            fix = f"{text}: one attempt leaves no room for a retry"
        else:
            text, setting = _setting(trace, "retry_on", "transient")
            fix = f"{text} with `max_attempts: 3` and backoff, so the model sees it only when retries run out"
            setting["max_attempts"] = 3
        out.append(
            Finding(
                kind="transient-not-retried",
                tool=call.tool,
                steps=[call.step],
                message=f"{call.tool} failed with a transient error ({_failure_said(f)}) and the harness sent it to "
                "the model at once, without a retry",
                evidence=f"sent to the model: {_quote(call.sent_text)}",
                fix=fix,
                setting=setting,
                basis=f"category from {f.basis}" if f.basis else "",
            )
        )
    return out


_MAY_HAVE_APPLIED = re.compile(
    r"timed? ?out|timeout|connection (?:reset|closed|lost|aborted)|broken pipe|\b50[24]\b|gateway|no response|"
    r"response (?:was )?lost|unknown (?:outcome|state)",
    re.IGNORECASE,
)


def unsafe_write_retry(trace: Trace) -> list[Finding]:
    out = []
    for chain, tries in _chains_tried(trace):
        if len(tries) < 2:  # a failure followed by a try
            continue
        first = chain[0]
        effects = trace.effects(first.tool)
        if effects.changes is not True or effects.idempotent is True:
            continue
        key = idempotency_key_in(first.input)
        if key:
            continue
        waste, cause, said = _Waste(), None, ""
        for k, (call, attempt, by_model) in enumerate(tries):
            if cause is not None:
                waste.add_attempt(call, attempt, by_model=by_model)
                continue
            if attempt.ok or k == len(tries) - 1:
                continue
            text = text_of_attempt(attempt)
            f = failure_of(attempt)
            if _transient(f) and _MAY_HAVE_APPLIED.search(text or ""):
                cause, said = f, text
        if cause is None:
            continue
        message = (
            f"{first.tool} changes something and was tried again after {_quote(said, 60)}, which may have applied "
            f"it: {_who(waste.harness, waste.model)}, with no idempotency key in its input"
        )
        out.append(
            waste.on(
                Finding(
                    kind="unsafe-write-retry",
                    tool=first.tool,
                    steps=sorted({first.step, *waste.steps}),
                    message=message,
                    evidence=f"the tool reported: {_quote(said)}; "
                    f"its input: {_quote(lint_mod.text_of(first.input), 80)}",
                    fix=f"give {first.tool} an idempotency key (an input field such as `idempotency_key`, the same on "
                    "every try of one change) so a repeat applies once, and declare it (`idempotentHint: true`); "
                    "until then never retry it after a timeout",
                    basis=f"{first.tool} {effects.said}",
                )
            )
        )
    return out


def no_error_guard(trace: Trace) -> list[Finding]:
    if trace.end is not None and trace.end.stop_reason == StopReason.CONSECUTIVE_ERRORS:
        return []
    out = []
    streak: list[Call] = []

    def close() -> None:
        if len(streak) > GUARD_LIMIT:
            beyond = streak[GUARD_LIMIT:]
            waste = _Waste()
            for c in beyond:
                for j, attempt in enumerate(c.attempts):
                    waste.add_attempt(c, attempt, by_model=j == 0)
            tools = sorted({c.tool for c in streak})
            text, setting = _setting(trace, "consecutive_error_limit", GUARD_LIMIT)
            out.append(
                waste.on(
                    Finding(
                        kind="no-error-guard",
                        tool=tools[0] if len(tools) == 1 else ", ".join(tools),
                        steps=sorted({c.step for c in streak}),
                        message=f"{len(streak)} failed calls in a row ({_steps_said([c.step for c in streak])}) and "
                        f"the run went on: a guard of {GUARD_LIMIT} would have stopped it after the third, saving "
                        f"{_cost_said(waste)}",
                        evidence=f"sent to the model each time: {_quote(streak[-1].sent_text)}",
                        fix=f"{text}: stop the run after {GUARD_LIMIT} tool errors in a row",
                        setting=setting,
                    )
                )
            )

    for call in trace.calls:
        if call.delivered and call.sent_error:
            streak.append(call)
        else:
            close()
            streak = []
    close()
    return out


def empty_as_error(trace: Trace) -> list[Finding]:
    out = []
    for chain, tries in _chains_tried(trace):
        if len(tries) == 1 and not chain[0].sent_error:  # neither sent as a failure nor tried again
            continue
        waste, cause_call, reported = _Waste(), None, False
        for call, attempt, by_model in tries:
            empty = found_nothing(attempt)
            if not attempt.ok and lint_mod.says_nothing_found(attempt.content, text_of_attempt(attempt)):
                empty = True
            if cause_call is not None:
                waste.add_attempt(call, attempt, by_model=by_model)
            if empty and cause_call is None:
                cause_call = call
            if empty and call.sent_error and attempt is call.attempts[-1]:
                reported = True
        if cause_call is None or not (reported or waste.calls):
            continue
        text, setting = _setting(trace, "empty_is_error", False)
        did = []
        if reported:
            did.append("was sent to the model as a failure")
        if waste.calls:
            did.append(_who(waste.harness, waste.model))
        found = text_of_attempt(cause_call.attempts[0]) if cause_call.attempts[0].ok else cause_call.sent_text
        out.append(
            waste.on(
                Finding(
                    kind="empty-as-error",
                    tool=cause_call.tool,
                    steps=sorted({cause_call.step, *waste.steps}),
                    message=f"{cause_call.tool} found nothing, a valid answer, which "
                    + " and ".join(did)
                    + (f" ({_cost_said(waste)})" if waste.calls else ""),
                    evidence=f"the tool returned {_quote(found, 80)}; "
                    f"sent to the model: {_quote(cause_call.sent_text)}",
                    fix=f"{text}: return the empty result with no error flag and a message that says nothing was found",
                    setting=setting,
                )
            )
        )
    return out


def fatal_continued(trace: Trace) -> list[Finding]:
    for index, call in enumerate(trace.calls):
        for j, attempt in enumerate(call.attempts):
            if attempt.ok:
                continue
            f = failure_of(attempt, sent=call.sent if attempt is call.attempts[-1] else None)
            if f.category != ErrorCategory.FATAL:
                continue
            later_attempts = call.attempts[j + 1 :]
            later_calls = trace.calls[index + 1 :] if call.delivered else []
            if not later_attempts and not later_calls:
                continue
            waste = _Waste()
            for a in later_attempts:
                waste.add_attempt(call, a, by_model=False)
            for c in later_calls:
                for k, a in enumerate(c.attempts):
                    waste.add_attempt(c, a, by_model=k == 0)
            went_on = []
            if later_attempts:
                went_on.append(f"the harness retried it {_times(len(later_attempts))}")
            if later_calls:
                went_on.append(f"the model made {len(later_calls)} more tool call{'s' if len(later_calls) > 1 else ''}")
            text, setting = _setting(trace, "stop_on_fatal", True)
            return [
                waste.on(
                    Finding(
                        kind="fatal-continued",
                        tool=call.tool,
                        steps=sorted({call.step, *waste.steps}),
                        message=f"{call.tool} failed fatally ({_failure_said(f)}) and the run went on: "
                        + " and ".join(went_on)
                        + f" ({_cost_said(waste)})",
                        evidence=f"the tool reported: {_quote(text_of_attempt(attempt))}"
                        + (f"; sent to the model: {_quote(call.sent_text)}" if call.delivered else ""),
                        fix=f"{text}: stop the run with the tool's reason; no retry or model can fix it",
                        setting=setting,
                        basis=f"category from {f.basis}" if f.basis else "",
                    )
                )
            ]
    return []


def misleading_error(trace: Trace) -> list[Finding]:
    out = []
    for (tool, tpl), calls in _by_template(_failed_deliveries(trace)).items():
        first = calls[0]
        f = failure_of(first.attempts[-1], sent=first.sent)
        if f.category is None or f.basis.startswith("the message"):
            continue
        words = lint_mod.category_from_words(first.sent_text)
        if words is None or words[0] == f.category:
            continue
        said, phrase = words
        # a refusal worded as a wrong id, or a final refusal worded as a blip (and the other way round)
        if not (
            {said, f.category} <= REFUSALS and ErrorCategory.VALIDATION in {said, f.category}
        ) and ErrorCategory.TRANSIENT not in {said, f.category}:
            continue
        suggested = lint_mod.rewrite(
            tool=tool, call_input=first.input, schema=trace.schema(tool), category=f.category, sent="", known=None
        )
        out.append(
            Finding(
                kind="misleading-error",
                tool=tool,
                steps=sorted({c.step for c in calls}),
                message=f"{tool}'s message says {phrase!r}, which reads as a {said} failure, but the failure was "
                f"{f.category} (said by {f.basis}): the model will fix the wrong thing",
                evidence=f"sent to the model: {_quote(first.sent_text)}",
                fix=f"make the message say the real reason, a {f.category} failure, and what to do instead",
                rewrite=suggested.message,
                basis=f"category from {f.basis}; the message's words name {said}",
                template=tpl,
            )
        )
    return out


# A run's error that says its model call failed (not its tool).
_MODEL_FAILED = re.compile(r"anthropic|messages api|model|overloaded|\b529\b|rate.?limit|api (?:error|status)", re.I)


def crash_on_tool_error(trace: Trace) -> list[Finding]:
    """A run that crashed on its last step, a failed tool call the model never read. A run from outside
    (spans) may carry the exception as that call's result; no model turn after it means it was never
    read, unless the run's error says the model call after it failed."""
    if trace.end is None or trace.end.stop_reason != StopReason.CRASHED or not trace.calls:
        return []
    last = trace.calls[-1]
    attempt = last.attempts[-1]
    if attempt.ok or trace.steps[-1].index != last.step:
        return []
    if last.delivered and (trace.start.model_backend != "imported" or _MODEL_FAILED.search(trace.end.error or "")):
        return []  # a result went back to the model (here, the loop says so), or the model call after it failed
    f = failure_of(attempt)
    if f.category == ErrorCategory.FATAL:
        return []
    text, setting = _setting(trace, "error_format", "structured")
    return [
        Finding(
            kind="crash-on-tool-error",
            tool=last.tool,
            steps=[last.step],
            message=f"{last.tool}'s failure ({_failure_said(f)}) was raised through the loop and the run crashed, "
            "so the model never saw it and could not repair the call",
            evidence=f"the run ended: {_quote(trace.end.error or '')}",
            fix=f"{text}: return every failure as an is_error tool_result (run_tool never raises)",
            setting=setting,
        )
    ]


RULES: tuple[tuple[str, Callable[[Trace], list[Finding]]], ...] = (
    ("retried-refusal", retried_refusal),
    ("vague-error", vague_error),
    ("internal-detail-leak", internal_detail_leak),
    ("transient-to-model", transient_to_model),
    ("transient-not-retried", transient_not_retried),
    ("unsafe-write-retry", unsafe_write_retry),
    ("no-error-guard", no_error_guard),
    ("empty-as-error", empty_as_error),
    ("fatal-continued", fatal_continued),
    ("misleading-error", misleading_error),
    ("crash-on-tool-error", crash_on_tool_error),
)


def price_findings(findings: Sequence[Finding], *, model: str, on: date | None = None) -> None:
    """Set each finding's ``cost`` from its wasted tokens at ``model``'s price on the day ``on``."""
    price = prices.price(model, on) if model else None
    for f in findings:
        if price is None:
            f.cost, f.price_basis = None, f"no price for {model or 'an unnamed model'}"
        else:
            f.cost, f.price_basis = price.cost(f.wasted_input_tokens, f.wasted_output_tokens), price.basis


def diagnose(
    *, start: RunStart, steps: Sequence[StepEvent], end: RunEnd | None = None, on: date | None = None
) -> list[Finding]:
    """The findings of one run, in the order of their first step, priced at its model's price on ``on``."""
    trace = trace_read(start=start, steps=steps, end=end)
    found: list[Finding] = []
    for _, rule in RULES:
        found += rule(trace)
    found.sort(key=lambda f: (f.steps[0] if f.steps else 0, f.kind))
    price_findings(found, model=start.model_name, on=on)
    return found
