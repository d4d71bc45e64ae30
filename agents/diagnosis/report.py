"""Findings as text: what ``python -m agents run`` prints after a run's verdict, and the CLI's text format."""

from __future__ import annotations

from collections.abc import Sequence

from ..prices import format_money
from .kinds import BY_KEY
from .rules import Finding


def format_finding(f: Finding, *, head: str = "") -> str:
    """A finding in a few lines: kind and steps, what happened, the evidence, the fix, the rewrite, the cost."""
    steps = ", ".join(str(s) for s in f.steps)
    lines = [f"{head}[{f.kind}] {BY_KEY[f.kind].title} · {f.tool} · step{'s' if len(f.steps) > 1 else ''} {steps}"]
    lines.append(f"    {f.message}")
    lines.append(f"    evidence: {f.evidence}")
    lines.append(f"    fix: {f.fix}")
    if f.rewrite:
        lines.append(f"    rewrite: {f.rewrite!r}")
    if f.wasted_calls or f.wasted_tokens:
        said = [f"{f.wasted_calls} wasted tool call{'s' if f.wasted_calls != 1 else ''}"]
        if f.wasted_ms >= 1:
            said.append(f"{f.wasted_ms / 1000:.2f} s")
        if f.wasted_tokens:
            said.append(f"{f.wasted_tokens:,} model tokens, {format_money(f.cost)} ({f.price_basis})")
        else:
            said.append("no model tokens (the harness retried without the model)")
        lines.append("    cost: " + ", ".join(said))
    if f.basis:
        lines.append(f"    from: {f.basis}")
    lines.append(f"    lesson: {f.lesson}")
    return "\n".join(lines)


def format_findings(findings: Sequence[Finding]) -> str:
    if not findings:
        return "findings: none"
    body = "\n".join(format_finding(f) for f in findings)
    return f"findings: {len(findings)}\n{body}"
