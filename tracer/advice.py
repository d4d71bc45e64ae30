"""Advice per tool: which retry settings the outcomes observed support, and how sure the data lets us be.

Read from a tool's summed rollups (``ToolDay`` and its ``FindingDay`` rows over the runs in scope),
never from a rule of thumb alone: each piece of advice says what was seen (how many transient
failures, how often a second and a third attempt succeeded, with the 95 % Wilson interval of each
rate from ``tracer.stats``), the setting it points to, and how sure it is:

- ``sure``: the decision is the same at both ends of the interval;
- ``likely``: the observed rate decides, but the interval reaches across the line;
- ``too few``: fewer than ``MIN_TRIES`` tries were seen, so the data says nothing yet (and the advice
  says so instead of guessing).

The line a further attempt must clear is ``WORTH_TRYING``: it is worth making when it succeeds at least
one time in ten. A refusal (validation, permission, business, or a failure that said it is not
retryable) retried is advice without a rate: no retry can change its answer, which is what the
category means, so the count of such retries is all the evidence needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .stats import Interval, wilson_interval

MIN_TRIES = 20  # fewer tries than this and a success rate says nothing yet
WORTH_TRYING = 0.10  # a further attempt is worth making when it succeeds at least this often

SURE, LIKELY, TOO_FEW = "sure", "likely", "too few"


@dataclass(frozen=True)
class Rate:
    """``ok`` successes out of ``n`` tries, with its 95 % interval."""

    ok: int
    n: int

    @property
    def interval(self) -> Interval:
        return wilson_interval(self.ok, self.n)

    @property
    def pct(self) -> int:
        return round(100 * self.ok / self.n) if self.n else 0

    def said(self) -> str:
        """ "91 % (95 % interval 86–94 %, 212 tries)"."""
        i = self.interval
        tries = f"{self.n} tr{'y' if self.n == 1 else 'ies'}"
        return f"{self.pct} % (95 % interval {i.low_pct}–{i.high_pct} %, {tries})"

    def worth(self) -> tuple[bool, str]:
        """Whether a try at this rate is worth making, and how sure that is."""
        if self.n < MIN_TRIES:
            return self.ok / self.n >= WORTH_TRYING if self.n else False, TOO_FEW
        i = self.interval
        worth = self.ok / self.n >= WORTH_TRYING
        sure = i.low >= WORTH_TRYING if worth else i.high < WORTH_TRYING
        return worth, SURE if sure else LIKELY


@dataclass(frozen=True)
class Advice:
    """One thing to change on a tool: what was seen, the setting, and how sure it is."""

    tool: str
    seen: str  # what the runs show, with its numbers
    setting: dict[str, Any]  # the policy setting(s) it points to (empty: a change to the tool itself)
    sureness: str  # SURE, LIKELY or TOO_FEW
    why: str  # why this follows from what was seen

    @property
    def setting_said(self) -> str:
        return ", ".join(f"{k}: {_value(v)}" for k, v in self.setting.items())


def _value(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def transient_advice(tool: str, counts: dict[str, int]) -> Advice | None:
    """``max_attempts`` from how often the second and third attempts after a transient failure worked."""
    failures = counts.get("transient_first", 0)
    if not failures:
        return None
    second = Rate(counts.get("second_ok", 0), counts.get("second_tries", 0))
    third = Rate(counts.get("third_ok", 0), counts.get("third_tries", 0))
    head = f"{tool}: {failures} transient failure{'s' if failures != 1 else ''}"
    if not second.n:
        return Advice(
            tool,
            f"{head}, none tried again by the harness",
            {"retry_on": "transient", "max_attempts": 2},
            TOO_FEW,
            "no retry was observed, so how often one succeeds is not known: retry in code as lesson 001 says "
            "(the model never sees a blip unless retries run out), then let this page measure it",
        )
    worth_second, sure_second = second.worth()
    if not worth_second:
        return Advice(
            tool,
            f"{head}; a second attempt succeeded in {second.said()}",
            {"max_attempts": 1},
            sure_second,
            "a retry of this tool almost never helps: each one is a wasted call and a wait; send the failure "
            "to the model at once (or fix what makes it fail)",
        )
    seen = f"{head}; a second attempt succeeded in {second.said()}"
    if not third.n:
        return Advice(
            tool,
            seen + ("; a third was never needed" if second.ok == second.n else "; no third attempt was observed"),
            {"max_attempts": 2},
            sure_second if sure_second != SURE else LIKELY,
            "every second attempt succeeded, so these runs never needed a third"
            if second.ok == second.n
            else "a second attempt pays; whether a third would is not known from these runs",
        )
    worth_third, sure_third = third.worth()
    seen += f", a third in {third.said()}"
    if worth_third:
        return Advice(
            tool,
            seen,
            {"max_attempts": 3},
            sure_third,
            "a third attempt still succeeds often enough to make",
        )
    return Advice(
        tool,
        seen,
        {"max_attempts": 2},
        sure_third,
        "the third attempt rarely succeeds: it is a wasted call and a wait on most failures",
    )


def refusal_advice(tool: str, counts: dict[str, int], finding: dict[str, int] | None) -> Advice | None:
    """``retry_on: transient`` when the harness retried refusals, from the retried-refusal findings."""
    if not finding or not finding.get("findings"):
        return None
    runs, wasted = finding.get("runs", 0), finding.get("wasted_calls", 0)
    tries = 1 + wasted / finding["findings"]
    by = [
        f"{name} {counts.get(f'failed_{name}', 0)}"
        for name in ("validation", "permission", "business")
        if counts.get(f"failed_{name}", 0)
    ]
    what = "refusals" + (f" ({', '.join(by)})" if by else "")
    harness = counts.get("refusals_retried", 0)
    setting = {"retry_on": "transient"} if harness else {"error_format": "structured"}
    who = (
        f"the harness retried {harness} of them"
        if harness
        else "the model sent them again (the harness did not retry them)"
    )
    return Advice(
        tool,
        f"{tool}: {what} tried {tries:.1f}× on average in {runs} run{'s' if runs != 1 else ''}; {who}",
        setting,
        SURE,
        "a refusal's answer cannot change on a retry, which is what its category says: every retry of one is "
        "wasted"
        + ("" if harness else "; the model repeats it when the result does not say it is final (isRetryable false)"),
    )


def empty_advice(tool: str, counts: dict[str, int], finding: dict[str, int] | None) -> Advice | None:
    if not finding or not finding.get("findings"):
        return None
    return Advice(
        tool,
        f"{tool}: nothing found was sent as a failure or retried in {finding.get('runs', 0)} run"
        f"{'s' if finding.get('runs', 0) != 1 else ''} ({counts.get('empty', 0)} calls found nothing)",
        {"empty_is_error": False},
        SURE,
        "nothing found is a valid answer: return it with no error flag, and it is answered once",
    )


def tool_advice(tool: str, counts: dict[str, int], findings: dict[str, dict[str, int]]) -> list[Advice]:
    """Every piece of advice the counts support for ``tool`` (``findings``: its FindingDay sums by kind)."""
    out = [
        transient_advice(tool, counts),
        refusal_advice(tool, counts, findings.get("retried-refusal")),
        empty_advice(tool, counts, findings.get("empty-as-error")),
    ]
    return [a for a in out if a is not None]
