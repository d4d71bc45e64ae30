"""Cassettes: recorded Messages API request/response pairs, and the transports that record and replay them.

A replay answers each request with the next recorded response, after checking the request is the
one that was recorded; when it is not, ``ReplayMismatch`` names the first field that differs.

Every response is kept, errors included: its status, its headers (``request-id``, ``retry-after``,
``x-should-retry``: what decides a retry and its wait) and its body as it came, JSON or not; a request
that got no response keeps the transport's failure (``error``: no answer in time, no connection), and
a replay raises it again. ``ModelClient`` adds what it decided after a failed attempt (``then``: wait
so long, or stop and why), which a replay follows, so a replay retries, waits and stops as the
recorded run did (``agents.llm.base``).

A cassette holds no secret: request headers (where the API key travels) are never kept, nor a
response's ``set-cookie``; bodies and kept headers are redacted (``agents.redaction``) before they are
kept. A replay compares requests after redacting both sides, so a recorded request whose secrets
became markers still matches the request a replayed run sends.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2

from ..redaction import Redactor

FORMAT = "repair-loop-tracer cassette"
VERSION = 2  # 1 kept only 200 responses' bodies; a version 1 cassette still replays
# Response headers not kept: how the body travelled (the replay sends it decoded) and cookies.
UNKEPT_HEADERS = {"content-encoding", "content-length", "transfer-encoding", "connection", "set-cookie"}


class ReplayMismatch(ValueError):
    """A replayed run asked the model something other than what was recorded."""


class Cassette:
    def __init__(
        self,
        *,
        backend: str,
        model: str,
        interactions: list[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        source: str = "memory",
    ) -> None:
        self.backend = backend
        self.model = model
        self.interactions = interactions or []
        self.meta = meta or {}
        self.source = source

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "backend": self.backend,
            "model": self.model,
            "meta": self.meta,
            "interactions": self.interactions,
        }

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Cassette:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ValueError(f"cassette {path} does not exist; expected a file written with --record") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(
                f"cassette {path} is not readable JSON ({exc}); expected a file written with --record"
            ) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"cassette {path} is not a {FORMAT}; expected a file written with --record")
        interactions = data.get("interactions")
        if not isinstance(interactions, list) or not all(
            isinstance(i, dict)
            and isinstance(i.get("request"), dict)
            and (
                isinstance(i.get("response"), dict)
                or isinstance(i.get("body_text"), str)
                or isinstance(i.get("error"), dict)
            )
            for i in interactions
        ):
            raise ValueError(
                f"cassette {path}: interactions must be a list of objects with a request and a response "
                "(or the body_text of one that was not JSON, or the error of a request that got none)"
            )
        return cls(
            backend=str(data.get("backend", "unknown")),
            model=str(data.get("model", "")),
            interactions=interactions,
            meta=data.get("meta") or {},
            source=str(path),
        )


def first_difference(recorded: Any, actual: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The path of the first field where two JSON values differ, with both values; None when equal."""
    if isinstance(recorded, dict) and isinstance(actual, dict):
        for key in list(recorded) + [k for k in actual if k not in recorded]:
            where = f"{path}.{key}" if path else str(key)
            if key not in recorded or key not in actual:
                return where, recorded.get(key, "<absent>"), actual.get(key, "<absent>")
            found = first_difference(recorded[key], actual[key], where)
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(actual, list):
        for i, (r, a) in enumerate(zip(recorded, actual, strict=False)):
            found = first_difference(r, a, f"{path}[{i}]")
            if found:
                return found
        if len(recorded) != len(actual):
            return f"{path} (length)", len(recorded), len(actual)
        return None
    if recorded != actual or type(recorded) is not type(actual):
        return path or "request", recorded, actual
    return None


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ReplayTransport(httpx2.BaseTransport):
    """Serves a cassette's responses in order to whichever agent asks next; ``last`` is the interaction
    served last (``ModelClient`` reads what the recorded run decided after it)."""

    def __init__(self, cassette: Cassette, *, redactor: Redactor | None = None) -> None:
        self.cassette = cassette
        self.position = 0
        self.redact = redactor or Redactor.from_environ()
        self.last: dict[str, Any] | None = None

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.read())
        if self.position >= len(self.cassette.interactions):
            raise ReplayMismatch(
                f"cassette {self.cassette.source} holds {len(self.cassette.interactions)} responses "
                "and this run asked for one more; record it again for this scenario and policy"
            )
        recorded = self.cassette.interactions[self.position]
        diff = first_difference(self.redact(recorded["request"]), self.redact(body))
        if diff:
            where, was, now = diff
            raise ReplayMismatch(
                f"request {self.position + 1} differs from the cassette at {where}: "
                f"recorded {_short(was)}, this run sent {_short(now)}"
            )
        self.position += 1
        self.last = recorded
        failure = recorded.get("error")
        if isinstance(failure, dict):
            raise _transport_error(failure, request)
        headers = recorded.get("headers") or {"content-type": "application/json"}
        if "body_text" in recorded:
            content = str(recorded["body_text"]).encode()
        else:
            content = json.dumps(recorded["response"]).encode()
        return httpx2.Response(recorded.get("status", 200), headers=headers, content=content)


def _transport_error(failure: dict[str, Any], request: httpx2.Request) -> httpx2.TransportError:
    """The transport failure a cassette recorded (``ReadTimeout``, ``ConnectError``…), raised again."""
    kind = getattr(httpx2, str(failure.get("type")), None)
    if not (isinstance(kind, type) and issubclass(kind, httpx2.TransportError)):
        kind = httpx2.TransportError
    return kind(str(failure.get("message") or failure.get("type")), request=request)


class RecordingTransport(httpx2.BaseTransport):
    """Passes each request to ``inner`` and keeps it, redacted, in a cassette with what came back:
    the response's status, headers and body as it came, or the transport's failure."""

    def __init__(self, inner: httpx2.BaseTransport, cassette: Cassette, *, redactor: Redactor | None = None) -> None:
        self.inner = inner
        self.cassette = cassette
        self.redact = redactor or Redactor.from_environ()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.read())
        entry: dict[str, Any] = {"request": self.redact(body)}
        try:
            response = self.inner.handle_request(request)
            content = response.read()
        except httpx2.TransportError as exc:
            entry["error"] = {"type": type(exc).__name__, "message": self.redact(str(exc))}
            self.cassette.interactions.append(entry)
            raise
        headers = {k.lower(): v for k, v in response.headers.items() if k.lower() not in UNKEPT_HEADERS}
        entry["status"] = response.status_code
        entry["headers"] = self.redact(headers)
        try:
            entry["response"] = self.redact(json.loads(content))
        except ValueError:
            entry["body_text"] = self.redact(content.decode("utf-8", errors="replace"))
        self.cassette.interactions.append(entry)
        return httpx2.Response(response.status_code, headers=headers, content=content)
