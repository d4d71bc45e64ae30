"""The stop queue's card written in Python (``stop_card``): the stopped run, the failing calls that tripped
its guard, the same scenario's run under another policy, and the run's review panel.

The queue shows twenty cards; written in Python, they skip the template's per-tag, filter and include
work, which would be most of the page's time. As in ``tracer_tags.run_row``, every text from a run or its
steps goes through ``escape`` (the stdlib's, quotes included) or ``previews.preview``, numbers are
``int``s, and only the finished string is marked safe.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django import template
from django.template.loader import get_template
from django.urls import get_script_prefix, reverse
from django.utils.safestring import SafeString

from .review_tags import review_panel
from .timeline_tags import _truncate, step_value_preview
from .tracer_tags import STOP_LABELS, _badge, _run_url, _stop_cell, failures, inline_json
from .tracer_tags import _escape as e

register = template.Library()


@cache
def _compare_url(prefix: str) -> str:
    """The compare page's URL under this script prefix, escaped (one ``reverse`` per process)."""
    return e(reverse("tracer:compare"))


def _stop(run: Any) -> str:
    reason = run.stop_reason or ""
    return f'<span class="stop {e(reason)}">{e(STOP_LABELS.get(reason, reason))}</span>'


def _attempts(count: int) -> str:
    return f' <span class="muted">({int(count)} attempts)</span>' if count > 1 else ""


def _calls(case: Any) -> str:
    """The failing calls that tripped the guard, each with its distinct errors and what the model saw."""
    calls = case.calls
    if not calls:
        return ""
    run, errors = case.run, len(case.errors)
    if run.stop_reason == "max_steps":
        said = f"It used every step it was allowed; the last {errors} failed in a row:"
    else:
        said = f"The {errors} error{'' if errors == 1 else 's'} in a row that tripped it:"
    items = []
    for call in calls:
        lines = "".join(
            f'<div class="err-line"><span class="badge outcome fail">{e(label)}</span> '
            f"{step_value_preview(message, run.pk, index, 'message', attempt=position)}{_attempts(count)}</div>"
            for label, message, count, index, position in call.errors
        )
        saw = e(_truncate(inline_json(call.model_saw), 200))
        items.append(
            f'\n        <li>\n          <code class="call">{e(call.tool_name)}('
            f"{step_value_preview(inline_json(call.input), run.pk, call.index, 'input')})</code> "
            f'<span class="times">× {int(call.times)}</span>\n          {lines}\n'
            f'          <div class="err-line muted small">the model saw: <code>{saw}</code></div>\n'
            "        </li>\n        "
        )
    return (
        f'\n      \n      <p class="muted small">{said}</p>\n      \n'
        f'      <ul class="guard-errors failing-calls">\n        {"".join(items)}\n      </ul>\n      '
    )


def _other(run: Any, other: Any, run_url: str) -> str:
    """The same scenario's run under another policy, how it was paired, and a link comparing the two."""
    if other is None:
        return '<p class="muted">No run of this scenario under another policy yet.</p>'
    pk = int(other.pk)
    stop = _stop_cell(other)
    verdict = f'<span class="verdict {e(other.verdict)}">{e(other.verdict)}</span>' if other.verdict else ""
    answer = (
        f'<blockquote class="answer small">{e(_truncate(other.final_answer, 280))}</blockquote>'
        if other.final_answer
        else ""
    )
    return (
        f'\n      <p><a href="{e(run_url.format(pk))}">Run #{pk}</a> under <strong>{e(other.policy_name)}</strong> '
        f'{_badge(other)} <span class="pairing muted small">paired by: {e(other.pairing)}</span></p>\n'
        f"      <p>{stop}\n         {verdict}\n"
        f'         <span class="muted">{int(other.tool_call_count)} tool calls, {e(failures(other))}</span></p>\n'
        f"      {answer}\n"
        f'      <a class="button small" href="{_compare_url(get_script_prefix())}?a={int(run.pk)}&amp;b={pk}">'
        "compare</a>\n      "
    )


@register.simple_tag(takes_context=True)
def stop_card(context: template.Context, case: Any) -> SafeString:
    """One card of the stop queue (its ``<article id="stop-N">``), made in one call: the run and why it
    stopped, the model judge's verdict when the two judges disagree, the failing calls, the other
    policy's run, and the review panel (``review_tags.review_panel``) with the identical stops it may
    cover too."""
    run = case.run
    pk = int(run.pk)
    run_url = _run_url(get_script_prefix())
    guard = f" — guard: <strong>{e(run.guard)}</strong>" if run.guard else ""
    with context.push(run=run, other=case.other, identical=case.identical):
        judges = ""
        if run.judges_disagree:
            judges = get_template("tracer/review.html#model-verdict").render(context.flatten())
        review = review_panel(context, run)
    return SafeString(  # every value above is escaped, an int, or HTML made so
        f'\n<article class="stop-case card" id="stop-{pk}" tabindex="-1" data-card>\n'
        '  <div class="stop-grid">\n    <div>\n'
        f'      <h2><a href="{e(run_url.format(pk))}" data-card-link>Run #{pk}</a> · '
        f"{e(run.scenario or 'unknown')} under <strong>{e(run.policy_name or 'unknown')}</strong> {_badge(run)}</h2>\n"
        f'      <p>{_stop(run)}{guard} <span class="muted">after {int(run.step_count)} steps, '
        f"{e(failures(run))}</span></p>\n"
        f"      {judges}\n"
        f"      \n      {_calls(case)}\n      \n"
        '    </div>\n    <div class="beside">\n      <h3>Same scenario, another policy</h3>\n'
        f"      {_other(run, case.other, run_url)}\n    </div>\n  </div>\n"
        f"  \n\n{review}\n\n</article>\n"
    )
