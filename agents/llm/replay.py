"""Cassettes: recorded Messages API request/response pairs, and the transports that record and replay them.

A replay answers each request with the next recorded response, after checking the request is the
one that was recorded; when it is not, ``ReplayMismatch`` names the first field that differs.

A cassette holds no secret: only request and response bodies are kept (never the headers, where the
API key travels), and both are redacted (``agents.redaction``) before they are kept. A replay
compares requests after redacting both sides, so a recorded request whose secrets became markers
still matches the request a replayed run sends.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2

from ..redaction import Redactor

FORMAT = "repair-loop-tracer cassette"
VERSION = 1


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
            isinstance(i, dict) and isinstance(i.get("request"), dict) and isinstance(i.get("response"), dict)
            for i in interactions
        ):
            raise ValueError(f"cassette {path}: interactions must be a list of {{request, response}} objects")
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
    """Serves a cassette's responses in order to whichever agent asks next."""

    def __init__(self, cassette: Cassette, *, redactor: Redactor | None = None) -> None:
        self.cassette = cassette
        self.position = 0
        self.redact = redactor or Redactor.from_environ()

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
        return httpx2.Response(recorded.get("status", 200), json=recorded["response"])


class RecordingTransport(httpx2.BaseTransport):
    """Passes each request to ``inner`` and keeps the pair, redacted, in a cassette (no headers)."""

    def __init__(self, inner: httpx2.BaseTransport, cassette: Cassette, *, redactor: Redactor | None = None) -> None:
        self.inner = inner
        self.cassette = cassette
        self.redact = redactor or Redactor.from_environ()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.read())
        response = self.inner.handle_request(request)
        content = response.read()
        if response.status_code != 200:
            return httpx2.Response(response.status_code, headers={"content-type": "application/json"}, content=content)
        reply = json.loads(content)
        self.cassette.interactions.append({"request": self.redact(body), "response": self.redact(reply)})
        return httpx2.Response(200, json=reply)
