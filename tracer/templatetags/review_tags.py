"""A run's review panel written in Python (``review_panel``): the review as stored and, for reviewers,
the form to change it, as ``tracer/review.html``'s ``run-review`` partial shows them on a run's page
and on each card of the stop queue.

The stop queue shows twenty cards, each with its form for a reviewer; written in Python, the form's
radio buttons, options and fields skip the template's per-tag work, which outweighs the rest of a card.
As in ``tracer_tags.run_row``, every text from a run, a review or a form goes through ``escape`` (the
stdlib's, quotes included), numbers are ``int``s, and only the finished string is marked safe.
"""

from __future__ import annotations

from functools import cache
from typing import Any
from urllib.parse import quote

from django import template
from django.forms import Form
from django.template.defaultfilters import date as date_filter
from django.urls import get_script_prefix, reverse
from django.utils.safestring import SafeString
from django.utils.timezone import template_localtime

from .tracer_tags import _escape as e

register = template.Library()

# The review form's fields in the order the form declares them (``forms.RunReviewForm``).
REVIEW_FIELDS = ("verdict", "verdict_override", "override_reason", "note", "tags", "identical")
IDENTICAL_TITLE = "identical: the same scenario, policy and stop reason, and the same failing tool and error at the end"


@cache
def _urls(prefix: str) -> tuple[str, str]:
    """The runs list's URL and a run's review URL with ``{}`` for its id, under this script prefix
    (reversed once per process)."""
    review = reverse("tracer:run-review", args=[4242424242]).replace("4242424242", "{}")
    return reverse("tracer:runs"), review


def _csrf_input(context: template.Context) -> str:
    """``{% csrf_token %}``: the hidden input with this request's token, nothing without one."""
    token = context.get("csrf_token")
    if not token or token == "NOTPROVIDED":
        return ""
    return f'<input type="hidden" name="csrfmiddlewaretoken" value="{e(token)}">'


def _reviewed(run: Any, review: Any, tags: list, runs_url: str) -> str:
    """The review as stored: why it stopped, an override beside the judge's verdict, its tags, who and
    when, its note."""
    verdict = (
        f'<span class="badge reviewed" title="why the guard stopped it">{e(review.get_verdict_display())}</span>'
        if review.verdict
        else ""
    )
    override = ""
    if review.verdict_override:
        judge = e(run.verdict or "unjudged")
        mine = e(review.verdict_override)
        override = (
            f'<span class="verdict-override">judge: <span class="verdict {judge}">{judge}</span> · reviewer: '
            f'<span class="verdict {mine}">{mine}</span> — {e(review.override_reason)}</span>'
        )
    links = "".join(
        f'<a class="badge tag" href="{e(runs_url)}?tag={e(quote(tag.name))}" title="runs tagged {e(tag.name)}">'
        f"{e(tag.name)}</a> "
        for tag in tags
    )
    reviewer = review.reviewer.get_username() if review.reviewer is not None else ""
    when = date_filter(template_localtime(review.reviewed_at), "M j, H:i") if review.reviewed_at else ""
    note = f'<p class="note">{e(review.note)}</p>' if review.note else ""
    return (
        '\n  <div class="reviewed">\n    <p>\n      <span class="muted">Reviewed:</span>\n      '
        f"{verdict}\n      {override}\n      {links}\n"
        f'      <span class="muted small">— {e(reviewer or "someone")}, {e(when)}</span>\n    </p>\n'
        f"    {note}\n  </div>\n  "
    )


def _field_errors(form: Form | None, errors: dict, name: str, css: str = "error field-error") -> str:
    return "".join(
        f'<p class="{css}">{e(form[name].label[:1].upper() + form[name].label[1:])}: {e(message)}</p>'
        for message in errors.get(name, ())
    )


def _form(context: template.Context, run: Any, review: Any, tags: list, review_url: str) -> str:
    """The review form: the stored review's values, or those posted when the form comes back refused,
    with each field's errors."""
    form = context.get("review_form")
    bound = bool(getattr(form, "is_bound", False))
    errors = form.errors if bound else {}
    data = form.data if bound else {}

    def posted(name: str) -> Any:
        return data.get(name) if bound else None

    def stored(name: str) -> str:
        return getattr(review, name) if review is not None else ""

    def value(name: str) -> str:
        return e(data.get(name, "") if bound else stored(name))

    pk = int(run.pk)
    url = e(review_url.format(pk))
    back = context.get("review_next")
    if not back:
        request = context.get("request")
        back = request.get_full_path() if request is not None else ""
    picked = posted("verdict") if bound else stored("verdict") or None
    if run.is_guard_stop:
        radios = "".join(
            f'<label class="check"><input type="radio" name="verdict" value="{e(v)}" '
            f"{'checked' if picked == v else ''}> {e(label)}</label>"
            for v, label in context.get("stop_verdicts") or ()
        )
        legend = "Change why it stopped" if review is not None and review.verdict else "Why it stopped"
        why = (
            f"\n    <fieldset>\n      <legend>{legend}</legend>\n      {radios}\n      "
            f"{_field_errors(form, errors, 'verdict')}\n    </fieldset>\n    "
        )
    else:
        why = f"{_field_errors(form, errors, 'verdict')}\n    "
    judged = run.verdict or "unjudged"
    chosen = posted("verdict_override") if bound else stored("verdict_override") or None
    options = "".join(
        f'<option value="{e(v)}" {"selected" if chosen == v else ""}>reviewer says {e(v)}</option>'
        for v, _ in context.get("verdicts") or ()
        if v != run.verdict
    )
    tag_text = e(data.get("tags", "")) if bound else e(" ".join(tag.name for tag in tags))
    identical = context.get("identical")
    offer = ""
    if identical:
        ticked = " checked" if bound and data.get("identical") else ""
        n = e(identical)
        offer = (
            f'\n    <input type="hidden" name="identical_offered" value="{n}">\n'
            f'    <label class="check identical" title="{IDENTICAL_TITLE}"><input type="checkbox" name="identical" '
            f'value="on"{ticked}> also the {n} identical unreviewed stop{"" if identical == 1 else "s"} '
            "(same scenario, policy, stop reason, failing tool and error)</label>\n    "
        )
    non_field = "".join(f'<p class="error">{e(m)}</p>' for m in errors.get("__all__", ()))
    return (
        f'\n  <form method="post" action="{url}" hx-post="{url}" hx-target="#run-review-{pk}" hx-swap="outerHTML" '
        f'class="review-form" data-swap-errors>\n    {_csrf_input(context)}\n'
        f'    <input type="hidden" name="next" value="{e(back)}">\n    {why}\n'
        f'    <label>Verdict\n      <select name="verdict_override">\n'
        f'        <option value="">judge\'s verdict stands ({e(judged)})</option>\n        {options}\n'
        f"      </select>\n    </label>\n    {_field_errors(form, errors, 'verdict_override')}\n"
        f'    <label class="grow">Why the judge was wrong <input type="text" name="override_reason" '
        f'value="{value("override_reason")}" placeholder="with an override: what the judge missed"></label>'
        f"{_field_errors(form, errors, 'override_reason')}\n"
        f'    <label class="grow">Note <input type="text" name="note" value="{value("note")}" '
        f'placeholder="what went wrong, what to change"></label>{_field_errors(form, errors, "note")}\n'
        f'    <label>Tags <input type="text" name="tags" value="{tag_text}" '
        f'placeholder="e.g. flaky-judge needs-prompt"></label>{_field_errors(form, errors, "tags")}\n    {offer}\n'
        f"    {_field_errors(form, errors, 'identical')}\n    {non_field}\n"
        '    <button type="submit">Save review</button>\n  </form>\n  '
    )


@register.simple_tag(takes_context=True)
def review_panel(context: template.Context, run: Any) -> SafeString:
    """``run``'s review panel (its ``<section id="run-review-N">``), made in one call: the review as
    stored, a saved message, and for a reviewer of an ended run the form (``review_form``, refused
    with its errors or empty, ``identical`` stops it may cover too); to anyone else, a refused form's
    errors."""
    runs_url, review_url = _urls(get_script_prefix())
    review = getattr(run, "review", None)  # reverse one-to-one: absent raises AttributeError
    tags = list(review.tags.all()) if review is not None else []
    can_review = bool(getattr(context.get("can"), "review", False))
    saved = context.get("saved")
    oob = 'hx-swap-oob="true"' if context.get("oob") else ""
    out = [
        f'<section id="run-review-{int(run.pk)}" class="review" {oob}>',
        "\n  \n  ",
        _reviewed(run, review, tags, runs_url) if review is not None else "",
        "\n  ",
        f'<p class="success" role="status">{e(saved)}</p>' if saved else "",
        "\n  ",
    ]
    if can_review and not run.is_active:
        out.append(f"\n  {_form(context, run, review, tags, review_url)}\n  ")
    elif review is None:
        waiting = "Not reviewed yet. Reviewing runs needs the reviewer role."
        if run.is_active:
            waiting = "Reviewed once it has ended."
        out.append(f'<p class="muted small">{waiting}</p>\n  ')
    out.append("\n  \n  ")
    form = context.get("review_form")
    errors = form.errors if getattr(form, "is_bound", False) else {}
    if errors and (not can_review or run.is_active):
        fields = "".join(_field_errors(form, errors, name, css="error") for name in REVIEW_FIELDS)
        non_field = "".join(f'<p class="error">{e(m)}</p>' for m in errors.get("__all__", ()))
        out.append(f"\n  {fields}\n  {non_field}\n  ")
    out.append("\n</section>")
    return SafeString("".join(out))  # every value above is escaped or an int
