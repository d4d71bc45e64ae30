"""Display helpers. Everything from a trace is escaped: by autoescaping, or (``run_row``, ``filter_widget``) by
``escape``/``format_html`` on each value before the row is marked safe; no helper marks raw trace data safe."""

from __future__ import annotations

import html
import json
from functools import cache, lru_cache
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote, urlencode

import orjson
from django import forms, template
from django.forms import BoundField
from django.http import QueryDict
from django.template.loader import get_template
from django.urls import get_script_prefix, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import capfirst
from django.utils.timezone import get_current_timezone

from agents.events import failures_words
from agents.prices import format_money
from agents.vocabulary import ErrorFormat, ModelBackendName
from tracer.divergence import attempt_outcome
from tracer.json_tree import json_tree as _json_tree
from tracer.models import Run
from tracer.waterfall import duration_text, seconds_text

register = template.Library()
SIMULATED_TITLE = "deterministic simulated model, not Claude"


@register.filter
def as_json(value: Any) -> str:
    """Indented JSON as plain text (escaped by the template like any other string). orjson indents in
    C; ``json.dumps(indent=2)`` drops to the standard library's pure-Python encoder (a 500-step run's
    page spent a third of its time there). What orjson refuses (an integer beyond 64 bits, a key that
    is not a string) goes to ``json``."""
    if isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS, default=str).decode()
    except TypeError:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


@register.filter
def json_tree(value: Any) -> SafeString:
    """A JSON value as a collapsible, escaped and bounded tree (``tracer.json_tree``)."""
    return _json_tree(value)


@register.filter
def outcome(attempt: dict, policy_settings: dict | None = None) -> str:
    """An attempt's outcome as the harness saw it under the run's policy: ok, empty result, bare
    "Error", the message, or category · retryable."""
    settings = policy_settings or {}
    error_format = settings.get("error_format", "")
    label = attempt_outcome(
        attempt, error_format=error_format, empty_is_error=bool(settings.get("empty_is_error"))
    ).label
    # The message format's label repeats the message, which the row shows beside it.
    return "error" if error_format == ErrorFormat.MESSAGE and label.startswith("error: ") else label


# How the badge names the path an imported run came by (``Run.Source``, ``agent`` aside).
IMPORTED_VIA = {"import": "file", "otlp": "OTLP", "api": "API"}


@register.filter
def backend_text(run: Any) -> str:
    """The badge's words as plain text, where no badge fits (a picker's option): "simulated",
    "imported · file", "claude · claude-haiku-4-5"."""
    if run.source != "agent" or run.model_backend == "imported":
        via = IMPORTED_VIA.get(run.source, run.source)
        return f"imported · {via}" + (f" · {run.model_name}" if run.model_name else "")
    if run.model_backend == ModelBackendName.SIMULATED:
        return "simulated"
    return f"{run.model_backend} · {run.model_name}" if run.model_name else run.model_backend


@register.simple_tag
def backend_badge(run: Any) -> str:
    """The model backend; a simulated run says so wherever it is shown, and so does an imported one
    (with the path it came by and the model it names): it was not executed here."""
    return SafeString(_badge(run))  # escaped in _badge


def _badge(run: Any) -> str:
    """``backend_badge``'s HTML as a plain string, each value escaped with ``_escape`` (each runs list row
    has one, and ``format_html`` would be a large share of the rows' time); the same four columns make
    the same badge, so it is kept for them (``_badge_of``)."""
    return _badge_of(run.source, run.model_backend, run.model_name, run.source_detail)


@lru_cache(maxsize=1024)
def _badge_of(source: str, model_backend: str, model_name: str, source_detail: str) -> str:
    run = SimpleNamespace(source=source, model_backend=model_backend, model_name=model_name)
    label = _escape(backend_text(run))
    if source != "agent" or model_backend == "imported":
        via = IMPORTED_VIA.get(source, source)
        detail = f" ({source_detail})" if source_detail else ""
        title = _escape(f"imported by {via}{detail}: recorded elsewhere, not executed here")
        return f'<span class="badge imported" title="{title}">{label}</span>'
    if model_backend == ModelBackendName.SIMULATED:
        return f'<span class="badge sim" title="{SIMULATED_TITLE}">{label}</span>'
    return f'<span class="badge model">{label}</span>'


@register.simple_tag
def bar(pct: int, tone: str = "") -> str:
    """A small inline SVG bar, ``pct`` of its width filled."""
    width = max(0, min(100, int(pct or 0)))
    return format_html(
        '<svg class="bar {}" viewBox="0 0 100 6" preserveAspectRatio="none" aria-hidden="true">'
        '<rect class="track" width="100" height="6" rx="2"/><rect class="fill" width="{}" height="6" rx="2"/></svg>',
        tone,
        width,
    )


@register.filter
def inline_json(value: Any) -> str:
    """One-line JSON as plain text, for a call's input next to its tool name."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


@register.filter
def fixed(value: Any, places: int = 1) -> str:
    """A number with ``places`` decimals (``4.0``, ``0.125``), as ``floatformat:N`` writes it for
    these pages, without its Decimal and locale work (a tenth of a 50-step timeline's rendering)."""
    try:
        return f"{float(value):.{int(places)}f}"
    except (TypeError, ValueError):
        return ""


@register.filter
def at(mapping: Any, key: Any) -> Any:
    """``mapping[key]``, or None when it is absent: ``sub_agents.by_step|at:step.index``."""
    return mapping.get(key) if mapping else None


@register.filter
def retry_after_before(attempts: Any, index: int) -> Any:
    """The wait the API asked for (``retry-after``) in the answer before ``attempts[index]``: what the
    wait before that attempt followed, capped or not. None for the first attempt or when it asked none."""
    if not attempts or not 0 < index < len(attempts):
        return None
    before = attempts[index - 1]
    return before.get("retry_after_s") if isinstance(before, dict) else None


@register.filter
def seconds(value: Any) -> str:
    """A duration in seconds as a person reads it (``waterfall.seconds_text``): ``0.42 s``, ``2 min 05 s``."""
    return "unknown" if value is None else seconds_text(float(value))


@register.filter
def duration(run: Any) -> str:
    """A run's duration (``waterfall.duration_text`` of its ``measured_ms``): "not recorded" without timings."""
    return duration_text(getattr(run, "measured_ms", None))


@register.filter
def ms_seconds(value: Any) -> str:
    """Milliseconds written as ``seconds`` writes seconds."""
    return "unknown" if value is None else seconds_text(float(value) / 1000)


@register.filter
def money(amount: Any) -> str:
    """A cost as ``agents.prices.format_money`` writes it: "$0.0042", or "unknown" (None)."""
    return format_money(amount)


# The policy chart's geometry (SVG user units): a name column, the pass-rate panel, its figures, and
# the wasted-retries panel with its figure.
CHART_ROW, CHART_TOP = 30, 26
CHART_NAME_END, CHART_PASS_X, CHART_PASS_W, CHART_PASS_TEXT = 150, 160, 260, 428
CHART_WASTED_X, CHART_WASTED_W, CHART_WASTED_TEXT, CHART_WIDTH = 600, 110, 716, 790


@register.simple_tag
def policy_chart(totals: list[Any]) -> str:
    """An inline SVG of each policy's pass rate (with its 95 % interval as a whisker) and its wasted
    retries per run, each bar's figures in its text and its row's accessible name. The pass rate is over
    the judged runs; a policy with none shows "unjudged" and no bar. No script, no style attribute: the
    page's CSP allows neither, so colours come from app.css classes."""
    shown = [t for t in totals if t.runs]
    height = CHART_TOP + CHART_ROW * len(shown) + 4
    rows = []
    for i, t in enumerate(shown):
        y = CHART_TOP + CHART_ROW * i
        mid = y + 10
        interval = t.pass_interval
        wasted = f"{t.mean_wasted_retries} wasted retries per run ({t.wasted_retries} in all)"
        if t.judged:
            unjudged = f", {t.unjudged} unjudged left out" if t.unjudged else ""
            label = (
                f"{t.policy}: passed {t.passes} of {t.judged} judged runs ({t.pass_pct} %, 95 % interval "
                f"{interval.low_pct}–{interval.high_pct} %{unjudged}); {wasted}"
            )
            passed = format_html(
                '<rect class="pass" x="{px}" y="{y}" width="{pass_w}" height="20"/>'
                '<line class="interval" x1="{lo}" x2="{hi}" y1="{mid}" y2="{mid}"/>'
                '<line class="interval" x1="{lo}" x2="{lo}" y1="{tick_top}" y2="{tick_bottom}"/>'
                '<line class="interval" x1="{hi}" x2="{hi}" y1="{tick_top}" y2="{tick_bottom}"/>'
                '<text class="figure" x="{pt}" y="{text_y}">{pct} % · {passes}/{judged} ({low}–{high} %)</text>',
                px=CHART_PASS_X,
                y=y,
                pass_w=round(CHART_PASS_W * t.passes / t.judged, 1),
                lo=round(CHART_PASS_X + CHART_PASS_W * interval.low, 1),
                hi=round(CHART_PASS_X + CHART_PASS_W * interval.high, 1),
                mid=mid,
                tick_top=mid - 5,
                tick_bottom=mid + 5,
                pt=CHART_PASS_TEXT,
                text_y=y + 15,
                pct=t.pass_pct,
                passes=t.passes,
                judged=t.judged,
                low=interval.low_pct,
                high=interval.high_pct,
            )
        else:
            label = f"{t.policy}: {t.runs} runs, none judged; {wasted}"
            passed = format_html(
                '<text class="figure unjudged" x="{pt}" y="{text_y}">unjudged · {runs} run{s}</text>',
                pt=CHART_PASS_TEXT,
                text_y=y + 15,
                runs=t.runs,
                s="" if t.runs == 1 else "s",
            )
        rows.append(
            format_html(
                '<g class="row" role="img" aria-label="{label}">'
                '<text class="name" x="{name_end}" y="{text_y}">{policy}</text>'
                '<rect class="track" x="{px}" y="{y}" width="{pw}" height="20"/>{passed}'
                '<rect class="track" x="{wx}" y="{y}" width="{ww}" height="20"/>'
                '<rect class="wasted" x="{wx}" y="{y}" width="{wasted_w}" height="20"/>'
                '<text class="figure" x="{wt}" y="{text_y}">{wasted}/run</text>'
                "</g>",
                label=label,
                name_end=CHART_NAME_END,
                text_y=y + 15,
                policy=t.policy,
                px=CHART_PASS_X,
                pw=CHART_PASS_W,
                y=y,
                passed=passed,
                wx=CHART_WASTED_X,
                ww=CHART_WASTED_W,
                wasted_w=round(CHART_WASTED_W * t.wasted_pct / 100, 1),
                wt=CHART_WASTED_TEXT,
                wasted=t.mean_wasted_retries,
            )
        )
    return format_html(
        '<svg class="policy-chart" viewBox="0 0 {w} {h}" role="group" aria-label="{title}">'
        '<text class="axis" x="{px}" y="14">pass rate, 95 % interval</text>'
        '<text class="axis" x="{wx}" y="14">wasted retries per run</text>{rows}</svg>',
        w=CHART_WIDTH,
        h=height,
        title="Pass rate and wasted retries per policy",
        px=CHART_PASS_X,
        wx=CHART_WASTED_X,
        rows=format_html_join("", "{}", ((row,) for row in rows)),
    )


@register.simple_tag
def filter_widget(field: BoundField) -> str:
    """A filter form's input or select as HTML, made in one call. Through Django's widget templates a
    select is rendered option by option, a large share of a runs list request for its filter form; this
    writes the same elements, the value and every attribute escaped, with ``_escape``."""
    widget = field.field.widget
    attrs = field.build_widget_attrs(dict(widget.attrs))
    attrs.pop("aria-describedby", None)  # the help text is the label's title, not an element
    if field.auto_id:
        attrs["id"] = field.auto_id
    value = field.value()
    name = _escape(field.html_name)
    if isinstance(widget, forms.Select):
        chosen = _escape("" if value is None else value)
        # the chosen value's options marked (escaping is one to one: equal values, equal escapes)
        options = _options(widget).replace(f'<option value="{chosen}">', f'<option value="{chosen}" selected>')
        return mark_safe(f'<select name="{name}"{_attributes(attrs)}>{options}</select>')  # each part escaped
    input_type = _escape(attrs.pop("type", getattr(widget, "input_type", "text")))
    shown = widget.format_value(value)
    if shown is not None:
        attrs["value"] = shown
    return mark_safe(f'<input type="{input_type}" name="{name}"{_attributes(attrs)}>')  # each part escaped


def _options(widget: forms.Select) -> str:
    """A select's options, none selected, each value and label escaped; kept on the widget for as long
    as its choices are the same list (a form's fields shared between requests: ``RunFilterForm``)."""
    choices = widget.choices
    kept = getattr(widget, "_options_html", None)
    if kept is not None and kept[0] is choices:
        return kept[1]
    options = "".join(f'<option value="{_escape(v)}">{_escape(label)}</option>' for v, label in choices)
    widget._options_html = (choices, options)
    return options


def _attributes(attrs: dict[str, Any]) -> str:
    """``attrs`` as ``flatatt`` writes them (sorted; ``True``: the bare name, ``False`` and ``None``: left
    out), names and values escaped."""
    pairs = "".join(
        f' {_escape(k)}="{_escape(v)}"' for k, v in sorted(attrs.items()) if not isinstance(v, bool) and v is not None
    )
    return pairs + "".join(f" {_escape(k)}" for k, v in sorted(attrs.items()) if v is True)


@register.simple_tag
def filter_fields(form: forms.Form, skip: str = "", grow: str = "") -> str:
    """A filter form's fields, each in its label (hidden ones bare) with ``filter_widget``, in one
    call; ``skip``: a field rendered elsewhere, ``grow``: the field whose label takes the free width."""
    parts = []
    for field in form:
        if field.name == skip:
            continue
        if field.is_hidden:
            parts.append(filter_widget(field))
            continue
        css = ' class="grow"' if field.name == grow else ""
        title = f' title="{_escape(field.help_text)}"' if field.help_text else ""
        parts.append(f"<label{css}{title}>{_escape(capfirst(field.label))} {filter_widget(field)}</label>")
    return mark_safe("\n".join(parts))  # every value in each part is escaped


@register.simple_tag
def filter_errors(form: forms.Form, skip: str = "") -> SafeString:
    """Each field's errors as ``<p class="error">Label: message</p>``, in the fields' order, escaped;
    ``skip``: a field whose errors are said elsewhere. Only the fields with errors are looked at."""
    errors = form.errors
    return SafeString(  # labels and messages escaped
        "".join(
            f'<p class="error">{_escape(capfirst(form[name].label))}: {_escape(message)}</p>'
            for name in form.fields
            if name in errors and name != skip
            for message in errors[name]
        )
    )


def _option_text(run: Any) -> str:
    """A run (``reads.compare_picker.RunChoice``) as the compare picker says it, escaped: id, policy,
    status, verdict (a reviewer's override beside the judge's), backend and label."""
    override = run.verdict_override
    text = f"#{run.pk} · {run.policy_name or 'unknown policy'} · {run.status}"
    text += (f" · {run.verdict}" if run.verdict else "") + (f" (reviewer: {override})" if override else "")
    text += f" · {backend_text(run)}" + (f" · {run.label}" if run.label else "")
    return _escape(text)


@register.simple_tag
def run_choice_text(run: Any) -> str:
    """A run as the compare picker's typeahead and suggested pairs name it (``_option_text``), escaped."""
    return mark_safe(_option_text(run))  # escaped by _option_text


def _escape(value: Any) -> str:
    """``escape`` without Django's lazy-string and SafeString wrapping: the stdlib's, quotes included."""
    return html.escape(str(value))


@lru_cache(maxsize=4096)
def _escape_word(value: str) -> str:
    """``_escape`` of a value many rows share (a scenario, a policy, a status, a stop reason, finding
    kinds), kept for the process; free text (labels, answers) goes through ``_escape``."""
    return html.escape(value)


def _cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis, as ``truncatechars`` does."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


STOP_LABELS = dict(Run.StopReason.choices)


@cache
def _run_url(prefix: str) -> str:
    """The run page's URL with ``{}`` for the id, under this script prefix (one ``reverse`` per process)."""
    return reverse("tracer:run", args=[4242424242]).replace("4242424242", "{}")


@register.filter
def run_url(pk: Any) -> str:
    """The page of run ``pk``, as ``{% url 'tracer:run' pk %}`` writes it, without a ``reverse`` each time
    (a list of runs on a page reversed once per run)."""
    return _run_url(get_script_prefix()).format(int(pk))


# The main navigation: each page's URL name, its link's text, and the ability (``access.Abilities``)
# a user needs to be shown it.
MAIN_NAV = (
    ("tracer:runs", "Runs", ""),
    ("tracer:tools", "Tools", ""),
    ("tracer:findings", "Findings", ""),
    ("tracer:compare", "Compare", ""),
    ("tracer:policies", "Policies", ""),
    ("tracer:stops", "Stops", ""),
    ("tracer:launch", "Launch", "launch"),
    ("tracer:import", "Import", "import_runs"),
    ("tracer:tokens", "API tokens", ""),
)


@cache
def _main_nav_urls(prefix: str) -> tuple[tuple[str, str, str], ...]:
    """``MAIN_NAV`` with each page's URL, escaped, under this script prefix (reversed once per process)."""
    return tuple((_escape(reverse(name)), label, ability) for name, label, ability in MAIN_NAV)


@register.simple_tag(takes_context=True)
def main_nav(context: template.Context) -> SafeString:
    """The main navigation's links, in one call: the current page's marked ``aria-current``, Launch
    and Import only for those who may use them. Nine ``{% url %}`` and their comparisons would cost the
    base template more than the rest of it."""
    request, can = context.get("request"), context.get("can")
    path = _escape(request.path) if request is not None else ""
    links = [
        f'<a href="{url}" aria-current="page">{label}</a>' if url == path else f'<a href="{url}">{label}</a>'
        for url, label, ability in _main_nav_urls(get_script_prefix())
        if not ability or getattr(can, ability, False)
    ]
    return SafeString("\n      ".join(links))  # escaped URLs and our own words


FAILED_ATTEMPTS_TITLE = "failed attempts: tool tries that failed, whether or not a retry then worked"


def _failed_attempts_note(run: Any) -> str:
    """Beside a run's failed steps, its failed attempts when the two differ (a retry that then worked
    leaves a failed attempt and no failed step)."""
    attempts = int(run.failed_attempt_count)
    if attempts == int(run.error_count):
        return ""
    words = f"{attempts} failed attempt{'' if attempts == 1 else 's'}"
    return f' <span class="muted failed-attempts" title="{FAILED_ATTEMPTS_TITLE}">({words})</span>'


@register.simple_tag
def errors_cell(run: Any) -> SafeString:
    """A run's errors cell, as every list of runs shows it: its failed steps, and its failed attempts
    beside them when they differ (``agents.events.failed_steps``, ``failed_attempts``)."""
    return SafeString(f"{int(run.error_count)}{_failed_attempts_note(run)}")  # ints and a fixed text


@register.filter
def failures(run: Any) -> str:
    """A run's failures in words: "0 failed steps, 1 failed attempt" (``agents.events.failures_words``)."""
    return failures_words(int(run.error_count), int(run.failed_attempt_count))


def _stop_cell(run: Any) -> str:
    reason = run.stop_reason
    return _stop_cell_of(reason) if reason else ""


@lru_cache(maxsize=64)
def _stop_cell_of(reason: str) -> str:
    return f'<span class="stop {_escape(reason)}">{_escape(STOP_LABELS.get(reason, reason))}</span>'


def _verdict_cell(context: template.Context, run: Any) -> str:
    """A run's verdict cell in a list of runs: the judge's verdict, or unjudged; a reviewed run's is
    ``review.html``'s ``review-cell`` (the override and tags beside it)."""
    if getattr(run, "review", None) is not None:
        with context.push(run=run):
            return get_template("tracer/review.html#review-cell").render(context.flatten())
    if run.verdict:
        verdict = _escape_word(run.verdict)
        return f'<span class="verdict {verdict}">{verdict}</span>'
    return "" if run.is_active else '<span class="unjudged" title="no verdict: neither pass nor fail">unjudged</span>'


@register.simple_tag(takes_context=True)
def experiment_run_row(context: template.Context, run: Any) -> str:
    """One row of an experiment page's runs (its ``<tr>``), made in one call as ``run_row`` makes the
    runs list's: every text from the run escaped, numbers as ints."""
    e = _escape
    run_url = context.render_context.get("experiment_run_row") or context.render_context.setdefault(
        "experiment_run_row", _run_url(get_script_prefix())
    )
    pk = int(run.pk)
    rerun = f' <span class="muted">re-run of #{int(run.rerun_of_id)}</span>' if run.rerun_of_id else ""
    status = e(run.status)
    return SafeString(  # every value from the run is escaped or an int
        f'<tr class="{"active" if run.is_active else ""}">'
        f'<td><a href="{e(run_url.format(pk))}">#{pk}</a>{rerun}</td>'
        f"<td>{e(run.scenario)}</td><td>{e(run.policy_name)}</td><td>{_badge(run)}</td>"
        f'<td><span class="status {status}">{status}</span></td>'
        f'<td class="num">{int(run.step_count)}</td><td class="num">{errors_cell(run)}</td>'
        f'<td class="num">{int(run.retry_count)}</td>'
        f"<td>{_stop_cell(run)}</td><td>{_verdict_cell(context, run)}</td></tr>"
    )


@register.simple_tag(takes_context=True)
def run_row(context: template.Context, run: Any, oob: bool = False) -> str:
    """One row of the runs list (its ``<tr id="run-row-N">``), made in one call: fifty rows through
    template tags and filters would dominate the request's CPU (docs/performance.md, bench_list.py).
    Every text from the run goes through ``escape``; numbers are ints. A reviewed run's verdict cell
    is ``review.html``'s ``review-cell``."""
    e = _escape
    label = f' <span class="muted">· {e(run.label)}</span>' if run.label else ""
    wasted = run.wasted_retry_count
    wasted = (
        f' <span class="warn" title="retries spent on non-retryable errors">({int(wasted)} wasted)</span>'
        if wasted
        else ""
    )
    stop = _stop_cell(run)
    verdict = _verdict_cell(context, run)
    # the time zone and the run page's URL, looked up once for all the rows of one rendering
    tz, run_url = context.render_context.get("run_row") or context.render_context.setdefault(
        "run_row", (get_current_timezone(), _escape(_run_url(get_script_prefix())))
    )
    started = run.started_at or run.created_at
    if started:  # aware, as the database gives it: localtime() without its checks
        started = started.astimezone(tz)
    when = f"{started:%b} {started.day}, {started:%H:%M:%S}" if started else ""
    answer = run.final_answer or ""
    findings = _finding_badges(getattr(run, "finding_kinds", "") or "")
    pk = int(run.pk)
    status = _escape_word(run.status)
    scenario, policy = _escape_word(run.scenario or "unknown"), _escape_word(run.policy_name or "unknown")
    active, swap = ("active" if run.is_active else ""), (' hx-swap-oob="true"' if oob else "")
    return SafeString(  # every value from the run above and below is escaped or an int
        f'<tr id="run-row-{pk}" class="{active}" tabindex="-1" data-card{swap}>'
        f'<td><input type="checkbox" name="run" value="{pk}" id="run-pick-{pk}" hx-preserve '
        f'aria-label="tick run {pk}"></td>'
        f'<td><a href="{run_url.format(pk)}" data-card-link>#{pk}</a></td>'
        f"<td>{scenario}{label}</td><td>{policy}</td>"
        f"<td>{_badge(run)}</td>"
        f'<td><span class="status {status}">{status}</span></td>'
        f'<td class="num">{int(run.step_count)}</td><td class="num">{errors_cell(run)}</td>'
        f'<td class="num">{int(run.retry_count)}{wasted}</td>'
        f'<td class="num nowrap">{_duration_cell(run.measured_ms)}</td>'
        f'<td class="num">{int(run.input_tokens) + int(run.output_tokens)}</td>'
        f'<td class="num nowrap">{_cost_cell(run.cost)}</td>'
        f'<td>{stop}</td><td>{verdict}</td><td class="findings-cell">{findings}</td><td class="nowrap">{when}</td>'
        f'<td class="excerpt"><span title="{e(_cut(answer, 400))}">{e(_cut(answer, 160))}</span></td></tr>'
    )


@cache
def _runs_url(prefix: str) -> str:
    """The runs list's URL under this script prefix, escaped (one ``reverse`` per process)."""
    return _escape(reverse("tracer:runs"))


NO_RUNS_SQUARE = '<span class="heat none" title="no runs">·<span class="visually-hidden"> no runs</span></span>'


@register.simple_tag(takes_context=True)
def heat_row(context: template.Context, row: Any) -> str:
    """One scenario's row of the matrix's heat map (its ``<tr>``), made in one call: each policy's square
    (its pass percent, shaded, its figures in words as its title and accessible name, a link to its
    runs under the page's experiment and model backend) or a dot where it has no runs."""
    e = _escape
    narrowing, experiment_id = context.get("narrowing") or {}, context.get("experiment_id")
    after = f"&amp;experiment={e(experiment_id)}" if experiment_id else ""
    if backend := narrowing.get("model_backend"):
        after += f"&amp;model_backend={e(quote(backend))}"
    runs_url = _runs_url(get_script_prefix())
    squares = []
    for cell in row.cells:
        if not cell:
            squares.append(f"\n        <td>\n          {NO_RUNS_SQUARE}\n        </td>\n        ")
            continue
        words = e(cell.heat_words)
        judged = cell.judged
        shade = f"h{int(cell.heat_step)}" if judged else "unjudged"
        figure = e(cell.pass_pct) if judged else "?"
        flag = '<span class="heat-flag" aria-hidden="true">!</span>' if cell.alarms else ""
        href = f"{runs_url}?scenario={e(quote(cell.scenario))}&amp;policy={e(quote(cell.policy))}{after}"
        squares.append(
            "\n        <td>\n          \n          \n"
            f'          <a class="heat {shade}" href="{href}" title="{words}" aria-label="{words}">{figure}{flag}</a>'
            "\n          \n          \n        </td>\n        "
        )
    return SafeString(  # every value above is escaped or an int
        f'<tr>\n        <th scope="row">{e(row.scenario)}</th>\n        {"".join(squares)}\n      </tr>'
    )


@lru_cache(maxsize=1024)
def _finding_badges(kinds: str) -> str:
    """A row's findings cell: a badge for each kind of ``Run.finding_kinds`` (comma-separated)."""
    return " ".join(f'<span class="badge finding">{_escape(kind)}</span>' for kind in kinds.split(",") if kind)


def _duration_cell(measured_ms: float) -> str:
    text = duration_text(measured_ms)
    return f'<span class="muted">{text}</span>' if measured_ms <= 0 else text  # our own words and digits


def _cost_cell(cost: Any) -> str:
    text = _escape(format_money(cost))
    return f'<span class="muted" title="no price for this model">{text}</span>' if cost is None else text


# Columns whose first click sorts A to Z; the others (counts, start time) sort largest first.
ASCENDING_FIRST = ("scenario", "policy", "status", "verdict", "stop")


@register.simple_tag(takes_context=True)
def sort_header(context: template.Context, name: str, label: str, css: str = "") -> str:
    """A runs list column header that sorts by ``name`` (``reads.runs_list.RUN_SORTS``): a link to this
    list sorted by it (reversed when it already is), and ``aria-sort`` saying how it is sorted now.
    The link is this page's query string with ``sort`` set and ``page`` left out, as
    ``QueryDict.urlencode`` writes it (the rest of the query encoded once for all the headers)."""
    current = context["sort"]
    if current == name:
        state, following = "ascending", f"-{name}"
    elif current == f"-{name}":
        state, following = "descending", name
    else:
        state, following = "none", name if name in ASCENDING_FIRST else f"-{name}"
    before, after = context.render_context.get("sort_header") or context.render_context.setdefault(
        "sort_header", _query_around_sort(context["request"].GET)
    )
    url = _escape("?" + "&".join(filter(None, (before, urlencode({"sort": following}), after))))
    arrow = {"ascending": " ▲", "descending": " ▼"}.get(state, "")
    title, label = _escape(label.lower()), _escape(label)
    return SafeString(  # each value escaped
        f'<th class="{_escape(css)}" aria-sort="{state}"><a href="{url}" hx-get="{url}" hx-target="#run-table" '
        f'hx-swap="outerHTML" hx-push-url="true" title="sort by {title}">{label}{arrow}</a></th>'
    )


def _query_around_sort(query: QueryDict) -> tuple[str, str]:
    """``query`` without ``page``, encoded as ``QueryDict.urlencode`` does, in the parts before and after
    where ``sort`` goes (its own place when the query has one, else the end)."""
    keys = [key for key in query if key != "page"]
    at = keys.index("sort") if "sort" in keys else len(keys)

    def encoded(names: list[str]) -> str:
        return "&".join(urlencode({name: value}) for name in names for value in query.getlist(name))

    return encoded(keys[:at]), encoded(keys[at + 1 :])
