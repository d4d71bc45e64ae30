"""Dashboard pages. Function views: read with ``reads/`` (a module per page), write with services,
branch on ``request.htmx``.

Every page works as a plain link; an htmx request gets only the fragment it targets. A view that
answers a page and its fragments at one URL is ``@fragments``: its responses vary on the htmx
headers, so the browser never shows a cached fragment as the page (the Back button after a filter).
"""

from __future__ import annotations

import re
from functools import cache
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import trigger_client_event

from . import access, previews, reviews, tokens
from .experiments import EXPERIMENT_BACKENDS, experiment_launch, policy_variant_archive, policy_variant_create
from .forms import (
    ID_MAX,
    ApiTokenForm,
    CompareForm,
    FindingsFilterForm,
    LaunchForm,
    MatrixFilterForm,
    PolicyVariantForm,
    RunFilterForm,
    RunReviewForm,
    StopFilterForm,
    ToolsFilterForm,
    add_service_errors,
)
from .models import ApiToken, Run, StopReview, run_cost
from .reads import (
    common,
    compare_page,
    compare_picker,
    experiment_page,
    findings_page,
    matrix,
    run_page,
    runs_list,
    stops_page,
    tools_page,
)
from .reads import findings as findings_reads
from .templatetags.timeline_tags import attempt_value_text, step_value_text

RUNS_PER_PAGE = 50

# django-htmx's guidance for views that switch content on request.htmx: vary on the headers read.
# A history restore (Back after hx-push-url) is asked without HX-Request (base.html's htmx-config:
# historyRestoreAsHxRequest false) and so gets the whole page.
fragments = vary_on_headers("HX-Request", "HX-Target")


@login_required
@require_GET
@fragments
def run_list(request: HttpRequest) -> HttpResponse:
    """Runs filtered, searched and sorted as the query string says, a page of 50; ``run-table`` and
    ``run-rows`` are its fragments. ``run_rows_live`` refreshes the rows of its active runs, and on the
    first page in the default order brings in new runs that match at the top."""
    form = RunFilterForm(request.GET, **runs_list.run_filter_values())
    form.is_valid()
    experiment = form.cleaned_data.get("experiment")
    form.offer_experiments(experiment_page.experiment_choices(selected=[experiment] if experiment else []))
    filters = form.filters()
    sort = filters.get("sort") or runs_list.DEFAULT_RUN_SORT
    # a search too short to run lists nothing and says why, rather than every run under the new words
    search_short = form.has_error("q", code="min_length")
    if search_short:
        page = runs_list.RunPage(runs=[], number=1, count=0, per_page=RUNS_PER_PAGE, has_next=False)
    else:
        page = runs_list.run_list_page(filters=filters, sort=sort, page=request.GET.get("page"), per_page=RUNS_PER_PAGE)
    newest_first = page.number == 1 and sort == runs_list.DEFAULT_RUN_SORT
    after = max((run.pk for run in page), default=0) if newest_first else None
    active = [runs_list.run_version(run) for run in page if run.is_active]
    context = {"form": form, "page": page, "sort": sort, "search_short": search_short}
    context |= _live(request, active=active, after=None if search_short else after)
    if request.htmx.target == "run-rows":
        return render(request, "tracer/run_list.html#run-rows", context)
    if request.htmx.target == "run-table":
        return render(request, "tracer/run_list.html#run-table", context)
    return render(request, "tracer/run_list.html", context)


# The list's filters, which its live poll carries to match new runs as the list does.
LIVE_FILTERS = [name for name in RunFilterForm.base_fields if name != "sort"]


def _live(request: HttpRequest, *, active: list[str], after: int | None) -> dict:
    """The live poll's query string and how often it asks (``live`` empty: it does not). It names the
    active runs by their ``run_version``; with ``after`` (the newest run the list shows) it watches for
    newer runs too, with the list's filters as they were asked."""
    query = [("v", version) for version in active[:RUNS_PER_PAGE]]
    every = "1s" if query else "2s"  # rows to follow; else only new runs to watch for
    if after is not None:
        query += [(name, value) for name in LIVE_FILTERS for value in request.GET.getlist(name) if value]
        query.append(("after", str(after)))
    return {"live": urlencode(query), "live_every": every}


LIVE_VERSION = re.compile(r"([1-9][0-9]{0,18})\.([0-9]{1,10})\.([a-z]{1,10})")
LIVE_AFTER = re.compile(r"0|[1-9][0-9]{0,18}")


@login_required
@require_GET
def run_rows_live(request: HttpRequest) -> HttpResponse:
    """The runs list's live poll. ``?v=<id>.<steps>.<status>`` names each active run as the page shows
    it; ``?after=<id>`` (the first page in the default order) asks too for runs newer than the newest
    it shows that match its filters (the list's, in the query string). The answer is the rows of those
    that changed (out of band), the new ones at the top, and the next poller. When nothing changed and
    no run is new: 204, nothing sent, polling goes on."""
    values = request.GET.getlist("v")[:RUNS_PER_PAGE]
    versions = {}
    for value in values:
        pk = int(value.partition(".")[0]) if LIVE_VERSION.fullmatch(value) else 0
        if not 0 < pk <= ID_MAX:
            message = f"v: expected <run id>.<steps>.<status>, such as 12.3.running; got {value[:40]!r}"
            return render(request, "400.html", {"message": message}, status=400)
        versions[pk] = value
    after = request.GET.get("after")
    if after is not None and not (LIVE_AFTER.fullmatch(after) and int(after) <= ID_MAX):
        message = (
            f"after: expected the id of the newest run the list shows, a whole number (0: none); got {after[:40]!r}"
        )
        return render(request, "400.html", {"message": message}, status=400)
    after = None if after is None else int(after)
    live = runs_list.run_rows_changed(versions=versions, watch=after is not None)
    new, count = [], None
    if after is not None and live.newest > after:
        form = RunFilterForm(request.GET, **runs_list.run_filter_values())
        form.is_valid()
        filters = form.filters()
        new = runs_list.run_rows_new(filters=filters, after=after, newest=live.newest, limit=RUNS_PER_PAGE)
        new = [run for run in new if run.pk not in versions]
        if new:  # the count above the table follows
            count = runs_list.run_count(runs=runs_list.run_list(filters=filters), searched=bool(filters.get("q")))
    elif not live.changed:
        return HttpResponse(status=204)
    context = {"changed": live.changed, "new": new, "count": count, "emptied": after == 0}
    active = [runs_list.run_version(run) for run in new if run.is_active] + live.active
    context |= _live(request, active=active, after=live.newest if after is not None else None)
    return render(request, "tracer/run_list.html#run-live-update", context)


@login_required
@require_GET
@fragments
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A run's page; its ``run-waterfall`` fragment redraws the picture of the run while it runs, asked
    for when the live step fragment says new steps arrived (``runStepsArrived``)."""
    run = run_page.run_shown(pk=pk)
    if request.htmx.target == "run-waterfall":
        context = {"run": run, "waterfall": run_page.run_waterfall(run=run)}
        return render(request, "tracer/run_detail.html#run-waterfall", context)
    window = run_page.step_window_first(run=run, at=common.index_or_zero(request.GET.get("at")))
    sub_agents = run_page.run_sub_agents(
        run=run, shown=run_page.window_indices(window), last=window.last_index if run.is_active else None
    )
    waterfall = run_page.run_waterfall(run=run, window=window, sub_agents=sub_agents)
    findings = findings_reads.run_findings(run=run)
    context = {
        "run": run,
        "findings": findings,
        "findings_by_step": findings_reads.findings_by_step(findings),
        "window": window,
        "last_index": window.last_index,
        "guard_errors": run_page.run_guard_errors(run=run),
        "reruns": run_page.run_reruns(run=run),
        "sub_agents": sub_agents,
        "waterfall": waterfall,
        "others": run_page.run_other_policies(run=run),
        "wasted": _wasted(run, waterfall),
    } | _review_context()
    return render(request, "tracer/run_detail.html", context)


@login_required
@require_GET
@fragments
def step_value(request: HttpRequest, pk: int, index: int, field: str) -> HttpResponse:
    """The whole of one value a page shows the start of (``previews.preview``): step ``index``'s ``field``
    (``timeline_tags.step_value_text``), escaped; to htmx the element that takes the preview's place, to a
    plain link a page of its own. 404 for a run, step or field there is none of."""
    if pk > ID_MAX or index > ID_MAX:
        raise Http404("no such step")
    found = step_value_text(run_page.step_get(run_id=pk, index=index), field)
    if found is None:
        raise Http404(f"step {index} of run {pk} shows no {field!r}")
    return _value_response(
        request, pk=pk, what=f"step {index}'s {field.replace('-', ' ')}", text=found[0], lines=found[1]
    )


@login_required
@require_GET
@fragments
def run_value(request: HttpRequest, pk: int, name: str) -> HttpResponse:
    """The whole of one of a run's long texts (``previews.RUN_TEXTS``) or of an error of the model call that
    ended it (``model-attempt-N-error``), as ``step_value`` answers."""
    if pk > ID_MAX:
        raise Http404("no such run")
    what = name.replace("_", " ").replace("-", " ")
    if name in previews.RUN_TEXTS:
        text = run_page.run_text(pk=pk, name=name)
        return _value_response(request, pk=pk, what=what, text=text, lines=previews.RUN_TEXTS[name])
    failed = run_page.run_text(pk=pk, name="failed_model_call")
    text = attempt_value_text(name, attempts=[], model_attempts=failed)
    if text is None:
        raise Http404(f"run {pk} shows no {name!r}")
    return _value_response(request, pk=pk, what=what, text=text, lines=False)


def _value_response(request: HttpRequest, *, pk: int, what: str, text: str, lines: bool) -> HttpResponse:
    if request.htmx:
        return HttpResponse(previews.whole(text, lines=lines))
    # a <pre> keeps the newlines itself
    context = {"pk": pk, "what": what, "value": mark_safe(previews.whole(text))}  # escaped by whole
    return render(request, "tracer/value.html", context)


def _wasted(run, waterfall) -> dict | None:
    """The repeated failing calls the picture folds (the model calling again what had just failed the
    same way): how many and what their tokens cost (None: no price)."""
    if not waterfall.folded_steps:
        return None
    tokens = waterfall.folded_tokens
    return {
        "calls": waterfall.folded_steps,
        "cost": run_cost(run.model_name, run.started_at or run.created_at, *tokens),
    }


@login_required
@require_GET
@fragments
def run_steps(request: HttpRequest, pk: int) -> HttpResponse:
    """The live fragment: steps after ``?after=``, the run's status, and the next poller while active.
    Asked by a gap in the timeline (``step-gap-N``), the next window of steps after ``?after=`` and
    before ``?before=`` (from the one holding ``?at=``), and gaps for the rest. Asked by a sub-agent's
    fold on its parent's page (``sub-agent-steps-<id>``, this run's id), its first steps."""
    run = run_page.run_shown(pk=pk)  # status first: a run finishing meanwhile still sends its last steps
    if request.htmx.target == f"sub-agent-steps-{run.pk}":  # a sub-agent's fold, opened on its parent's page
        context = {"run": run, "child": run, "steps": run_page.sub_agent_steps_first(run=run)}
        return render(request, "tracer/run_detail.html#sub-agent-steps", context)
    after = common.index_or_zero(request.GET.get("after"))
    if request.htmx.target and request.htmx.target.startswith("step-gap-"):
        before = common.index_or_zero(request.GET.get("before")) or None
        window = run_page.step_window(
            run=run, after=after, before=before, at=common.index_or_zero(request.GET.get("at"))
        )
        context = {
            "run": run,
            "window": window,
            "sub_agents": run_page.run_sub_agents(run=run, shown=run_page.window_indices(window)),
            "findings_by_step": findings_reads.findings_by_step(findings_reads.run_findings(run=run)),
        }
        return render(request, "tracer/run_detail.html#step-window", context)
    window = run_page.step_window_new(run=run, after=after)
    last_index = window.last_index or after
    context = {
        "run": run,
        "window": window,
        "last_index": last_index,
        "guard_errors": run_page.run_guard_errors(run=run),
        "reruns": run_page.run_reruns(run=run),
        # nested under the new steps, those whose step has not come yet in the poller, and those
        # running named on the live line
        "sub_agents": run_page.run_sub_agents(
            run=run, shown=run_page.window_indices(window), last=last_index if run.is_active else None
        ),
        "oob": True,
    }
    if not run.is_active:  # the run's end swaps in its review form, which "Reviewed once it has ended" held
        context |= _review_context() | {"review_next": reverse("tracer:run", args=[run.pk])}
    if request.htmx:
        response = render(request, "tracer/run_detail.html#step-poll", context)
        if window.last_index:  # the picture of the run redraws itself on this (run_detail's run-waterfall)
            trigger_client_event(response, "runStepsArrived")
        return response
    return redirect("tracer:run", pk=pk)


@login_required
@require_GET
@fragments
def compare(request: HttpRequest) -> HttpResponse:
    """Two runs side by side. Without their ids (or with a wrong one), a picker of recent runs by
    scenario, and what was wrong: a field left out, an id that is not a number, a run that is not there.
    The aligned steps are windowed (``tracer/compare_lines.py``): ``?at=N`` adds the lines that hold
    aligned row N, and a gap (``row-gap-N``) is asked for its rows after ``?after=`` and before ``?before=``
    (``&plain=1``: a fold's, unfolded), from the one holding ``?at=``."""
    form = CompareForm(request.GET or None)
    context: dict = {"form": form}
    status = 200
    gap = (request.htmx.target or "").startswith("row-gap-")
    if form.is_valid():
        a_id, b_id = form.cleaned_data["a"], form.cleaned_data["b"]
        at = common.index_or_zero(request.GET.get("at"))
        try:
            if gap:
                cmp = compare_page.run_compare_rows(
                    a_id=a_id,
                    b_id=b_id,
                    after=common.index_or_zero(request.GET.get("after")),
                    before=common.index_or_zero(request.GET.get("before")) or None,
                    at=at,
                    plain=request.GET.get("plain") == "1",
                )
                context = {"cmp": cmp, "a": cmp.a, "b": cmp.b, "d": cmp.divergence}
                return render(request, "tracer/compare.html#aligned-lines", context)
            context["cmp"] = compare_page.run_compare(a_id=a_id, b_id=b_id, at=at)
            context["findings_diff"] = findings_reads.findings_compare(a=context["cmp"].a, b=context["cmp"].b)
        except Http404:
            missing = compare_picker.run_ids_missing(ids=[a_id, b_id])
            for name, pk in (("a", a_id), ("b", b_id)):
                if pk in missing:
                    form.add_error(name, f"there is no run #{pk}")
            status = 404
    elif gap:
        status = 400
    cmp = context.get("cmp")
    context["pairs"] = [] if cmp else compare_picker.suggested_pairs()
    context["has_runs"] = bool(cmp or context["pairs"]) or compare_picker.runs_exist()
    return render(request, "tracer/compare.html", context, status=status)


SUGGEST_TEXT_MAX = 200  # what the compare picker's typeahead looks for


@login_required
@require_GET
def compare_suggest(request: HttpRequest) -> HttpResponse:
    """The compare picker's typeahead: ``?side=a`` (or ``b``) and that side's text in ``a`` (or ``b``),
    answered with the runs it matches, each a button that picks it."""
    side = request.GET.get("side", "")
    if side not in ("a", "b"):
        return HttpResponse("side: expected a or b\n", status=400, content_type="text/plain; charset=utf-8")
    text = request.GET.get(side, "")
    if len(text) > SUGGEST_TEXT_MAX:  # said in the box, where the typeahead shows its answer
        problem = f"at most {SUGGEST_TEXT_MAX} characters; got {len(text)}"
        context = {"side": side, "runs": [], "text": text, "problem": problem}
        return render(request, "tracer/compare.html#compare-suggestions", context)
    runs = compare_picker.run_suggestions(text=text)
    return render(request, "tracer/compare.html#compare-suggestions", {"side": side, "runs": runs, "text": text})


def _scope_form(form_class, request: HttpRequest):
    """A Tools or Findings page's filters, checked against the scenarios, policies and tools runs have."""
    scenarios, policies, _ = runs_list.run_distinct_values()
    form = form_class(
        request.GET,
        scenarios=[s for s in scenarios if s],
        policies=[p for p in policies if p],
        tools=findings_reads.known_tools(),
    )
    form.is_valid()
    return form


@login_required
@require_GET
@fragments
def tools(request: HttpRequest) -> HttpResponse:
    """Every tool over the runs in scope: calls, failures by category over time, retries, wasted tries
    and their cost, findings, message lint and advice. A filter naming nothing known is a 400 that says
    what is valid; ``tool-list`` is the fragment the filters swap."""
    form = _scope_form(ToolsFilterForm, request)
    tool = form.cleaned_data.get("tool") or ""
    context = {"form": form, "page": tools_page.tools_page(scope=form.scope(), tool=tool), "tool": tool}
    status = 400 if form.errors else 200
    if request.htmx.target == "tool-list":
        return render(request, "tracer/tools.html#tool-list", context, status=status)
    return render(request, "tracer/tools.html", context, status=status)


@login_required
@require_GET
@fragments
def findings(request: HttpRequest) -> HttpResponse:
    """Each finding kind's count and trend over the runs in scope, its top tools, one kind's findings
    paged, and the failing runs' patterns. ``finding-body`` is what the filters swap, ``finding-list``
    what the kind links and the pager swap."""
    form = _scope_form(FindingsFilterForm, request)
    data = form.cleaned_data
    page = findings_page.findings_page(
        scope=form.scope(), kind=data.get("kind") or "", tool=data.get("tool") or "", page=request.GET.get("page")
    )
    context = {"form": form, "page": page}
    status = 400 if form.errors else 200
    if request.htmx.target in ("finding-list", "finding-body"):
        return render(request, f"tracer/findings.html#{request.htmx.target}", context, status=status)
    return render(request, "tracer/findings.html", context, status=status)


def _policies_context(request: HttpRequest) -> dict:
    matrix_form = MatrixFilterForm(request.GET)
    narrowing = matrix_form.filters()
    experiments = experiment_page.experiment_choices(selected=narrowing["experiment_ids"])
    known = {e.pk for e in experiments}
    missing = sorted(set(narrowing["experiment_ids"]) - known)  # named on the page and left out
    narrowing["experiment_ids"] = chosen = [pk for pk in narrowing["experiment_ids"] if pk in known]
    archived = matrix.policy_archived_names()
    show_archived = request.GET.get("archived") == "1"
    return {
        "matrix": matrix.policy_matrix(
            policies=request.GET.getlist("policy"),
            page=request.GET.get("page") or 1,
            leave_out=() if show_archived else archived,
            **narrowing,
        ),
        "matrix_form": matrix_form,
        "narrowing": narrowing,
        "experiments": experiments,
        "missing_experiments": missing,
        "experiment_id": chosen[0] if len(chosen) == 1 else None,  # the cells' links narrow the runs list to it
        "cells": "detail" if request.GET.get("cells") == "detail" else "heat",  # the matrix's form
        "archived": archived,
        "show_archived": show_archived,
    }


@login_required
@require_GET
@fragments
def policies(request: HttpRequest) -> HttpResponse:
    context = _policies_context(request)
    if request.htmx.target == "policy-matrix":  # new columns: the summary above follows out of band
        return render(request, "tracer/policies.html#policy-matrix", context | {"oob": True})
    return render(request, "tracer/policies.html", context)


@login_required
@require_GET
@fragments
def policy_variants(request: HttpRequest) -> HttpResponse:
    """The saved variants, archived ones marked, each with its settings."""
    context = {"variants": matrix.policy_variant_list()}
    if request.htmx.target == "policy-list":
        return render(request, "tracer/policy_variants.html#policy-list", context)
    return render(request, "tracer/policy_variants.html", context)


@login_required
@require_http_methods(["GET", "POST"])
@fragments
def policy_create(request: HttpRequest) -> HttpResponse:
    """The new-variant form, its settings showing the chosen base preset's (``?base=``; the form asks
    again with ``HX-Target: policy-form`` when the base changes), and its submission."""
    access.permission_require(user=request.user, perms=access.CREATE_POLICY, action="create policy variants")
    template = "tracer/policy_new.html#policy-form" if request.htmx else "tracer/policy_new.html"
    if request.method == "GET":
        typed = {k: request.GET[k][:500] for k in ("name", "description") if isinstance(request.GET.get(k), str)}
        form = PolicyVariantForm(initial=PolicyVariantForm.base_values(request.GET.get("base", "")) | typed)
        return render(request, template, {"form": form})
    form = PolicyVariantForm(request.POST)
    if form.is_valid():
        try:
            variant = policy_variant_create(name=form.cleaned_data["name"], settings=form.settings(), user=request.user)
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            if request.htmx:
                fresh = PolicyVariantForm(initial=PolicyVariantForm.base_values(form.cleaned_data["base"]))
                response = render(request, template, {"form": fresh, "created": variant})
                return trigger_client_event(response, "policyCreated", {"name": variant.name})
            messages.success(request, f"Policy {variant.name} created.")
            return redirect(reverse("tracer:policy-variants") + f"#variant-{variant.name}")
    return render(request, template, {"form": form})


@login_required
@require_POST
def policy_archive(request: HttpRequest, name: str) -> HttpResponse:
    """Archive a variant (``archived=1``) or bring it back (``archived=0``); its runs are kept."""
    access.permission_require(user=request.user, perms=access.CREATE_POLICY, action="archive policy variants")
    archived = request.POST.get("archived")
    if archived not in ("0", "1"):
        return HttpResponseBadRequest(
            f"archived: expected 1 (archive) or 0 (bring back), got {archived!r}",
            content_type="text/plain; charset=utf-8",
        )
    try:
        variant = policy_variant_archive(name=name, archived=archived == "1")
    except ValidationError as exc:
        return HttpResponse(exc.message_dict["name"][0], status=404, content_type="text/plain; charset=utf-8")
    if request.htmx:
        return render(request, "tracer/policy_variants.html#policy-list", {"variants": matrix.policy_variant_list()})
    messages.success(request, f"Policy {variant.name} {'archived' if variant.archived_at else 'brought back'}.")
    return redirect(reverse("tracer:policy-variants") + f"#variant-{variant.name}")


@login_required
@require_GET
@fragments
def stops(request: HttpRequest) -> HttpResponse:
    """The stop queue: guard stops narrowed by review state, policy, experiment and kind of stop."""
    form = StopFilterForm(request.GET, **stops_page.stop_filter_values())
    state, filters = form.queue_state(), form.filters()
    counts = stops_page.stop_counts(**filters)
    if request.htmx.target == "stop-counts":
        return render(request, "tracer/stops.html#stop-counts", {"counts": counts, "state": state, "form": form})
    page = stops_page.stop_page(state=state, counts=counts, number=request.GET.get("page"), **filters)
    context = {
        "state": state,
        "counts": counts,
        "page": page,
        "cases": stops_page.stop_cases(runs=list(page)),
        "form": form,
        "bulk": _bulk_undo_offer(request),
    } | _review_context()
    if request.htmx.target == "stop-cases":  # after a bulk review: the queue without the stops it covered
        return render(request, "tracer/stops.html#stop-cases", context)
    return render(request, "tracer/stops.html", context, status=400 if form.errors else 200)


def _bulk_undo_offer(request: HttpRequest) -> dict | None:
    """The user's latest bulk review while it may be undone: what it did and until when (one query)."""
    if not request.user.has_perms(access.REVIEW):
        return None
    bulk = reviews.bulk_review_undoable(user=request.user)
    if bulk is None:
        return None
    return {"pk": bulk.pk, "message": reviews.bulk_review_message(bulk), "until": reviews.bulk_review_undo_until(bulk)}


@login_required
@require_POST
def bulk_review_undo(request: HttpRequest, pk: int) -> HttpResponse:
    """Undo a bulk review (``reviews.bulk_review_undo``) and go back to the stop queue saying so; a
    refusal (too late, undone already, changed since) is a 400 page saying why, with nothing changed."""
    access.permission_require(user=request.user, perms=access.REVIEW, action="review runs")
    try:
        bulk = reviews.bulk_review_undo(bulk_id=pk)
    except ValidationError as exc:
        return render(request, "400.html", {"message": f"Not undone: {' '.join(exc.messages)}."}, status=400)
    ids = ", ".join(f"#{i}" for i in bulk.run_ids)
    messages.success(
        request, f"Undid the review of {len(bulk.run_ids)} runs ({ids}): each has its review from before again."
    )
    return HttpResponseRedirect(_safe_next(request, fallback=reverse("tracer:stops")))


def _safe_next(request: HttpRequest, *, fallback: str) -> str:
    """``next`` from the form when it is a path on this site, else ``fallback``.

    Only a path: ``redirect()`` would take a bare word such as ``abc`` for a view name.
    """
    back = request.POST.get("next", "")
    on_site = url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return back if on_site and back.startswith("/") else fallback


def _review_context(form: RunReviewForm | None = None) -> dict:
    """What ``tracer/review.html``'s review panel needs besides the run: the form (by default the
    empty one, ``_review_form_empty``) and the choices."""
    return {
        "review_form": form or _review_form_empty(),
        "stop_verdicts": StopReview.Verdict.choices,
        "verdicts": Run.Verdict.choices,
    }


@cache
def _review_form_empty() -> RunReviewForm:
    """The unbound review form every run page and stop card shows, one per process: the panel only
    reads it (its empty data and errors), and a form's fields are deep-copied each time one is made."""
    return RunReviewForm()


@login_required
@require_POST
def run_review(request: HttpRequest, pk: int) -> HttpResponse:
    """Save a reviewer's review of a run (and, when asked, of every unreviewed stop identical to it).

    htmx gets the run's review panel back and a ``runReviewed`` event (the stop queue's counts refresh);
    after a bulk review also ``stopsReviewed``, on which the queue's list refreshes and shows what was
    saved. Bad input is a 400 with the panel naming each bad field, and nothing is saved.
    """
    access.permission_require(user=request.user, perms=access.REVIEW, action="review runs")
    run = get_object_or_404(Run.objects.select_related("review"), pk=pk)
    form = RunReviewForm(request.POST)
    saved = []
    if form.is_valid():
        try:
            saved = reviews.run_review_save(run=run, user=request.user, **form.cleaned_data)
        except ValidationError as exc:
            add_service_errors(form, exc)
    back = _safe_next(request, fallback=reverse("tracer:run", args=[run.pk]))
    if not request.htmx:
        if saved:
            messages.success(request, _review_saved_message(saved))
            return HttpResponseRedirect(back)
        return render(request, "tracer/review.html", {"run": run, "back": back} | _review_context(form), status=400)
    context = {"run": run, "review_next": back}
    if not saved:
        # the stop queue's "also the N identical" box stays, as ticked as it was, for the next try
        if request.POST.get("identical_offered") and run.is_guard_stop:
            context["identical"] = len(stops_page.stops_identical(run=run))
        return render(request, "tracer/review.html#run-review", context | _review_context(form), status=400)
    run = run_page.run_reviewed(pk=run.pk)  # the review as stored, with its tags and reviewer
    context |= {"run": run, "saved": _review_saved_message(saved)}
    response = render(request, "tracer/review.html#run-review", context | _review_context())
    trigger_client_event(response, "runReviewed", {"runs": [r.run_id for r in saved]})
    if len(saved) > 1:  # the stop queue refreshes its list, where this message shows
        messages.success(request, _review_saved_message(saved))
        trigger_client_event(response, "stopsReviewed", {"runs": [r.run_id for r in saved]})
    return response


def _review_saved_message(saved: list) -> str:
    first, others = saved[0], saved[1:]
    if not others:
        return f"Review of run {first.run_id} saved."
    ids = ", ".join(f"#{r.run_id}" for r in others)
    stops = "stop" if len(others) == 1 else "stops"
    return f"Review of run {first.run_id} saved, and of {len(others)} identical {stops}: {ids}."


@login_required
@require_http_methods(["GET", "POST"])
def launch(request: HttpRequest) -> HttpResponse:
    from agents.scenarios import scenario_groups  # the packs, loaded as the process started (tracer.apps)

    access.permission_require(user=request.user, perms=access.LAUNCH, action="launch experiments")
    packs = [(p.name, p.title, [s.name for s in p.scenarios]) for p in scenario_groups()]
    form = LaunchForm(
        request.POST or None,
        scenarios=[name for _, _, names in packs for name in names],
        packs=packs,
        policies=[v.name for v in matrix.policy_variant_list(archived=False)],
        backends=list(EXPERIMENT_BACKENDS),
    )
    if request.method == "POST" and form.is_valid():
        try:
            experiment = experiment_launch(user=request.user, **form.cleaned_data)
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            return redirect("tracer:experiment", pk=experiment.pk)
    return render(request, "tracer/launch.html", {"form": form, "experiments": experiment_page.experiment_recent()})


@login_required
@require_GET
@fragments
def experiment(request: HttpRequest, pk: int) -> HttpResponse:
    """An experiment's progress, its summary and compare pairs over all its runs, and a page of its runs."""
    exp = experiment_page.experiment_get(pk=pk)
    progress = experiment_page.experiment_progress(experiment=exp)
    page = experiment_page.experiment_runs(experiment=exp, count=progress.runs, number=request.GET.get("page"))
    # the pairs are shown once it is done
    paired = experiment_page.experiment_pair_runs(experiment=exp) if exp.is_done else []
    context = {
        "experiment": exp,
        "page": page,
        "progress": progress,
        "pairs": experiment_page.experiment_pairs(runs=paired, policies=exp.policies, first_repeat=True),
        "matrix": matrix.policy_matrix(policies=exp.policies, experiment_ids=[exp.pk]),
    }
    if request.htmx:
        return render(request, "tracer/experiment.html#experiment-progress", context)
    return render(request, "tracer/experiment.html", context)


@login_required
@require_GET
@fragments
def api_tokens(request: HttpRequest) -> HttpResponse:
    """The user's API tokens, and the form for a new one when the user may add runs (docs/dashboard.md)."""
    context = {"tokens": tokens.token_list(user=request.user)}
    if request.htmx.target == "token-list":
        return render(request, "tracer/tokens.html#token-list", context)
    return render(request, "tracer/tokens.html", context | {"form": ApiTokenForm()})


@login_required
@require_POST
def api_token_create(request: HttpRequest) -> HttpResponse:
    """A new token: its secret is in this one response (never cached) and nowhere else. A token adds
    runs everyone sees, so making one needs the import permission (docs/dashboard.md)."""
    access.permission_require(user=request.user, perms=access.IMPORT, action="create API tokens (they add runs)")
    form = ApiTokenForm(request.POST)
    created = secret = None
    if form.is_valid():
        try:
            created, secret = tokens.token_create(user=request.user, name=form.cleaned_data["name"])
        except ValidationError as exc:
            add_service_errors(form, exc)
    context = {"form": ApiTokenForm() if created else form, "created": created, "secret": secret}
    if request.htmx:
        response = render(request, "tracer/tokens.html#token-form", context)
        if created is not None:
            trigger_client_event(response, "tokenCreated", {"prefix": created.prefix})
    else:
        response = render(request, "tracer/tokens.html", context | {"tokens": tokens.token_list(user=request.user)})
    add_never_cache_headers(response)
    return response


@login_required
@require_POST
def api_token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke one of the user's own tokens; another user's token is a 404."""
    try:
        token = tokens.token_revoke(user=request.user, token_id=pk)
    except ApiToken.DoesNotExist:
        raise Http404("No such token of yours.") from None
    if request.htmx:
        return render(request, "tracer/tokens.html#token-list", {"tokens": tokens.token_list(user=request.user)})
    messages.success(request, f"Token {token.prefix}… ({token.name}) revoked.")
    return redirect("tracer:tokens")
