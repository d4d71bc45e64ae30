"""The error taxonomy of lesson 002, and lesson 001's four kinds of failure mapped onto it.

A tool signals a failure by raising ``ToolFailure(category, message)``. ``fail`` builds the JSON a
tool result carries for it, ``should_retry`` reads the flag inside that JSON, and "nothing found" is
an empty answer, never an error.
"""

from __future__ import annotations

from typing import Any

from .vocabulary import ErrorCategory

RETRYABLE = frozenset({ErrorCategory.TRANSIENT})

# Lesson 001's kinds of failure and the categories that belong to each.
KINDS: dict[str, tuple[ErrorCategory, ...]] = {
    "model-fixable": (ErrorCategory.VALIDATION,),
    "transient": (ErrorCategory.TRANSIENT,),
    "permanent-but-survivable": (ErrorCategory.PERMISSION, ErrorCategory.BUSINESS),
    "fatal": (ErrorCategory.FATAL,),
}


class ToolFailure(Exception):
    """A failure a tool reports on purpose: a category and a message the model (and a person) can read.

    ``retryable`` defaults to what the category implies; a sub-agent that already retried passes its
    failure up with ``retryable=False``.
    """

    def __init__(self, category: str, message: str, *, retryable: bool | None = None) -> None:
        try:
            known = ErrorCategory(category)
        except ValueError:
            raise ValueError(
                f"unknown failure category {category!r}; expected one of {', '.join(ErrorCategory)}"
            ) from None
        super().__init__(message)
        self.category = known
        self.message = message
        self.retryable = category in RETRYABLE if retryable is None else retryable


def kind_of(category: str) -> str:
    """Lesson 001's kind for a category, e.g. ``kind_of("business") == "permanent-but-survivable"``."""
    for kind, categories in KINDS.items():
        if category in categories:
            return kind
    raise ValueError(f"unknown failure category {category!r}; expected one of {', '.join(ErrorCategory)}")


def error_json(category: str, message: str, *, retryable: bool | None = None) -> dict[str, Any]:
    """The structured error a tool result carries (MCP spells the flag ``isError``)."""
    return {
        "isError": True,
        "error": {
            "errorCategory": category,
            "isRetryable": category in RETRYABLE if retryable is None else retryable,
            "message": message,
        },
    }


def fail(category: str, message: str) -> dict[str, Any]:
    """The result a tool returns when it fails. Nothing found is a valid answer, so "empty" carries no error."""
    if category == "empty":
        return {"orders": [], "message": message}
    return error_json(category, message)


def should_retry(error: dict[str, Any]) -> bool:
    """Retry only a failure that says a retry can help. Pass ``result["error"]``, not the whole result."""
    return bool(error.get("isRetryable"))


def is_empty(content: Any) -> bool:
    """Whether a successful result found nothing: an empty value, or a mapping whose lists are all empty."""
    if content in (None, "", [], {}):
        return True
    if isinstance(content, dict) and "isError" not in content:
        lists = [v for v in content.values() if isinstance(v, list)]
        return bool(lists) and not any(lists)
    return False
