"""The API's one error shape, and how request bodies are read before any operation sees them.

Every answer that is not a success is ``{"errors": [{"path": …, "message": …}]}``: ``path`` names
the field at fault as a client wrote it (``steps[0].kind``, ``run_id``, ``Authorization``; ``""`` for
the request as a whole) and ``message`` says what was expected. Bodies are read strictly, by
``tracer.json_input``: UTF-8 JSON only (no ``NaN`` or ``Infinity``, which no database column takes),
nested at most ``json_input.MAX_DEPTH`` deep, at most ``RLT_API_MAX_BYTES``.
What the database cannot store inside valid JSON (a NUL character, an unpaired surrogate) is
``tracer.intake``'s to refuse, with the path of the field.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja.parser import Parser

from .json_input import JsonTooDeep, json_parse


class ApiError(Exception):
    """An answer other than success: its status and its errors, each ``{"path", "message"}``."""

    def __init__(self, status: int, errors: list[dict[str, str]], *, headers: dict[str, str] | None = None) -> None:
        super().__init__(errors[0]["message"] if errors else str(status))
        self.status = status
        self.errors = errors
        self.headers = headers or {}

    @classmethod
    def one(cls, status: int, message: str, *, path: str = "", **kwargs: Any) -> ApiError:
        return cls(status, [{"path": path, "message": message}], **kwargs)


def prefixed(prefix: str, path: str) -> str:
    """``path`` under ``prefix`` (``[2]`` + ``steps[0]`` → ``[2].steps[0]``)."""
    if not prefix:
        return path
    if not path:
        return prefix
    return prefix + (path if path.startswith("[") else "." + path)


def json_loads(text: str | bytes, *, what: str = "the body") -> Any:
    """``text`` parsed strictly as JSON; ``ApiError`` 400 naming where and why it is not."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ApiError.one(400, f"{what} is not UTF-8 text: byte {exc.start} cannot be decoded") from None
    try:
        value = json_parse(text)
    except json.JSONDecodeError as exc:
        raise ApiError.one(
            400, f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except JsonTooDeep as exc:
        raise ApiError.one(400, f"{what} is {exc}") from None
    except ValueError as exc:  # NaN / Infinity
        raise ApiError.one(400, f"{what} is not valid JSON: {exc}") from None
    return value


def body_limit() -> int:
    return settings.RLT_API_MAX_BYTES


def body_size_check(request: HttpRequest) -> None:
    """413 naming the limit when the body is larger than ``RLT_API_MAX_BYTES`` (read from
    ``Content-Length``, before anything of the body is read)."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise ApiError.one(400, "Content-Length is not a whole number", path="Content-Length") from None
    limit = body_limit()
    if length > limit:
        raise ApiError.one(
            413,
            f"the body is {length} bytes; the limit is {limit} bytes (RLT_API_MAX_BYTES): "
            "send fewer runs or steps per request",
        )


DISCARD_MAX = 64 * 1024 * 1024  # the most of a refused body read and thrown away so its sender sees the answer


def body_discard(request: HttpRequest) -> None:
    """Read and throw away the body of a request refused by its Content-Length (413), a chunk at a time,
    nothing kept: a client that sends its whole body before it reads the answer (Python's
    ``http.client``, most OTLP exporters) then gets the 413 instead of a connection reset mid-send. A
    body beyond ``DISCARD_MAX`` is not read: its connection is closed after the answer."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return
    if length > DISCARD_MAX:
        return
    left = length
    while left > 0:
        chunk = request.read(min(left, 1 << 16))
        if not chunk:
            return
        left -= len(chunk)


class StrictJsonParser(Parser):
    """ninja's body parser with ``json_loads``' rules. ninja turns any exception here into a bare
    400; ``tracer.api`` finds this one behind it (``__cause__``) and answers with its message."""

    def parse_body(self, request: HttpRequest) -> Any:
        form_body(request)
        return json_loads(request.body)


FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def form_body(request: HttpRequest) -> None:
    """415 for a form-encoded body (an HTML form's, or curl's ``-d`` without a JSON Content-Type): the API
    reads JSON only, and the answer says so rather than that the form is not valid JSON."""
    if (request.content_type or "").lower() in FORM_TYPES:
        raise ApiError.one(
            415,
            f"the body is {request.content_type}; send it as JSON with 'Content-Type: application/json'",
            path="Content-Type",
        )
