"""What a tool changes, read from what the trace carries, and which of those it was read from.

In order: MCP tool annotations (``readOnlyHint``, ``idempotentHint``, ``destructiveHint``, with MCP's
defaults for the hints an annotated tool leaves out), a pack's tool flags (``read_only``,
``idempotent``, ``destructive`` on the tool's definition), else the tool's name and description
(a verb such as refund, charge, book, delete says it writes; get, list, look up, search that it reads).
What none of them says stays unknown, and a finding that needs it is not made.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import orjson

MCP = "MCP annotations"
PACK = "pack tool flags"
NAME = "tool name and description"

_WRITES = frozenset(
    [
        "add",
        "apply",
        "approve",
        "book",
        "buy",
        "cancel",
        "charge",
        "create",
        "delete",
        "deposit",
        "disable",
        "drop",
        "enable",
        "insert",
        "issue",
        "pay",
        "place",
        "post",
        "publish",
        "purchase",
        "put",
        "refund",
        "register",
        "remove",
        "reserve",
        "schedule",
        "send",
        "set",
        "ship",
        "submit",
        "transfer",
        "update",
        "upload",
        "withdraw",
        "write",
    ]
)
_READS = frozenset(
    [
        "calculate",
        "check",
        "compute",
        "convert",
        "count",
        "describe",
        "estimate",
        "fetch",
        "find",
        "get",
        "inspect",
        "list",
        "look",
        "lookup",
        "query",
        "read",
        "search",
        "show",
        "validate",
        "view",
    ]
)
# An input field whose name says the call carries an idempotency key.
IDEMPOTENCY_FIELD = re.compile(r"idempot|dedup|request[_-]?id|client[_-]?token|operation[_-]?id", re.IGNORECASE)


@dataclass(frozen=True)
class Effects:
    """Whether a call of the tool changes something, is safe to repeat, destroys; None: not known."""

    changes: bool | None
    idempotent: bool | None
    destructive: bool | None
    basis: str  # which of MCP, PACK, NAME it was read from; "" when nothing said

    @property
    def said(self) -> str:
        """ "reads only (MCP annotations)", "changes something (tool name and description)", …"""
        if self.changes is None:
            return "not known whether it changes anything"
        what = "changes something" if self.changes else "reads only"
        if self.changes and self.idempotent:
            what += ", safe to repeat"
        return f"{what} ({self.basis})"


_CAMEL = re.compile(r"([a-z])([A-Z])")
_NOT_LETTERS = re.compile(r"[^a-z]+")
_SAYS_IDEMPOTENT = re.compile(r"\bidempotent\b|idempotency key", re.IGNORECASE)


def _words(text: str) -> list[str]:
    spaced = _CAMEL.sub(r"\1 \2", text or "")
    return [w for w in _NOT_LETTERS.split(spaced.lower()) if w]


def _flag(tool: dict[str, Any], *names: str) -> bool | None:
    for name in names:
        value = tool.get(name)
        if isinstance(value, bool):
            return value
    return None


def effects_of(tool: dict[str, Any] | None) -> Effects:
    """What the tool definition ``tool`` (a Messages API tool schema, maybe with ``annotations``) says;
    one ``Effects`` per distinct definition, worked out once (every run of a tool asks the same)."""
    try:
        spelled = orjson.dumps(tool or {}, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
    except TypeError:  # an integer beyond 64 bits: not kept
        return _effects_of(tool or {})
    return _effects_cached(spelled)


@functools.lru_cache(maxsize=2048)
def _effects_cached(spelled: bytes) -> Effects:
    return _effects_of(orjson.loads(spelled))


def _effects_of(tool: dict[str, Any]) -> Effects:
    notes = tool.get("annotations")
    if isinstance(notes, dict) and any(k in notes for k in ("readOnlyHint", "idempotentHint", "destructiveHint")):
        read_only = notes.get("readOnlyHint") is True
        return Effects(
            changes=not read_only,
            idempotent=True if read_only else notes.get("idempotentHint") is True,
            destructive=False if read_only else notes.get("destructiveHint") is not False,
            basis=MCP,
        )
    read_only = _flag(tool, "read_only", "readOnly")
    idempotent = _flag(tool, "idempotent")
    if read_only is not None or idempotent is not None:
        return Effects(
            changes=None if read_only is None else not read_only,
            idempotent=True if read_only else idempotent,
            destructive=_flag(tool, "destructive"),
            basis=PACK,
        )
    name_words = _words(str(tool.get("name") or ""))
    description = str(tool.get("description") or "")
    first = _words(description)[:1]
    if name_words and name_words[0] in _READS:
        changes: bool | None = False
    elif any(w in _WRITES for w in name_words):
        changes = True
    elif any(w in _READS for w in name_words) or (first and first[0] in _READS):
        changes = False
    elif first and first[0] in _WRITES:
        changes = True
    else:
        return Effects(None, None, None, "")
    said_idempotent = True if _SAYS_IDEMPOTENT.search(description) else None
    return Effects(changes, True if not changes else said_idempotent, None, NAME)


def idempotency_key_in(call_input: Any) -> str | None:
    """The name of the input field that carries an idempotency key, when the call has one with a value."""
    if not isinstance(call_input, dict):
        return None
    for name, value in call_input.items():
        if IDEMPOTENCY_FIELD.search(str(name)) and value not in (None, ""):
            return str(name)
    return None
