"""The HTTP API (django-ninja) at ``/api/``: agents report runs live, step by step, or send whole
run documents; ``docs/api.md`` is the guide and ``/api/openapi.json`` the description.

This module only speaks HTTP: every write is ``tracer.intake``'s (``live.imported_run_open``,
``imported_steps_append``, ``imported_run_close``; ``files.runs_import_many``), which records through
``tracer.recording`` like a worker, and every body schema is ``tracer.intake.schema``'s pydantic model.
Every call needs an API token (``tracer.tokens``) as ``Authorization: Bearer``: 401 without a valid
one. A token sees only its user's runs: anyone else's run is a 404. Errors are always
``{"errors": [{"path", "message"}]}`` (``tracer.api_errors``).
"""

from __future__ import annotations

import functools
import logging
from datetime import datetime
from typing import Annotated, Any, Literal

from csp.decorators import csp_update
from django.db import IntegrityError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.request import RawPostDataException
from django.urls import reverse
from ninja import Field, NinjaAPI, Query, Schema, Status, Swagger
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import HttpBearer
from pydantic import BaseModel, ConfigDict, create_model

from agents.diagnosis.kinds import KEYS

from . import access, outage, tokens
from .api_errors import ApiError, StrictJsonParser, body_discard, body_size_check, form_body, json_loads, prefixed
from .export import document as export_document
from .intake import files, live, schema
from .intake.errors import IngestError, RunEnded, StepConflict, pydantic_errors
from .models import Run
from .reads import findings as findings_reads
from .recording import DATABASE_LOST

logger = logging.getLogger(__name__)

ID_MAX = 2**63 - 1  # the largest id a database row has: a larger one is a 400, not a database error
RUNS_PER_PAGE = 50
PAGE_MAX = 1_000_000
STEPS_PER_REQUEST = 1000
BATCH_TYPES = ("application/x-ndjson", "application/jsonl", "application/x-jsonlines", "application/json-seq")


class BearerToken(HttpBearer):
    """``Authorization: Bearer rlt_…``: an API token made on the dashboard's API tokens page."""

    def __call__(self, request: HttpRequest) -> Any:
        return tokens.token_user(request)

    def authenticate(self, request: HttpRequest, token: str) -> Any:  # pragma: no cover - __call__ decides
        return tokens.token_user(request)


def _without_parameter(path: str) -> str:
    """``payload.steps[0].kind`` → ``steps[0].kind``: a body's path without ninja's parameter name."""
    cut = min((i for i in (path.find("."), path.find("[")) if i >= 0), default=len(path))
    rest = path[cut:]
    return rest[1:] if rest.startswith(".") else rest


class TracerApi(NinjaAPI):
    def validation_error_from_error_contexts(self, error_contexts: list) -> NinjaValidationError:
        """ninja's 422 as our 400: the path as the client wrote it (without ninja's ``body`` and the
        parameter's name), the message as ``tracer.intake`` words it for a document."""
        errors: list[dict[str, str]] = []
        for context in error_contexts:
            in_body = context.model.__ninja_param_source__ == "body"
            for error in pydantic_errors(context.pydantic_validation_error):
                path, message = error["path"], error["message"]
                if in_body:
                    path = _without_parameter(path)
                    if not path and message == "required":
                        message = "a JSON object is required as the body"
                errors.append({"path": path, "message": message})
        return NinjaValidationError(errors)


class ApiDocs(Swagger):
    """django-ninja's Swagger UI page, with a bar that leads back to the dashboard."""

    template = "tracer/api_docs.html"


api = TracerApi(
    title="Repair Loop Tracer API",
    version="1",
    description=(
        "Report an agent's runs to Repair Loop Tracer: open a run, append its steps as they happen, "
        "finish it; or send whole run documents (format rlt.run/1) one by one or as JSON Lines. "
        "Every call needs `Authorization: Bearer <token>` (a token from the dashboard's API tokens page). "
        'Errors are `{"errors": [{"path": "steps[0].kind", "message": "…"}]}`.'
    ),
    urls_namespace="api",
    auth=BearerToken(),
    parser=StrictJsonParser(),
    # Swagger UI at /api/docs from this site's static files ("ninja" in INSTALLED_APPS), no CDN; under
    # the CSP it needs one thing more, the data: images of its stylesheet (its select arrows).
    docs=ApiDocs(settings={"persistAuthorization": False}),
    docs_url="/docs",
    docs_decorator=csp_update({"img-src": "data:"}),
)


def _error_response(status: int, errors: list[dict[str, str]], *, headers: dict[str, str] | None = None):
    response = JsonResponse({"errors": errors}, status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def _body_limited(run):
    """Every operation: a body over ``RLT_API_MAX_BYTES`` is a 413 before anything else is read."""

    @functools.wraps(run)
    def limited(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            body_size_check(request)
        except ApiError as exc:
            if exc.status == 413:
                body_discard(request)
            return _error_response(exc.status, exc.errors)
        return run(request, *args, **kwargs)

    return limited


api.add_decorator(_body_limited, mode="view")


@api.exception_handler(ApiError)
def _api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
    return _error_response(exc.status, exc.errors, headers=exc.headers)


@api.exception_handler(NinjaValidationError)
def _validation_error(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    return _error_response(400, exc.errors)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    message = (
        "a valid API token is required as 'Authorization: Bearer <token>'; this request has none, or its "
        "token is unknown or revoked (tokens are made on the dashboard's API tokens page)"
    )
    return _error_response(401, [{"path": "Authorization", "message": message}], headers={"WWW-Authenticate": "Bearer"})


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    cause = exc.__cause__
    if isinstance(cause, ApiError):  # the body parser's own words (ninja wraps them)
        return _error_response(cause.status, cause.errors)
    return _error_response(exc.status_code, [{"path": "", "message": str(exc)}])


@api.exception_handler(IngestError)
def _ingest_error(request: HttpRequest, exc: IngestError) -> HttpResponse:
    status = 409 if isinstance(exc, RunEnded | StepConflict) else 400
    return _error_response(status, exc.errors)


@api.exception_handler(RawPostDataException)
def _form_body(request: HttpRequest, exc: RawPostDataException) -> HttpResponse:
    return _error_response(415, [{"path": "Content-Type", "message": "send the body as JSON (application/json)"}])


@api.exception_handler(Run.DoesNotExist)
def _no_run(request: HttpRequest, exc: Run.DoesNotExist) -> HttpResponse:
    return _error_response(404, [{"path": "run_id", "message": str(exc)}])


@api.exception_handler(IntegrityError)
def _conflict(request: HttpRequest, exc: IntegrityError) -> HttpResponse:
    """Two requests wrote the same run or step at once; the other one won. Sending again is safe."""
    logger.info("API write conflict: %s", exc)
    return _error_response(
        409, [{"path": "", "message": "another request wrote the same run or step at the same time; send it again"}]
    )


def _database_busy(request: HttpRequest, exc: Exception) -> HttpResponse:
    """SQLite's lock held too long by another writer, or a database that went away: try again."""
    logger.warning("API call failed on the database: %s", exc)
    message = f"{outage.database_problem(exc)}; try again shortly"
    return _error_response(503, [{"path": "", "message": message}], headers={"Retry-After": str(outage.RETRY_AFTER_S)})


for _exc_class in DATABASE_LOST:
    api.add_exception_handler(_exc_class, _database_busy)


# --- schemas: the bodies are tracer.intake.schema's; these only shape answers ------------------------

RunId = Annotated[int, Field(ge=1, le=ID_MAX, description="the run's id, as POST /api/runs answered")]

# Opening a run takes the fields of a run document's "run" that are known before it ends.
_OPEN_FIELDS = (
    "external_id",
    "scenario",
    "policy",
    "policy_settings",
    "source",
    "model",
    "task",
    "started_at",
    "labels",
)
RunOpenIn = create_model(
    "RunOpenIn",
    __config__=ConfigDict(extra="forbid"),
    __doc__="A run about to be reported step by step: what is known before it ends. Every field is optional.",
    **{
        name: (schema.RunMeta.model_fields[name].annotation, schema.RunMeta.model_fields[name]) for name in _OPEN_FIELDS
    },
)


class StepsIn(BaseModel):
    """Steps to append, in order. An omitted ``index`` takes the next one; a step sent again with
    the same index and content is harmless (a retried request), with other content a 409."""

    model_config = ConfigDict(extra="forbid")

    steps: list[schema.StepIn] = Field(..., min_length=1, max_length=STEPS_PER_REQUEST)


class RunOut(Schema):
    """A run as the API reports it (``GET /api/runs/{run_id}`` gives the whole document)."""

    id: int
    url: str = Field(description="the run's page on the dashboard")
    status: Literal["queued", "running", "finished"]
    source: str
    external_id: str
    scenario: str
    policy: str
    model: str
    stop_reason: str
    api_stop_reason: str = Field(
        description="the Messages API's stop_reason of the run's last model response (end_turn, max_tokens, "
        'refusal…); "" when unknown'
    )
    verdict: str
    step_count: int
    tool_call_count: int
    error_count: int = Field(description="failed steps: tool calls whose last attempt failed")
    failed_attempt_count: int = Field(description="tool attempts that failed, whether or not a retry then worked")
    retry_count: int
    model_retry_count: int = Field(
        description="model API calls tried again (429, 529, 5xx, no answer), its sub-agents' included"
    )
    labels: dict[str, Any]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class StepsOut(Schema):
    run: RunOut
    indexes: list[int] = Field(description="the indexes the steps of this request were recorded under")


class RunPage(Schema):
    items: list[RunOut]
    count: int
    page: int
    pages: int


class ErrorItem(Schema):
    path: str = Field(description='the bad field as written in the request ("steps[0].kind"), "" for the whole')
    message: str = Field(description="what was expected")


class Errors(Schema):
    errors: list[ErrorItem]


class ImportItem(Schema):
    where: str = Field(description='"line 3" of JSON Lines, "[2]" of a JSON list, "" for a single document')
    ok: bool
    run_id: int | None
    url: str | None
    action: str = Field(description="created, unchanged, completed or replaced; blank when refused")
    steps: int
    errors: list[ErrorItem]


class ImportReport(Schema):
    imported: int
    refused: int
    items: list[ImportItem]


ERRORS = {400: Errors, 401: Errors, 403: Errors, 404: Errors, 409: Errors, 413: Errors, 415: Errors, 503: Errors}


def _run_out(run: Run) -> dict[str, Any]:
    return {
        "id": run.pk,
        "url": reverse("tracer:run", args=[run.pk]),
        "status": run.status,
        "source": run.source,
        "external_id": run.external_id,
        "scenario": run.scenario,
        "policy": run.policy_name,
        "model": run.model_name,
        "stop_reason": run.stop_reason,
        "api_stop_reason": run.api_stop_reason,
        "verdict": run.verdict,
        "step_count": run.step_count,
        "tool_call_count": run.tool_call_count,
        "error_count": run.error_count,
        "failed_attempt_count": run.failed_attempt_count,
        "retry_count": run.retry_count,
        "model_retry_count": run.model_retry_count,
        "labels": run.labels or {},
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
    }


def _may_add_runs(request: HttpRequest) -> None:
    """Writes add runs everyone sees: the token's user needs the import permission, as on the upload page."""
    if not request.auth.has_perms(access.IMPORT):
        message = (
            "this token's user may not add runs (the import permission, tracer.add_run, which an "
            "administrator gives); it can still read the user's own runs"
        )
        raise ApiError.one(403, message, path="Authorization")


def _own_run(request: HttpRequest, run_id: int) -> Run:
    """The run if the token's user sent it; 404 otherwise, whether it exists or not."""
    try:
        return Run.objects.get(pk=run_id, owner=request.auth)
    except Run.DoesNotExist:
        raise Run.DoesNotExist(f"no run {run_id} of yours (a token sees only the runs its user sent)") from None


# --- operations ------------------------------------------------------------------------------


@api.post("/runs", response={201: RunOut, **ERRORS}, tags=["live runs"], summary="Open a run")
def run_open(request: HttpRequest, payload: RunOpenIn):
    """Open a run that will be reported step by step. It shows on the dashboard at once, as running.
    Sending the same ``external_id`` again while that run is open gives the same run (409 once it
    has ended)."""
    _may_add_runs(request)
    meta = schema.RunMeta.model_validate(payload.model_dump(exclude_unset=True) | {"status": "running"})
    run = live.imported_run_open(user=request.auth, source=Run.Source.API, run=meta)
    return Status(201, _run_out(run))


@api.post("/runs/{run_id}/steps", response={200: StepsOut, **ERRORS}, tags=["live runs"], summary="Append steps")
def steps_append(request: HttpRequest, run_id: RunId, payload: StepsIn):
    """Append one or more steps to an open run, in one transaction: all are recorded or none.
    409 once the run has ended."""
    _may_add_runs(request)
    run = _own_run(request, run_id)
    rows = live.imported_steps_append(run=run, steps=payload.steps)
    run.refresh_from_db()
    return {"run": _run_out(run), "indexes": [row.index for row in rows]}


@api.post("/runs/{run_id}/finish", response={200: RunOut, **ERRORS}, tags=["live runs"], summary="Finish a run")
def run_close(request: HttpRequest, run_id: RunId, payload: schema.RunEndIn):
    """End an open run: its stop reason (default: ``final_answer`` when its last step is one),
    final answer (default: the last final-answer step's text), verdict and error if known.
    Finishing it again the same way is harmless; otherwise 409 once it has ended."""
    _may_add_runs(request)
    run = _own_run(request, run_id)
    return _run_out(live.imported_run_close(run=run, end=payload))


@api.get("/runs/{run_id}", response={200: schema.RunDocument, **ERRORS}, tags=["runs"], summary="A run document")
def run_get(request: HttpRequest, run_id: RunId):
    """The run and its steps as a run document (format ``rlt.run/1``), as ``POST /api/imports`` reads it."""
    return export_document.run_export(run=_own_run(request, run_id))


@api.get("/runs", response={200: RunPage, **ERRORS}, tags=["runs"], summary="Your runs")
def run_list(
    request: HttpRequest,
    scenario: Annotated[str, Query(max_length=100, description="only runs of this scenario key")] = "",
    policy: Annotated[str, Query(max_length=40, description="only runs under this policy label")] = "",
    page: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 1,
):
    """The runs this token's user sent (through the API, OTLP or imports), newest first, 50 a page."""
    runs = Run.objects.filter(owner=request.auth)
    if scenario:
        runs = runs.filter(scenario=scenario)
    if policy:
        runs = runs.filter(policy_name=policy)
    count = runs.count()
    pages = max(1, -(-count // RUNS_PER_PAGE))
    start = (page - 1) * RUNS_PER_PAGE
    items = [_run_out(run) for run in runs.order_by("-created_at", "-id")[start : start + RUNS_PER_PAGE]]
    return {"items": items, "count": count, "page": page, "pages": pages}


_IMPORT_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "oneOf": [
                        {"$ref": "#/components/schemas/RunDocument"},
                        {"type": "array", "items": {"$ref": "#/components/schemas/RunDocument"}},
                    ]
                }
            },
            "application/x-ndjson": {
                "schema": {
                    "type": "array",
                    "items": {"$ref": "#/components/schemas/RunDocument"},
                    "description": "JSON Lines: each run document as one line of JSON",
                }
            },
        },
    }
}


@api.post(
    "/imports",
    response={200: ImportReport, 201: ImportReport, **ERRORS},
    tags=["runs"],
    summary="Import run documents",
    openapi_extra=_IMPORT_BODY,
)
def imports(request: HttpRequest):
    """Record whole runs: one run document (``application/json``), a JSON list of them, or JSON Lines
    (``application/x-ndjson``, one document per line). A Messages API transcript (an object with
    ``messages``) is read as a document too. Each document is all or nothing; the report
    says for each where it was, the run it became or why it was refused (with paths). A single
    document answers 201 (or 200 when it changed an earlier one) or 400; a batch answers 200 with
    the report when at least one document was imported, else 400 with the report."""
    _may_add_runs(request)
    content_type = request.content_type or ""
    form_body(request)
    body = request.body
    if content_type in BATCH_TYPES:
        items = _lines(body)
        single = False
    else:
        value = json_loads(body)
        single = not isinstance(value, list)
        items = [("", value)] if single else [(f"[{k}]", item) for k, item in enumerate(value)]
        if not items:
            raise ApiError.one(400, "the list is empty: send at least one run document")
    report = _import_all(request, items)
    imported = sum(1 for item in report if item["ok"])
    body_out = {"imported": imported, "refused": len(report) - imported, "items": report}
    if not imported:
        errors = [
            {"path": prefixed(item["where"], e["path"]) if item["where"] else e["path"], "message": e["message"]}
            for item in report
            for e in item["errors"]
        ]
        return JsonResponse({"errors": errors} | body_out, status=400)
    if single:
        return Status(201 if report[0]["action"] == "created" else 200, body_out)
    return Status(200, body_out)


def _lines(body: bytes) -> list[tuple[str, Any]]:
    """JSON Lines: each non-blank line, parsed, or the ApiError that says why it is not JSON."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError.one(400, f"the body is not UTF-8 text: byte {exc.start} cannot be decoded") from None
    items: list[tuple[str, Any]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            items.append((where, json_loads(line, what=where)))
        except ApiError as exc:
            items.append((where, exc))
    if not items:
        raise ApiError.one(400, "the body has no lines: send one run document (JSON) per line")
    return items


def _import_all(request: HttpRequest, items: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Each item recorded as a run (``files.runs_import_many``: new runs written together, each
    document all or nothing), or refused with its errors: one report entry per item, in order."""
    report: list[dict[str, Any]] = []
    arrivals: list = []
    places: list[int] = []  # report entry of each document
    for where, value in items:
        item = {"where": where, "ok": False, "run_id": None, "url": None, "action": "", "steps": 0, "errors": []}
        report.append(item)
        if isinstance(value, ApiError):
            item["errors"] = value.errors
            continue
        try:
            arrivals.append(files.item_arrival(data=value, source=Run.Source.API, user=request.auth))
        except IngestError as exc:
            item["errors"] = exc.errors
            continue
        places.append(len(report) - 1)
    results = files.runs_import_many(arrivals=arrivals)
    for place, arrival, result in zip(places, arrivals, results, strict=True):
        item = report[place]
        if isinstance(result, IngestError):
            item["errors"] = result.errors
            continue
        run = result.run
        url = reverse("tracer:run", args=[run.pk])
        item.update(ok=True, run_id=run.pk, url=url, action=result.action, steps=len(arrival.steps))
    return report


# --- findings: the lessons' mistakes found in the runs (tracer/diagnosis.py) --------------------------


class FindingOut(Schema):
    """One of the lessons' mistakes seen in a run, as ``manage.py findings --format json`` gives it."""

    kind: str = Field(description="a stable key: " + ", ".join(KEYS))
    run: int
    tool: str
    steps: list[int] = Field(description="the steps that show it (their indexes on the run's page)")
    message: str = Field(description="what happened, with its numbers")
    evidence: str = Field(description="what the model was sent, quoted as it was")
    fix: str = Field(description="what to change: a policy setting by name and value, or a rewritten message")
    setting: dict[str, Any] = Field(description="the policy setting(s) the fix names: name -> value")
    rewrite: str | None = Field(description="for a message: a rewrite that says what, why and what instead")
    basis: str = Field(description="where the facts came from (the tool's category, MCP annotations, …)")
    wasted_calls: int
    wasted_tokens: int
    wasted_ms: float
    cost_usd: str | None = Field(description="the wasted tokens at the model's price on the run's day; null: no price")
    cost: str
    price_basis: str
    rule_set: str
    scenario: str
    policy: str
    source: str
    run_created_at: datetime


class RunFindings(Schema):
    run: int
    diagnosed: bool = Field(description="false for a run still open, or not diagnosed yet")
    rule_set: str
    findings: list[FindingOut]


class FindingPage(Schema):
    items: list[FindingOut]
    page: int
    more: bool = Field(description="whether a next page has findings")


FINDINGS_PER_PAGE = 100


@api.get(
    "/runs/{run_id}/findings", response={200: RunFindings, **ERRORS}, tags=["findings"], summary="A run's findings"
)
def run_findings_get(request: HttpRequest, run_id: RunId):
    """The lessons' mistakes found in one of your runs when it ended, in step order, each with its
    evidence, fix and cost."""
    run = _own_run(request, run_id)
    rows = findings_reads.findings_query(findings_reads.FindingFilter(run_id=run.pk)).order_by("position")
    return {
        "run": run.pk,
        "diagnosed": bool(run.rule_set),
        "rule_set": run.rule_set,
        "findings": [findings_reads.finding_json(f) for f in rows],
    }


@api.get("/findings", response={200: FindingPage, **ERRORS}, tags=["findings"], summary="Findings in your runs")
def findings_list(
    request: HttpRequest,
    kind: Annotated[
        str, Query(max_length=400, description="only these kinds, comma-separated (" + ", ".join(KEYS) + ")")
    ] = "",
    tool: Annotated[str, Query(max_length=200, description="only findings on this tool")] = "",
    since: Annotated[
        str, Query(max_length=40, description="only runs created since: YYYY-MM-DD or an ISO 8601 time")
    ] = "",
    page: Annotated[int, Query(ge=1, le=PAGE_MAX)] = 1,
):
    """The findings in the runs this token's user sent, newest run first, 100 a page. An unknown kind,
    tool or date is a 400 naming what is valid."""
    try:
        chosen = findings_reads.findings_filter(kind=kind, tool=tool, since=since)
    except findings_reads.FindingFilterError as exc:
        raise ApiError.one(400, exc.message, path=exc.field) from None
    rows = findings_reads.findings_query(chosen).filter(run__owner=request.auth)
    start = (page - 1) * FINDINGS_PER_PAGE
    found = list(rows[start : start + FINDINGS_PER_PAGE + 1])
    items = [findings_reads.finding_json(f) for f in found[:FINDINGS_PER_PAGE]]
    return {"items": items, "page": page, "more": len(found) > FINDINGS_PER_PAGE}
