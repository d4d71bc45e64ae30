"""Trace lines in the lessons' own format, for the command line and anywhere a run is shown as text."""

from __future__ import annotations

import json
from typing import Any, TextIO

from .events import (
    Attempt,
    ModelAttempt,
    RunEnd,
    RunStart,
    StepEvent,
    failed_attempts,
    failed_steps,
    failures_words,
    is_model_retry,
)
from .redaction import Redactor
from .vocabulary import MODEL_JUDGE_LABEL, ErrorCategory, StepKind, StopReason


def readable(content: Any) -> str:
    """What a tool_result said, as a person reads it: the message of an error, the text or JSON of a result."""
    if isinstance(content, dict):
        err = content.get("error")
        if isinstance(err, dict) and "message" in err:
            return str(err["message"])
        if isinstance(err, str):
            return err
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def _said_flag(result: Any) -> tuple[Any, Any] | None:
    """The category and retryable flag a structured tool_result carried, or ``None`` when it carried none."""
    err = result.get("error") if isinstance(result, dict) else None
    if isinstance(err, dict) and "errorCategory" in err:
        return err.get("errorCategory"), err.get("isRetryable")
    return None


def _attempt_line(a: Attempt) -> str:
    """What the harness made of one attempt. A category shows in brackets only when the tool_result carried
    it; what only the tool knew (under ``bare`` or ``message``) is labelled "tool knew"."""
    waited = f" after {a.backoff_s}s backoff" if a.number > 1 else ""
    if a.ok and not a.empty:
        return f"attempt {a.number}{waited}: ok"
    said = readable(a.result_content if a.result_content is not None else a.content)
    if a.ok:
        return f"attempt {a.number}{waited}: {said} [empty result]"
    carried = _said_flag(a.result_content)
    if carried is not None:
        category, retryable = carried
        return f"attempt {a.number}{waited}: {said} [{category}, {'retryable' if retryable else 'not retryable'}]"
    flag = "retryable" if a.retryable else "not retryable"
    return f"attempt {a.number}{waited}: {said} (tool knew: {a.category}, {flag})"


def _model_attempt_line(a: ModelAttempt, asked: float | None) -> str:
    """One HTTP attempt of a model call: the wait before it (and the API's retry-after when the harness
    waited less), then what the API answered, as the run's crash reason words it."""
    if a.continuation:
        waited = " (continued after pause_turn)"
    elif is_model_retry(a):
        waited = f" after {a.wait_s:g}s wait"
        if asked is not None and asked > a.wait_s:
            waited += f" (the API asked {asked:g}s: capped)"
    else:
        waited = ""
    if a.error is None:
        return f"attempt {a.number}{waited}: ok ({a.status})"
    line = f"attempt {a.number}{waited}: the model API {a.error}"
    if a.retry_after_s is not None:
        line += f", retry-after {a.retry_after_s:g}s"
    return line + (f" (request-id {a.request_id})" if a.request_id else "")


def format_model_call(attempts: list[ModelAttempt], *, head: str, failed: bool = False) -> str | None:
    """``{head}: N attempts`` and a line per attempt, for a call that was retried, failed or continued a
    paused turn (as the run page shows it); None for a call that went through at once, unless ``failed``."""
    if not attempts or not (failed or len(attempts) > 1 or attempts[0].error is not None):
        return None
    lines = [f"{head}: {len(attempts)} attempt{'s' if len(attempts) > 1 else ''}"]
    asked = None
    for a in attempts:
        lines.append(f"    {_model_attempt_line(a, asked)}")
        asked = a.retry_after_s
    return "\n".join(lines)


def format_step(step: StepEvent) -> str:
    """``step N: tool({...}) -> ok: ...`` or ``-> ERROR (is_error): ...``, with a line per attempt when retried.

    A step that ended the run (a fatal error under ``stop_on_fatal``, an exception under ``raise``) sent
    no tool_result, and says so; a model turn that ended it (cut off, refused) says why and that
    nothing in it was executed.
    """
    if step.kind == StepKind.FINAL_ANSWER:
        return f"final answer: {step.text or ''}"
    if step.kind == StepKind.MODEL_STOP:
        said = f": {step.text}" if step.text else ""
        if step.tool_name:
            return (
                f"step {step.index}: {step.tool_name}({step.input!r}) -> NOT EXECUTED, "
                f"the model's reply was cut off (stop_reason {step.api_stop_reason}){said}"
            )
        return f"step {step.index}: the model stopped (stop_reason {step.api_stop_reason}){said}"
    head = f"step {step.index}: {step.tool_name}({step.input!r})"
    last = step.attempts[-1] if step.attempts else None
    if step.result_content is None and step.is_error:
        said = last.message if last else "no outcome"
        if last is not None and last.category == ErrorCategory.FATAL:
            line = f"{head} -> FATAL, the run stopped (no tool_result sent): {said}"
        else:
            line = f"{head} -> CRASHED (no tool_result sent): {said}"
    elif step.is_error:
        line = f"{head} -> ERROR (is_error): {readable(step.result_content)}"
    else:
        line = f"{head} -> ok: {readable(step.result_content)}"
    if step.retry_count:
        line += "".join(f"\n    {_attempt_line(a)}" for a in step.attempts)
    removed = list(dict.fromkeys(w for a in step.attempts for w in a.removed or ()))
    if removed:
        line += f"\n    removed from the error before the model read it: {', '.join(removed)} (clean_error_text)"
    return line


def format_end(end: RunEnd) -> str:
    """The final answer, the model call that failed and ended the run (when one did), then how the run
    stopped and its verdict."""
    lines = []
    if end.final_answer is not None:
        answer, *more = end.final_answer.splitlines() or [""]
        lines.append(f"final answer: {answer}")
        lines += [f"              {m}" for m in more]
    if end.model_call_of:  # a sub-agent's, whose own end, printed above under its label, shows its attempts
        lines.append(f"model call that ended the run: in [{end.model_call_of}], above")
    elif failed_call := format_model_call(end.model_attempts, head="model call that ended the run", failed=True):
        lines.append(failed_call)
    stop = f"stop reason: {end.stop_reason}"
    if end.guard:
        stop += f" ({end.guard})"
    lines.append(stop)
    if end.error and end.stop_reason != StopReason.FINAL_ANSWER:
        lines.append(f"error: {end.error}")
    if end.verdict is not None:
        lines.append(f"verdict: {'PASS' if end.verdict.passed else 'FAIL'}: {end.verdict.reason}")
    if end.model_verdict is not None:
        said = end.model_verdict
        word = said.verdict.upper() if said.verdict else "none"
        line = f"{MODEL_JUDGE_LABEL}, {said.model}: {word}: {said.reason}"
        rules = "pass" if end.verdict is not None and end.verdict.passed else "fail"
        if said.verdict and end.verdict is not None and said.verdict != rules:
            line += f" (disagrees with the rules' {rules.upper()}: the run goes to review)"
        lines.append(line)
    return "\n".join(lines)


class PrintRecorder:
    """Prints each step as the loop reports it; a sub-agent's run is printed indented, where it happens.

    Every line is redacted first (``agents.redaction``, configured by the environment as stored
    traces are): a key in a tool's error or the model's answer is printed as its marker."""

    def __init__(self, out: TextIO, indent: str = "") -> None:
        self.out = out
        self.indent = indent
        self.redactor = Redactor.from_environ()
        self.steps: list[StepEvent] = []  # for the run's failures, printed with its end

    def _print(self, text: str) -> None:
        for line in self.redactor.text(text).splitlines():
            print(self.indent + line, file=self.out, flush=True)

    def run_started(self, start: RunStart) -> None:
        if self.indent:
            self._print(f"task: {start.task}")

    def step_recorded(self, step: StepEvent) -> None:
        what = "the final answer" if step.kind == StepKind.FINAL_ANSWER else f"step {step.index}"
        model_call = format_model_call(step.model_attempts, head=f"model call for {what}")
        if model_call is not None:  # the call came first: its attempts, then the step it made
            self._print(model_call)
        if step.kind != StepKind.FINAL_ANSWER:
            self._print(format_step(step))
        self.steps.append(step)

    def run_finished(self, end: RunEnd) -> None:
        tool_calls = sum(1 for s in self.steps if s.kind == StepKind.TOOL_USE)
        failures = failures_words(failed_steps(self.steps), failed_attempts(self.steps))
        self._print(format_end(end))
        self._print(f"tool calls: {tool_calls} ({failures})")

    def child(self, *, label: str) -> PrintRecorder:
        self._print(f"  [{label}]")
        child = type(self)(self.out, self.indent + "    ")
        child.redactor = self.redactor
        return child
