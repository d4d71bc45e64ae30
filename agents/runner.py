"""Validate-then-run (lesson 000): every tool call ends in an ``Outcome``; ``run_tool`` never raises."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from .errors import ToolFailure, is_empty
from .vocabulary import ErrorCategory

# Exceptions a tool did not classify itself, mapped onto a category by what they usually mean.
_BUILTIN_CATEGORIES: tuple[tuple[type[BaseException], ErrorCategory], ...] = (
    (TimeoutError, ErrorCategory.TRANSIENT),
    (ConnectionError, ErrorCategory.TRANSIENT),
    (PermissionError, ErrorCategory.PERMISSION),
    (ValueError, ErrorCategory.VALIDATION),
    (LookupError, ErrorCategory.VALIDATION),
)


@dataclass
class Outcome:
    """What one attempt of a tool call produced: ok + content, or a failure (category, retryable, message)."""

    ok: bool
    content: Any
    category: str | None = None
    retryable: bool | None = None
    message: str | None = None
    empty: bool = False
    exception: BaseException | None = field(default=None, repr=False, compare=False)
    # Over MCP: the CallToolResult this outcome was read from, as the wire spells it (``isError``).
    mcp_result: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def as_lesson_dict(self) -> dict[str, Any]:
        """Lesson 000's ``{ok, content}`` shape."""
        return {"ok": self.ok, "content": self.content}


def validation_message(exc: ValidationError) -> str:
    """``Invalid input -> field: what is expected`` for each error, as lesson 000 prints them."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "input"
        parts.append(f"{where}: {err['msg']}")
    return "Invalid input -> " + "; ".join(parts)


def failed(category: str, message: str, exception: BaseException, *, retryable: bool | None = None) -> Outcome:
    if retryable is None:
        retryable = category == ErrorCategory.TRANSIENT
    return Outcome(
        ok=False, content=message, category=category, retryable=retryable, message=message, exception=exception
    )


def run_tool(model_cls: type[BaseModel], fn: Callable[..., Any], raw_input: Any) -> Outcome:
    """Validate ``raw_input`` with ``model_cls``; only if that passes, run ``fn`` with the validated fields."""
    try:
        validated = model_cls.model_validate(raw_input)
    except ValidationError as exc:
        return failed(ErrorCategory.VALIDATION, validation_message(exc), exc)
    try:
        content = fn(**validated.model_dump())
    except ToolFailure as exc:
        return failed(exc.category, exc.message, exc, retryable=exc.retryable)
    except Exception as exc:  # a runtime failure the tool did not classify
        category = next((c for kind, c in _BUILTIN_CATEGORIES if isinstance(exc, kind)), ErrorCategory.BUSINESS)
        return failed(category, f"Tool error -> {exc}", exc)
    return Outcome(ok=True, content=content, empty=is_empty(content))
