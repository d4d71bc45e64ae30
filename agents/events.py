"""What the agent loop reports while it runs, and the recorder protocol that receives it.

The loop knows nothing of storage: it hands a ``RunStart``, one ``StepEvent`` per step and a
``RunEnd`` to the ``Recorder`` it is given. ``tracer`` supplies a recorder that writes each step to
the database as it happens; ``ListRecorder`` keeps them in memory (tests, the command line). The
values these events carry (stop reasons, step kinds, categories) are spelled in ``agents.vocabulary``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from functools import cache
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


def _known_fields(cls: type[T], data: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``data`` that are fields of ``cls`` (data from older or newer writers still loads)."""
    names = _field_names(cls)
    return {k: v for k, v in data.items() if k in names}


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))  # type: ignore[arg-type]


@dataclass
class Attempt:
    """One try of one tool call, as the harness saw it."""

    number: int  # 1-based
    ok: bool
    content: Any  # what the tool produced (text or JSON-able), before the policy formats it
    category: str | None = None  # an ErrorCategory when not ok
    retryable: bool | None = None
    message: str | None = None  # the failure's readable message
    backoff_s: float = 0.0  # delay the harness waited before this attempt (0 for the first)
    latency_ms: float = 0.0
    empty: bool = False  # ok, but nothing was found
    result_content: Any = None  # the tool_result content the policy made of this attempt
    is_error: bool | None = None  # the tool_result's is_error (Messages API spelling) for this attempt
    transport: str | None = None  # a ToolTransport: how the harness reached the tool (None: recorded before)
    mcp_result: dict[str, Any] | None = None  # over MCP: the CallToolResult as the wire spells it (isError)
    # What the policy's clean_error_text took out of the failure's text before the model read it
    # ("a stack trace", "SQL", …: agents.diagnosis.lint.LEAKS names); empty when nothing was.
    removed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict, for JSON. Shallow: ``content`` and ``result_content`` are the same
        objects, not copies (``dataclasses.asdict`` deep-copied them, a third of a batch import's time)."""
        return {name: getattr(self, name) for name in ATTEMPT_FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Attempt:
        return cls(**_known_fields(cls, data))


ATTEMPT_FIELDS = tuple(f.name for f in fields(Attempt))


@dataclass
class ModelAttempt:
    """One HTTP attempt of one model call: the harness retries the Messages API itself (``agents.llm.base``)."""

    number: int  # 1-based, within the step (a paused turn's continuations number on)
    status: int | None = None  # the HTTP status; None when no response came (no answer in time, no connection)
    request_id: str | None = None  # the API's ``request-id`` header
    error: str | None = None  # what went wrong, for a person ("overloaded (529)"); None when it answered
    error_type: str | None = None  # the API's error type (``overloaded_error``), or ``timeout`` / ``connection``
    retry_after_s: float | None = None  # the wait the API asked for (``retry-after``), before any cap
    wait_s: float = 0.0  # waited before this attempt (0 for the first)
    latency_ms: float = 0.0
    # The first attempt of a call that continues a turn the API paused (pause_turn): a new call, not a retry.
    continuation: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in MODEL_ATTEMPT_FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelAttempt:
        return cls(**_known_fields(cls, data))


MODEL_ATTEMPT_FIELDS = tuple(f.name for f in fields(ModelAttempt))


def is_model_retry(attempt: ModelAttempt | dict[str, Any]) -> bool:
    """Whether an attempt tried a call again: not the first of its step, nor the first of a paused
    turn's continuation (attempts recorded before continuations were marked restart at 1 per call)."""
    get = attempt.get if isinstance(attempt, dict) else lambda name: getattr(attempt, name, None)
    return (get("number") or 1) > 1 and not get("continuation")


def model_retries(attempts: list[ModelAttempt] | list[dict[str, Any]]) -> int:
    """Retries of the model calls these attempts made (a step's, or the call that ended a run)."""
    return sum(1 for a in attempts if is_model_retry(a))


@dataclass
class StepEvent:
    """One tool_use (with all its attempts) or the final answer."""

    index: int  # 1-based, in the order the model produced them
    kind: str  # a StepKind
    tool_name: str | None = None
    tool_use_id: str | None = None
    input: dict[str, Any] | None = None
    attempts: list[Attempt] = field(default_factory=list)
    result_content: Any = None  # the tool_result content sent back to the model
    is_error: bool = False  # the tool_result's is_error flag
    category: str | None = None  # of the last attempt, when it failed
    retryable: bool | None = None
    retry_count: int = 0  # attempts beyond the first made by the harness
    latency_ms: float = 0.0  # tool time plus backoff, all attempts
    input_tokens: int = 0  # of the model response that produced this step
    output_tokens: int = 0
    text: str | None = None  # the final answer, or assistant text that came with the tool_use
    # The Messages API's stop_reason for the model response that produced this step (end_turn,
    # tool_use, max_tokens, refusal…); None when the step came from elsewhere and did not say.
    api_stop_reason: str | None = None
    # The attempts of the model call whose response produced this step (on its first step only).
    model_attempts: list[ModelAttempt] = field(default_factory=list)
    # The index of the step whose call this one repeats: the model sent the same call again right after
    # that one failed or found nothing (``agents.diagnosis.calls.step_repeats``). Set by the recorder.
    repeat_of: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict, for JSON; shallow like ``Attempt.to_dict``."""
        data = {name: getattr(self, name) for name in STEP_FIELDS}
        data["attempts"] = [a.to_dict() for a in self.attempts]
        data["model_attempts"] = [a.to_dict() for a in self.model_attempts]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepEvent:
        values = _known_fields(cls, data)
        values["attempts"] = [Attempt.from_dict(a) for a in data.get("attempts") or []]
        values["model_attempts"] = [ModelAttempt.from_dict(a) for a in data.get("model_attempts") or []]
        return cls(**values)


STEP_FIELDS = tuple(f.name for f in fields(StepEvent))


def failed_steps(steps: Iterable[StepEvent]) -> int:
    """The steps among ``steps`` whose tool_result told the model it failed (``is_error``): a run's
    errors, as every page counts them."""
    return sum(1 for s in steps if s.is_error)


def failed_attempts(steps: Iterable[StepEvent]) -> int:
    """The tool attempts among ``steps`` that failed, whether or not a retry then worked: a run's
    failed attempts, beside its failed steps (the steps whose tool_result was an error). A retried 503
    that then worked is one failed attempt and no failed step."""
    return sum(1 for s in steps for a in s.attempts if not a.ok)


def failures_words(failed_steps: int, failed_attempts: int) -> str:
    """A run's failures as every page and command words them: "0 failed steps, 1 failed attempt"."""
    steps = f"{failed_steps} failed step{'' if failed_steps == 1 else 's'}"
    return f"{steps}, {failed_attempts} failed attempt{'' if failed_attempts == 1 else 's'}"


@dataclass
class RunStart:
    scenario: str
    policy_name: str
    policy_settings: dict[str, Any]
    model_backend: str  # a ModelBackendName
    model_name: str
    task: str
    system: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)  # Messages API tool schemas

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunStart:
        return cls(**_known_fields(cls, data))


@dataclass
class Verdict:
    passed: bool
    reason: str  # e.g. "refund not applied ✓; answer gives 30 days ✗" (each check, ✗ with what was found)
    checks: list[dict[str, Any]] = field(default_factory=list)  # each check's name, passed and detail


@dataclass
class ModelVerdict:
    """The optional model judge's word on a run (``agents.model_judge``), beside the rules' ``Verdict``:
    ``verdict`` pass or fail with its one-line rationale, or empty with ``error`` saying why there is none."""

    model: str
    verdict: str = ""  # "pass", "fail", or "" when the model judge could not judge
    rationale: str = ""
    error: str = ""

    @property
    def reason(self) -> str:
        """The line stored beside the verdict: the rationale, or why there is no verdict."""
        return self.rationale if self.verdict else f"no verdict: {self.error}"


@dataclass
class RunEnd:
    stop_reason: str  # a StopReason
    final_answer: str | None = None
    verdict: Verdict | None = None
    model_verdict: ModelVerdict | None = None  # asked only with ``--judge claude``
    error: str | None = None  # the exception (crashed) or the fatal error's message
    guard: str | None = None  # e.g. "3 tool errors in a row" when a guard stopped the run
    api_stop_reason: str | None = None  # the Messages API's stop_reason of the run's last model response
    transcript: list[dict[str, Any]] = field(default_factory=list)  # raw Messages API exchange
    # The attempts of the model call that ended the run (it failed), when one did.
    model_attempts: list[ModelAttempt] = field(default_factory=list)
    # Whose call that was when not this run's own: the sub-agent's label. Its retries are counted on the
    # sub-agent's run, and reach this one's with the sub-agent's total, not again from here.
    model_call_of: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunEnd:
        values = _known_fields(cls, data)
        if isinstance(values.get("verdict"), dict):
            values["verdict"] = Verdict(**_known_fields(Verdict, values["verdict"]))
        if isinstance(values.get("model_verdict"), dict):
            values["model_verdict"] = ModelVerdict(**_known_fields(ModelVerdict, values["model_verdict"]))
        values["model_attempts"] = [ModelAttempt.from_dict(a) for a in values.get("model_attempts") or []]
        return cls(**values)


class Recorder(Protocol):
    def run_started(self, start: RunStart) -> None: ...

    def step_recorded(self, step: StepEvent) -> None: ...

    def run_finished(self, end: RunEnd) -> None: ...

    def child(self, *, label: str) -> Recorder:
        """A recorder for a sub-agent's run (the coordinator's children)."""
        ...


class ListRecorder:
    """Keeps everything in memory; children are kept in ``children``."""

    def __init__(self, label: str = "") -> None:
        self.label = label
        self.start: RunStart | None = None
        self.steps: list[StepEvent] = []
        self.end: RunEnd | None = None
        self.children: list[ListRecorder] = []

    def run_started(self, start: RunStart) -> None:
        self.start = start

    def step_recorded(self, step: StepEvent) -> None:
        self.steps.append(step)

    def run_finished(self, end: RunEnd) -> None:
        self.end = end

    def child(self, *, label: str) -> ListRecorder:
        rec = ListRecorder(label)
        self.children.append(rec)
        return rec


class RunAborted(BaseException):
    """The whole run stops, ``crashed``, with this message as its reason: the model side failed inside
    a sub-agent, or the run ran out of time (``tracer.recording.RunTimeLimitExceeded``).

    A ``BaseException`` so that the tool wrapper around a sub-agent cannot turn it into a tool failure.
    When a sub-agent's model call failed, ``model_failure`` says how, ``model_attempts`` are that call's
    attempts and ``sub_agent`` names the sub-agent (``Session.spawn`` sets it), so the parent's reason
    and its record of the failed call can say whose call it was.
    """

    def __init__(
        self, message: str, *, model_failure: str = "", model_attempts: list[ModelAttempt] | None = None
    ) -> None:
        super().__init__(message)
        self.model_failure = model_failure
        self.model_attempts = list(model_attempts or [])
        self.sub_agent = ""
