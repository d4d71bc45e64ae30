"""Where two runs split, and the earlier outcome that made them split.

Plain data in, plain data out (no database): each run is a list of step mappings with the keys of
``tracer.models.Step`` (``kind``, ``tool_name``, ``input``, ``attempts``, ``text``) and the error
format of the policy it ran under.

Steps are aligned on what was *done* (the tool and its input, or the final answer); a step one run
has and the other lacks becomes a gap. Within a pair of steps, attempts are aligned by number, so
the extra retries of one run sit opposite gaps. The *split* is the first aligned place where what
was done differs: another tool or input, a step only one run took, a retry only one run made, or a
different final answer. The *cause* is the nearest earlier attempt whose outcome, as the harness
reported it, differed between the runs (e.g. bare "Error" against business / not retryable).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from agents.vocabulary import ErrorFormat, StepKind


def canonical(value: Any) -> str:
    """A stable text form of JSON-able data, for comparing inputs and contents."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Outcome:
    """One attempt's outcome as the harness reported it under a policy's error format."""

    ok: bool
    label: str  # short, human: 'ok', 'empty result', 'bare "Error"', 'business · not retryable'
    key: tuple  # what two runs' outcomes are compared on
    detail: str = ""  # the message that came with a structured error


def attempt_outcome(attempt: Mapping[str, Any], *, error_format: str = "", empty_is_error: bool = False) -> Outcome:
    """What the harness made of one attempt under the policy's error format."""
    failed = not attempt.get("ok") or (attempt.get("empty") and empty_is_error)
    if not failed:
        if attempt.get("empty"):
            return Outcome(True, "empty result", ("empty",))
        return Outcome(True, "ok", ("ok", canonical(attempt.get("content"))))
    message = attempt.get("message") or ("nothing found" if attempt.get("empty") else "")
    # An unknown error format (an imported run's) shows everything the attempt says, as structured does.
    if error_format == ErrorFormat.BARE:
        return Outcome(False, 'bare "Error"', ("error", "Error"))
    if error_format == ErrorFormat.MESSAGE:
        return Outcome(False, f"error: {message}", ("error", message))
    if error_format == ErrorFormat.RAISE:
        return Outcome(False, "raised", ("raised", message))
    category = attempt.get("category") or "error"
    retryable = attempt.get("retryable")
    flag = "retryable" if retryable else "not retryable" if retryable is False else "retryable unknown"
    return Outcome(False, f"{category} · {flag}", ("error", category, retryable, message), message)


def step_signature(step: Mapping[str, Any]) -> tuple:
    """What a step did, for alignment: the tool and its input, or the final answer."""
    if step.get("kind") == StepKind.FINAL_ANSWER:
        return (StepKind.FINAL_ANSWER,)
    return (StepKind.TOOL_USE, step.get("tool_name") or "", canonical(step.get("input")))


@dataclass
class AttemptRow:
    number: int
    left: Mapping[str, Any] | None
    right: Mapping[str, Any] | None
    left_outcome: Outcome | None
    right_outcome: Outcome | None
    is_split: bool = False
    is_cause: bool = False

    @property
    def differs(self) -> bool:
        if self.left_outcome is None or self.right_outcome is None:
            return False
        return self.left_outcome.key != self.right_outcome.key


@dataclass
class StepRow:
    left: Mapping[str, Any] | None
    right: Mapping[str, Any] | None
    attempts: list[AttemptRow] = field(default_factory=list)
    is_split: bool = False
    is_cause: bool = False

    @property
    def is_gap(self) -> bool:
        return self.left is None or self.right is None


@dataclass(frozen=True)
class Cause:
    row: int  # index into the aligned rows
    attempt: int  # attempt number within that step
    tool_name: str
    left: str  # outcome labels
    right: str


@dataclass(frozen=True)
class Split:
    row: int  # index into the aligned rows
    attempt: int | None  # attempt number when the split is a retry one run made and the other did not
    what: str  # "tool" | "input" | "retry" | "extra step" | "final answer" | "answered"
    summary: str  # one sentence, run A first


@dataclass
class Divergence:
    rows: list[StepRow]
    split: Split | None
    cause: Cause | None


def _describe(step: Mapping[str, Any] | None) -> str:
    if step is None:
        return "nothing"
    if step.get("kind") == StepKind.FINAL_ANSWER:
        return "gave its final answer"
    return f"called {step.get('tool_name')}"


def align(left: Sequence[Mapping[str, Any]], right: Sequence[Mapping[str, Any]]) -> list[StepRow]:
    """Pair steps that did the same thing; a step one run lacks sits opposite a gap.

    The common prefix is paired first, so a gap appears where the runs part, not before.
    """
    sig_a, sig_b = [step_signature(s) for s in left], [step_signature(s) for s in right]
    prefix = 0
    while prefix < min(len(sig_a), len(sig_b)) and sig_a[prefix] == sig_b[prefix]:
        prefix += 1
    rows = [StepRow(left[k], right[k]) for k in range(prefix)]
    matcher = SequenceMatcher(a=sig_a[prefix:], b=sig_b[prefix:], autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        a0, a1, b0, b1 = a0 + prefix, a1 + prefix, b0 + prefix, b1 + prefix
        paired = min(a1 - a0, b1 - b0) if op in ("equal", "replace") else 0
        rows.extend(StepRow(left[a0 + k], right[b0 + k]) for k in range(paired))
        rows.extend(StepRow(left[k], None) for k in range(a0 + paired, a1))
        rows.extend(StepRow(None, right[k]) for k in range(b0 + paired, b1))
    return rows


def _attempt_rows(row: StepRow, left_format: Mapping[str, Any], right_format: Mapping[str, Any]) -> list[AttemptRow]:
    left = list((row.left or {}).get("attempts") or [])
    right = list((row.right or {}).get("attempts") or [])
    out = []
    for n in range(max(len(left), len(right))):
        a = left[n] if n < len(left) else None
        b = right[n] if n < len(right) else None
        out.append(
            AttemptRow(
                number=n + 1,
                left=a,
                right=b,
                left_outcome=attempt_outcome(a, **left_format) if a is not None else None,
                right_outcome=attempt_outcome(b, **right_format) if b is not None else None,
            )
        )
    return out


def _next_step(rows: list[StepRow], index: int, side: str) -> Mapping[str, Any] | None:
    """The step after row ``index`` on one side ("A" or "B")."""
    later = (row.left if side == "A" else row.right for row in rows[index + 1 :])
    return next((step for step in later if step is not None), None)


def _split_in(rows: list[StepRow], index: int) -> Split | None:
    """The split in one aligned row, if what the two runs did there differs."""
    a, b = rows[index].left, rows[index].right
    if a is None or b is None:
        present = a or b
        side = "A" if a is not None else "B"
        other = "B" if side == "A" else "A"
        return Split(index, None, "extra step", f"Run {side} {_describe(present)}; run {other} has no such step.")
    a_final, b_final = a.get("kind") == StepKind.FINAL_ANSWER, b.get("kind") == StepKind.FINAL_ANSWER
    if a_final and b_final:
        if (a.get("text") or "") != (b.get("text") or ""):
            return Split(index, None, "final answer", "The runs gave different final answers.")
        return None
    if a_final != b_final:
        return Split(index, None, "answered", f"Run A {_describe(a)}; run B {_describe(b)}.")
    if a.get("tool_name") != b.get("tool_name"):
        return Split(index, None, "tool", f"Run A called {a.get('tool_name')}; run B called {b.get('tool_name')}.")
    if canonical(a.get("input")) != canonical(b.get("input")):
        return Split(index, None, "input", f"Both called {a.get('tool_name')}, with different input.")
    n_a, n_b = len(a.get("attempts") or []), len(b.get("attempts") or [])
    if n_a != n_b:
        more, fewer = ("A", "B") if n_a > n_b else ("B", "A")
        fewest = min(n_a, n_b)
        then = _next_step(rows, index, fewer)
        return Split(
            index,
            fewest + 1,
            "retry",
            f"Run {more} retried {a.get('tool_name')} ({max(n_a, n_b)} attempts); run {fewer} stopped after "
            f"{fewest} attempt{'s' if fewest != 1 else ''} and sent the result back to the model"
            + (f", which then {_describe(then)}." if then is not None else "."),
        )
    return None


def _find_cause(rows: list[StepRow], split: Split) -> Cause | None:
    """The nearest attempt before the split whose outcomes differ between the runs."""
    for index in range(split.row, -1, -1):
        row = rows[index]
        attempts = row.attempts
        if index == split.row:
            attempts = attempts[: split.attempt - 1] if split.attempt else []
        for attempt in reversed(attempts):
            if attempt.differs:
                tool = (row.left or row.right or {}).get("tool_name") or ""
                return Cause(index, attempt.number, tool, attempt.left_outcome.label, attempt.right_outcome.label)
    return None


def run_divergence(
    left: Sequence[Mapping[str, Any]],
    right: Sequence[Mapping[str, Any]],
    *,
    left_policy: Mapping[str, Any] | None = None,
    right_policy: Mapping[str, Any] | None = None,
) -> Divergence:
    """Align two runs' steps, find where they split and the outcome that caused it.

    ``left_policy``/``right_policy`` are the policy settings snapshots (``error_format`` and
    ``empty_is_error`` are read) so an outcome is compared as the harness reported it.
    """
    formats = [
        {"error_format": (p or {}).get("error_format") or "", "empty_is_error": bool((p or {}).get("empty_is_error"))}
        for p in (left_policy, right_policy)
    ]
    rows = align(left, right)
    for row in rows:
        row.attempts = _attempt_rows(row, formats[0], formats[1])
    split = next((s for i in range(len(rows)) if (s := _split_in(rows, i))), None)
    cause = None
    if split is not None:
        rows[split.row].is_split = True
        if split.attempt:
            rows[split.row].attempts[split.attempt - 1].is_split = True
        cause = _find_cause(rows, split)
        if cause is not None:
            rows[cause.row].is_cause = True
            rows[cause.row].attempts[cause.attempt - 1].is_cause = True
    return Divergence(rows=rows, split=split, cause=cause)


@dataclass(frozen=True)
class Difference:
    label: str
    left: Any
    right: Any

    @property
    def differs(self) -> bool:
        return self.left != self.right


SUMMARY_FIELDS = (
    ("tool calls", "tool_call_count"),
    ("errors", "error_count"),
    ("retries", "retry_count"),
    ("retries spent on non-retryable errors", "wasted_retry_count"),
    ("tokens", "total_tokens"),
    ("stop reason", "stop_reason"),
    ("verdict", "verdict"),
    ("final answer", "final_answer"),
)


def run_differences(left: Any, right: Any) -> list[Difference]:
    """The compare page's summary: each measure of run A against run B."""
    return [Difference(label, getattr(left, attr), getattr(right, attr)) for label, attr in SUMMARY_FIELDS]
