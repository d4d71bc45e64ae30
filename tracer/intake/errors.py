"""What a source sent that cannot be recorded, said with the path of each bad field.

``IngestError`` carries every problem found, each ``{"path", "message"}``: ``path`` names the field
as the sender wrote it (``steps[3].attempts[0].category``, ``messages[4].content[0].tool_use_id``;
``""`` for the whole), ``message`` says what was expected and what came. ``RunEnded`` (a write to a
run that has ended) and ``StepConflict`` (a step index recorded with other content) are
``IngestError``s too, for the API to answer 409. ``pydantic_errors`` words pydantic's errors the
same way, for the run document's schema and the API's bodies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError


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
        errors = [{"path": join(prefix, e["path"]), "message": e["message"]} for e in self.errors]
        return type(self)(errors)

    def __str__(self) -> str:
        return "; ".join(f"{e['path']}: {e['message']}" if e["path"] else e["message"] for e in self.errors)


class RunEnded(IngestError):
    """A write to a run that has already ended (or was executed here): refused, nothing written."""


class StepConflict(IngestError):
    """A step index that was already recorded with other content: refused, nothing written."""


def join(prefix: str, path: str) -> str:
    """``path`` under ``prefix``: ``steps[0]`` + ``kind`` → ``steps[0].kind``, + ``[2]`` → ``steps[0][2]``."""
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


def shown(value: Any, limit: int = 60) -> str:
    """``value`` as a message quotes it: its repr, cut to ``limit`` characters."""
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


def pydantic_errors(exc: ValidationError, prefix: str = "") -> list[dict[str, str]]:
    """pydantic's errors as ``{path, message}``, each message saying what was expected and what came."""
    out = []
    for err in exc.errors(include_url=False):
        kind, ctx, given = err["type"], err.get("ctx") or {}, err.get("input")
        if kind == "missing":
            message = "required"
        elif kind == "extra_forbidden":
            message = "unknown field"
        elif kind in ("enum", "literal_error"):
            message = f"expected one of {_expected_values(str(ctx.get('expected', '')))}; got {shown(given)}"
        elif kind in _TYPE_NAMES:
            message = f"expected {_TYPE_NAMES[kind]}; got {shown(given)}"
        elif kind == "timezone_aware":
            message = f"expected a date and time with a timezone (e.g. 2025-01-31T09:30:00Z); got {shown(given)}"
        elif kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
            bounds = {
                "greater_than_equal": f"at least {ctx.get('ge')}",
                "less_than_equal": f"at most {ctx.get('le')}",
                "greater_than": f"more than {ctx.get('gt')}",
                "less_than": f"less than {ctx.get('lt')}",
            }
            message = f"expected a number {bounds[kind]}; got {shown(given)}"
        elif kind in ("string_too_long", "too_long") and isinstance(given, str):
            message = f"expected at most {ctx.get('max_length')} characters; got {len(given)}"
        elif kind == "value_error":  # a check of ours: its message says what is expected and what came
            message = str(ctx.get("error", err["msg"]))
        elif kind == "finite_number":
            message = f"expected a finite number; got {shown(given)}"
        else:
            message = f"{err['msg']}; got {shown(given)}"
        out.append({"path": join(prefix, _path(err["loc"])), "message": message})
    return out
