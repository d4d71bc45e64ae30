"""Lesson 002's workshop checks, run on a policy module: every built-in scenario under it, then what held.

``check_policy(module)`` runs each scenario of the lessons' pack (``agents.lessons``) with the
simulated model under the module's ``fail`` and ``should_retry`` (the structured harness's attempts,
backoff and guards otherwise), and reads every tool call the runs made, sub-agents' too:

- every failure has ``isError: true``, an ``errorCategory`` (the failure's), an ``isRetryable`` flag
  and the tool's message in ``error.message``;
- only transient failures are retried (a refusal, a bad input or nothing found is tried once);
- a transient failure is retried, which needs ``isRetryable`` inside the result's ``error``, where
  the harness hands ``should_retry`` the error (lesson 002's nested flag read right);
- an empty result is no error: nothing found goes to the model with no error and an empty list;
- every scenario ran: the module's functions raised nothing and returned JSON.

Each check that fails says which scenario, step and tool showed it and why. ``manage.py
check_policy MODULE`` prints them and exits 1 when one fails.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .events import ListRecorder, StepEvent
from .loop import RunResult
from .policies import code_policy
from .vocabulary import ErrorCategory, ModelBackendName, StepKind, StopReason

BUILTIN = "agents.lessons"


@dataclass
class CheckResult:
    """One check: whether it held, over how many cases, and each case where it did not."""

    title: str
    seen: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        return not self.problems


@dataclass
class PolicyReport:
    module: str
    path: str
    sha256: str
    scenarios: list[str]
    passed: int  # scenarios whose judge passed the run
    checks: list[CheckResult]

    @property
    def holds(self) -> bool:
        return all(c.holds for c in self.checks)


def _short(value: Any, limit: int = 90) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _steps(result: RunResult, where: str) -> Iterator[tuple[str, StepEvent]]:
    for step in result.steps:
        if step.kind == StepKind.TOOL_USE and step.attempts:
            yield where, step
    for child in result.children:
        yield from _steps(child, f"{where} › {child.label or child.start.scenario}")


def _failure_problems(result: Any, category: str, message: str) -> list[str]:
    """What a failure's result lacks of lesson 002's shape."""
    lacks: list[str] = []
    if not isinstance(result, dict):
        return [f"is {type(result).__name__}, not an object with isError and error"]
    if result.get("isError") is not True:
        lacks.append("no isError: true")
    error = result.get("error")
    if not isinstance(error, dict):
        return [*lacks, "no error object (errorCategory, isRetryable, message)"]
    if "errorCategory" not in error:
        lacks.append("no errorCategory")
    elif error["errorCategory"] != category:
        lacks.append(f"errorCategory {error['errorCategory']!r} for a {category} failure")
    if not isinstance(error.get("isRetryable"), bool):
        lacks.append("no isRetryable (a retry hint)" if "isRetryable" not in error else "isRetryable is not true/false")
    said = error.get("message")
    if not isinstance(said, str) or message not in said:
        lacks.append(
            f"its message {_short(said, 40)!r} is not the tool's ({message!r})" if said is not None else "no message"
        )
    return lacks


def _has_empty_list(result: Any) -> bool:
    if result == []:
        return True
    return isinstance(result, dict) and any(v == [] for v in result.values())


def check_policy(module: str, *, listed: bool = False) -> PolicyReport:
    """Run every built-in scenario under ``module`` and judge lesson 002's checks (module docstring).

    ``listed``: the module must be one ``RLT_POLICY_PACKS`` names. ``PolicyError`` when it cannot be
    loaded or lacks ``fail`` or ``should_retry``.
    """
    import importlib

    from .run import run_scenario

    policy = code_policy(module, listed=listed)
    code = policy.policy_code
    assert code is not None
    scenarios = list(importlib.import_module(BUILTIN).PACK.scenarios)
    shape = CheckResult("every failure has isError, a category, a retry hint and the message")
    only_transient = CheckResult("only transient failures are retried")
    nested = CheckResult("a transient failure is retried (isRetryable read inside the error)")
    empty = CheckResult("an empty result is no error")
    ran = CheckResult("every scenario ran under it")
    passed = 0
    for scenario in scenarios:
        result = run_scenario(scenario, policy, model=ModelBackendName.SIMULATED, recorder=ListRecorder())
        ran.seen += 1
        if result.end.stop_reason == StopReason.CRASHED:
            ran.problems.append(f"{scenario.name}: crashed: {_short(result.end.error or '', 200)}")
        if result.end.verdict is not None and result.end.verdict.passed:
            passed += 1
        for where, step in _steps(result, scenario.name):
            at = f"{where} step {step.index} {step.tool_name}"
            first, tries = step.attempts[0], len(step.attempts)
            shape.seen += any(not a.ok for a in step.attempts)
            for attempt in step.attempts:
                if attempt.ok:
                    continue
                content = attempt.result_content
                if content is None:  # a fatal failure stops the run before a tool_result is sent
                    content = code.fail(str(attempt.category), attempt.message or "")
                lacks = _failure_problems(content, str(attempt.category), attempt.message or "")
                if lacks:
                    shape.problems.append(f"{at}: {_short(content, 60)} has {'; '.join(lacks)}")
                    break
            if first.ok and first.empty:
                empty.seen += 1
                last = step.attempts[-1]
                if step.is_error or not _has_empty_list(last.result_content):
                    made = "an error" if step.is_error else "no empty list"
                    again = f", tried {tries} times" if tries > 1 else ""
                    empty.problems.append(
                        f"{at}: nothing found became {made} ({_short(last.result_content, 60)}){again}"
                    )
            if first.ok and not first.empty:
                continue
            if first.ok or first.category != ErrorCategory.TRANSIENT:
                only_transient.seen += 1
                if tries > 1:
                    what = "an empty result" if first.ok else f"a {first.category} failure"
                    only_transient.problems.append(f"{at}: {what} was tried {tries} times")
                continue
            if step.attempts[-1].ok or policy.max_attempts < 2:
                nested.seen += 1
                continue
            nested.seen += 1
            if tries == 1:
                content = first.result_content if isinstance(first.result_content, dict) else {}
                error = content.get("error")
                if isinstance(error, dict) and error.get("isRetryable") is True:
                    why = (
                        "should_retry(result['error']) said no although that error says isRetryable: true; "
                        "it reads the flag somewhere else"
                    )
                elif content.get("isRetryable") is True:
                    why = (
                        "isRetryable sits at the top of the result, not inside its error, which is what the "
                        "harness hands should_retry"
                    )
                else:
                    why = f"its result says no retry can help ({_short(first.result_content, 60)})"
                nested.problems.append(f"{at}: a transient failure was tried once: {why}")
    return PolicyReport(
        module=module,
        path=code.path,
        sha256=code.sha256,
        scenarios=[s.name for s in scenarios],
        passed=passed,
        checks=[shape, only_transient, nested, empty, ran],
    )


def report_lines(report: PolicyReport, *, most: int = 6) -> list[str]:
    """The report as ``./workshop check`` prints it: a line per check, then each case where it failed."""
    lines = [
        f"{report.module} ({report.path}, sha256 {report.sha256[:12]}): {len(report.scenarios)} built-in scenarios, "
        f"simulated model; the judge passed {report.passed} of them"
    ]
    for check in report.checks:
        mark = "✓" if check.holds else "✗"
        count = f"{check.seen - len(check.problems)} of {check.seen} hold" if check.seen else "nothing to check"
        lines.append(f"{mark} {check.title} ({count})")
        for problem in check.problems[:most]:
            lines.append(f"    {problem}")
        if len(check.problems) > most:
            lines.append(f"    … and {len(check.problems) - most} more")
    failing = [c for c in report.checks if not c.holds]
    lines.append("All checks hold." if not failing else f"{len(failing)} of {len(report.checks)} checks fail.")
    return lines
