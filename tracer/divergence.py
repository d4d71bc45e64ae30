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

When the runs' policies differ, the *reasons* name the setting that made the difference (a guard
that stopped one run, ``max_attempts``, the retry rule, the error format…), read from the two
policies' settings snapshots and how each run ended. Runs of different scenarios are not aligned for
a split: they did different tasks. Long stretches of identical rows are grouped for the page.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

import orjson
from pydantic import ValidationError

from agents.policies import RETRY_FLAG_PATHS, Policy
from agents.vocabulary import ErrorFormat, RetryRule, StepKind, StopReason, in_words


def canonical(value: Any) -> str:
    """A stable text form of JSON-able data, for comparing inputs and contents."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def same_key(value: Any) -> bytes | str:
    """What two JSON values are compared on here: equal values have equal keys, as with ``canonical``,
    made by orjson (a compare makes one per step and per attempt: ``json`` was a fifth of its time).
    What orjson refuses (an integer beyond 64 bits, a key that is not a string) falls back to
    ``canonical``; an equal value falls back alike, so the two never meet."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError is one
        return canonical(value)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One attempt's outcome as the harness reported it under a policy's error format."""

    ok: bool
    label: str  # short, human: 'ok', 'empty result', 'bare "Error"', 'business · not retryable'
    key: tuple  # what two runs' outcomes are compared on
    detail: str = ""  # the message that came with a structured error


def attempt_outcome(
    attempt: Mapping[str, Any], *, error_format: str = "", empty_is_error: bool = False, swallow_errors: bool = False
) -> Outcome:
    """What the harness made of one attempt under the policy's error format."""
    failed = not attempt.get("ok") or (attempt.get("empty") and empty_is_error)
    if not attempt.get("ok") and swallow_errors:
        return Outcome(False, "swallowed: sent as no results", ("swallowed",), attempt.get("message") or "")
    if not failed:
        if attempt.get("empty"):
            return Outcome(True, "empty result", ("empty",))
        return Outcome(True, "ok", ("ok", same_key(attempt.get("content"))))
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
    if attempt.get("ok"):  # an empty result the policy reports as an error (``agents.loop.format_result``)
        category, retryable = "empty", False
    flag = "retryable" if retryable else "not retryable" if retryable is False else "retryable unknown"
    return Outcome(False, f"{category} · {flag}", ("error", category, retryable, message), message)


def step_signature(step: Mapping[str, Any]) -> tuple:
    """What a step did, for alignment: the tool and its input, the final answer, or a model turn that
    stopped the run (its API stop reason)."""
    if step.get("kind") == StepKind.FINAL_ANSWER:
        return (StepKind.FINAL_ANSWER,)
    if step.get("kind") == StepKind.MODEL_STOP:
        return (StepKind.MODEL_STOP, step.get("api_stop_reason") or "", step.get("tool_name") or "")
    return (StepKind.TOOL_USE, step.get("tool_name") or "", same_key(step.get("input")))


@dataclass(slots=True)
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


_NO_FORMAT: Mapping[str, Any] = {}


@dataclass(slots=True)
class StepRow:
    """One aligned place: each run's step (None: a gap), and their attempts side by side (``attempts``,
    made when first read: a long compare reads the attempts of the rows it checks, folds or shows)."""

    left: Mapping[str, Any] | None
    right: Mapping[str, Any] | None
    number: int = 0  # 1-based, the "aligned step" the page names
    left_signature: int | None = None  # each side's ``step_signature`` as ``align`` numbered it (None: no step)
    right_signature: int | None = None
    is_split: bool = False
    is_cause: bool = False
    left_ended: bool = False  # run A has no step here or after: it had ended
    right_ended: bool = False
    left_stopped: str = ""  # run A's last step, where a fatal error or a crash ended it: which
    right_stopped: str = ""
    same: bool = False  # the same step and outcomes in both runs, neither the split nor the cause (``stretches``)
    formats: tuple[Mapping[str, Any], Mapping[str, Any]] = (_NO_FORMAT, _NO_FORMAT)  # each run's, for outcomes
    _attempts: list[AttemptRow] | None = None
    _key: tuple | None = None

    @property
    def is_gap(self) -> bool:
        return self.left is None or self.right is None

    @property
    def attempts(self) -> list[AttemptRow]:
        if self._attempts is None:
            self._attempts = _attempt_rows(self, *self.formats)
        return self._attempts

    @property
    def signatures(self) -> tuple[int | None, int | None]:
        """What each side did, numbered by ``align``: equal numbers, equal ``step_signature``s."""
        return self.left_signature, self.right_signature

    @property
    def key(self) -> tuple:
        """What the row shows: each side's step and outcomes (a repeat of a row has the same key)."""
        if self._key is None:
            self._key = _row_key(self)
        return self._key


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
    what: str  # "tool" | "input" | "retry" | "extra step" | "final answer" | "answered" | "model stop"
    summary: str  # one sentence, run A first


@dataclass(frozen=True)
class Reason:
    """A policy setting (or settings) that made the runs differ, said in one sentence, run A first."""

    settings: tuple[str, ...]  # the settings it names, as ``agents.policies.Policy`` spells them
    text: str


@dataclass
class Stretch:
    """Consecutive aligned rows the page shows together; ``label`` set: folded away behind it."""

    rows: list[StepRow]
    label: str = ""


@dataclass
class Divergence:
    rows: list[StepRow]
    split: Split | None
    cause: Cause | None
    reasons: list[Reason] = field(default_factory=list)
    note: str = ""  # what the page says when neither an outcome nor a setting explains the split
    comparable: bool = True  # False: different scenarios, so no split was looked for
    stretches: list[Stretch] = field(default_factory=list)

    @property
    def settings(self) -> set[str]:
        """Every setting a reason names (the settings table marks them)."""
        return {name for reason in self.reasons for name in reason.settings}


# --- the two policies' settings ---------------------------------------------------------------

# Every setting of a policy, in ``Policy``'s order; the name and description say nothing about behaviour.
SETTING_NAMES = tuple(name for name in Policy.model_fields if name not in ("name", "description"))
# Settings that change when or how a tool is reached, never which steps a run takes.
TIMING_SETTINGS = frozenset({"backoff_base_s", "backoff_max_s", "backoff_jitter", "tool_transport"})
_MISSING: Any = object()


def settings_snapshot(snapshot: Mapping[str, Any] | None, *, complete: bool) -> dict[str, Any]:
    """A run's policy settings as divergence reads them. ``complete``: the snapshot was stored by this
    harness (a run executed here), so a setting it lacks is one added later and had its default.
    Otherwise (an imported run) a missing setting is unknown, and an empty snapshot knows nothing. A
    value a policy could not hold (an imported ``"max_steps": "ten"``) is unknown too."""
    if not isinstance(snapshot, Mapping) or not snapshot:
        return {}
    known = {}
    for name, value in snapshot.items():
        if name not in SETTING_NAMES:
            known[name] = value  # not a setting of ours: shown, never reasoned about
            continue
        try:  # the setting as a policy holds it (``Policy``'s types, bounds and validators)
            known[name] = getattr(Policy(name="snapshot", **{name: value}), name)
        except ValidationError:
            continue
    if complete:
        known = {**{name: Policy.model_fields[name].default for name in SETTING_NAMES}, **known}
    return known


@dataclass(frozen=True)
class SettingRow:
    name: str
    left: str  # shown values: "yes", "off", "unknown"…
    right: str
    differs: bool  # both known and different
    timing_only: bool  # a difference here changes no step (``TIMING_SETTINGS``)


def _shown(name: str, value: Any) -> str:
    if value is _MISSING:
        return "unknown"
    if value is None:
        return "off (no guard)" if name == "consecutive_error_limit" else "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def settings_compare(left: Mapping[str, Any], right: Mapping[str, Any]) -> list[SettingRow]:
    """The two policies' settings side by side (snapshots from ``settings_snapshot``); settings a
    snapshot holds that this harness does not know come last."""
    extra = sorted((set(left) | set(right)) - set(SETTING_NAMES) - {"name", "description"})
    rows = []
    for name in (*SETTING_NAMES, *extra):
        a, b = left.get(name, _MISSING), right.get(name, _MISSING)
        known = a is not _MISSING and b is not _MISSING
        rows.append(SettingRow(name, _shown(name, a), _shown(name, b), known and a != b, name in TIMING_SETTINGS))
    return rows


# --- alignment and the split -----------------------------------------------------------------


def _describe(step: Mapping[str, Any] | None) -> str:
    if step is None:
        return "nothing"
    if step.get("kind") == StepKind.FINAL_ANSWER:
        return "gave its final answer"
    if step.get("kind") == StepKind.MODEL_STOP:
        return f"stopped with nothing executed (the API's stop_reason {step.get('api_stop_reason') or 'unknown'})"
    return f"called {step.get('tool_name')}"


def align(left: Sequence[Mapping[str, Any]], right: Sequence[Mapping[str, Any]]) -> list[StepRow]:
    """Pair steps that did the same thing; a step one run lacks sits opposite a gap.

    The common prefix is paired first, so a gap appears where the runs part, not before.
    """
    ids: dict[tuple, int] = {}  # each signature as a number, cheaper to match and compare than the tuple
    sig_a = [ids.setdefault(step_signature(s), len(ids)) for s in left]
    sig_b = [ids.setdefault(step_signature(s), len(ids)) for s in right]
    prefix = 0
    while prefix < min(len(sig_a), len(sig_b)) and sig_a[prefix] == sig_b[prefix]:
        prefix += 1
    rows = [StepRow(left[k], right[k], left_signature=sig_a[k], right_signature=sig_b[k]) for k in range(prefix)]
    matcher = SequenceMatcher(a=sig_a[prefix:], b=sig_b[prefix:], autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        a0, a1, b0, b1 = a0 + prefix, a1 + prefix, b0 + prefix, b1 + prefix
        paired = min(a1 - a0, b1 - b0) if op in ("equal", "replace") else 0
        rows.extend(
            StepRow(left[a0 + k], right[b0 + k], left_signature=sig_a[a0 + k], right_signature=sig_b[b0 + k])
            for k in range(paired)
        )
        rows.extend(StepRow(left[k], None, left_signature=sig_a[k]) for k in range(a0 + paired, a1))
        rows.extend(StepRow(None, right[k], right_signature=sig_b[k]) for k in range(b0 + paired, b1))
    for number, row in enumerate(rows, start=1):
        row.number = number
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


# A run that ended with one of these at its last step sent that step's failure back to no model.
_ENDED_ON_FAILURE = {StopReason.FATAL_ERROR: "a fatal error", StopReason.CRASHED: "the run crashed"}


def _split_in(rows: list[StepRow], index: int, stops: Mapping[str, str]) -> Split | None:
    """The split in one aligned row, if what the two runs did there differs (``stops``: each side's
    stop reason, "A" and "B")."""
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
    if StepKind.MODEL_STOP in (a.get("kind"), b.get("kind")):
        if step_signature(a) != step_signature(b):
            return Split(index, None, "model stop", f"Run A {_describe(a)}; run B {_describe(b)}.")
        return None
    if a.get("tool_name") != b.get("tool_name"):
        return Split(index, None, "tool", f"Run A called {a.get('tool_name')}; run B called {b.get('tool_name')}.")
    if rows[index].left_signature != rows[index].right_signature:  # the same tool: its input differs
        return Split(index, None, "input", f"Both called {a.get('tool_name')}, with different input.")
    n_a, n_b = len(a.get("attempts") or []), len(b.get("attempts") or [])
    if n_a != n_b:
        more, fewer = ("A", "B") if n_a > n_b else ("B", "A")
        fewest = min(n_a, n_b)
        then = _next_step(rows, index, fewer)
        stopped = f"Run {more} retried {a.get('tool_name')} ({max(n_a, n_b)} attempts); run {fewer} stopped after "
        stopped += f"{fewest} attempt{'s' if fewest != 1 else ''}"
        if then is None and stops.get(fewer) in _ENDED_ON_FAILURE:
            ended = _ENDED_ON_FAILURE[stops[fewer]]
            return Split(
                index, fewest + 1, "retry", f"{stopped} and ended there ({ended}): no result went to the model."
            )
        return Split(
            index,
            fewest + 1,
            "retry",
            f"{stopped} and sent the result back to the model"
            + (f", which then {_describe(then)}." if then is not None else "."),
        )
    return None


def _with_detail(outcome: Outcome) -> str:
    detail = outcome.detail or (outcome.key[-1] if not outcome.ok else "")
    return f"{outcome.label} ({detail})" if detail else outcome.label


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
                left, right = attempt.left_outcome, attempt.right_outcome
                if left.label == right.label:  # alike but for what the error said: say it
                    return Cause(index, attempt.number, tool, _with_detail(left), _with_detail(right))
                return Cause(index, attempt.number, tool, left.label, right.label)
    return None


# --- the settings behind a split ----------------------------------------------------------------


@dataclass(frozen=True)
class _Side:
    """One run as the reasons read it: "A" or "B", its settings (``settings_snapshot``) and its end."""

    name: str
    settings: Mapping[str, Any]
    stop_reason: str

    def knows(self, *names: str) -> bool:
        return all(name in self.settings for name in names)

    def __getitem__(self, name: str) -> Any:
        return self.settings[name]

    def step(self, row: StepRow) -> Mapping[str, Any] | None:
        return row.left if self.name == "A" else row.right


# What the model reads of a failure under each error format.
FORMAT_SAYS = {
    ErrorFormat.RAISE: "nothing: the exception ends the run",
    ErrorFormat.BARE: 'only "Error"',
    ErrorFormat.MESSAGE: "the error's message",
    ErrorFormat.STRUCTURED: "its category, whether it is retryable and its message",
}
RETRY_RULE_SAYS = {
    RetryRule.ALL: "every failure (retry_on all)",
    RetryRule.TRANSIENT: "only failures marked retryable (retry_on transient)",
    RetryRule.NONE: "nothing in code (retry_on none)",
}


def _differ(x: _Side, y: _Side, name: str) -> bool:
    return x.knows(name) and y.knows(name) and x[name] != y[name]


def _code_differs(x: _Side, y: _Side) -> bool:
    """Either run's policy is code (``agents.policy_code``), and the two ran different code."""
    if not (x.settings.get("code") or y.settings.get("code")):
        return False
    return _differ(x, y, "code") or _differ(x, y, "code_sha256")


def _code_of(side: _Side) -> str:
    """Run ``side``'s policy module and the start of its source hash."""
    sha = side.settings.get("code_sha256")
    return f"{side['code']}" + (f", sha256 {sha[:12]}" if isinstance(sha, str) else "")


def _format_by(side: _Side) -> str:
    """What builds run ``side``'s failure results: its policy code's fail(), or its error_format."""
    if side.settings.get("code"):
        return f"its policy code's fail() ({_code_of(side)})"
    fmt = side.settings.get("error_format")
    return f"error_format {fmt}: the model reads {FORMAT_SAYS.get(fmt, fmt)}" if fmt else "settings not known"


def _retries_by(side: _Side) -> str:
    if side.settings.get("code"):
        return f"its policy code's should_retry() ({_code_of(side)})"
    rule = side.settings.get("retry_on")
    return f"retry_on {rule}" if rule else "settings not known"


def _is_retryable(attempt: Mapping[str, Any]) -> bool:
    return attempt.get("retryable") is True or attempt.get("category") == "transient"


def _retry_reason(
    rows: list[StepRow], split: Split, fewer: _Side, more: _Side, outcome: Outcome | None
) -> Reason | None:
    """Why run ``fewer`` stopped trying a call that run ``more`` tried again."""
    f_attempts = list(fewer.step(rows[split.row]).get("attempts") or [])
    last, n = f_attempts[-1], len(f_attempts)
    f, m = fewer.name, more.name
    ended = _next_step(rows, split.row, f) is None
    if ended and fewer.stop_reason == StopReason.FATAL_ERROR and _differ(fewer, more, "stop_on_fatal"):
        return Reason(
            ("stop_on_fatal",),
            f"Run {f} stops the run on a fatal error (stop_on_fatal); run {m} does not, so it went on trying.",
        )
    crashed = ended and fewer.stop_reason == StopReason.CRASHED and _differ(fewer, more, "error_format")
    if crashed and fewer["error_format"] == ErrorFormat.RAISE:
        return Reason(
            ("error_format",),
            f"Run {f}'s error_format is raise: the failure ended the run; run {m} reports a failure to "
            f"the model as {FORMAT_SAYS.get(more['error_format'], more['error_format'])}.",
        )
    if _code_differs(fewer, more):
        return Reason(
            ("code", "code_sha256"),
            f"Run {f} stopped after {n} attempt{'s' if n != 1 else ''}: {_retries_by(fewer)} said no; run {m}'s "
            f"retries follow {_retries_by(more)}.",
        )
    if not last.get("ok") and _differ(fewer, more, "swallow_errors") and fewer["swallow_errors"]:
        return Reason(
            ("swallow_errors",),
            f"Run {f} swallows failures (swallow_errors): the failure went to the model as an empty result "
            f"with no error, so nothing was retried; run {m} reports it as an error.",
        )
    if last.get("ok") and last.get("empty") and _differ(fewer, more, "empty_is_error") and more["empty_is_error"]:
        return Reason(
            ("empty_is_error",),
            f"Run {m} counts an empty result as an error (empty_is_error) and retried it; run {f} passes it "
            "on as a result.",
        )
    if not fewer.knows("retry_on", "max_attempts") or not more.knows("retry_on", "max_attempts"):
        return None
    if fewer["retry_on"] == RetryRule.NONE and more["retry_on"] != RetryRule.NONE:
        return Reason(
            ("retry_on",),
            f"Run {f} retries nothing in code (retry_on none); run {m} retries {RETRY_RULE_SAYS[more['retry_on']]}.",
        )
    if n >= fewer["max_attempts"] and more["max_attempts"] > fewer["max_attempts"]:
        return Reason(
            ("max_attempts",),
            f"Run {f} gave up after {n} attempt{'s' if n != 1 else ''} (its max_attempts is "
            f"{fewer['max_attempts']}); run {m}'s max_attempts is {more['max_attempts']}.",
        )
    if fewer["retry_on"] == RetryRule.TRANSIENT and more["retry_on"] == RetryRule.ALL and not _is_retryable(last):
        said = f", and this one was {outcome.label}" if outcome is not None and not outcome.ok else ""
        return Reason(
            ("retry_on",),
            f"Run {m} retries every failure (retry_on all); run {f} retries only failures marked retryable "
            f"(retry_on transient){said}.",
        )
    if (
        fewer["retry_on"] == RetryRule.TRANSIENT
        and fewer.knows("error_format", "retry_flag_path")
        and fewer["error_format"] == ErrorFormat.STRUCTURED
        and fewer["retry_flag_path"] != RETRY_FLAG_PATHS[0]
        and _differ(fewer, more, "retry_flag_path")
        and _is_retryable(last)
    ):
        return Reason(
            ("retry_flag_path",),
            f"Run {f} reads isRetryable at {fewer['retry_flag_path']} (retry_flag_path), where the structured "
            f"error never puts it, so it did not retry a retryable failure; run {m} reads it at "
            f"{more['retry_flag_path']}.",
        )
    return None


def _stop_reason(stopped: _Side, other: _Side) -> Reason | None:
    """Why run ``stopped`` ended where run ``other`` went on."""
    s, o = stopped.name, other.name
    if stopped.stop_reason == StopReason.CONSECUTIVE_ERRORS and _differ(stopped, other, "consecutive_error_limit"):
        limit, others = stopped["consecutive_error_limit"], other["consecutive_error_limit"]
        if limit is not None and (others is None or others > limit):
            beyond = f"run {o} has no guard" if others is None else f"run {o}'s guard allows {others} errors in a row"
            return Reason(
                ("consecutive_error_limit",),
                f"Run {s}'s consecutive-error guard stopped the run after {limit} errors in a row; {beyond}.",
            )
    if (
        stopped.stop_reason == StopReason.MAX_STEPS
        and _differ(stopped, other, "max_steps")
        and stopped["max_steps"] < other["max_steps"]
    ):
        return Reason(
            ("max_steps",),
            f"Run {s} stopped at its {stopped['max_steps']}-step limit (max_steps); run {o}'s max_steps is "
            f"{other['max_steps']}.",
        )
    if stopped.stop_reason == StopReason.FATAL_ERROR and _differ(stopped, other, "stop_on_fatal"):
        return Reason(
            ("stop_on_fatal",),
            f"Run {s} stops the run on a fatal error (stop_on_fatal); run {o} does not, so it sent the error "
            "to the model and went on.",
        )
    crashed = stopped.stop_reason == StopReason.CRASHED and _differ(stopped, other, "error_format")
    if crashed and stopped["error_format"] == ErrorFormat.RAISE:
        return Reason(
            ("error_format",),
            f"Run {s}'s error_format is raise: the failure ended the run; run {o} reports a failure to the "
            f"model as {FORMAT_SAYS.get(other['error_format'], other['error_format'])}.",
        )
    return None


def _model_reason(rows: list[StepRow], split: Split, a: _Side, b: _Side) -> Reason | None:
    """A prompt setting behind a choice the model made from the same results."""
    if not _differ(a, b, "ask_model_to_retry"):
        return None
    asked, other = (a, b) if a["ask_model_to_retry"] else (b, a)
    row = rows[split.row]
    step = asked.step(row)
    before = next((asked.step(r) for r in reversed(rows[: split.row]) if asked.step(r) is not None), None)
    again = (
        step is not None
        and before is not None
        and step_signature(step) == step_signature(before)
        and not all(attempt.get("ok") for attempt in before.get("attempts") or [{}])
    )
    did = f", and the model called {step.get('tool_name')} again" if again else ""
    return Reason(
        ("ask_model_to_retry",),
        f"Run {asked.name}'s system prompt asks the model to retry a retryable failure once "
        f"(ask_model_to_retry){did}; run {other.name}'s does not.",
    )


def _outcome_reason(rows: list[StepRow], cause: Cause, a: _Side, b: _Side) -> Reason | None:
    """The setting that made one attempt's outcome read differently in the two runs."""
    attempt = rows[cause.row].attempts[cause.attempt - 1]
    x, y = attempt.left or {}, attempt.right or {}
    failed = not x.get("ok") or not y.get("ok")
    if (failed or x.get("empty") or y.get("empty")) and _code_differs(a, b):
        return Reason(
            ("code", "code_sha256"),
            f"Run A builds this result with {_format_by(a)}; run B with {_format_by(b)}.",
        )
    if failed and _differ(a, b, "swallow_errors"):
        swallows, other = (a, b) if a["swallow_errors"] else (b, a)
        return Reason(
            ("swallow_errors",),
            f"Run {swallows.name} swallows failures (swallow_errors): the model got an empty result with no "
            f"error; run {other.name} reports the failure.",
        )
    if (x.get("empty") or y.get("empty")) and _differ(a, b, "empty_is_error"):
        counts, other = (a, b) if a["empty_is_error"] else (b, a)
        return Reason(
            ("empty_is_error",),
            f"Run {counts.name} counts an empty result as an error (empty_is_error); run {other.name} passes "
            "it on as a result.",
        )
    if failed and _differ(a, b, "error_format"):
        fa, fb = a["error_format"], b["error_format"]
        return Reason(
            ("error_format",),
            f"Run A's error_format is {fa}: the model reads {FORMAT_SAYS.get(fa, fa)}; run B's is {fb}: "
            f"{FORMAT_SAYS.get(fb, fb)}.",
        )
    if a.knows(*SETTING_NAMES) and b.knows(*SETTING_NAMES):
        same = all(a[n] == b[n] for n in ("error_format", "empty_is_error", "swallow_errors"))
        if same:
            return Reason((), "Both policies report this outcome the same way: the tool itself answered differently.")
    return None


def _reasons(rows: list[StepRow], split: Split, cause: Cause | None, a: _Side, b: _Side) -> list[Reason]:
    reasons: list[Reason] = []
    row = rows[split.row]
    if split.what == "retry":
        n_a, n_b = len(row.left.get("attempts") or []), len(row.right.get("attempts") or [])
        more, fewer = (a, b) if n_a > n_b else (b, a)
        outcome_row = row.attempts[split.attempt - 2] if split.attempt and split.attempt > 1 else None
        outcome = None
        if outcome_row is not None:
            outcome = outcome_row.left_outcome if fewer.name == "A" else outcome_row.right_outcome
        reasons.append(_retry_reason(rows, split, fewer, more, outcome))
    elif split.what == "extra step":
        gap = a if row.left is None else b
        ended = all(gap.step(r) is None for r in rows[split.row :])
        other = b if gap is a else a
        reasons.append(_stop_reason(gap, other) if ended else None)
    if not any(reasons) and split.what != "retry":
        reasons.append(_model_reason(rows, split, a, b))
    named = {name for r in reasons if r is not None for name in r.settings}
    found = _outcome_reason(rows, cause, a, b) if cause is not None else None
    if found is not None and not named & set(found.settings):  # a setting already named is said once
        reasons.append(found)
    return [r for r in reasons if r is not None]


def _note(split: Split, cause: Cause | None, reasons: list[Reason], a: _Side, b: _Side) -> str:
    """What to say of a split that neither an outcome nor a setting explains."""
    if cause is not None or any(r.settings for r in reasons):
        return ""
    unknown = [s.name for s in (a, b) if not s.knows(*SETTING_NAMES)]
    if unknown:
        which = "run " + " and run ".join(unknown)
        return (
            f"No earlier tool outcome differed. The policy settings of {which} are not known (an imported run "
            "may carry only its policy's name), so whether a setting made the difference cannot be told."
        )
    differing = [n for n in SETTING_NAMES if a[n] != b[n]]
    if not [n for n in differing if n not in TIMING_SETTINGS]:
        apart = f" apart from {', '.join(differing)}, which change no step" if differing else ""
        return (
            f"No earlier tool outcome differed and both policies have the same settings{apart}: the model "
            "chose differently from the same results."
        )
    return (
        f"No earlier tool outcome differed, and none of the settings that differ ({', '.join(differing)}) "
        "decides this step: the model chose differently from the same results."
    )


# --- stretches ----------------------------------------------------------------------------------

FOLD_REPEATS_AT = 2  # this many rows repeating the row before them fold behind one line
FOLD_SAME_AT = 5  # a stretch of this many rows the same in both runs keeps its first and last row shown


def _row_key(row: StepRow) -> tuple:
    """What a row shows: each side's step and outcomes (a repeat of a row has the same key)."""
    left, right = row.signatures

    def side(signature, outcomes):
        if signature is None:
            return None
        return (signature, tuple(o.key for o in outcomes if o is not None))

    return (
        side(left, [a.left_outcome for a in row.attempts]),
        side(right, [a.right_outcome for a in row.attempts]),
    )


def _same_in_both(row: StepRow) -> bool:
    """The same step and outcomes in both runs (its attempts are read only when the steps are alike)."""
    left, right = row.signatures
    return _plain(row) and left is not None and left == right and row.key[0] == row.key[1]


def _repeats(row: StepRow, first: StepRow) -> bool:
    """``row`` shows what ``first`` shows (their attempts are read only when their steps are alike)."""
    return _plain(row) and row.signatures == first.signatures and row.key == first.key


def _plain(row: StepRow) -> bool:
    return not row.is_split and not row.is_cause


def _repeats_label(rows: list[StepRow]) -> str:
    first = rows[0]
    step = first.left or first.right
    outcomes = [o for a in first.attempts for o in (a.left_outcome, a.right_outcome) if o is not None]
    failing = " failing" if outcomes and not any(o.ok for o in outcomes) else ""
    what = (
        "final answers" if step.get("kind") == StepKind.FINAL_ANSWER else f"{failing} calls of {step.get('tool_name')}"
    )
    n = len(rows)
    if first.left is not None and first.right is not None:
        return f"{n} more identical {what.strip()} in both runs"
    side, other = ("A", "B") if first.left is not None else ("B", "A")
    return f"{n} more identical {what.strip()} in run {side}; run {other} has no such steps"


def stretches(rows: list[StepRow]) -> list[Stretch]:
    """The rows as the page shows them: a row repeated (same steps, same outcomes) ``FOLD_REPEATS_AT``
    times or more after itself folds its repeats behind one line ("6 more identical failing calls of
    free_slots in run A…"); a stretch of ``FOLD_SAME_AT`` or more rows the same in both runs folds all
    but its first and last. The split and the cause are never folded. Each row's key is made once, when
    its steps are alike (another row's, or the other run's), and whether it is the same in both runs
    kept as its ``same``."""
    same = [_same_in_both(row) for row in rows]
    for row, alike in zip(rows, same, strict=True):
        row.same = alike
    out: list[Stretch] = []
    i = 0
    while i < len(rows):
        j = i + 1
        while j < len(rows) and _repeats(rows[j], rows[i]):
            j += 1
        if j - i - 1 >= FOLD_REPEATS_AT:
            out += [Stretch([rows[i]]), Stretch(rows[i + 1 : j], _repeats_label(rows[i + 1 : j]))]
            i = j
            continue
        k = i
        while k < len(rows) and same[k]:
            k += 1
        if k - i >= FOLD_SAME_AT:
            middle = rows[i + 1 : k - 1]
            out += [Stretch([rows[i]]), Stretch(middle, f"{len(middle)} more steps the same in both runs")]
            out.append(Stretch([rows[k - 1]]))
            i = k
            continue
        out.append(Stretch([rows[i]]))
        i += 1
    return out


def run_divergence(
    left: Sequence[Mapping[str, Any]],
    right: Sequence[Mapping[str, Any]],
    *,
    left_policy: Mapping[str, Any] | None = None,
    right_policy: Mapping[str, Any] | None = None,
    left_stop: str = "",
    right_stop: str = "",
    comparable: bool = True,
) -> Divergence:
    """Align two runs' steps, find where they split, the outcome that caused it and the settings behind it.

    ``left_policy``/``right_policy`` are the policy settings as ``settings_snapshot`` gives them (a
    setting missing is unknown); ``left_stop``/``right_stop`` the runs' stop reasons. Not
    ``comparable`` (runs of different scenarios): the rows are aligned for reading, no split is sought.
    """
    a = _Side("A", left_policy or {}, left_stop)
    b = _Side("B", right_policy or {}, right_stop)
    formats = tuple(
        {
            "error_format": side.settings.get("error_format") or "",
            "empty_is_error": bool(side.settings.get("empty_is_error")),
            "swallow_errors": bool(side.settings.get("swallow_errors")),
        }
        for side in (a, b)
    )
    rows = align(left, right)
    left_last = max((i for i, row in enumerate(rows) if row.left is not None), default=-1)
    right_last = max((i for i, row in enumerate(rows) if row.right is not None), default=-1)
    for i, row in enumerate(rows):
        row.formats = formats
        row.left_ended, row.right_ended = i > left_last, i > right_last
    if left_last >= 0:
        rows[left_last].left_stopped = _ENDED_ON_FAILURE.get(left_stop, "")
    if right_last >= 0:
        rows[right_last].right_stopped = _ENDED_ON_FAILURE.get(right_stop, "")
    divergence = Divergence(rows=rows, split=None, cause=None, comparable=comparable)
    stops = {"A": left_stop, "B": right_stop}
    split = next((s for i in range(len(rows)) if (s := _split_in(rows, i, stops)) is not None), None)
    if comparable and split is not None:
        divergence.split = split
        rows[split.row].is_split = True
        if split.attempt:
            rows[split.row].attempts[split.attempt - 1].is_split = True
        divergence.cause = cause = _find_cause(rows, split)
        if cause is not None:
            rows[cause.row].is_cause = True
            rows[cause.row].attempts[cause.attempt - 1].is_cause = True
        divergence.reasons = _reasons(rows, split, cause, a, b)
        divergence.note = _note(split, cause, divergence.reasons, a, b)
    divergence.stretches = stretches(rows)
    return divergence


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
    ("failed steps", "error_count"),
    ("failed attempts", "failed_attempt_count"),
    ("retries", "retry_count"),
    ("retries spent on non-retryable errors", "wasted_retry_count"),
    ("tokens", "total_tokens"),
    ("stop reason", "stop_reason"),
    ("verdict", "verdict"),
    ("final answer", "final_answer"),
)


def run_differences(left: Any, right: Any) -> list[Difference]:
    """The compare page's summary: each measure of run A against run B."""

    def value(run: Any, attr: str) -> Any:
        found = getattr(run, attr)
        if attr == "verdict" and (override := getattr(getattr(run, "review", None), "verdict_override", "")):
            return f"{found or 'unknown'} (reviewer: {override})"  # the judge's, and the override beside it
        return in_words(found) if attr == "stop_reason" and found else found  # as every page words it

    return [Difference(label, value(left, attr), value(right, attr)) for label, attr in SUMMARY_FIELDS]
