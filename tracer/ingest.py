"""Runs from outside: the project's run document, Messages transcripts, JSON Lines batches, and export.

This module owns turning what another agent sent into recorded runs, and recorded runs back into
documents. Everything it writes goes through ``tracer.recording`` (``run_start``,
``steps_record_many``, ``run_finish``), so counters, divergence, the matrix and the stop queue work
the same for an imported run as for one executed here. The OTLP receiver (``tracer/otlp.py``) and
the step API (``/api/``) call these functions; the upload page and ``manage.py import_traces`` too.

The run document, format ``rlt.run/1`` (``docs/formats.md``), is what ``run_export`` writes and
``run_import`` reads: export then import gives the same steps and fields::

    {"format": "rlt.run/1",
     "run": {"external_id", "scenario", "policy", "policy_settings", "source", "model", "task",
             "status", "stop_reason", "final_answer", "verdict", "verdict_reason", "error", "guard",
             "api_stop_reason", "failed_model_call": [{model attempt}], "model_retry_count",
             "started_at", "finished_at", "labels", "transcript"},     # every key optional
     "steps": [{"index", "kind", "tool_name", "tool_use_id", "input",
                "attempts": [{"number", "ok", "content", "category", "retryable", "message",
                              "backoff_s", "latency_ms", "empty", "result_content"}],
                "result_content", "is_error", "category", "retryable", "retry_count", "latency_ms",
                "input_tokens", "output_tokens", "text", "api_stop_reason",
                "model_attempts": [{"number", "status", "request_id", "error", "error_type",
                                    "retry_after_s", "wait_s", "latency_ms", "continuation"}]}]}

A JSON Lines batch is one document (or transcript) per line. The pydantic models below are the
schema (``RunDocument``, ``RunMeta``, ``StepIn``, ``AttemptIn``, ``RunEndIn``); unknown keys are
refused, so a misspelt field is reported rather than dropped. Fields the contract sketched and this
module names differently: ``run.model`` is the model's name (``Run.model_name``), ``run.policy`` the
policy label (``Run.policy_name``); ``run.source`` is the sender's own word for where the run came
from (stored as ``Run.source_detail`` when the importer names nothing more precise), while
``Run.source`` (import, otlp, api) is set by the path it arrived by.

Interface (keyword-only, HackSoft style):

- ``document_parse(data=…)``: a run document or a Messages transcript (decoded JSON) → ``RunDocument``.
- ``run_import(document=…, user=…, source=…)`` → ``Run``: one transaction per run; a re-sent
  ``external_id`` (same source and owner) updates or dedupes instead of adding a run
  (``run_import_outcome`` also says which).
- ``imported_run_open`` / ``imported_steps_append`` / ``imported_run_close``: a run that arrives
  step by step (the live API, OTLP batches).
- ``run_export(run=…)``, ``runs_export(runs=…)``: documents, for downloads and ``GET`` on the API.
- ``transcript_to_document(transcript=…, meta=…)``: the Messages transcript mapping.
- ``file_import(name=…, data=…, user=…)``: a file (document, transcript, JSON array or JSON Lines)
  with a report per item: what was imported, what was refused and why.

A bad document raises ``IngestError`` whose ``errors`` is a list of ``{"path", "message"}``, e.g.
``{"path": "steps[3].attempts[0].category", "message": "expected one of validation, transient,
permission, business, fatal; got 'x'"}``; nothing is written. ``RunEnded`` (appending to or closing
a run that already ended) and ``StepConflict`` (an index already recorded with other content) are
``IngestError``s too, for an API to answer 409.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from django.db import IntegrityError, transaction
from django.utils import timezone
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
)

from agents.errors import is_empty
from agents.events import Attempt, ModelAttempt, RunEnd, RunStart, StepEvent, Verdict
from agents.vocabulary import ErrorCategory, StepKind, StopReason

from . import recording
from .divergence import canonical
from .json_input import json_parse
from .models import Run, Step

FORMAT = "rlt.run/1"
INT_MAX = 2_147_483_647  # the largest value a PositiveIntegerField holds on PostgreSQL
EXTERNAL_SOURCES = (Run.Source.IMPORT, Run.Source.OTLP, Run.Source.API)
EXPORT_BATCH = 200  # runs per query when exporting many


# --- errors -----------------------------------------------------------------------------------


class IngestError(Exception):
    """A document that cannot be recorded, with every problem found: ``errors`` is a list of
    ``{"path": "steps[3].attempts[0].category", "message": "expected one of …; got 'x'"}``.
    A path of ``""`` is the document (or the file) as a whole."""

    def __init__(self, errors: list[dict[str, str]]) -> None:
        self.errors = errors
        super().__init__(str(self))

    @classmethod
    def one(cls, path: str, message: str) -> IngestError:
        return cls([{"path": path, "message": message}])

    def prefixed(self, prefix: str) -> IngestError:
        """The same errors under ``prefix`` (``"line 3"`` → ``"line 3: steps[0].kind"``), same class."""
        errors = [{"path": _join(prefix, e["path"]), "message": e["message"]} for e in self.errors]
        return type(self)(errors)

    def __str__(self) -> str:
        return "; ".join(f"{e['path']}: {e['message']}" if e["path"] else e["message"] for e in self.errors)


class RunEnded(IngestError):
    """A write to a run that has already ended (or was executed here): refused, nothing written."""


class StepConflict(IngestError):
    """A step index that was already recorded with other content: refused, nothing written."""


def _join(prefix: str, path: str) -> str:
    if not prefix:
        return path
    if not path:
        return prefix
    return f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}"


def _path(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _expected_values(expected: str) -> str:
    """pydantic's "'a', 'b' or 'c'" as "a, b, c"."""
    return expected.replace(" or ", ", ").replace("'", "")


_TYPE_NAMES = {
    "string_type": "a string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "dict_type": "an object",
    "list_type": "a list",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "datetime_type": "a date and time (ISO 8601 with a timezone)",
    "datetime_parsing": "a date and time (ISO 8601 with a timezone)",
    "datetime_from_date_parsing": "a date and time (ISO 8601 with a timezone)",
}


def _pydantic_errors(exc: ValidationError, prefix: str = "") -> list[dict[str, str]]:
    """pydantic's errors as ``{path, message}``, each message saying what was expected and what came."""
    out = []
    for err in exc.errors(include_url=False):
        kind, ctx, given = err["type"], err.get("ctx") or {}, err.get("input")
        if kind == "missing":
            message = "required"
        elif kind == "extra_forbidden":
            message = "unknown field"
        elif kind in ("enum", "literal_error"):
            message = f"expected one of {_expected_values(str(ctx.get('expected', '')))}; got {_shown(given)}"
        elif kind in _TYPE_NAMES:
            message = f"expected {_TYPE_NAMES[kind]}; got {_shown(given)}"
        elif kind == "timezone_aware":
            message = f"expected a date and time with a timezone (e.g. 2025-01-31T09:30:00Z); got {_shown(given)}"
        elif kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
            bounds = {
                "greater_than_equal": f"at least {ctx.get('ge')}",
                "less_than_equal": f"at most {ctx.get('le')}",
                "greater_than": f"more than {ctx.get('gt')}",
                "less_than": f"less than {ctx.get('lt')}",
            }
            message = f"expected a number {bounds[kind]}; got {_shown(given)}"
        elif kind in ("string_too_long", "too_long") and isinstance(given, str):
            message = f"expected at most {ctx.get('max_length')} characters; got {len(given)}"
        elif kind == "finite_number":
            message = f"expected a finite number; got {_shown(given)}"
        else:
            message = f"{err['msg']}; got {_shown(given)}"
        out.append({"path": _join(prefix, _path(err["loc"])), "message": message})
    return out


# --- the run document, v1 ---------------------------------------------------------------------


def _none_as_blank(value: Any) -> Any:
    return "" if value is None else value


Text = Annotated[str, BeforeValidator(_none_as_blank)]
Count = Annotated[int, Field(ge=0, le=INT_MAX)]
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Scalar = str | int | float | bool | None


def _in_utc(moment: datetime) -> datetime:
    """The same moment in UTC: ISO 8601 allows offsets up to ±23:59, PostgreSQL stores ±15:59 at most."""
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise ValueError("out of range once in UTC") from None


Moment = Annotated[AwareDatetime, AfterValidator(_in_utc)]


class _Schema(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class AttemptIn(_Schema):
    """One try of one tool call (``agents.events.Attempt``; a test keeps the two in step)."""

    number: Annotated[int, Field(ge=1, le=INT_MAX)]
    ok: StrictBool
    content: Any = None  # what the tool produced
    category: ErrorCategory | None = None  # when not ok
    retryable: StrictBool | None = None
    message: str | None = None
    backoff_s: Seconds = 0.0  # waited before this attempt
    latency_ms: Seconds = 0.0
    empty: StrictBool = False  # ok, but nothing was found
    result_content: Any = None  # the tool_result content made of this attempt
    is_error: StrictBool | None = None  # the tool_result's is_error for this attempt, when known
    transport: Annotated[str, Field(max_length=40)] | None = None  # how the harness reached the tool (e.g. mcp)
    mcp_result: dict[str, Any] | None = None  # over MCP: the CallToolResult as the wire spells it (isError)

    def to_attempt(self) -> Attempt:
        # from_dict keeps the fields this version of Attempt has: a newer document still loads.
        return Attempt.from_dict(self.model_dump(mode="json"))


class ModelAttemptIn(_Schema):
    """One HTTP attempt of the model call that made a step (``agents.events.ModelAttempt``)."""

    number: Annotated[int, Field(ge=1, le=INT_MAX)]
    status: Annotated[int, Field(ge=100, le=599)] | None = None  # None: no response came
    request_id: Annotated[str, Field(max_length=200)] | None = None
    error: Annotated[str, Field(max_length=1000)] | None = None
    error_type: Annotated[str, Field(max_length=100)] | None = None
    retry_after_s: Seconds | None = None
    wait_s: Seconds = 0.0  # waited before this attempt
    latency_ms: Seconds = 0.0
    continuation: bool = False  # it began a call continuing a paused turn (pause_turn), not a retry

    def to_model_attempt(self) -> ModelAttempt:
        return ModelAttempt.from_dict(self.model_dump(mode="json"))


class StepIn(_Schema):
    """One tool_use with its attempts, or the final answer (``agents.events.StepEvent``).

    Omitted, these are made from the attempts: ``index`` (the step's place, 1-based),
    ``is_error`` (the last attempt failed), ``category`` and ``retryable`` (the last failed
    attempt's), ``retry_count`` (attempts − 1), ``latency_ms`` (attempts' latency plus backoff),
    ``result_content`` (the last attempt's). A tool_use without attempts gets one made from the
    step's own fields (ok unless ``is_error``).
    """

    index: Annotated[int, Field(ge=1, le=INT_MAX)] | None = None
    kind: StepKind
    tool_name: Annotated[Text, Field(max_length=100)] = ""
    tool_use_id: Annotated[Text, Field(max_length=100)] = ""
    input: dict[str, Any] | None = None
    attempts: list[AttemptIn] = Field(default_factory=list)
    result_content: Any = None
    is_error: StrictBool | None = None
    category: ErrorCategory | None = None
    retryable: StrictBool | None = None
    retry_count: Count | None = None
    latency_ms: Seconds | None = None
    input_tokens: Count = 0
    output_tokens: Count = 0
    text: Text = ""
    model_attempts: list[ModelAttemptIn] = Field(default_factory=list)  # of the model call that made it
    api_stop_reason: Annotated[Text, Field(max_length=40)] = ""  # the Messages API's, for the response that made it

    def to_event(self, *, index: int) -> StepEvent:
        """The ``StepEvent`` the recorder writes, with omitted fields made from the attempts."""
        given = self.model_fields_set
        attempts = [a.to_attempt() for a in self.attempts]
        if self.kind == StepKind.TOOL_USE and not attempts and "attempts" not in given:
            failed = bool(self.is_error)
            attempts = [
                Attempt(
                    number=1,
                    ok=not failed,
                    content=self.result_content,
                    category=self.category.value if failed and self.category else None,
                    retryable=self.retryable if failed else None,
                    latency_ms=self.latency_ms or 0.0,
                    result_content=self.result_content,
                )
            ]
        last = attempts[-1] if attempts else None
        last_failed = last is not None and not last.ok
        is_error = self.is_error if "is_error" in given and self.is_error is not None else last_failed
        category = self.category.value if self.category else None
        if "category" not in given and last_failed:
            category = last.category
        retryable = self.retryable
        if "retryable" not in given and last_failed:
            retryable = last.retryable
        result_content = self.result_content
        if "result_content" not in given and last is not None:
            result_content = last.result_content
        retry_count = self.retry_count if self.retry_count is not None else max(len(attempts) - 1, 0)
        latency_ms = self.latency_ms
        if latency_ms is None:
            latency_ms = round(sum(a.latency_ms + a.backoff_s * 1000 for a in attempts), 3)
        return StepEvent(
            index=index,
            kind=self.kind.value,
            tool_name=self.tool_name or None,
            tool_use_id=self.tool_use_id or None,
            input=self.input,
            attempts=attempts,
            result_content=result_content,
            is_error=is_error,
            category=category,
            retryable=retryable,
            retry_count=retry_count,
            latency_ms=latency_ms,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            text=self.text or None,
            model_attempts=[a.to_model_attempt() for a in self.model_attempts],
            api_stop_reason=self.api_stop_reason or None,
        )


class RunMeta(_Schema):
    """What a document says about the run. Every field is optional: a run from outside may not know
    its scenario, policy or verdict. Runs sent with the same ``scenario`` key compare and aggregate
    in the matrix with built-in runs of that scenario."""

    external_id: Annotated[Text, Field(max_length=200)] = ""  # the sender's id (a trace id)
    scenario: Annotated[Text, Field(max_length=100)] = ""
    policy: Annotated[Text, Field(max_length=40)] = ""  # the policy label
    policy_settings: dict[str, Any] = Field(default_factory=dict)  # a harness policy's settings, if known
    source: Annotated[Text, Field(max_length=200)] = ""  # the sender's word for where it came from
    model: Annotated[Text, Field(max_length=100)] = ""  # the model's name
    task: Text = ""
    status: Literal["running", "finished"] = "finished"
    # Left out: final_answer when the last step is one, else unknown; null: unknown.
    stop_reason: StopReason | None = None
    final_answer: Text | None = None  # default: the last final-answer step's text
    verdict: Literal["pass", "fail"] | None = None  # blank: unknown
    verdict_reason: Text = ""
    error: Text = ""
    guard: Annotated[Text, Field(max_length=200)] = ""
    api_stop_reason: Annotated[Text, Field(max_length=40)] = ""  # the Messages API's, of the last response
    # The attempts of the model call that failed for good and ended the run (it crashed), when one did.
    failed_model_call: list[ModelAttemptIn] = Field(default_factory=list)
    # The run's model retries, a coordinator's sub-agents' included (not in its document); left out:
    # counted from the steps' model_attempts and failed_model_call.
    model_retry_count: Count | None = None
    started_at: Moment | None = None
    finished_at: Moment | None = None
    labels: dict[Annotated[str, Field(max_length=100)], Scalar] = Field(default_factory=dict)
    transcript: Any = None  # the raw exchange (a Messages transcript), stored on the run


class RunEndIn(_Schema):
    """How a run that arrived step by step ended (``imported_run_close``)."""

    stop_reason: StopReason | None = None  # left out: final_answer when the last step is one; null: unknown
    final_answer: Text | None = None
    verdict: Literal["pass", "fail"] | None = None
    verdict_reason: Text = ""
    error: Text = ""
    guard: Annotated[Text, Field(max_length=200)] = ""
    api_stop_reason: Annotated[Text, Field(max_length=40)] = ""
    finished_at: Moment | None = None
    transcript: Any = None


class RunDocument(_Schema):
    """A run and its steps, format ``rlt.run/1``: what ``run_export`` writes and ``run_import`` reads."""

    format: Literal["rlt.run/1"] = FORMAT
    run: RunMeta = Field(default_factory=RunMeta)
    steps: list[StepIn] = Field(default_factory=list)


# --- checks pydantic cannot express ------------------------------------------------------------


def _text_problem(value: str) -> str | None:
    """Why the database cannot store ``value``, if it cannot."""
    if "\x00" in value:
        return "contains a NUL character (\\u0000), which the database cannot store"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (e.g. \\ud800), which is not valid Unicode"
    return None


def _storable(value: Any, path: str, errors: list[dict[str, str]]) -> None:
    """Every string in ``value`` (keys too) can be stored; numbers are finite. One ``json.dumps``
    answers for the common case; only a suspect value is walked, to name the paths."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=str)
        text.encode("utf-8")
    except (ValueError, UnicodeEncodeError):
        pass
    else:
        if "\\u0000" not in text:
            return
    _storable_walk(value, path, errors)


def _storable_walk(value: Any, path: str, errors: list[dict[str, str]]) -> None:
    if isinstance(value, str):
        if problem := _text_problem(value):
            errors.append({"path": path, "message": problem})
    elif isinstance(value, float):
        if not math.isfinite(value):
            errors.append({"path": path, "message": f"expected a finite number; got {value}"})
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and (problem := _text_problem(key)):
                errors.append({"path": path, "message": f"a key {problem}"})
            _storable_walk(item, f"{path}.{key}" if path else str(key), errors)
    elif isinstance(value, list | tuple):
        for k, item in enumerate(value):
            _storable_walk(item, f"{path}[{k}]", errors)


def _steps_check(steps: Sequence[StepIn], *, first_index: int, prefix: str = "steps") -> list[dict[str, str]]:
    """Rules across fields: steps and attempts numbered in order, a tool_use names its tool,
    a final answer has no attempts."""
    errors: list[dict[str, str]] = []
    for k, step in enumerate(steps):
        path = f"{prefix}[{k}]"
        expected = first_index + k
        if step.index is not None and step.index != expected:
            errors.append(
                {
                    "path": f"{path}.index",
                    "message": f"expected {expected} (steps are numbered 1, 2, 3… in order); got {step.index}",
                }
            )
        if step.kind == StepKind.TOOL_USE and not step.tool_name:
            errors.append({"path": f"{path}.tool_name", "message": "required for a tool_use step"})
        if step.kind == StepKind.FINAL_ANSWER and step.attempts:
            errors.append({"path": f"{path}.attempts", "message": "a final_answer step has no attempts"})
        for n, attempt in enumerate(step.attempts):
            if attempt.number != n + 1:
                errors.append(
                    {
                        "path": f"{path}.attempts[{n}].number",
                        "message": f"expected {n + 1} (attempts are numbered 1, 2, 3… in order); got {attempt.number}",
                    }
                )
    return errors


def _document_check(document: RunDocument) -> None:
    """Raise ``IngestError`` with every problem pydantic's types do not catch."""
    errors = _steps_check(document.steps, first_index=1)
    meta = document.run
    if meta.verdict_reason and meta.verdict is None:
        errors.append({"path": "run.verdict_reason", "message": "a verdict_reason needs a verdict (pass or fail)"})
    if meta.started_at and meta.finished_at and meta.finished_at < meta.started_at:
        errors.append({"path": "run.finished_at", "message": "is before run.started_at"})
    if meta.status == "running" and "finished_at" in meta.model_fields_set and meta.finished_at is not None:
        errors.append({"path": "run.finished_at", "message": "a running run has not finished; leave it out"})
    if meta.status == "running" and meta.failed_model_call:
        errors.append({"path": "run.failed_model_call", "message": "a running run has not ended; leave it out"})
    _storable(document.model_dump(mode="python", exclude_defaults=True), "", errors)
    if errors:
        raise IngestError(errors)


# --- parsing ----------------------------------------------------------------------------------


def document_validate(data: Any, *, prefix: str = "") -> RunDocument:
    """A run document (decoded JSON) as ``RunDocument``, or ``IngestError`` naming each bad field."""
    if not isinstance(data, Mapping):
        raise IngestError.one(prefix, f"expected a JSON object (a run document); got {type(data).__name__}")
    if "format" not in data:
        raise IngestError.one(_join(prefix, "format"), f"required; expected {FORMAT!r}")
    if data["format"] != FORMAT:
        raise IngestError.one(
            _join(prefix, "format"), f"unknown format version {_shown(data['format'])}; this server reads {FORMAT!r}"
        )
    try:
        document = RunDocument.model_validate(data)
    except ValidationError as exc:
        raise IngestError(_pydantic_errors(exc, prefix)) from None
    try:
        _document_check(document)
    except IngestError as exc:
        raise exc.prefixed(prefix) from None
    return document


def document_parse(*, data: Any, meta: RunMeta | None = None) -> RunDocument:
    """A run document or a Messages transcript (decoded JSON) as a ``RunDocument``.

    A JSON object with ``"format"`` is a run document; one with ``"messages"`` is a transcript
    (``transcript_to_document``, with ``meta`` for what a transcript does not say).
    """
    if isinstance(data, Mapping) and "format" not in data and "messages" in data:
        return transcript_to_document(transcript=data, meta=meta)
    if not isinstance(data, Mapping) or not ({"format", "run", "steps"} & set(data)):
        raise IngestError.one(
            "",
            'expected a run document (a JSON object with "format": "rlt.run/1") or a Messages transcript '
            '(a JSON object with "messages")',
        )
    return document_validate(data)


def document_label(document: RunDocument, *, scenario: str = "", policy: str = "") -> RunDocument:
    """``document`` with the scenario key and policy label an importer gave (blank: as the document says)."""
    changes = {k: v for k, v in (("scenario", scenario), ("policy", policy)) if v}
    if not changes:
        return document
    try:
        meta = RunMeta.model_validate(document.run.model_dump(exclude_unset=True) | changes)
    except ValidationError as exc:
        raise IngestError(_pydantic_errors(exc, "run")) from None
    return document.model_copy(update={"run": meta})


# --- Messages transcripts ---------------------------------------------------------------------


def _blocks(content: Any, path: str, errors: list[dict[str, str]]) -> list[dict[str, Any]]:
    """A message's content as blocks: a string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        message = f"expected a string or a list of content blocks; got {_shown(content)}"
        errors.append({"path": path, "message": message})
        return []
    out = []
    for k, block in enumerate(content):
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            errors.append({"path": f"{path}[{k}]", "message": 'expected a content block (an object with "type")'})
            continue
        out.append(dict(block, _path=f"{path}[{k}]"))
    return out


def _maybe_json(text: str) -> Any:
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json_parse(stripped)
        except ValueError:  # not JSON, or too deep to read: kept as the text it is
            return text
    return text


def _result_value(content: Any) -> Any:
    """What a tool_result's content says: a string (JSON decoded when it is JSON), or its text blocks
    joined and decoded the same way; other blocks (images) are kept as they are."""
    if isinstance(content, str):
        return _maybe_json(content)
    if isinstance(content, list):
        if content and all(isinstance(b, Mapping) and b.get("type") == "text" for b in content):
            return _maybe_json("\n".join(str(b.get("text", "")) for b in content))
        return content
    return content


@dataclass
class _ErrorFields:
    is_error: bool
    category: str | None
    retryable: bool | None
    message: str | None
    empty: bool


def _error_fields(value: Any) -> _ErrorFields | None:
    """A structured error (lesson 002): ``isError`` with ``errorCategory``, ``isRetryable`` and
    ``message``, at the top or under ``"error"``. None when ``value`` carries none of them."""
    if not isinstance(value, Mapping):
        return None
    inner = value.get("error") if isinstance(value.get("error"), Mapping) else value
    keys = ("isError", "errorCategory", "isRetryable")
    if not any(k in value for k in keys) and not any(k in inner for k in keys) and inner is value:
        return None
    category = inner.get("errorCategory", value.get("errorCategory"))
    retryable = inner.get("isRetryable", value.get("isRetryable"))
    message = inner.get("message", value.get("message"))
    flagged = value.get("isError") is True or inner.get("isError") is True
    known = {c.value for c in ErrorCategory}
    return _ErrorFields(
        is_error=flagged,
        category=category if category in known else None,
        retryable=retryable if isinstance(retryable, bool) else None,
        message=message if isinstance(message, str) else None,
        empty=category == "empty",
    )


def _attempt_from_result(block: Mapping[str, Any], number: int, errors: list[dict[str, str]]) -> dict[str, Any]:
    """One attempt from a ``tool_result`` block: ``is_error`` (API) or an MCP ``CallToolResult``'s
    ``isError``; a structured error's category and retryable flag; "nothing found" is not an error."""
    path = block["_path"]
    flag = block.get("is_error", False)
    if not isinstance(flag, bool):
        errors.append({"path": f"{path}.is_error", "message": f"expected true or false; got {_shown(flag)}"})
        flag = False
    raw = block.get("content")
    value = _result_value(raw)
    mcp_flag = False
    # An MCP CallToolResult passed through as the content: {"content": [blocks], "isError": …}.
    if isinstance(value, Mapping) and isinstance(value.get("content"), list) and "isError" in value:
        mcp_flag = value.get("isError") is True
        structured = value.get("structuredContent")
        value = structured if structured is not None else _result_value(value["content"])
    fields = _error_fields(value)
    failed = flag or mcp_flag or bool(fields and fields.is_error)
    message = fields.message if fields else None
    if failed and message is None and isinstance(value, str):
        message = value
    return {
        "number": number,
        "ok": not failed,
        "content": value,
        "category": fields.category if failed and fields else None,
        "retryable": fields.retryable if failed and fields else None,
        "message": message if failed else None,
        "backoff_s": 0.0,
        "latency_ms": 0.0,
        "empty": bool(fields and fields.empty) or (not failed and is_empty(value)),
        "result_content": raw,
    }


def _tokens(message: Mapping[str, Any]) -> tuple[int, int]:
    usage = message.get("usage")
    if not isinstance(usage, Mapping):
        return 0, 0
    values = []
    for key in ("input_tokens", "output_tokens"):
        n = usage.get(key)
        values.append(n if isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= INT_MAX else 0)
    return values[0], values[1]


def transcript_to_document(*, transcript: Any, meta: RunMeta | None = None) -> RunDocument:
    """A Messages API transcript (``{"model", "system", "tools", "messages"}``, as the API takes
    them) as a run document. ``meta`` supplies what a transcript does not say (scenario, policy,
    external_id, …); the transcript itself is stored on the run.

    - Each ``tool_use`` and its ``tool_result`` (matched by ``tool_use_id``) is an attempt. A call
      identical (tool and input) to one of the previous assistant turn whose result was an error is
      a retry by the model: another attempt of that step, not a new step.
    - A result is an error when the block says ``is_error``, an MCP ``CallToolResult`` says
      ``isError``, or a structured error says ``isError``; its ``errorCategory`` and ``isRetryable``
      fill category and retryable. An empty result is not an error.
    - The first user text is the task; a last assistant turn without tool_use is the final answer.
    - Token counts come from a message's ``usage`` when the transcript kept it (responses do).
    """
    errors: list[dict[str, str]] = []
    if not isinstance(transcript, Mapping):
        raise IngestError.one("", f"expected a Messages transcript (a JSON object); got {type(transcript).__name__}")
    messages = transcript.get("messages")
    if not isinstance(messages, list) or not messages:
        raise IngestError.one("messages", "expected a non-empty list of messages")
    model = transcript.get("model", "")
    if model is not None and not isinstance(model, str):
        errors.append({"path": "model", "message": f"expected a string; got {_shown(model)}"})
        model = ""
    steps: list[dict[str, Any]] = []
    pending: dict[str, tuple[dict[str, Any], str, str]] = {}  # tool_use_id -> (step, call key, path)
    answered: set[str] = set()
    failed_last_turn: dict[str, dict[str, Any]] = {}  # call key -> step whose last attempt failed
    task = ""
    final: tuple[str, tuple[int, int]] | None = None
    for i, message in enumerate(messages):
        path = f"messages[{i}]"
        if not isinstance(message, Mapping):
            errors.append({"path": path, "message": "expected a message object with role and content"})
            continue
        role = message.get("role")
        if role not in ("user", "assistant"):
            errors.append({"path": f"{path}.role", "message": f"expected one of user, assistant; got {_shown(role)}"})
            continue
        blocks = _blocks(message.get("content"), f"{path}.content", errors)
        if role == "assistant":
            for use_id, (_, _, use_path) in pending.items():
                errors.append(
                    {"path": use_path, "message": f"tool_use {use_id!r} has no tool_result in the next user message"}
                )
            pending = {}
            text = "\n".join(str(b.get("text", "")) for b in blocks if b["type"] == "text").strip()
            uses = [b for b in blocks if b["type"] == "tool_use"]
            tokens = _tokens(message)
            final = (text, tokens) if not uses else None
            retried_from = failed_last_turn
            failed_last_turn = {}
            for k, use in enumerate(uses):
                use_path = use["_path"]
                use_id, name, tool_input = use.get("id"), use.get("name"), use.get("input", {})
                if not isinstance(use_id, str) or not use_id:
                    errors.append({"path": f"{use_path}.id", "message": "expected the tool_use id, a string"})
                    continue
                if not isinstance(name, str) or not name:
                    errors.append({"path": f"{use_path}.name", "message": "expected the tool's name, a string"})
                    continue
                if not isinstance(tool_input, Mapping):
                    message = f"expected an object; got {_shown(tool_input)}"
                    errors.append({"path": f"{use_path}.input", "message": message})
                    continue
                key = name + "\x1f" + canonical(tool_input)
                step = retried_from.pop(key, None)
                if step is None:
                    step = {
                        "index": len(steps) + 1,
                        "kind": StepKind.TOOL_USE.value,
                        "tool_name": name,
                        "tool_use_id": use_id,
                        "input": dict(tool_input),
                        "attempts": [],
                        "input_tokens": tokens[0] if k == 0 else 0,
                        "output_tokens": tokens[1] if k == 0 else 0,
                        "text": text if k == 0 else "",
                    }
                    steps.append(step)
                else:
                    step["input_tokens"] += tokens[0] if k == 0 else 0
                    step["output_tokens"] += tokens[1] if k == 0 else 0
                pending[use_id] = (step, key, use_path)
            continue
        # a user message: the task, or the results of the last assistant turn's calls
        results = [b for b in blocks if b["type"] == "tool_result"]
        if not task and not results:
            task = "\n".join(str(b.get("text", "")) for b in blocks if b["type"] == "text").strip()
        for block in results:
            use_id = block.get("tool_use_id")
            if not isinstance(use_id, str):
                message = f"expected the id of a tool_use, a string; got {_shown(use_id)}"
                errors.append({"path": f"{block['_path']}.tool_use_id", "message": message})
                continue
            if use_id not in pending:
                again = use_id in answered
                errors.append(
                    {
                        "path": f"{block['_path']}.tool_use_id",
                        "message": (
                            f"a second tool_result for tool_use {_shown(use_id)}"
                            if again
                            else f"{_shown(use_id)} matches no tool_use of the assistant message before it"
                        ),
                    }
                )
                continue
            step, key, _ = pending.pop(use_id)
            answered.add(use_id)
            attempt = _attempt_from_result(block, len(step["attempts"]) + 1, errors)
            step["attempts"].append(attempt)
            if not attempt["ok"]:
                failed_last_turn[key] = step
        if not results:
            failed_last_turn = {}
    # Calls of the last turn with no result: the transcript ends before them; they stay, unanswered.
    if errors:
        raise IngestError(errors)
    if final is not None:
        text, tokens = final
        steps.append(
            {
                "index": len(steps) + 1,
                "kind": StepKind.FINAL_ANSWER.value,
                "text": text,
                "input_tokens": tokens[0],
                "output_tokens": tokens[1],
            }
        )
    for step in steps:
        attempts = step.get("attempts")
        if attempts:
            last = attempts[-1]
            step["result_content"] = last["result_content"]
            step["is_error"] = not last["ok"]
            step["category"] = last["category"]
            step["retryable"] = last["retryable"]
            step["retry_count"] = len(attempts) - 1
            step["latency_ms"] = 0.0
    run = (meta or RunMeta()).model_dump(exclude_unset=True)
    run.setdefault("model", model or "")
    run.setdefault("task", task)
    run.setdefault("stop_reason", StopReason.FINAL_ANSWER.value if final is not None else None)
    run["transcript"] = dict(transcript)
    return document_validate({"format": FORMAT, "run": run, "steps": steps})


# --- writing ----------------------------------------------------------------------------------


def _owner(user: Any) -> Any:
    return user if user is not None and getattr(user, "is_authenticated", False) else None


def _source_check(source: str) -> str:
    if source not in EXTERNAL_SOURCES:
        raise ValueError(f"source must be one of {', '.join(EXTERNAL_SOURCES)} for a run from outside; got {source!r}")
    return source


def _step_dict(step: StepEvent | Step) -> dict[str, Any]:
    """A step as the document writes it; the same for an event and the row it was written as."""
    if isinstance(step, Step):
        attempts = step.attempts or []
        model_attempts = step.model_attempts or []
        api_stop_reason = step.api_stop_reason
    else:
        attempts = [a.to_dict() for a in step.attempts]
        model_attempts = [a.to_dict() for a in step.model_attempts]
        api_stop_reason = step.api_stop_reason
    return recording._jsonable(
        {
            "index": step.index,
            "kind": step.kind,
            "tool_name": step.tool_name or "",
            "tool_use_id": step.tool_use_id or "",
            "input": step.input,
            "attempts": attempts,
            "result_content": step.result_content,
            "is_error": step.is_error,
            "category": step.category or None,
            "retryable": step.retryable,
            "retry_count": step.retry_count,
            "latency_ms": float(step.latency_ms),
            "input_tokens": step.input_tokens,
            "output_tokens": step.output_tokens,
            "text": step.text or "",
            **({"model_attempts": model_attempts} if model_attempts else {}),
            **({"api_stop_reason": api_stop_reason} if api_stop_reason else {}),
        }
    )


def _events(steps: Sequence[StepIn], *, first_index: int) -> list[StepEvent]:
    return [step.to_event(index=first_index + k) for k, step in enumerate(steps)]


def _run_end(*, end: RunMeta | RunEndIn, events: Sequence[StepEvent] | None, last_kind: str | None) -> RunEnd:
    """The ``RunEnd`` of an imported run: stop reason and final answer made from its last step if not given."""
    stop_reason = end.stop_reason.value if end.stop_reason else ""
    # Left out, it is made from the last step; given as null, it is unknown.
    if "stop_reason" not in end.model_fields_set and last_kind == StepKind.FINAL_ANSWER:
        stop_reason = StopReason.FINAL_ANSWER.value
    final_answer = end.final_answer
    if final_answer is None:
        answers = [e.text or "" for e in events or [] if e.kind == StepKind.FINAL_ANSWER]
        final_answer = answers[-1] if answers else ""
    verdict = Verdict(passed=end.verdict == "pass", reason=end.verdict_reason) if end.verdict else None
    failed_call = end.failed_model_call if isinstance(end, RunMeta) else []
    return RunEnd(
        stop_reason=stop_reason,
        final_answer=final_answer,
        verdict=verdict,
        error=end.error,
        guard=end.guard,
        api_stop_reason=end.api_stop_reason or None,
        transcript=end.transcript if end.transcript not in (None, [], {}) else [],
        model_attempts=[a.to_model_attempt() for a in failed_call],
    )


def _start(meta: RunMeta) -> RunStart:
    return RunStart(
        scenario=meta.scenario,
        policy_name=meta.policy,
        policy_settings=meta.policy_settings,
        model_backend=Run.ModelBackend.IMPORTED,
        model_name=meta.model,
        task=meta.task,
    )


def document_record(
    *, document: RunDocument, user: Any = None, source: str = Run.Source.IMPORT, source_detail: str = ""
) -> recording.RunRecord:
    """A new run from outside, as ``recording.runs_record_many`` writes it: the run document mapped
    to the run's fields (model backend ``imported``), its start, its steps and, unless the document
    says ``"status": "running"``, its end. The one place a document becomes a run."""
    meta = document.run
    events = _events(document.steps, first_index=1)
    run = Run(
        source=_source_check(source),
        source_detail=(source_detail or meta.source)[:200],
        external_id=meta.external_id,
        owner=_owner(user),
        labels=meta.labels,
        model_backend=Run.ModelBackend.IMPORTED,
        started_at=meta.started_at or timezone.now(),
        status=Run.Status.QUEUED,
    )
    end = None
    if meta.status == "finished":
        end = _run_end(end=meta, events=events, last_kind=events[-1].kind if events else None)
    return recording.RunRecord(
        run=run,
        start=_start(meta),
        steps=events,
        end=end,
        finished_at=meta.finished_at,
        model_retry_count=meta.model_retry_count,
    )


def _run_begin(*, run: Run, meta: RunMeta) -> None:
    recording.run_start(run=run, start=_start(meta))


def _find(*, source: str, owner: Any, external_id: str, lock: bool = False) -> Run | None:
    if not external_id:
        return None
    runs = Run.objects.filter(source=source, owner=owner, external_id=external_id)
    if lock:
        runs = runs.select_for_update()
    return runs.first()


@dataclass(frozen=True)
class ImportOutcome:
    """What ``run_import_outcome`` did: ``created`` a run; left an identical one ``unchanged``;
    ``completed`` a run that was open (its new steps appended, then ended); ``replaced`` the steps
    and fields of a run sent before with the same ``external_id``."""

    run: Run
    action: Literal["created", "unchanged", "completed", "replaced"]


def _meta_matches(run: Run, meta: RunMeta) -> bool:
    """Whether every field the document sets already has that value on ``run``."""
    stored = _run_meta_out(run)
    given = meta.model_dump(mode="json", exclude_unset=True)
    given.pop("status", None)
    if given.get("model_retry_count", 0) is None:  # null: counted from the steps, as it was
        given.pop("model_retry_count")
    if "failed_model_call" in given:  # each attempt with every field, as it is stored
        given["failed_model_call"] = [a.to_model_attempt().to_dict() for a in meta.failed_model_call]
    for name in ("started_at", "finished_at"):  # compared as moments, whatever the timezone written
        if name in given:
            given.pop(name)
            if getattr(meta, name) != getattr(run, name):
                return False
    return all(stored.get(k) == v for k, v in given.items() if k in stored)


def run_import_outcome(
    *, document: RunDocument, user: Any = None, source: str = Run.Source.IMPORT, source_detail: str = ""
) -> ImportOutcome:
    """``run_import``, saying what it did (``ImportOutcome.action``)."""
    _source_check(source)
    _document_check(document)
    owner = _owner(user)
    try:
        return _import_once(document=document, owner=owner, source=source, source_detail=source_detail)
    except IntegrityError:
        # Another request created the same external_id meanwhile: that run stands; compare against it.
        external_id = document.run.external_id
        if not external_id or _find(source=source, owner=owner, external_id=external_id) is None:
            raise
        return _import_once(document=document, owner=owner, source=source, source_detail=source_detail)


def _import_once(*, document: RunDocument, owner: Any, source: str, source_detail: str) -> ImportOutcome:
    meta = document.run
    events = _events(document.steps, first_index=1)
    last_kind = events[-1].kind if events else None
    finished = meta.status == "finished"
    with transaction.atomic():
        existing = _find(source=source, owner=owner, external_id=meta.external_id, lock=True)
        action = "created"
        if existing is None:
            record = document_record(document=document, user=owner, source=source, source_detail=source_detail)
            (run,) = recording.runs_record_many(records=[record])
            return ImportOutcome(run=run, action=action)
        run = existing
        stored = [_step_dict(s) for s in run.steps.order_by("index")]
        wanted = [_step_dict(e) for e in events]
        same_meta = _meta_matches(run, meta)
        if stored == wanted and same_meta and run.is_active != finished:
            return ImportOutcome(run=run, action="unchanged")
        rewrite = not (run.is_active and wanted[: len(stored)] == stored)  # its steps changed, or it ended
        action = "completed" if same_meta and not rewrite else "replaced"
        if rewrite:
            recording.imported_run_reset(run=run)
        if rewrite or not same_meta:
            # the new document's fields, as a replacement writes them; steps it keeps stay (a live
            # trace whose root span arrives last brings the run's labels with its last steps)
            fields = _reset_fields(meta=meta, source_detail=source_detail)
            Run.objects.filter(pk=run.pk).update(**fields)
            for name, value in fields.items():
                setattr(run, name, value)
            _run_begin(run=run, meta=meta)
        recording.steps_record_many(run=run, steps=events if rewrite else events[len(stored) :])
        if finished:
            recording.run_finish(
                run=run, end=_run_end(end=meta, events=events, last_kind=last_kind), finished_at=meta.finished_at
            )
        if meta.model_retry_count is not None:  # the sender's count stands for the one made from its steps
            Run.objects.filter(pk=run.pk).update(model_retry_count=meta.model_retry_count)
        run.refresh_from_db()  # as stored: the recorder's counters, its redaction
    return ImportOutcome(run=run, action=action)


def _reset_fields(*, meta: RunMeta, source_detail: str) -> dict[str, Any]:
    """What a replaced run takes from its new document before ``run_start`` (which keeps a field the
    new document leaves blank, so the earlier value is cleared here first)."""
    return {
        "source_detail": (source_detail or meta.source)[:200],
        "labels": meta.labels,
        "started_at": meta.started_at or timezone.now(),
        "scenario": "",
        "policy_name": "",
        "model_name": "",
        "task": "",
        "policy_settings": {},
    }


def run_import(
    *, document: RunDocument, user: Any = None, source: str = Run.Source.IMPORT, source_detail: str = ""
) -> Run:
    """Record one run document as a run from outside, in one transaction: the run (``source``,
    ``source_detail``, owner ``user``), each step through ``recording.steps_record_many``, and its end
    through ``recording.run_finish`` (unless the document says ``"status": "running"``). Its model
    backend is ``imported``; scenario, policy and verdict are what the document says (blank if not).

    With an ``external_id`` already imported from the same source by the same owner: an identical
    document changes nothing, a longer one completes a run still open, anything else replaces the
    earlier steps and fields (the run keeps its id). ``IngestError`` (nothing written) for a
    document that breaks the format's rules.
    """
    return run_import_outcome(document=document, user=user, source=source, source_detail=source_detail).run


BATCH_RUNS = 200  # new runs written per transaction by runs_import_many


def runs_import_many(
    *,
    documents: Sequence[RunDocument],
    user: Any = None,
    source: str = Run.Source.IMPORT,
    source_detail: str = "",
    progress: Callable[[int], None] | None = None,
) -> list[ImportOutcome | IngestError]:
    """``run_import`` for many documents (a JSON Lines batch), fast: one result per document, in
    order, an ``ImportOutcome`` or the ``IngestError`` that refused it.

    Each document is still all or nothing. New runs are written ``BATCH_RUNS`` at a time through
    ``recording.runs_record_many`` (one transaction, two multi-row ``INSERT``s); a document whose
    ``external_id`` was sent before, or repeats one earlier in the batch, goes through
    ``run_import_outcome`` on its own (dedupe or replace), and so does every document of a group
    that could not be written together (an id taken meanwhile by another request).
    ``progress(n)`` is called with the number of documents done so far.
    """
    _source_check(source)
    owner = _owner(user)
    results: list[ImportOutcome | IngestError | None] = [None] * len(documents)
    for k, document in enumerate(documents):
        try:
            _document_check(document)
        except IngestError as exc:
            results[k] = exc
    ids = [d.run.external_id for k, d in enumerate(documents) if results[k] is None and d.run.external_id]
    taken: set[str] = set()
    for start in range(0, len(ids), 500):
        taken |= set(
            Run.objects.filter(source=source, owner=owner, external_id__in=ids[start : start + 500]).values_list(
                "external_id", flat=True
            )
        )
    fresh: list[int] = []
    alone: list[int] = []
    for k, document in enumerate(documents):
        if results[k] is not None:
            continue
        external_id = document.run.external_id
        (alone if external_id and external_id in taken else fresh).append(k)
        if external_id:
            taken.add(external_id)
    done = sum(1 for r in results if r is not None)
    for start in range(0, len(fresh), BATCH_RUNS):
        group = fresh[start : start + BATCH_RUNS]
        records = [
            document_record(document=documents[k], user=owner, source=source, source_detail=source_detail)
            for k in group
        ]
        try:
            runs = recording.runs_record_many(records=records)
        except IntegrityError:
            alone.extend(group)
            continue
        for k, run in zip(group, runs, strict=True):
            results[k] = ImportOutcome(run=run, action="created")
        done += len(group)
        if progress is not None:
            progress(done)
    for k in sorted(alone):
        try:
            results[k] = run_import_outcome(
                document=documents[k], user=owner, source=source, source_detail=source_detail
            )
        except IngestError as exc:
            results[k] = exc
        done += 1
        if progress is not None:
            progress(done)
    return [result for result in results if result is not None]  # every place is filled above


def imported_run_open(*, user: Any, source: str, run: RunMeta, source_detail: str = "") -> Run:
    """Start a run that arrives step by step (status ``running``). Opening the same ``external_id``
    again returns the open run; ``RunEnded`` if that run has already ended."""
    _source_check(source)
    errors: list[dict[str, str]] = []
    _storable(run.model_dump(mode="python", exclude_defaults=True), "run", errors)
    if errors:
        raise IngestError(errors)
    owner = _owner(user)
    try:
        with transaction.atomic():
            existing = _find(source=source, owner=owner, external_id=run.external_id)
            if existing is not None:
                if not existing.is_active:
                    raise RunEnded.one(
                        "run.external_id",
                        f"run {existing.pk} with external_id {run.external_id!r} has already ended "
                        f"({existing.stop_reason or 'finished'}); send it as a new run with another id",
                    )
                return existing
            document = RunDocument(run=run.model_copy(update={"status": "running"}))
            record = document_record(document=document, user=owner, source=source, source_detail=source_detail)
            (created,) = recording.runs_record_many(records=[record])
            return created
    except IntegrityError:
        existing = _find(source=source, owner=owner, external_id=run.external_id)
        if existing is None:
            raise
        return imported_run_open(user=user, source=source, run=run, source_detail=source_detail)


def _ended(run_id: int, what: str) -> RunEnded:
    row = Run.objects.filter(pk=run_id).values("status", "stop_reason", "source").first()
    if row is None:
        return RunEnded.one("", f"run {run_id} does not exist; {what} refused")
    if row["source"] == Run.Source.AGENT:
        return RunEnded.one("", f"run {run_id} was executed here, not sent from outside; {what} refused")
    return RunEnded.one("", f"run {run_id} has already ended ({row['stop_reason'] or 'finished'}); {what} refused")


def imported_steps_append(*, run: Run, steps: Sequence[StepIn]) -> list[Step]:
    """Append steps to an open run from outside, in one transaction, and return them as recorded.

    Indexes continue the run's steps (an omitted index takes the next one). A step whose index is
    already recorded with the same content is returned as it is (a re-sent batch is harmless);
    with other content it is a ``StepConflict``. ``RunEnded`` once the run has ended.
    """
    if run.source == Run.Source.AGENT:
        raise _ended(run.pk, "steps")
    with transaction.atomic():
        state = Run.objects.select_for_update().filter(pk=run.pk).values("status", "step_count", "source").first()
        if state is None or state["status"] == Run.Status.FINISHED or state["source"] == Run.Source.AGENT:
            raise _ended(run.pk, "steps")
        recorded = state["step_count"]
        repeats = [s for s in steps if s.index is not None and s.index <= recorded]
        fresh = [s for s in steps if not (s.index is not None and s.index <= recorded)]
        errors = _steps_check(fresh, first_index=recorded + 1)
        known = {row.index: row for row in run.steps.filter(index__in=[s.index for s in repeats])}
        kept: list[Step] = []
        for k, step in enumerate(steps):
            if step.index is None or step.index > recorded:
                continue
            row = known.get(step.index)
            if row is None or _step_dict(row) != _step_dict(step.to_event(index=step.index)):
                raise StepConflict.one(
                    f"steps[{k}].index",
                    f"step {step.index} of run {run.pk} was already recorded with other content; "
                    f"the next new step is {recorded + 1}",
                )
            kept.append(row)
        if errors:
            # _steps_check numbered the fresh steps from 0; name them by their place in the request.
            places = [k for k, s in enumerate(steps) if not (s.index is not None and s.index <= recorded)]
            for error in errors:
                where = int(error["path"].split("[", 1)[1].split("]", 1)[0])
                error["path"] = error["path"].replace(f"steps[{where}]", f"steps[{places[where]}]", 1)
            raise IngestError(errors)
        storable: list[dict[str, str]] = []
        for k, step in enumerate(steps):
            _storable(step.model_dump(mode="python", exclude_defaults=True), f"steps[{k}]", storable)
        if storable:
            raise IngestError(storable)
        try:
            rows = recording.steps_record_many(run=run, steps=_events(fresh, first_index=recorded + 1))
        except recording.RunNotRunning as exc:
            raise RunEnded.one("", str(exc)) from None
    return sorted(kept + rows, key=lambda row: row.index)


def imported_run_close(*, run: Run, end: RunEndIn) -> Run:
    """End a run that arrived step by step, through ``recording.run_finish``. Closing it again with
    the same stop reason returns it unchanged; ``RunEnded`` if it ended otherwise."""
    if run.source == Run.Source.AGENT:
        raise _ended(run.pk, "its end")
    errors: list[dict[str, str]] = []
    _storable(end.model_dump(mode="python", exclude_defaults=True), "", errors)
    if errors:
        raise IngestError(errors)
    last = run.steps.order_by("-index").first()
    answers = run.steps.filter(kind=Step.Kind.FINAL_ANSWER).order_by("-index").values_list("text", flat=True)[:1]
    event_like = [StepEvent(index=0, kind=StepKind.FINAL_ANSWER, text=t) for t in answers]
    run_end = _run_end(end=end, events=event_like, last_kind=last.kind if last else None)
    if not recording.run_finish(run=run, end=run_end, finished_at=end.finished_at):
        run.refresh_from_db()
        if run.stop_reason == run_end.stop_reason and run.final_answer == (run_end.final_answer or ""):
            return run
        raise _ended(run.pk, "its end")
    run.refresh_from_db()
    return run


# --- export -----------------------------------------------------------------------------------


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def _run_meta_out(run: Run) -> dict[str, Any]:
    transcript = run.transcript if run.transcript not in (None, [], {}) else None
    return {
        "external_id": run.external_id,
        "scenario": run.scenario,
        "policy": run.policy_name,
        "policy_settings": run.policy_settings or {},
        "source": run.source_detail if run.source != Run.Source.AGENT else run.source,
        "model": run.model_name,
        "task": run.task,
        "status": "finished" if run.status == Run.Status.FINISHED else "running",
        "stop_reason": run.stop_reason or None,
        "final_answer": run.final_answer if run.status == Run.Status.FINISHED else None,
        "verdict": run.verdict or None,
        "verdict_reason": run.verdict_reason,
        "error": run.error,
        "guard": run.guard,
        **({"api_stop_reason": run.api_stop_reason} if run.api_stop_reason else {}),
        **({"failed_model_call": run.failed_model_call} if run.failed_model_call else {}),
        "model_retry_count": run.model_retry_count,
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "labels": run.labels or {},
        "transcript": transcript,
    }


def _document_out(run: Run, steps: Iterable[Step]) -> dict[str, Any]:
    return {"format": FORMAT, "run": _run_meta_out(run), "steps": [_step_dict(s) for s in steps]}


def run_export(*, run: Run) -> dict[str, Any]:
    """A run and its steps as a run document (``rlt.run/1``), ready for ``json.dumps``. Two queries
    at most: the run given, its steps."""
    return _document_out(run, run.steps.order_by("index"))


def runs_export(*, runs: Iterable[Run]) -> Iterator[dict[str, Any]]:
    """Documents for many runs (an experiment, a compare pair), in the order given, reading steps
    for ``EXPORT_BATCH`` runs per query, so memory stays bounded for a large experiment."""
    batch: list[Run] = []

    def flush() -> Iterator[dict[str, Any]]:
        by_run: dict[int, list[Step]] = {run.pk: [] for run in batch}
        for step in Step.objects.filter(run_id__in=list(by_run)).order_by("run_id", "index"):
            by_run[step.run_id].append(step)
        for run in batch:
            yield _document_out(run, by_run[run.pk])

    for run in runs:
        batch.append(run)
        if len(batch) >= EXPORT_BATCH:
            yield from flush()
            batch = []
    if batch:
        yield from flush()


def document_dumps(document: Mapping[str, Any]) -> str:
    """One document as one line of JSON (a JSON Lines batch is these, one per line)."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), default=str)


# --- files and batches ------------------------------------------------------------------------


@dataclass
class ItemReport:
    """One document of a file: where it was (``"line 3"``, ``"[2]"``, ``""`` for the whole file), and
    the run it became or the errors that refused it."""

    where: str
    run_id: int | None = None
    action: str = ""  # an ImportOutcome action when imported
    steps: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


@dataclass
class FileReport:
    name: str
    items: list[ItemReport] = field(default_factory=list)

    @property
    def imported(self) -> int:
        return sum(1 for item in self.items if item.ok)

    @property
    def refused(self) -> int:
        return sum(1 for item in self.items if not item.ok)


def _decode_error(exc: json.JSONDecodeError) -> str:
    return f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"


def file_items(*, name: str, data: bytes) -> tuple[list[tuple[str, Any]], list[ItemReport]]:
    """Split a file into (where, decoded JSON) items: a ``.jsonl`` / ``.ndjson`` file or several JSON
    values one per line → one item per non-blank line; a JSON array → one per element; a JSON object
    → one item. Items that cannot be decoded come back as refused reports."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return [], [ItemReport(where="", errors=[{"path": "", "message": f"not UTF-8 text (byte {exc.start})"}])]
    lines_mode = name.lower().endswith((".jsonl", ".ndjson"))
    if not lines_mode:
        try:
            whole = json_parse(text)
        except json.JSONDecodeError as exc:
            if exc.msg != "Extra data":
                return [], [ItemReport(where="", errors=[{"path": "", "message": _decode_error(exc)}])]
            lines_mode = True  # several JSON values, one per line: JSON Lines whatever the name
        except ValueError as exc:  # too deep, NaN or Infinity
            return [], [ItemReport(where="", errors=[{"path": "", "message": f"not read: {exc}"}])]
        else:
            if isinstance(whole, list):
                return [(f"[{k}]", item) for k, item in enumerate(whole)], []
            return [("", whole)], []
    items: list[tuple[str, Any]] = []
    refused: list[ItemReport] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            items.append((where, json_parse(line)))
        except json.JSONDecodeError as exc:
            refused.append(
                ItemReport(
                    where=where, errors=[{"path": "", "message": f"malformed JSON: {exc.msg} (column {exc.colno})"}]
                )
            )
        except ValueError as exc:  # too deep, NaN or Infinity
            refused.append(ItemReport(where=where, errors=[{"path": "", "message": f"not read: {exc}"}]))
    if not items and not refused:
        refused.append(ItemReport(where="", errors=[{"path": "", "message": "the file is empty"}]))
    return items, refused


def file_import(
    *,
    name: str,
    data: bytes,
    user: Any = None,
    source: str = Run.Source.IMPORT,
    scenario: str = "",
    policy: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> FileReport:
    """Import every document or transcript in a file, each all or nothing (``runs_import_many``), and
    report each: the run it became, or why it was refused (paths named). ``scenario`` / ``policy``
    label every run (blank: as each document says). ``progress(done, total)`` is called as documents
    are written."""
    report = FileReport(name=name)
    items, refused = file_items(name=name, data=data)
    total = len(items) + len(refused)
    report.items.extend(refused)
    meta = RunMeta(scenario=scenario, policy=policy) if (scenario or policy) else None
    parsed: list[tuple[ItemReport, RunDocument]] = []
    for where, value in items:
        item = ItemReport(where=where)
        report.items.append(item)
        try:
            document = document_label(document_parse(data=value, meta=meta), scenario=scenario, policy=policy)
        except IngestError as exc:
            item.errors = exc.errors
        else:
            parsed.append((item, document))
    already = total - len(parsed)

    def advanced(n: int) -> None:
        if progress is not None:
            progress(already + n, total)

    results = runs_import_many(
        documents=[document for _, document in parsed],
        user=user,
        source=source,
        source_detail=name[:200],
        progress=advanced,
    )
    for (item, document), result in zip(parsed, results, strict=True):
        if isinstance(result, IngestError):
            item.errors = result.errors
        else:
            item.run_id, item.action, item.steps = result.run.pk, result.action, len(document.steps)
    if progress is not None and not parsed:
        progress(total, total)
    report.items.sort(key=_item_order)
    return report


def _item_order(item: ItemReport) -> tuple[int, int]:
    digits = "".join(ch for ch in item.where if ch.isdigit())
    return (0 if not item.where else 1, int(digits) if digits else 0)
