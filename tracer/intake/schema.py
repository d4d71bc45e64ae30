"""The run document, format ``rlt.run/1`` (``docs/formats.md``): its schema, its rules, and how a
document becomes the typed values every source maps to (``intake.record.Arrival``).

The pydantic models here are the schema (``RunDocument``, ``RunMeta``, ``StepIn``, ``AttemptIn``,
``ModelAttemptIn``, ``RunEndIn``); unknown keys are refused, so a misspelt field is reported rather
than dropped. The API's bodies are these models too. Fields the contract sketched and this module
names differently: ``run.model`` is the model's name (``Run.model_name``), ``run.policy`` the policy
label (``Run.policy_name``); ``run.source`` is the sender's own word for where the run came from
(stored as ``Run.source_detail`` when the importer names nothing more precise), while ``Run.source``
(import, otlp, api) is set by the path it arrived by.

- ``document_validate(data)``: decoded JSON → ``RunDocument``, or ``IngestError`` naming each bad field.
- ``document_arrival(document, …)``: the document as an ``Arrival`` for ``intake.record.runs_record``.
- ``step_dict(step)``: a step as the document writes it, the same for a ``StepEvent`` and its stored
  row (what the export writes, and what a re-sent step is compared by).
- ``storable(value, path, errors)``: the checks of what no database stores (NUL, lone surrogates).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any, Literal

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

from agents import names
from agents.events import Attempt, ModelAttempt, RunEnd, StepEvent, Verdict
from agents.vocabulary import ErrorCategory, StepKind, StopReason

from .. import recording
from ..models import Step
from .errors import IngestError, join, pydantic_errors, shown
from .record import Arrival, run_start_of

FORMAT = "rlt.run/1"
INT_MAX = 2_147_483_647  # the largest value a PositiveIntegerField holds on PostgreSQL


def _none_as_blank(value: Any) -> Any:
    return "" if value is None else value


Text = Annotated[str, BeforeValidator(_none_as_blank)]


# The names a run's matrix row and column come from, as a policy variant's name is checked (agents.names).
ScenarioKey = Annotated[Text, AfterValidator(partial(names.name_checked, limit=names.SCENARIO_KEY_MAX))]
PolicyLabel = Annotated[Text, AfterValidator(partial(names.name_checked, limit=names.POLICY_NAME_MAX))]
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
    # what the policy's clean_error_text took out of the failure's text before the model read it
    removed: list[Annotated[str, Field(max_length=100)]] = Field(default_factory=list)

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
    # The step whose call this one repeats, as a document read back has it: the recorder marks repeats
    # from the steps themselves, whatever the source, so a value sent here is not what is stored.
    repeat_of: Annotated[int, Field(ge=1, le=INT_MAX)] | None = None

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
    scenario: ScenarioKey = ""
    policy: PolicyLabel = ""  # the policy label
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


def storable(value: Any, path: str, errors: list[dict[str, str]]) -> None:
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


def steps_check(steps: Sequence[StepIn], *, first_index: int, prefix: str = "steps") -> list[dict[str, str]]:
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


def document_check(document: RunDocument) -> None:
    """Raise ``IngestError`` with every problem pydantic's types do not catch."""
    errors = steps_check(document.steps, first_index=1)
    meta = document.run
    if meta.verdict_reason and meta.verdict is None:
        errors.append({"path": "run.verdict_reason", "message": "a verdict_reason needs a verdict (pass or fail)"})
    if meta.started_at and meta.finished_at and meta.finished_at < meta.started_at:
        errors.append({"path": "run.finished_at", "message": "is before run.started_at"})
    if meta.status == "running" and "finished_at" in meta.model_fields_set and meta.finished_at is not None:
        errors.append({"path": "run.finished_at", "message": "a running run has not finished; leave it out"})
    if meta.status == "running" and meta.failed_model_call:
        errors.append({"path": "run.failed_model_call", "message": "a running run has not ended; leave it out"})
    storable(document.model_dump(mode="python", exclude_defaults=True), "", errors)
    if errors:
        raise IngestError(errors)


def document_validate(data: Any, *, prefix: str = "") -> RunDocument:
    """A run document (decoded JSON) as ``RunDocument``, or ``IngestError`` naming each bad field."""
    if not isinstance(data, Mapping):
        raise IngestError.one(prefix, f"expected a JSON object (a run document); got {type(data).__name__}")
    if "format" not in data:
        raise IngestError.one(join(prefix, "format"), f"required; expected {FORMAT!r}")
    if data["format"] != FORMAT:
        raise IngestError.one(
            join(prefix, "format"), f"unknown format version {shown(data['format'])}; this server reads {FORMAT!r}"
        )
    try:
        document = RunDocument.model_validate(data)
    except ValidationError as exc:
        raise IngestError(pydantic_errors(exc, prefix)) from None
    try:
        document_check(document)
    except IngestError as exc:
        raise exc.prefixed(prefix) from None
    return document


def step_dict(step: StepEvent | Step) -> dict[str, Any]:
    """A step as the document writes it; the same for an event and the row it was written as."""
    if isinstance(step, Step):
        attempts = step.attempts or []
        model_attempts = step.model_attempts or []
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
            **({"repeat_of": step.repeat_of} if step.repeat_of else {}),
        }
    )


def steps_events(steps: Sequence[StepIn], *, first_index: int) -> list[StepEvent]:
    return [step.to_event(index=first_index + k) for k, step in enumerate(steps)]


def run_end_of(*, end: RunMeta | RunEndIn, answers: Sequence[str], last_kind: str | None) -> RunEnd:
    """The ``RunEnd`` of a document's run (or of a live run's ``finish``): its stop reason left out is
    ``final_answer`` when the last step is one (given as null, it is unknown), its final answer left
    out the last final-answer step's text (``answers``: those texts, in order)."""
    stop_reason = end.stop_reason.value if end.stop_reason else ""
    if "stop_reason" not in end.model_fields_set and last_kind == StepKind.FINAL_ANSWER:
        stop_reason = StopReason.FINAL_ANSWER.value
    final_answer = end.final_answer
    if final_answer is None:
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


def document_arrival(
    document: RunDocument,
    *,
    source: str,
    owner: Any = None,
    source_detail: str = "",
    steps: list[StepEvent] | None = None,
) -> Arrival:
    """``document`` as the typed values of a run from outside (``intake.record.runs_record``): its
    start, its steps (``steps``, when already made from it), and, unless it says ``"status":
    "running"``, its end."""
    meta = document.run
    events = steps if steps is not None else steps_events(document.steps, first_index=1)
    end = None
    if meta.status == "finished":
        answers = [e.text or "" for e in events if e.kind == StepKind.FINAL_ANSWER]
        end = run_end_of(end=meta, answers=answers, last_kind=events[-1].kind if events else None)
    return Arrival(
        source=source,
        owner=owner,
        external_id=meta.external_id,
        source_detail=source_detail or meta.source,
        labels=meta.labels,
        started_at=meta.started_at,
        start=run_start_of(
            scenario=meta.scenario,
            policy=meta.policy,
            model=meta.model,
            task=meta.task,
            policy_settings=meta.policy_settings,
        ),
        steps=events,
        end=end,
        finished_at=meta.finished_at,
        model_retry_count=meta.model_retry_count,
    )
