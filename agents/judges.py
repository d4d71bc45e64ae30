"""Judges: a verdict from named checks on the world's final state and the facts the answer carries.

A check never compares wording. The answer is read for its facts (``agents.answers``): numbers as
numbers, in digits or words (``gives(30, "day")`` finds "30 days", "30-day window", "thirty-day");
durations in any unit within a stated tolerance (``gives_duration(239, "day")`` finds "239 days",
"about eight months", "nearly 34 weeks"); key terms at the start of a word (``mentions``); clock
times in either notation (``gives_time("13:00")`` finds "13:00" and "1 pm"); and claims, with their
synonyms and negation (``states(claim)``: "I couldn't refund it" denies a refund, "Actually I
refunded it anyway" states one), checked against the world (``true_to_world``: an answer saying the
refund was made when the world says it wasn't fails). So a run of Claude, or of a better policy, is
judged on what happened, not on the simulated model's sentences.

The verdict's reason names every check with ✓ or ✗: a passed fact with the words that carried it, a
failed one with what was found: ``refund not applied ✓; answer gives the 30-day window ✓ ("thirty-day");
answer gives the order's age, 239 days ✓ ("about eight months")``. A check that raises fails with the
exception named; it never crashes the run it judges.

What a check receives: the scenario's world after the run (``world``) and the run (``run``), whose
``run.end.final_answer``, ``run.end.stop_reason`` and ``run.steps`` (each ``tool_name``, ``input``,
``attempts``, ``is_error``) it may read. Importing this module loads only the standard library and
``agents.answers``, ``agents.events`` and ``agents.vocabulary``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from .answers import (
    DAYS_PER,
    Claim,
    durations,
    find_duration,
    find_number,
    find_term,
    read,
    time_pattern,
)
from .events import Verdict
from .vocabulary import ErrorCategory, StepKind, StopReason

# A check's test returns passed, or (passed, what was found); an answer's fact also the words that carried it.
Outcome = bool | tuple[bool, str] | tuple[bool, str, str]


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str = ""  # what was found, shown when the check failed
    found: str = ""  # the answer's words that carried the fact, shown when it passed

    def line(self) -> str:
        if self.passed:
            return f"{self.name} ✓" + (f" ({self.found})" if self.found else "")
        return f"{self.name} ✗" + (f" ({self.detail})" if self.detail else "")


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
            passed, detail, *found = outcome
            return CheckResult(self.name, bool(passed), str(detail or ""), str(found[0] or "") if found else "")
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


def normalize(text: str) -> str:
    """The answer as the judges read it: lowercase, contractions spelled out, number words as digits."""
    return read(text or "").text


def has_term(text: str, term: str) -> bool:
    return find_term(text, term) is not None


def has_number(text: str, value: float, units: Iterable[str] = ()) -> bool:
    """Whether ``text`` gives ``value`` as a number (in digits or words), with one of ``units`` beside it if any."""
    return find_number(text, value, units) is not None


def quoted(words: Iterable[str]) -> str:
    return ", ".join(f'"{w}"' for w in dict.fromkeys(words))


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


def gives(value: float, *units: str, name: str | None = None, tolerance: float = 0.0) -> Check:
    """The answer gives ``value`` as a number, in digits or words ("92", "ninety-two"), within
    ``tolerance`` (absolute), with one of ``units`` beside it when any are named."""
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    label = name or f"answer gives {shown}" + (f" {units[0]}" if units else "")

    def test(answer: str) -> Outcome:
        words = find_number(answer, value, units, tolerance)
        return words is not None, "", f'"{words}"' if words else ""

    return _answer_check(label, test)


def gives_duration(value: float, unit: str = "day", *, tolerance: float = 0.12, name: str | None = None) -> Check:
    """The answer gives an amount of time of ``value`` ``unit``s in any unit, within ``tolerance`` (a
    fraction): 239 days is "239 days", "34 weeks", "about eight months"; a bound counts when it is on the
    right side and within it ("over seven months", "nearly eight months")."""
    if unit not in DAYS_PER:
        raise ValueError(f"gives_duration: unit is one of {', '.join(DAYS_PER)}, got {unit!r}")
    days = value * DAYS_PER[unit]
    shown = f"{value:g} {unit}{'s' if value != 1 else ''}"
    label = name or f"answer gives {shown}"
    label += f" (within {tolerance:.0%})"

    def test(answer: str) -> Outcome:
        found = find_duration(answer, days, tolerance)
        if found is None:
            others = [d.words for d in durations(answer)]
            return False, f"it gives {quoted(others)}" if others else ""
        said = f'"{found.words}"'
        if abs(found.days - days) > 0.5:
            said += f" ≈ {found.days / DAYS_PER[unit]:.0f} {unit}s"
        return True, "", said

    return _answer_check(label, test)


def gives_time(hhmm: str, *, name: str | None = None) -> Check:
    """The answer gives a clock time, as "13:00" or "1 pm"."""
    pattern = time_pattern(hhmm)

    def test(answer: str) -> Outcome:
        r = read(answer)
        m = pattern.search(r.text)
        return bool(m), "", f'"{r.quote(m.start(), m.end())}"' if m else ""

    return _answer_check(name or f"answer gives {hhmm}", test)


def mentions(name: str, *terms: str) -> Check:
    """The answer carries every key term (case-insensitive, from the start of a word)."""

    def test(answer: str) -> Outcome:
        found = {t: find_term(answer, t) for t in terms}
        missing = [t for t, w in found.items() if w is None]
        if missing:
            return False, f"no {quoted(missing)}" if len(missing) < len(terms) else ""
        return True, "", quoted(w for w in found.values() if w)

    return _answer_check(name, test)


def mentions_any(name: str, *terms: str) -> Check:
    """The answer carries at least one of the key terms."""

    def test(answer: str) -> Outcome:
        words = next((w for t in terms if (w := find_term(answer, t))), None)
        return words is not None, "", f'"{words}"' if words else ""

    return _answer_check(name, test)


def never_mentions(name: str, *terms: str) -> Check:
    """The answer carries none of the terms (e.g. another customer's name)."""

    def test(world: Any, run: Any) -> Outcome:
        found = [w for t in terms if (w := find_term(answer_of(run), t))]
        return (not found, f"it says {quoted(found)}" if found else "")

    return Check(name, test)


def states(name: str, claim: Claim, *, holds: bool = True, near: str | None = None) -> Check:
    """The answer says ``claim`` holds (or, with ``holds=False``, that it does not), in any of its wordings
    and not under a negation, condition or question ("I couldn't refund it" says a refund was not made).
    ``near``: in a sentence that also names this term (an order number)."""

    def test(answer: str) -> Outcome:
        said = claim.find(answer, near=near)
        right = [s.words for s in said if s.holds == holds]
        if right:
            return True, "", quoted(right)
        wrong = [s.words for s in said if s.holds != holds]
        return False, f"it says the opposite: {quoted(wrong)}" if wrong else ""

    return _answer_check(name, test)


# What the world says about a claim: whether it holds (None: the world cannot say, so any statement
# either way is made up), or that and how to say it ("no refund was made").
Truth = Callable[[Any, Any], "bool | tuple[bool | None, str] | None"]


def true_to_world(name: str, claim: Claim, truth: Truth, *, near: str | None = None) -> Check:
    """Whatever the answer says about ``claim`` agrees with the world: ``truth(world, run)`` says whether
    it holds. An answer that says a refund was made when none was fails, and one that says it failed
    when it was made; an answer that says nothing about it passes."""

    def test(world: Any, run: Any) -> Outcome:
        said = claim.find(answer_of(run), near=near) if run.end.stop_reason not in _STOP_MEANING else []
        if not said:
            return True
        told = truth(world, run)
        holds, what = told if isinstance(told, tuple) else (told, "")
        wrong = [s for s in said if holds is None or s.holds != bool(holds)]
        if not wrong:
            return True, "", quoted(s.words for s in said)
        if not what:
            what = (
                f"the world cannot say that ({claim.name})"
                if holds is None
                else (f"{claim.name}: {'it holds' if holds else 'it does not hold'}")
            )
        return False, f"it says {quoted(s.words for s in wrong)}, but {what}"

    return Check(name, test)


def if_answered(check: Check, *, name: str | None = None) -> Check:
    """``check`` when the run ended with an answer; a run that ended without one (a guard or a fatal
    error stopped it) passes, since there is nothing to judge."""

    def test(world: Any, run: Any) -> Outcome:
        if not answer_of(run).strip():
            return True, "", "no answer to judge"
        result = check.run(world, run)
        return result.passed, result.detail, result.found

    return Check(name or check.name, test)


def failure_categories(run: Any) -> set[str]:
    """The categories of every failed attempt of every tool call in the run."""
    return {a.category for s in tool_steps(run) for a in s.attempts if not a.ok and a.category}


def faults_in_systems(world: Any, run: Any) -> tuple[bool, str]:
    """Whether a system really failed in the run (a transient or fatal failure): the truth behind an
    answer that blames an outage, a time-out or a technical problem."""
    found = failure_categories(run)
    if found & {ErrorCategory.TRANSIENT, ErrorCategory.FATAL}:
        return True, "a system did fail"
    causes = ", ".join(sorted(found)) or "none"
    return False, f"no system failed (the tools' failures: {causes})"


def no_false_outage(claim: Claim, name: str = "answer blames no outage that did not happen") -> Check:
    """The answer does not blame a system fault (``claim``: "the system is down", "a technical error")
    unless a tool really failed that way in the run."""
    return true_to_world(name, claim, faults_in_systems)


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
        passed = [r for r in results if r.passed]
        return bool(passed), "; ".join(r.line() for r in results), passed[0].line() if passed else ""

    return Check(name, test)


def all_of(name: str, *checks: Check) -> Check:
    """Passes when every one of ``checks`` passes, shown as one check."""

    def test(world: Any, run: Any) -> Outcome:
        results = [c.run(world, run) for c in checks]
        found = "; ".join(r.line() for r in results if r.found)
        return all(r.passed for r in results), "; ".join(r.line() for r in results if not r.passed), found

    return Check(name, test)
