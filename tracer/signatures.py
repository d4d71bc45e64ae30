"""A guard stop's signature: what makes two stops "identical", so that one review may cover them all.

The signature is the run's scenario, policy and stop reason, and the tool and error of its last step
when that step is a failing tool call (the last failed attempt's category and message, or for a step
recorded without attempts its category and what it returned). ``Run.stop_signature`` keeps a short
hash of it (``signature_key``), written with the run's findings when it ends (``tracer/diagnosis.py``),
so the stop queue counts identical stops through an index instead of reading every stop's last step.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .divergence import canonical

GUARD_STOPS = ("consecutive_errors", "max_steps")  # Run.GUARD_STOPS' values (migrations import this module)
StopSignature = tuple[str, str, str, str, str]
# The last step's columns the signature reads, in ``failing_call``'s order.
SIGNATURE_STEP_FIELDS = ("kind", "tool_name", "is_error", "category", "attempts", "result_content")


def failing_call(
    kind: str, tool_name: str, is_error: bool, category: str, attempts: list | None, result_content: Any
) -> tuple[str, str]:
    """(tool, error) of a failing tool call: the last failed attempt's category and message, or for a
    step recorded without attempts (imported) its category and what it returned; blank otherwise."""
    if kind != "tool_use" or not is_error:
        return ("", "")
    failed = [a for a in attempts or [] if not a.get("ok")]
    if failed:
        return (tool_name, f"{failed[-1].get('category') or ''}: {failed[-1].get('message') or ''}")
    return (tool_name, f"{category}: {canonical(result_content)}")


def stop_signature(scenario: str, policy_name: str, stop_reason: str, last_step: tuple | None) -> StopSignature:
    """The signature of a run that ended with ``last_step`` (its ``SIGNATURE_STEP_FIELDS``; ``None``: no step)."""
    call = failing_call(*last_step) if last_step else ("", "")
    return (scenario, policy_name, stop_reason, *call)


def event_fields(step: Any) -> tuple:
    """An ``agents.events.StepEvent``'s ``SIGNATURE_STEP_FIELDS``, blank where the row stores blank."""
    attempts = [a.to_dict() for a in step.attempts]
    return (step.kind, step.tool_name or "", step.is_error, step.category or "", attempts, step.result_content)


def signature_key(signature: StopSignature) -> str:
    """The signature as ``Run.stop_signature`` keeps it: 16 hex digits of its SHA-256."""
    text = json.dumps(list(signature), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def stop_key(scenario: str, policy_name: str, stop_reason: str, last_step: tuple | None) -> str | None:
    """``Run.stop_signature`` of a run that ended so: the key for a guard stop, ``None`` for any other run."""
    if stop_reason not in GUARD_STOPS:
        return None
    return signature_key(stop_signature(scenario, policy_name, stop_reason, last_step))
