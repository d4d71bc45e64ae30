"""Judges: a verdict from named checks on the world's final state and the facts the answer carries.

A check never compares wording. Facts are matched tolerantly: numbers as numbers (``gives(30, "day")``
finds "30 days", "30-day window", "30.0 days"), key terms case-insensitively at the start of a word
(``mentions("manager", "approv")`` finds "a Manager's approval"), clock times in either notation
(``gives_time("13:00")`` finds "13:00" and "1 pm"). So a run of Claude, or of a better policy, is
judged on what happened, not on the simulated model's sentences.

The verdict's reason names every check with ✓ or ✗, a failed one with what was found:
``refund not applied ✓; answer gives 30 days ✓; answer gives 239 days ✓`` (shown after the verdict:
"verdict: PASS: refund not applied ✓; …"). A check that
raises fails with the exception named; it never crashes the run it judges.

What a check receives: the scenario's world after the run (``world``) and the run (``run``), whose
``run.end.final_answer``, ``run.end.stop_reason`` and ``run.steps`` (each ``tool_name``, ``input``,
``attempts``, ``is_error``) it may read. Importing this module loads only the standard library and
``agents.events``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from .events import Verdict
from .vocabulary import StepKind, StopReason

Outcome = bool | tuple[bool, str]


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str = ""

    def line(self) -> str:
        mark = "✓" if self.passed else "✗"
        return f"{self.name} {mark}" + (f" ({self.detail})" if self.detail and not self.passed else "")


@dataclass(frozen=True)
class Check:
    """A named test of a run: ``test(world, run)`` returns passed, or (passed, what was found)."""

    name: str
    test: Callable[[Any, Any], Outcome]

    def run(self, world: Any, run: Any) -> CheckResult:
        try:
            outcome = self.test(world, run)
        except Exception as exc:  # a broken check fails, naming why; the run is still judged
            return CheckResult(self.name, False, f"the check raised {type(exc).__name__}: {exc}")
        if isinstance(outcome, tuple):
            passed, detail = outcome
            return CheckResult(self.name, bool(passed), str(detail or ""))
        return CheckResult(self.name, bool(outcome))


class Judge:
    """A scenario's judge: every check runs; the run passes when all of them pass."""

    def __init__(self, *checks: Check) -> None:
        if not checks:
            raise ValueError("a Judge needs at least one check, e.g. Judge(answered(), gives(42))")
        for check in checks:
            if not isinstance(check, Check):
                raise TypeError(f"a Judge takes Check objects (answered(), state(...), …), got {check!r}")
        self.checks = checks

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.checks]

    def __call__(self, world: Any, run: Any) -> Verdict:
        results = [c.run(world, run) for c in self.checks]
        passed = all(r.passed for r in results)
        return Verdict(passed, "; ".join(r.line() for r in results), checks=[asdict(r) for r in results])


# --- reading a run ---------------------------------------------------------------------------


def answer_of(run: Any) -> str:
    return run.end.final_answer or ""


def tool_steps(run: Any, tool: str | None = None) -> list[Any]:
    return [s for s in run.steps if s.kind == StepKind.TOOL_USE and (tool is None or s.tool_name == tool)]


def attempts_of(run: Any, tool: str) -> int:
    """How many times the tool ran, counting the harness's retries."""
    return sum(len(s.attempts) for s in tool_steps(run, tool))


# --- tolerant matching -----------------------------------------------------------------------

_DASHES = str.maketrans({"\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2019": "'"})
_NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.,])\d+(?:\.\d+)?(?![\w])")
_TOKEN = re.compile(r"[\w€$£¥%]+")


def normalize(text: str) -> str:
    """Lowercase, one kind of dash and apostrophe, single spaces."""
    return re.sub(r"\s+", " ", (text or "").translate(_DASHES).replace("\u00a0", " ")).lower()


def term_pattern(term: str) -> re.Pattern[str]:
    """A key term as a pattern: case-insensitive, from the start of a word, spaces or dashes between words."""
    words = normalize(term).strip().split(" ")
    body = r"[\s-]+".join(re.escape(w) for w in words)
    start = r"(?<!\w)" if words[0][:1].isalnum() else ""
    end = r"(?!\d)" if words[-1][-1:].isdigit() else ""
    return re.compile(start + body + end)


def has_term(text: str, term: str) -> bool:
    return bool(term_pattern(term).search(normalize(text)))


def has_number(text: str, value: float, units: Iterable[str] = ()) -> bool:
    """Whether ``text`` gives ``value`` as a number, with one of ``units`` (a word start) beside it if any.

    A unit counts within the two words after the number ("30 calendar days", "30-day") or right
    before it ("EUR 92", "€92").
    """
    said = normalize(text)
    wanted = [normalize(u).strip() for u in units]
    for m in _NUMBER.finditer(said):
        if float(m.group().replace(",", "")) != float(value):
            continue
        if not wanted:
            return True
        after = _TOKEN.findall(said[m.end() : m.end() + 40])[:3]
        before = _TOKEN.findall(said[max(0, m.start() - 12) : m.start()])[-1:]
        if any(tok.startswith(u) or (len(u) == 1 and u in tok) for tok in after + before for u in wanted):
            return True
    return False


def time_pattern(hhmm: str) -> re.Pattern[str]:
    hour, minute = (int(p) for p in hhmm.split(":"))
    h12, suffix = hour % 12 or 12, "am" if hour < 12 else "pm"
    mm = f"{minute:02d}"
    forms = [
        rf"0?{hour}[:.]{mm}",
        rf"{h12}(?:[:.]{mm})?\s?{suffix[0]}\.?m\.?" if minute == 0 else rf"{h12}[:.]{mm}\s?{suffix}",
    ]
    return re.compile(r"(?<![\d:.])(?:" + "|".join(forms) + r")(?![\d])")


# --- checks ----------------------------------------------------------------------------------


# What a stop reason means for the answer, where its name alone does not say.
_STOP_MEANING = {
    StopReason.MAX_TOKENS: "the model's reply was cut off at its token limit, so there is no answer",
    StopReason.REFUSAL: "the model declined to answer",
}


def _why_stopped(run: Any) -> str:
    """How the run ended, for a failed check; the error itself is shown with the run, not repeated here."""
    end = run.end
    meaning = end.guard or _STOP_MEANING.get(end.stop_reason)
    return f"it ended {end.stop_reason}" + (f": {meaning}" if meaning else "")


def _answer_check(name: str, test: Callable[[str], Outcome]) -> Check:
    """A check of the final answer's facts; a run the model's reply ended without an answer (cut off,
    refused) fails it naming that stop reason, not as an answer that lacks the fact."""

    def check(world: Any, run: Any) -> Outcome:
        if run.end.stop_reason in _STOP_MEANING:
            return False, f"no answer: it ended {run.end.stop_reason}"
        return test(answer_of(run))

    return Check(name, check)


def answered(name: str = "answered") -> Check:
    """The run ended with a final answer to the user (not crashed, stopped by a guard, …)."""

    def test(world: Any, run: Any) -> Outcome:
        if run.end.stop_reason == StopReason.FINAL_ANSWER:
            return True
        return False, _why_stopped(run)

    return Check(name, test)


def state(name: str, predicate: Callable[[Any], Outcome]) -> Check:
    """A fact about the world's final state: ``predicate(world)`` returns passed, or (passed, what was found)."""
    return Check(name, lambda world, run: predicate(world))


def gives(value: float, *units: str, name: str | None = None) -> Check:
    """The answer gives ``value`` as a number, with one of ``units`` beside it when any are named."""
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    label = name or f"answer gives {shown}" + (f" {units[0]}" if units else "")
    return _answer_check(label, lambda answer: has_number(answer, value, units))


def gives_time(hhmm: str, *, name: str | None = None) -> Check:
    """The answer gives a clock time, as "13:00" or "1 pm"."""
    pattern = time_pattern(hhmm)
    return _answer_check(name or f"answer gives {hhmm}", lambda answer: bool(pattern.search(normalize(answer))))


def mentions(name: str, *terms: str) -> Check:
    """The answer carries every key term (case-insensitive, from the start of a word)."""
    return _answer_check(name, lambda answer: all(has_term(answer, t) for t in terms))


def mentions_any(name: str, *terms: str) -> Check:
    """The answer carries at least one of the key terms."""
    return _answer_check(name, lambda answer: any(has_term(answer, t) for t in terms))


def never_mentions(name: str, *terms: str) -> Check:
    """The answer carries none of the terms (e.g. another customer's name)."""

    def test(world: Any, run: Any) -> Outcome:
        found = [t for t in terms if has_term(answer_of(run), t)]
        return (not found, f"it says {', '.join(repr(t) for t in found)}" if found else "")

    return Check(name, test)


def stopped(reason: str, *, name: str | None = None) -> Check:
    """The run ended with this stop reason (e.g. a guard stopped a stuck model)."""

    def test(world: Any, run: Any) -> Outcome:
        return run.end.stop_reason == reason, _why_stopped(run)

    return Check(name or f"the run stopped {reason}", test)


def attempts_at_most(tool: str, limit: int, *, name: str | None = None) -> Check:
    """``tool`` ran at most ``limit`` times in the run, counting the harness's retries."""

    def test(world: Any, run: Any) -> Outcome:
        n = attempts_of(run, tool)
        return n <= limit, f"{n} attempts"

    return Check(name or f"{tool} tried at most {limit} time{'s' if limit != 1 else ''}", test)


def either(name: str, *checks: Check) -> Check:
    """Passes when any of ``checks`` passes (e.g. the value, or why it could not be had)."""

    def test(world: Any, run: Any) -> Outcome:
        results = [c.run(world, run) for c in checks]
        return any(r.passed for r in results), "; ".join(r.line() for r in results)

    return Check(name, test)


def all_of(name: str, *checks: Check) -> Check:
    """Passes when every one of ``checks`` passes, shown as one check."""

    def test(world: Any, run: Any) -> Outcome:
        results = [c.run(world, run) for c in checks]
        return all(r.passed for r in results), "; ".join(r.line() for r in results if not r.passed)

    return Check(name, test)
