"""The compare page's aligned rows written in Python: one row's two steps and their attempts side by
side, its ``<div class="pair" id="row-N">`` (``compare_pair``).

Through the template's partials the 50 rows of a short compare or of a gap would cost more than the
rest of the page (docs/performance.md); one call per row writes the same
elements. As in ``timeline_tags.step_item``, every text from a trace goes through ``escape`` (the
stdlib's, quotes included) or ``linebreaksbr`` with autoescaping, numbers are ``int``s or formatted
floats, and only the finished string is marked safe.
"""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from agents.vocabulary import StepKind
from tracer.divergence import Outcome, StepRow
from tracer.previews import preview, preview_cut

from .timeline_tags import _plain, _text, model_call
from .tracer_tags import _escape, fixed, inline_json

register = template.Library()
e = _escape
SPLIT_LABEL = '<p class="split-label" id="split">This is where the runs split</p>'


@register.simple_tag(takes_context=True)
def compare_pair(context: template.Context, row: StepRow) -> SafeString:
    """One aligned row: each run's step (or why it has none) and, attempt by attempt, each outcome as
    its policy reported it, the split and the cause marked. Reads ``a``, ``b`` (the runs) and ``d``
    (their ``Divergence``) from the context."""
    run_a, run_b, divergence = context["a"], context["b"], context["d"]
    paths = context.render_context.get("compare_value_paths")
    if paths is None:  # where each run's show-all controls ask (views.step_value): runs/<pk>/steps/
        paths = context.render_context["compare_value_paths"] = tuple(
            f"{reverse('tracer:run', args=[run.pk])}steps/" for run in (run_a, run_b)
        )
    css = "pair" + " is-split" * row.is_split + " has-cause" * row.is_cause + " has-gap" * row.is_gap
    parts = [f'<div class="{css}" id="row-{int(row.number)}">']
    if row.is_split and not divergence.split.attempt:
        parts.append(SPLIT_LABEL)
    parts.append(
        f'<div class="line head">\n{_head(row.left, row.left_ended, run_a, paths[0])}\n'
        f"{_head(row.right, row.right_ended, run_b, paths[1])}\n</div>"
    )
    for attempt in row.attempts:
        if attempt.is_cause:
            left, right = e(preview_cut(attempt.left_outcome.label)), e(preview_cut(attempt.right_outcome.label))
            parts.append(f'<p class="cause-label">Cause: this outcome differed — {left} against {right}</p>')
        if attempt.is_split:
            parts.append(SPLIT_LABEL)
        line = "line attempt-line" + " is-split" * attempt.is_split + " is-cause" * attempt.is_cause
        parts.append(
            f'<div class="{line}">\n{_cell(attempt.left, attempt.left_outcome, row.left, row.left_stopped, paths[0])}\n'
            f"{_cell(attempt.right, attempt.right_outcome, row.right, row.right_stopped, paths[1])}\n</div>"
        )
    parts.append("</div>")
    return mark_safe("\n".join(parts))  # every value from the trace above is escaped, or an int


def _head(step: dict | None, ended: bool, run: Any, steps_path: str) -> str:
    """One side's step: its index, and the tool and input, the final answer or the model's stop; or,
    where the run has no step, why (not there yet, ended and how, or only not aligned here). Its long
    values show their start, the rest under ``steps_path`` (``views.step_value``)."""
    if step is None:
        if ended and run.is_active:
            note = f"no step yet: the run is still {e(run.status)}"
        elif ended:
            how = run.guard or (run.get_stop_reason_display() or "").lower() or "stop reason unknown"
            note = f"no such step: the run had ended ({e(how)})"
        else:
            note = "no such step"
        return f'<div class="cell gap">\n<span class="gap-note">{note}</span>\n</div>'
    index = f'<span class="idx">{_text(step.get("index"))}</span>'
    kind, tool, text = step.get("kind"), step.get("tool_name"), step.get("text")
    values = f"{steps_path}{int(step.get('index'))}/"
    if kind == StepKind.FINAL_ANSWER:
        answer = preview(text or "", url=f"{values}text/", lines=True)
        what = f'{index} <strong>Final answer</strong>\n<blockquote class="answer">{answer}</blockquote>'
    elif kind == StepKind.MODEL_STOP:
        what = f"{index} <strong>Model stopped</strong> (stop_reason {e(step.get('api_stop_reason') or 'unknown')})"
        if tool:
            what += f' <code class="tool">{e(tool)}</code> <span class="badge err">not executed</span>'
        if text:
            what += f'\n<p class="said">{preview(text, url=f"{values}text/")}</p>'
    else:
        given = preview(inline_json(step.get("input")), url=f"{values}input/")
        call = f'<code class="tool">{e(tool)}</code> <code class="input">{given}</code>'
        what = f"{index} {call}"
    calls = step.get("model_attempts") or []
    if len(calls) > 1:  # a call retried or continued: each attempt (one that went through at once: nothing)
        what += "\n" + model_call(calls, value_path=values)
    return f'<div class="cell">\n{what}\n</div>'


def _cell(attempt: dict | None, outcome: Outcome | None, step: dict | None, stopped: str, steps_path: str) -> str:
    """One side of an attempt line: the attempt's number, outcome and backoff, or why there is none."""
    if attempt:
        number = attempt.get("number", "")
        again = isinstance(number, int | float) and number > 1
        place = list(step.get("attempts") or []).index(attempt) + 1 if step is not None else 0
        url = f"{steps_path}{int(step.get('index')) if step else 0}/attempt-{place}-message/"
        parts = [
            f'<span class="n">{"Retry · attempt" if again else "Attempt"} {_text(number)}</span>',
            f'<span class="badge outcome {"ok" if outcome.ok else "fail"}">{preview(outcome.label, url=url)}</span>',
        ]
        if outcome.detail:
            parts.append(f'<span class="msg">{preview(_plain(outcome.detail), url=url)}</span>')
        if attempt.get("backoff_s"):
            parts.append(f'<span class="meta">after {fixed(attempt["backoff_s"], 3)} s backoff</span>')
        return '<div class="cell">\n' + "\n".join(parts) + "\n</div>"
    if step is not None and step.get("kind") == StepKind.MODEL_STOP:
        note = "nothing executed: the model's turn stopped the run"
    elif stopped:
        note = f"no retry: {e(stopped)} ended the run here, and no result went to the model"
    elif step is not None:
        note = "no retry: the result went back to the model"
    else:
        return '<div class="cell gap">\n</div>'
    return f'<div class="cell gap">\n<span class="gap-note">{note}</span>\n</div>'
