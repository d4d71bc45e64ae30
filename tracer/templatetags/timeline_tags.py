"""The run page's timeline written in Python: a step's ``<li>`` (``step_item``), a model call's attempts
(``model_call``, which ``includes/model_call.html`` renders too) and the sub-agents a step started.

Fifty steps through the template's tags, filters and includes would be much of every run page's CPU
(docs/performance.md); one call per step writes the same elements. As in ``tracer_tags.run_row``, every
text from a trace goes through ``escape`` (the stdlib's, quotes included) or ``linebreaksbr`` with
autoescaping, numbers are ``int``s or formatted floats, class names are escaped too, and only the
finished string is marked safe.
"""

from __future__ import annotations

import unicodedata
from functools import cache
from typing import Any

from django import template
from django.template.defaultfilters import floatformat, truncatechars
from django.urls import get_script_prefix, reverse
from django.utils.formats import localize
from django.utils.safestring import SafeString, mark_safe

from agents.events import failures_words
from agents.prices import format_money
from agents.vocabulary import ErrorFormat, StepKind
from tracer.models import Run, run_cost
from tracer.previews import RUN_TEXTS, preview, preview_cut
from tracer.reads.run_page import SUB_STEPS
from tracer.waterfall import duration_text, repeat_identity, step_time_s

from .tracer_tags import (
    STOP_LABELS,
    _escape,
    _run_url,
    as_json,
    backend_badge,
    fixed,
    inline_json,
    outcome,
    retry_after_before,
)

register = template.Library()
e = _escape
MCP_TITLE = (
    "the tool was served by an MCP server: its CallToolResult, and the Messages API tool_result the harness made of it"
)
REQUEST_ID_TITLE = "the API's request-id header"


def _plain(value: Any) -> str:
    """A value as ``{{ value }}`` writes it, before escaping: a float localized."""
    if value is None:
        return "None"
    if isinstance(value, float):
        return localize(value)
    return str(value)


def _text(value: Any) -> str:
    """A value as ``{{ value }}`` writes it: escaped, a float localized."""
    return e(_plain(value))


def _truncate(text: str, limit: int) -> str:
    """``truncatechars``, whose lazy ``Truncator`` costs more than the rest of a step's head: a text no
    longer than ``limit`` is never cut (combining characters only shorten what it counts), only put in
    NFC as it does."""
    if len(text) <= limit:
        return unicodedata.normalize("NFC", text)
    return truncatechars(text, limit)


def _plural(count: Any, forms: str = "s") -> str:
    """``pluralize``: ``forms`` is the plural suffix, or "singular,plural"."""
    singular, _, plural = forms.rpartition(",") if "," in forms else ("", "", forms)
    return singular if count == 1 else plural


def _yesno(value: Any, yes: str, no: str) -> str:
    return yes if value else no


class StepPage:
    """What every step of one rendering shares: the run, its policy's error format, whether it was
    imported, its sub-agents (by step, and the steps each nests), the findings that cite each step, the
    run page's URL, and ``prefix``, put before each step's id: a sub-agent's steps nested in its
    parent's page are ``sub-agent-7-step-1``, so they are not taken for the parent's ``step-1``."""

    def __init__(self, run: Any, *, sub_agents: Any = None, findings: Any = None, prefix: str = "") -> None:
        self.policy_settings = run.policy_settings or {}
        self.bare = self.policy_settings.get("error_format") == ErrorFormat.BARE
        self.imported = run.is_imported
        self.by_step = getattr(sub_agents, "by_step", None) or {}
        self.sub_steps = getattr(sub_agents, "steps", None) or {}
        self.run_url = _run_url(get_script_prefix())
        # the run's findings that cite each step (reads.findings.findings_by_step): marked on the step
        self.findings = findings or {}
        self.model_name, self.day = run.model_name, run.started_at or run.created_at
        self.prefix = prefix
        self.run_path = reverse("tracer:run", args=[run.pk])

    def value_path(self, index: int) -> str:
        """Where the show-all controls of step ``index`` ask for its values whole: this, the field's name
        and a slash (``views.step_value``)."""
        return f"{self.run_path}steps/{int(index)}/"

    @classmethod
    def of(cls, context: template.Context) -> StepPage:
        page = context.render_context.get(cls)
        if page is None:
            page = context.render_context[cls] = cls(
                context["run"], sub_agents=context.get("sub_agents"), findings=context.get("findings_by_step")
            )
        return page

    def nested(self, child: Run) -> StepPage:
        """The page a sub-agent's nested steps are written with: its own policy, model and imports,
        its parent's sub-agent steps (where grandchildren's would be), ids of its own."""
        page = StepPage(child, prefix=f"sub-agent-{int(child.pk)}-")
        page.sub_steps = self.sub_steps
        return page


@register.simple_tag(takes_context=True)
def step_items(context: template.Context, steps: Any) -> SafeString:
    """The timeline's ``steps``, each ``step_item``'s ``<li>``: one tag for all of them, not a loop of
    template nodes around one per step."""
    page = StepPage.of(context)
    steps = list(steps or ())
    out, i = [], 0
    while i < len(steps):
        out.append(step_item(steps[i], page))
        identity, j = repeat_identity(steps[i]), i + 1
        while identity is not None and j < len(steps) and repeat_identity(steps[j]) == identity:
            j += 1
        if j > i + 1:
            out.append(_folded_repeats(steps[i + 1 : j], page, tool=steps[i].tool_name))
        i = j
    return mark_safe("".join(out))  # each escaped by step_item and _folded_repeats


def _folded_repeats(repeats: list, page: StepPage, *, tool: str) -> str:
    """The steps that repeat the one before them exactly (the same call failing the same way), folded
    as the picture folds them: "7 more identical failing calls to lookup_orders…", which opens on them."""
    count, first, last = len(repeats), int(repeats[0].index), int(repeats[-1].index)
    steps = f"step {first}" if count == 1 else f"steps {first}–{last}"
    return (
        f'<li class="folded-repeats" id="{page.prefix}repeats-{first}"><details><summary>{count} more identical '
        f'failing call{_plural(count)} to <code>{e(tool)}</code>… <span class="muted">{steps}</span></summary>'
        f'<ol class="timeline">{"".join(step_item(step, page) for step in repeats)}</ol></details></li>'
    )


def step_item(step: Any, page: StepPage) -> str:
    """One step of the timeline, its ``<li id="step-N">``: the head (kind, tool and input, is_error,
    category, retryable, retries, latency, tokens), the model call when it was retried or failed, the
    tool's attempts and the tool_result sent, or the answer, and the sub-agents the step started."""
    kind, index = step.kind, int(step.index)
    values = page.value_path(index)
    given = preview(inline_json(step.input), url=f"{values}input/")
    call = f'<code class="tool">{e(step.tool_name)}</code><code class="input">{given}</code>'
    if kind == StepKind.FINAL_ANSWER:
        what = "<strong>Final answer</strong>"
    elif kind == StepKind.MODEL_STOP:
        what = "<strong>Model stopped</strong>"
        if step.tool_name:
            what += f' {call} <span class="badge err">not executed</span>'
    else:
        what = call
    no_result = step.result_content is None and step.is_error and not page.imported
    head = [f'<span class="idx">{index}</span>', what]
    if step.is_error:
        head.append(f'<span class="badge err">{"run stopped · no tool_result" if no_result else "is_error"}</span>')
    if step.category:
        head.append(f'<span class="badge cat-{e(step.category)}">{e(step.category)}</span>')
    if step.retryable is not None:
        head.append(f'<span class="badge">{_yesno(step.retryable, "retryable", "not retryable")}</span>')
    meta = ""
    if kind == StepKind.TOOL_USE:
        retries = int(step.retry_count)
        meta = f"{retries} retr{_plural(retries, 'y,ies')} · "
    took, _ = step_time_s(model_attempts=step.model_attempts, attempts=step.attempts)
    meta += f"{duration_text(took * 1000)} · {int(step.input_tokens)}/{int(step.output_tokens)} tokens"
    meta += f" · {e(format_money(run_cost(page.model_name, page.day, step.input_tokens, step.output_tokens)))}"
    if step.api_stop_reason:
        meta += f" · stop_reason {e(step.api_stop_reason)}"
    head.append(f'<span class="meta">{meta}</span>')
    for position, finding_kind in page.findings.get(index, ()):
        head.append(f'<a class="badge finding" href="#finding-{int(position)}">{e(finding_kind)}</a>')

    body = [model_call(step.model_attempts, value_path=values)] if step.model_attempts else []
    lines = kind == StepKind.FINAL_ANSWER
    # a timeline row (reads.run_page.StepRow) holds the text's start and its size, a Step the whole text
    text = preview(step.text, url=f"{values}text/", size=getattr(step, "text_bytes", None), lines=lines)
    said = f'<p class="said"><span class="muted">Model:</span> {text}</p>' if step.text else ""
    if kind == StepKind.TOOL_USE:
        body.append(said)
        attempts = "".join(_attempt(a, n, page, values) for n, a in enumerate(step.attempts or [], 1))
        body.append(f'<ol class="attempts">{attempts}</ol>')
        if no_result:
            fatal = step.category == "fatal"
            why = "the fatal error stopped the run here" if fatal else "the exception ended the run here"
            body.append(f'<p class="result muted">No tool_result was sent to the model: {why}.</p>')
        else:
            flag = " (is_error: true)" if step.is_error else ""
            body.append(
                f'<details class="result"><summary>tool_result sent to the model{flag}: '
                f"<code>{e(_truncate(inline_json(step.result_content), 120))}</code></summary>"
                f"<pre>{preview(as_json(step.result_content), url=f'{values}result/')}</pre></details>"
            )
    elif kind == StepKind.MODEL_STOP:
        reason = step.api_stop_reason
        if reason == "refusal":
            why = "the model declined to go on"
        elif reason == "pause_turn":
            why = "the API paused it again and again, and a guard stopped the run"
        else:
            why = f"the reply was cut off (stop_reason {e(reason)})"
            if step.tool_name:
                why += " while it wrote this call, so its input is incomplete"
        body += [said, f'<p class="result muted">Nothing in this turn was executed: {why}.</p>']
    else:
        body.append(f'<blockquote class="answer">{text}</blockquote>')
    children = page.by_step.get(index)
    if children:
        body.append(sub_agents_of_step(index, children, page))
    error = " is-error" if step.is_error else ""
    if index in page.findings:
        error += " has-finding"
    return (  # every value from the step above is escaped, an int or a formatted number
        f'<li class="step {e(kind)}{error}" id="{page.prefix}step-{index}">\n<div class="step-head">\n'
        + "\n".join(head)
        + "\n</div>\n"
        + "\n".join(b for b in body if b)
        + "\n</li>"
    )


def step_value_text(step: Any, field: str) -> tuple[str, bool] | None:
    """The whole text of what step_item shows of ``step`` as ``field`` (``input``, ``text``, ``result``,
    ``attempt-N-message``, ``attempt-N-content``, ``model-attempt-N-error``, N from 1) and whether its
    newlines are written as ``<br>``: what a show-all control loads. None: the step shows no such value."""
    if field == "input":
        return inline_json(step.input), False
    if field == "text":
        return step.text, step.kind == StepKind.FINAL_ANSWER
    if field == "result":
        return as_json(step.result_content), False
    found = attempt_value_text(field, attempts=step.attempts, model_attempts=step.model_attempts)
    return None if found is None else (found, False)


def attempt_value_text(field: str, *, attempts: Any, model_attempts: Any) -> str | None:
    """The whole text of ``attempt-N-message``, ``attempt-N-content`` (of ``attempts``) or
    ``model-attempt-N-error`` (of ``model_attempts``) as the page shows them; None: it shows no such value."""
    which, _, part = field.rpartition("-")
    source, _, number = which.rpartition("-")
    if source not in ("attempt", "model-attempt") or not (number.isascii() and number.isdigit()):
        return None
    chosen = (attempts if source == "attempt" else model_attempts) or []
    if not 1 <= int(number) <= len(chosen) or not isinstance(chosen[int(number) - 1], dict):
        return None
    attempt = chosen[int(number) - 1]
    if source == "attempt" and part == "message" and attempt.get("message"):
        return _plain(attempt["message"])
    if source == "attempt" and part == "content" and attempt.get("ok") and not attempt.get("empty"):
        return as_json(attempt.get("content", ""))
    if source == "model-attempt" and part == "error" and attempt.get("error"):
        return _plain(attempt["error"])
    return None


register.filter("preview_cut", preview_cut)


@register.simple_tag
def step_value_preview(text: Any, run_pk: int, index: int, field: str, attempt: int = 0) -> SafeString:
    """A value of step ``index`` of run ``run_pk`` (``step_value_text``'s ``field``; with ``attempt``, that
    attempt's ``attempt-N-<field>``) as a page other than the run's shows it: its start with a show-all
    control when it is long."""
    name = f"attempt-{int(attempt)}-{field}" if attempt else field
    url = reverse("tracer:step-value", args=[int(run_pk), int(index), name])
    return mark_safe(preview(_plain(text), url=url))  # escaped by preview


@register.simple_tag
def run_value(run: Run, name: str) -> SafeString:
    """One of ``run``'s long texts (``previews.RUN_TEXTS``) as its page shows it: its start with a show-all
    control when it is long. Read as ``<name>_shown`` and ``<name>_bytes`` when the run was
    (``reads.run_page.run_shown``), else whole."""
    url = reverse("tracer:run-value", args=[run.pk, name])
    if hasattr(run, f"{name}_bytes"):
        shown, size = getattr(run, f"{name}_shown") or "", getattr(run, f"{name}_bytes") or 0
        return mark_safe(preview(shown, url=url, size=size, lines=RUN_TEXTS[name]))  # escaped by preview
    return mark_safe(preview(getattr(run, name) or "", url=url, lines=RUN_TEXTS[name]))  # escaped by preview


def _attempt(a: Any, position: int, page: StepPage, value_path: str) -> str:
    """One of a tool call's attempts (the ``position``-th), its ``<li class="attempt ok|fail">``; its long
    texts show their start, the rest at ``value_path`` + ``attempt-N-message/`` or ``attempt-N-content/``."""
    a = a if isinstance(a, dict) else {}
    parts = []
    if a.get("backoff_s"):
        parts.append(f'<span class="backoff">waited {fixed(a["backoff_s"], 3)} s, then retried</span>')
    number = a.get("number", "")
    again = isinstance(number, int | float) and number > 1
    parts.append(f'<span class="n">{"Retry · attempt" if again else "Attempt"} {_text(number)}</span>')
    parts.append(f'<span class="badge outcome">{e(outcome(a, page.policy_settings))}</span>')
    if a.get("transport") == "mcp":
        mcp = a.get("mcp_result")
        is_error = mcp.get("isError") if isinstance(mcp, dict) else None
        sent = (
            "no tool_result sent"
            if a.get("result_content") is None
            else f"tool_result is_error: {_yesno(a.get('is_error'), 'true', 'false')}"
        )
        parts.append(
            f'<span class="badge transport" title="{MCP_TITLE}">MCP CallToolResult isError: '
            f"{_yesno(is_error, 'true', 'false')} → {sent}</span>"
        )
    if a.get("message"):
        knew = ""
        if page.bare:
            knew = (
                '<span class="muted" title="what the tool knew; the harness sent only &quot;Error&quot;">'
                f"tool knew:</span> {_text(a.get('category', ''))} · "
            )
        message = preview(_plain(a["message"]), url=f"{value_path}attempt-{position}-message/")
        parts.append(f'<span class="msg">{knew}{message}</span>')
    removed = [str(w) for w in a.get("removed") or () if w]
    if removed:
        parts.append(
            '<span class="badge removed" title="the policy\'s clean_error_text took these out of the failure\'s '
            f'text before the model read it">removed before the model read it: {e(", ".join(removed))}</span>'
        )
    parts.append(f'<span class="meta">{fixed(a.get("latency_ms", ""), 1)} ms</span>')
    if a.get("ok") and not a.get("empty"):
        content = preview(as_json(a.get("content", "")), url=f"{value_path}attempt-{position}-content/")
        parts.append(f"<details><summary>content</summary><pre>{content}</pre></details>")
    return f'<li class="attempt {"ok" if a.get("ok") else "fail"}">\n' + "\n".join(parts) + "\n</li>"


@register.simple_tag
def model_call(attempts: Any, failed: bool = False, value_path: str = "") -> SafeString:
    """The HTTP attempts of one model call (``agents.events.ModelAttempt`` each), apart from the tool's: a
    call that went through at once is one line with its request-id; one that was retried, failed or
    continued a paused turn lists each attempt with its status, what the API said, its request-id and
    the wait before it (capped when the answer before it asked for longer). Nothing for a call that went
    through at once without a request-id. A long error shows its start, the rest at ``value_path`` +
    ``model-attempt-N-error/`` (a step's, or a run's: ``views.step_value``, ``views.run_value``)."""
    attempts = [a if isinstance(a, dict) else {} for a in attempts or []]
    if not attempts:
        return mark_safe("")
    first = attempts[0]
    if len(attempts) == 1 and not first.get("error"):
        if not first.get("request_id"):
            return mark_safe("")
        return mark_safe(  # escaped values
            f'<p class="model-call muted small">model API: {_text(first.get("status", ""))}, '
            f'<code class="request-id" title="{REQUEST_ID_TITLE}">{_text(first["request_id"])}</code></p>'
        )
    rows = []
    for i, a in enumerate(attempts):
        parts = []
        wait, asked = a.get("wait_s"), retry_after_before(attempts, i)  # what the answer before it asked
        if wait:
            if asked and _greater(asked, wait):
                why = f" (the API asked {_text(asked)} s: capped)"
            else:
                why = " (retry-after)" if asked else ""
            parts.append(f'<span class="backoff">waited {_text(wait)} s{why}, then tried again</span>')
        number = a.get("number", "")
        if a.get("continuation"):
            n = "Continued after pause_turn · attempt"
        else:
            n = "Model retry · attempt" if isinstance(number, int | float) and number > 1 else "Attempt"
        parts.append(f'<span class="n">{n} {_text(number)}</span>')
        status = _text(a["status"]) if a.get("status") else "no response"
        parts.append(f'<span class="badge {"err" if a.get("error") else "outcome"}">{status}</span>')
        if a.get("error"):
            error = preview(_plain(a["error"]), url=f"{value_path}model-attempt-{i + 1}-error/")
            parts.append(f'<span class="msg">{error}</span>')
        if a.get("request_id"):
            parts.append(f'<code class="request-id" title="{REQUEST_ID_TITLE}">{_text(a["request_id"])}</code>')
        parts.append(f'<span class="meta">{e(floatformat(a.get("latency_ms", ""), 1))} ms</span>')
        rows.append(f'<li class="attempt {"fail" if a.get("error") else "ok"}">' + "\n".join(parts) + "</li>")
    count = len(attempts)
    which = "the call that ended the run" if failed else "this step's model call"
    return mark_safe(  # every value above is escaped
        f'<div class="model-call">\n<p class="model-call-head"><span class="badge model">model API</span> '
        f"{which}: {count} attempt{_plural(count)}</p>\n"
        f'<ol class="attempts">\n' + "\n".join(rows) + "\n</ol>\n</div>"
    )


def _greater(a: Any, b: Any) -> bool:
    """``{% if a > b %}``: False when the two do not compare."""
    try:
        return a > b
    except TypeError:
        return False


def sub_agents_of_step(index: int, children: list[Run], page: StepPage) -> str:
    """The sub-agents (child runs) step ``index`` started, nested under it, each folded."""
    count = len(children)
    return (
        f'<div class="sub-agents" id="{page.prefix}sub-agents-{int(index)}">\n<p class="sub-agents-head">'
        f'<span class="badge">sub-agent{_plural(count)}</span> this call ran {count} sub-agent{_plural(count)}:</p>\n'
        f"{sub_agent_list(children, page)}\n</div>"
    )


def sub_agent_list(children: list[Run], page: StepPage) -> str:
    """``children`` as a list of folds (``sub_agent_fold``)."""
    return '<ol class="sub-agent-list">\n' + "\n".join(sub_agent_fold(c, page) for c in children) + "\n</ol>"


def sub_agent_fold(child: Run, page: StepPage) -> str:
    """One sub-agent, folded: its summary (a link to its page, backend, policy, status, stop reason,
    verdict, steps, failures, retries, tokens, duration) opens on its steps, nested as the timeline
    writes a run's; at most ``SUB_STEPS`` of them, the rest a link away on its own page. Its id is the
    same under its step and, while its step has not come, in the live poller, so a fold a person opened
    stays open when the step arrives (app.js reopens ``details[id]``)."""
    pk = int(child.pk)
    url = e(page.run_url.format(pk))
    stop = child.stop_reason
    stop = f'<span class="stop {e(stop)}">{e(STOP_LABELS.get(stop, stop))}</span>' if stop else ""
    if child.verdict:
        verdict = f'<span class="verdict {e(child.verdict)}">{e(child.verdict)}</span>'
    elif child.is_active:
        verdict = ""
    else:
        verdict = '<span class="unjudged" title="no verdict: neither pass nor fail">unjudged</span>'
    count, retries = int(child.step_count), int(child.retry_count)
    failures = failures_words(int(child.error_count), int(child.failed_attempt_count))
    so_far = " so far" if child.is_active else ""
    steps = page.sub_steps.get(pk)
    if steps is None:  # past the page's budget of nested steps: read when the fold is opened
        load = e(_steps_url(get_script_prefix()).format(pk))
        body = (
            f'<div class="nested-load" id="sub-agent-steps-{pk}" hx-get="{load}"'
            ' hx-trigger="toggle once from:closest details" hx-swap="outerHTML">'
            f'<p class="muted">Its steps load when it opens; they are on <a href="{url}">its page</a> too.</p></div>'
        )
    else:
        body = sub_agent_steps_body(child, steps, page)
    return (
        f'<li class="sub-agent">\n<details class="sub-agent-fold" id="sub-agent-{pk}">\n<summary>'
        f'<a href="{url}">#{pk} {e(child.label or "sub-agent")}</a>\n{backend_badge(child)}\n'
        f'<span class="badge policy">{e(child.policy_name or "unknown policy")}</span>\n'
        f'<span class="status {e(child.status)}">{e(child.status)}</span>\n{stop}\n{verdict}\n'
        f'<span class="meta">{count} step{_plural(count)}{so_far} · {failures} · '
        f"{retries} retr{_plural(retries, 'y,ies')} · tokens {int(child.input_tokens)} in · "
        f"{int(child.output_tokens)} out · {e(duration_text(child.measured_ms))}</span>\n</summary>\n"
        f"{body}\n</details>\n</li>"
    )


def sub_agent_steps_body(child: Run, steps: list, page: StepPage) -> str:
    """What a sub-agent's fold opens on: its ``steps``, nested as the timeline writes a run's, saying
    how many more are on its own page."""
    pk, count = int(child.pk), int(child.step_count)
    url = e(page.run_url.format(pk))
    if not steps:
        return f'<p class="muted">{"No steps yet." if child.is_active else "No steps recorded."}</p>'
    inner = page.nested(child)
    body = f'<ol class="timeline nested-steps">{"".join(step_item(step, inner) for step in steps)}</ol>'
    before, after = int(steps[0].index) - 1, count - int(steps[-1].index)
    if before > 0:
        body = f'<p class="muted">{before} earlier step{_plural(before)} on <a href="{url}">its page</a>.</p>' + body
    if after > 0 and not child.is_active:
        body += (
            f'<p class="muted sub-agent-more">{after} more step{_plural(after)} (of {count}) on '
            f'<a href="{url}">its page</a>; a fold here shows its first {SUB_STEPS}.</p>'
        )
    return body


@register.simple_tag
def sub_agent_steps(child: Run, steps: Any) -> SafeString:
    """A fold's steps read when it was opened (``run_steps`` asked for ``sub-agent-steps-<id>``)."""
    body = sub_agent_steps_body(child, list(steps or ()), StepPage(child))
    return mark_safe(f'<div id="sub-agent-steps-{int(child.pk)}">{body}</div>')  # escaped by step_item


@cache
def _steps_url(prefix: str) -> str:
    """A run's live step fragment's URL with ``{}`` for the id (one ``reverse`` per script prefix)."""
    return reverse("tracer:run-steps", args=[4242424242]).replace("4242424242", "{}")


@register.simple_tag(takes_context=True)
def sub_agent_folds(context: template.Context, children: Any) -> SafeString:
    """Sub-agents not under a step of the timeline (those whose step has not come yet, or that never
    kept one), folded as those under a step are."""
    children = list(children or ())
    if not children:
        return mark_safe("")
    return mark_safe(sub_agent_list(children, StepPage.of(context)))  # escaped by sub_agent_fold
