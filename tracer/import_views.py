"""Import and export pages: the upload page, and runs to download (a run as a run document or as
OTLP, a compare pair, an experiment). The work is ``tracer.intake.files``' and ``tracer.export``'s;
these views check who may, and answer."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET, require_http_methods

from . import access
from .export import document as export_document
from .export import otlp as export_otlp
from .forms import CompareForm, ImportForm
from .intake import files
from .models import Experiment, Run
from .reads import run_page
from .tokens import token_user
from .views import fragments

# The report lists at most this many documents per file (every refusal first); the counts are whole.
REPORT_ITEMS_SHOWN = 200


def _report_rows(report: files.FileReport) -> list[files.ItemReport]:
    refused = [item for item in report.items if not item.ok]
    imported = [item for item in report.items if item.ok]
    return (refused + imported)[:REPORT_ITEMS_SHOWN]


@login_required
@require_http_methods(["GET", "POST"])
@fragments
def import_runs(request: HttpRequest) -> HttpResponse:
    """The upload page: several files at once; a report per file and per document of what was
    imported and what was refused, with the path of each bad field."""
    access.permission_require(user=request.user, perms=access.IMPORT, action="import runs")
    form = ImportForm(request.POST or None, request.FILES or None)
    reports = []
    if request.method == "POST" and form.is_valid():
        for upload in form.cleaned_data["files"]:
            report = files.file_import(
                name=upload.name,
                data=upload.read(),
                user=request.user,
                scenario=form.cleaned_data["scenario"],
                policy=form.cleaned_data["policy"],
            )
            reports.append({"file": report, "rows": _report_rows(report)})
    context = {"form": form, "reports": reports, "shown": REPORT_ITEMS_SHOWN}
    status = 400 if form.errors else 200  # a field refused: nothing was read, nothing written
    if request.htmx:
        return render(request, "tracer/import.html#import-report", context, status=status)
    return render(request, "tracer/import.html", context, status=status)


def _lines(documents: Iterable[dict]) -> Iterator[str]:
    for document in documents:
        yield export_document.document_dumps(document) + "\n"


def _attachment(response: HttpResponse, filename: str) -> HttpResponse:
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
@require_GET
def run_export(request: HttpRequest, pk: int) -> HttpResponse:
    """One run as a run document (``rlt.run/1``), downloaded."""
    run = get_object_or_404(Run, pk=pk)
    body = export_document.document_dumps(export_document.run_export(run=run))
    return _attachment(HttpResponse(body, content_type="application/json"), f"run-{run.pk}.json")


@login_required
@require_GET
def compare_export(request: HttpRequest) -> HttpResponse:
    """The two runs of a comparison as JSON Lines (run A, then run B), downloaded."""
    form = CompareForm(request.GET)
    if not form.is_valid():
        problems = "; ".join(f"{form.fields[f].label}: {' '.join(e)}" for f, e in form.errors.items())
        return HttpResponse(problems + "\n", status=400, content_type="text/plain; charset=utf-8")
    a = get_object_or_404(Run, pk=form.cleaned_data["a"])
    b = get_object_or_404(Run, pk=form.cleaned_data["b"])
    response = HttpResponse(
        "".join(_lines(export_document.runs_export(runs=[a, b]))), content_type="application/x-ndjson"
    )
    return _attachment(response, f"compare-{a.pk}-{b.pk}.jsonl")


@login_required
@require_GET
def experiment_export(request: HttpRequest, pk: int) -> HttpResponse:
    """Every top-level run of an experiment as JSON Lines, streamed (a few queries per 200 runs)."""
    experiment = get_object_or_404(Experiment, pk=pk)
    runs = experiment.runs.filter(parent__isnull=True).order_by("id").iterator(chunk_size=export_document.EXPORT_BATCH)
    response = StreamingHttpResponse(
        _lines(export_document.runs_export(runs=runs)), content_type="application/x-ndjson"
    )
    return _attachment(response, f"experiment-{experiment.pk}.jsonl")


PROTOBUF = "application/x-protobuf"


@require_GET
def run_otlp(request: HttpRequest, pk: int) -> HttpResponse:
    """The run as one OTLP trace (GenAI conventions), to load into Phoenix, Langfuse or another receiver:
    OTLP JSON, or protobuf with ``?format=pb`` or ``Accept: application/x-protobuf``. A dashboard login
    sees every run; an API token (``Authorization: Bearer``), as on the API, its user's runs only."""
    if request.user.is_authenticated:
        run = run_page.run_get(pk=pk)
    else:
        user = token_user(request)
        if user is None:
            return redirect_to_login(request.get_full_path())
        run = get_object_or_404(Run, pk=pk, owner=user)
    exported = export_otlp.run_otlp_export(run=run)
    protobuf = request.GET.get("format") == "pb" or PROTOBUF in request.headers.get("Accept", "")
    if protobuf:
        response = HttpResponse(export_otlp.otlp_protobuf(exported), content_type=PROTOBUF)
        response["Vary"] = "Accept"
        return _attachment(response, f"run-{run.pk}.otlp.pb")
    response = JsonResponse(exported, json_dumps_params={"ensure_ascii": False})
    response["Vary"] = "Accept"
    return _attachment(response, f"run-{run.pk}.otlp.json")
