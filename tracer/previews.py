"""How much of a value from a trace a page shows: its first ``PREVIEW_CHARS`` characters, and for a longer
one a "show all (N KB)" control that asks for the whole value (``views.step_value``, ``views.run_value``)
and puts it in the preview's place. A step may hold megabytes (the step API takes up to
``RLT_API_MAX_BYTES``); a page shows a few KB of each value whatever it holds, and nothing is cut without
saying so.

``preview`` writes the HTML: the text escaped (or its lines joined by ``<br>``), cut with an ellipsis and
the control, in a ``<span class="clipped">`` the control's answer replaces. ``Utf8Bytes`` is a value's size
in the database, for a column read there only as its first ``PREVIEW_CHARS`` characters (``Substr``).
"""

from __future__ import annotations

from html import escape
from typing import Any

from django.db.models import Func, IntegerField
from django.db.models.functions import Substr
from django.template.defaultfilters import linebreaksbr

PREVIEW_CHARS = 4096


class Utf8Bytes(Func):
    """A text column's length in UTF-8 bytes (``octet_length``; SQLite: the length of it as a blob)."""

    function = "OCTET_LENGTH"
    output_field = IntegerField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template="LENGTH(CAST(%(expressions)s AS BLOB))", **extra)


def size_text(size: int) -> str:
    """A size in bytes as the control says it: KB, rounded up, with thousands separators."""
    return f"{-(-size // 1024):,} KB"


def _html(text: str, lines: bool) -> str:
    return linebreaksbr(text, autoescape=True) if lines else escape(text)


def preview(text: str, *, url: str, size: int | None = None, lines: bool = False) -> str:
    """``text`` escaped for a page: whole when it is at most ``PREVIEW_CHARS`` characters, else its first
    ``PREVIEW_CHARS`` and a control (a link that htmx follows in place) loading the whole value from
    ``url``. ``size``: the whole value's UTF-8 bytes when ``text`` is already only its start (read so in the
    query); None when ``text`` is the whole value. ``lines``: newlines written as ``<br>``."""
    whole = len(text.encode()) if size is None else size
    shown = text[:PREVIEW_CHARS]
    if len(shown) == len(text) and whole <= len(shown.encode()):
        return _html(text, lines)
    link = escape(url)
    return (
        f'<span class="clipped">{_html(shown, lines)}<span class="clip-more">… '
        f'<a class="show-all" href="{link}" hx-get="{link}" hx-target="closest .clipped" hx-swap="outerHTML">'
        f"show all ({size_text(whole)})</a></span></span>"
    )


def preview_cut(text: str) -> str:
    """``text`` cut to ``PREVIEW_CHARS`` characters with an ellipsis, for a text made of several values
    (a split's summary, a cause), which no single show-all control holds: the steps it names have theirs."""
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def whole(text: str, *, lines: bool = False) -> str:
    """The control's answer: the whole value escaped, in the preview's place."""
    return f'<span class="clipped whole">{_html(text, lines)}</span>'


# A run's long texts the run page shows, each with whether its newlines are written as <br>. The page reads
# each as ``<name>_shown`` (its first PREVIEW_CHARS characters) and ``<name>_bytes`` (its size), not whole.
RUN_TEXTS = {
    "task": False,
    "error": False,
    "final_answer": True,
    "verdict_reason": False,
    "model_verdict_reason": False,
}


def shown_annotations(*names: str) -> dict[str, Func]:
    """For each text column in ``names``: ``<name>_shown``, its first ``PREVIEW_CHARS`` characters, and
    ``<name>_bytes``, its size, read in the query so that the page never reads the column whole."""
    annotations: dict[str, Func] = {}
    for name in names:
        annotations[f"{name}_shown"] = Substr(name, 1, PREVIEW_CHARS)
        annotations[f"{name}_bytes"] = Utf8Bytes(name)
    return annotations
