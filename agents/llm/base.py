"""What every model backend is: an ``anthropic.Anthropic`` client and a model name for each agent.

The simulated model and a replayed cassette plug into the SDK as HTTP transports, so requests and
responses are real Messages API JSON on every path; any backend can record what it exchanged.
``agents.llm.registry`` names the backends and builds one.

``ModelClient`` makes each model call, and retries it itself rather than through the SDK
(``max_retries=0``): it retries what the SDK would (``x-should-retry``, 408, 409, 429, 5xx, a lost
connection, no answer in time) as often as the backend's ``model_retries``, waits what the API asks
(``retry-after``, capped at ``RLT_MODEL_RETRY_AFTER_CAP_S``) or the SDK's backoff, gives each attempt
only the time left to the run (``Session.deadline``), and keeps every attempt (``ModelAttempt``: its
status, ``request-id``, wait and latency). The SDK's own retry loop offered none of that: its waits
are unbounded and slept in place, its attempts are seen only in log lines, and a run's time limit
cannot interrupt it. Waits pass on the session's clock: really for Claude, virtually for the
simulated model and a replay. What the client decided after each failed attempt (wait so long, or
give up and why) is kept in a recording and followed by its replay, so a replay waits and stops as
the recorded run did whatever its time limit or jitter.
"""

from __future__ import annotations

import email.utils
import math
import os
import random
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import anthropic
import httpx2

from ..events import ModelAttempt
from ..redaction import Redactor
from ..vocabulary import ModelBackendName
from .replay import Cassette, RecordingTransport, ReplayMismatch, ReplayTransport

RETRY_AFTER_CAP_ENV = "RLT_MODEL_RETRY_AFTER_CAP_S"
DEFAULT_RETRY_AFTER_CAP_S = 60.0
# The SDK's backoff when the API names no wait: 0.5 s doubled each retry, at most 8 s, minus up to 25 % jitter.
INITIAL_RETRY_DELAY_S = 0.5
MAX_RETRY_DELAY_S = 8.0
TIME_LIMIT_ENV = "RLT_RUN_TIME_LIMIT_S"


class ModelError(RuntimeError):
    """The model could not be reached or refused the request; ``attempts`` are the call's attempts."""

    def __init__(self, message: str, *, attempts: list[ModelAttempt] | None = None) -> None:
        super().__init__(message)
        self.attempts = list(attempts or [])


def retry_after_cap(environ: dict[str, str] | None = None) -> float:
    """``RLT_MODEL_RETRY_AFTER_CAP_S``: the longest wait a ``retry-after`` gets; a bad value is a ValueError."""
    raw = (os.environ if environ is None else environ).get(RETRY_AFTER_CAP_ENV, "").strip()
    if not raw:
        return DEFAULT_RETRY_AFTER_CAP_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (0 <= value < math.inf):
        raise ValueError(f"{RETRY_AFTER_CAP_ENV} must be a number of seconds, 0 or more; it is {raw!r}")
    return value


def parse_retry_after(headers: Any) -> float | None:
    """The wait an error response asks for, in seconds, as the SDK reads it: ``retry-after-ms``, then
    ``retry-after`` as seconds or as an HTTP date; None when it names none."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            return max(float(raw) / scale, 0.0)
        except ValueError:
            pass
        if name == "retry-after":
            when = email.utils.parsedate_tz(raw)
            if when is not None:
                return max(float(email.utils.mktime_tz(when) - time.time()), 0.0)
    return None


def should_retry(status: int, headers: Any) -> bool:
    """Whether an error status is worth another try, by the SDK's rules: the API's ``x-should-retry``
    when it says, else 408, 409, 429 and 5xx."""
    said = headers.get("x-should-retry")
    if said in ("true", "false"):
        return said == "true"
    return status in (408, 409, 429) or status >= 500


STATUS_PHRASES = {
    400: "refused the request",
    401: "refused the API key",
    403: "refused permission",
    404: "answered not found",
    413: "refused a request too large",
    429: "was rate-limited",
    529: "was overloaded",
}
COUNTS = {1: "once", 2: "twice", 3: "three times"}


def _status_phrase(status: int, message: str | None) -> str:
    phrase = STATUS_PHRASES.get(status) or ("failed" if status >= 500 else "answered")
    said = f": {message}" if message and status < 500 and status != 429 else ""
    return f"{phrase} ({status}{said})"


def _times(n: int) -> str:
    return COUNTS.get(n, f"{n} times")


def message_problem(data: Any) -> str | None:
    """What keeps a 200's body from being a Messages API message the loop can read, in words; None when
    it is one. Only what the loop reads is checked: a content block of a type newer than this SDK passes."""
    if not isinstance(data, dict):
        return f"it is a JSON {type(data).__name__}, not an object"
    if data.get("type") != "message":
        return f"its type is {data.get('type')!r}, not 'message'"
    content = data.get("content")
    if not isinstance(content, list):
        return "its content is not a list of blocks"
    for n, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            return f"content block {n} has no type"
        if block["type"] == "text" and not isinstance(block.get("text"), str):
            return f"text block {n} has no text"
        if block["type"] == "tool_use" and not (
            isinstance(block.get("id"), str) and isinstance(block.get("name"), str) and "input" in block
        ):
            return f"tool_use block {n} lacks its id, name or input"
    if not isinstance(data.get("stop_reason"), str | None):
        return "its stop_reason is not a string"
    if not isinstance(data.get("usage") or {}, dict):
        return "its usage is not an object"
    return None


def describe_failures(attempts: list[ModelAttempt]) -> str:
    """What the model API did, for a person: "the model API was overloaded (529) three times"."""
    runs: list[list[Any]] = []
    for attempt in attempts:
        if attempt.error is None:
            continue
        if runs and runs[-1][0] == attempt.error:
            runs[-1][1] += 1
        else:
            runs.append([attempt.error, 1])
    parts = [f"{error} {_times(n)}" if len(attempts) > 1 else error for error, n in runs]
    ids = [a.request_id for a in attempts if a.request_id]
    named = f" (request-id {ids[-1]})" if ids else ""
    return "the model API " + ", then ".join(parts) + named


class ModelClient:
    """One agent's connection to its model: ``create(request)`` sends Messages API JSON, returns the reply's.

    ``session`` (``agents.loop.Session``) gives the clock waits pass on, the run's ``deadline`` and the
    randomness of the backoff's jitter; without one, waits are real and calls unbounded but by the SDK's
    own timeout. Every attempt is kept until ``take_attempts()`` hands them to the step they produced.
    """

    def __init__(
        self,
        client: anthropic.Anthropic,
        *,
        retries: int = 0,
        session: Any = None,
        recording: RecordingTransport | None = None,
        replaying: ReplayTransport | None = None,
        retry_after_cap_s: float = DEFAULT_RETRY_AFTER_CAP_S,
    ) -> None:
        self.client = client
        self.retries = retries
        self.session = session
        self.recording = recording
        self.replaying = replaying
        self.retry_after_cap_s = retry_after_cap_s
        self.attempts: list[ModelAttempt] = []  # every attempt not yet taken by a step

    def take_attempts(self) -> list[ModelAttempt]:
        """The attempts made since the last call of this, for the step their response produced."""
        taken, self.attempts = self.attempts, []
        return taken

    # -- time --

    def _remaining(self) -> float | None:
        deadline = getattr(self.session, "deadline", None)
        return None if deadline is None else deadline - time.monotonic()

    def _limit(self) -> str:
        limit = getattr(self.session, "time_limit_s", None)
        return f"the run's time limit ({limit:g} s, {TIME_LIMIT_ENV})" if limit is not None else "the run's time limit"

    def _sleep(self, seconds: float) -> None:
        clock = getattr(self.session, "clock", None)
        if clock is None:
            time.sleep(seconds)
        else:
            clock.sleep(seconds)

    # -- one call --

    def create(self, request: dict[str, Any], *, continuation: bool = False) -> dict[str, Any]:
        """Send ``request``, retrying as needed; ``continuation``: it continues a turn the API paused
        (``pause_turn``), so its attempts are numbered on from the paused response's, on the same step."""
        call: list[ModelAttempt] = []
        wait = 0.0
        while True:
            # Numbered within the step: a paused turn's continuation goes on from the paused response.
            attempt = ModelAttempt(
                number=len(self.attempts) + 1, wait_s=round(wait, 3), continuation=continuation and not call
            )
            remaining = self._remaining()
            if remaining is not None and remaining <= 0 and self.replaying is None:
                again = " again" if call else ""
                raise ModelError(
                    (describe_failures(call) + "; then " if call else "")
                    + f"{self._limit()} was reached before the model was asked{again}",
                    attempts=call,
                )
            call.append(attempt)
            self.attempts.append(attempt)
            recorded_before = len(self.recording.cassette.interactions) if self.recording else 0
            if self.replaying is not None:
                self.replaying.last = None
            began = time.monotonic()
            retryable = False
            retry_after = None
            try:
                # A replay answers at once from its cassette, and follows the recorded run's decisions.
                bound = {} if remaining is None or self.replaying is not None else {"timeout": remaining}
                raw = self.client.messages.with_raw_response.create(**request, **bound)
                attempt.status = raw.status_code
                attempt.request_id = raw.headers.get("request-id")
                try:
                    message = raw.parse()
                except ValueError as exc:
                    attempt.error = f"answered {raw.status_code} with a body that is not JSON ({exc})"
                    attempt.error_type = "malformed"
                else:
                    # No serializer warnings: a content block newer than this SDK is kept as it came.
                    data = message.to_dict(warnings=False) if isinstance(message, anthropic.BaseModel) else message
                    problem = message_problem(data)
                    if problem is None:
                        attempt.latency_ms = round((time.monotonic() - began) * 1000, 3)
                        return data
                    attempt.error = f"answered {raw.status_code} with a body that is not a message ({problem})"
                    attempt.error_type = "malformed"
            except anthropic.APIStatusError as exc:
                attempt.status = exc.status_code
                attempt.request_id = exc.request_id or exc.response.headers.get("request-id")
                body = exc.body if isinstance(exc.body, dict) else {}
                error = body.get("error") if isinstance(body.get("error"), dict) else {}
                attempt.error_type = error.get("type")
                attempt.error = _status_phrase(exc.status_code, error.get("message") or None)
                retryable = should_retry(exc.status_code, exc.response.headers)
                retry_after = parse_retry_after(exc.response.headers)
                attempt.retry_after_s = retry_after
            except anthropic.APIConnectionError as exc:
                cause = exc.__cause__
                if isinstance(cause, ReplayMismatch):
                    raise cause from None
                if isinstance(exc, anthropic.APITimeoutError) or isinstance(cause, httpx2.TimeoutException):
                    attempt.error_type = "timeout"
                    attempt.error = f"gave no answer within {time.monotonic() - began:.3g} s"
                    retryable = True
                elif isinstance(cause, httpx2.TransportError):
                    attempt.error_type = "connection"
                    attempt.error = f"could not be reached ({type(cause).__name__}: {cause})"
                    retryable = True
                else:  # not the network: a transport's own failure, or the worker's time limit inside the call
                    attempt.error_type = "connection"
                    attempt.error = f"could not be reached ({type(cause or exc).__name__}: {cause or exc})"
            attempt.latency_ms = round((time.monotonic() - began) * 1000, 3)
            wait = self._after_failure(
                call, retryable=retryable, retry_after=retry_after, recorded_before=recorded_before
            )
            self._sleep(wait)

    def _after_failure(
        self, call: list[ModelAttempt], *, retryable: bool, retry_after: float | None, recorded_before: int
    ) -> float:
        """The wait before the next attempt; raises ``ModelError`` when there is none. A replay follows
        the recorded decision; a recording keeps the one made here."""
        served = self.replaying.last if self.replaying is not None else None
        decision = served.get("then") if isinstance(served, dict) else None
        if not isinstance(decision, dict):
            decision = self._decide(call, retryable=retryable, retry_after=retry_after)
        if self.recording is not None and len(self.recording.cassette.interactions) > recorded_before:
            self.recording.cassette.interactions[-1]["then"] = decision
        if "stop" in decision:
            raise ModelError(str(decision["stop"]), attempts=call)
        return float(decision.get("wait_s") or 0.0)

    def _decide(self, call: list[ModelAttempt], *, retryable: bool, retry_after: float | None) -> dict[str, Any]:
        failures = describe_failures(call)
        remaining = self._remaining()
        retries = len(call) - 1
        if remaining is not None and remaining <= 0:
            return {"stop": f"{failures}; {self._limit()} was reached while waiting for it"}
        if not retryable:
            return {"stop": failures}
        if retries >= self.retries:
            tried = f"{retries} retr{'y' if retries == 1 else 'ies'}" if retries else "no retry"
            return {"stop": f"{failures}; gave up after {tried}"}
        if retry_after is not None and retry_after > 0:
            wait = min(retry_after, self.retry_after_cap_s)
        else:
            rng = getattr(self.session, "rng", None) or random
            wait = min(INITIAL_RETRY_DELAY_S * 2.0**retries, MAX_RETRY_DELAY_S) * (1 - 0.25 * rng.random())
        wait = round(wait, 3)
        if remaining is not None and wait >= remaining:
            asked = " (its retry-after)" if retry_after else ""
            return {
                "stop": f"{failures}; the next try would wait {wait:g} s{asked}, past {self._limit()}, "
                f"{max(remaining, 0):.3g} s away"
            }
        return {"wait_s": wait}


class ModelBackend(ABC):
    """A kind of model for one run (and its sub-agents): hands out clients, records if asked."""

    kind = ""
    label = ""
    real_time = False  # whether retries really sleep
    model_retries = 0  # retries of a model call that failed in a way worth another try (``ModelClient``)

    def __init__(self, model: str, *, record_to: str | Path | None = None) -> None:
        self.model = model
        self.record_to = Path(record_to) if record_to else None
        self.recording = Cassette(backend=self.kind, model=model) if self.record_to else None
        # What a cassette is redacted with: the environment's configuration and this backend's key.
        self.redactor = Redactor.from_environ(secrets=self.secrets())

    @abstractmethod
    def transport(self, persona: Any) -> httpx2.BaseTransport:
        """The HTTP transport the SDK talks through for an agent with this persona."""

    def api_key(self) -> str:
        return str(self.kind)

    def secrets(self) -> dict[str, str]:
        """Secret values this backend holds, by name (a real API key), redacted wherever they appear."""
        return {}

    def client_for(self, persona: Any, *, session: Any = None) -> ModelClient:
        """A client for an agent with ``persona``; ``session`` bounds its calls (``ModelClient``)."""
        transport = self.transport(persona)
        replaying = transport if isinstance(transport, ReplayTransport) else None
        recording = None
        if self.recording is not None:
            transport = recording = RecordingTransport(transport, self.recording, redactor=self.redactor)
        # The SDK never retries: ModelClient does, recording each attempt.
        client = anthropic.Anthropic(
            api_key=self.api_key(), http_client=httpx2.Client(transport=transport), max_retries=0
        )
        return ModelClient(
            client,
            retries=self.model_retries,
            session=session,
            recording=recording,
            replaying=replaying,
            retry_after_cap_s=retry_after_cap(),
        )

    def close(self, **meta: Any) -> None:
        """Write the recording, if one was asked for."""
        if self.recording is not None and self.record_to is not None:
            self.recording.meta.update(meta)
            self.recording.save(self.record_to)


class ReplayBackend(ModelBackend):
    kind = ModelBackendName.REPLAY
    model_retries = 2  # a cassette without recorded decisions retries as Claude would

    def __init__(self, cassette: Cassette, *, record_to: str | Path | None = None) -> None:
        super().__init__(cassette.model, record_to=record_to)
        self.cassette = cassette
        self.player = ReplayTransport(cassette, redactor=self.redactor)
        self.label = f"replay of a recorded {cassette.backend} run ({cassette.source})"

    def transport(self, persona: Any) -> httpx2.BaseTransport:
        return self.player
