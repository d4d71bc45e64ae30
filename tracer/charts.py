"""Small inline SVG charts over days for the Tools and Findings pages: a tool's failure rate by category,
a finding kind's count. Drawn as rects with classes (``static/css/app.css`` colours them, dark mode
too), each day's figures in a ``<title>`` a pointer or a screen reader can read; nothing from a trace
is drawn, and every value is escaped all the same."""

from __future__ import annotations

from datetime import date
from html import escape

from django.utils.safestring import SafeString, mark_safe

from agents.vocabulary import ErrorCategory

CATEGORIES = (*(c.value for c in ErrorCategory), "unknown")
HEIGHT = 32
BAR = 6  # a day's width, gap included
GAP = 1


def _svg(days: int, body: list[str], label: str) -> SafeString:
    width = max(days, 1) * BAR
    return mark_safe(
        f'<svg class="day-chart" viewBox="0 0 {width} {HEIGHT}" width="{width}" height="{HEIGHT}" role="img" '
        f'aria-label="{escape(label)}"><rect class="track" width="{width}" height="{HEIGHT}"/>{"".join(body)}</svg>'
    )


def _day_rect(css: str, x: float, y: float, height: float, title: str) -> str:
    """One day's column, its figures in a ``<title>``."""
    size = f'x="{x}" y="{y}" width="{BAR - GAP}" height="{height}"'
    return f'<rect class="{css}" {size}><title>{escape(title)}</title></rect>'


def failure_chart(days: list[date], per_day: dict[date, dict[str, int]], *, label: str) -> SafeString:
    """Each day's failed calls over its calls, stacked by category (full height: every call failed)."""
    body = []
    for k, day in enumerate(days):
        counts = per_day.get(day) or {}
        calls = counts.get("calls", 0)
        x = k * BAR
        if not calls:
            body.append(_day_rect("none", x, HEIGHT - 1, 1, f"{day}: no calls"))
            continue
        y = float(HEIGHT)
        said = []
        for cat in CATEGORIES:
            n = counts.get(f"failed_{cat}", 0)
            if not n:
                continue
            h = HEIGHT * n / calls
            y -= h
            body.append(f'<rect class="cat-{cat}" x="{x}" y="{y:.2f}" width="{BAR - GAP}" height="{h:.2f}"/>')
            said.append(f"{cat} {n}")
        failed = counts.get("failed", 0)
        title = f"{day}: {failed} of {calls} calls failed" + (f" ({', '.join(said)})" if said else "")
        body.append(_day_rect("hit", x, 0, HEIGHT, title))
    return _svg(len(days), body, label)


def count_chart(days: list[date], per_day: dict[date, int], *, label: str, what: str = "findings") -> SafeString:
    """Each day's count, scaled to the largest day's."""
    top = max((per_day.get(d, 0) for d in days), default=0) or 1
    body = []
    for k, day in enumerate(days):
        n = per_day.get(day, 0)
        h = max(HEIGHT * n / top, 1 if n else 0)
        x = k * BAR
        if n:
            body.append(f'<rect class="count" x="{x}" y="{HEIGHT - h:.2f}" width="{BAR - GAP}" height="{h:.2f}"/>')
        body.append(_day_rect("hit", x, 0, HEIGHT, f"{day}: {n} {what}"))
    return _svg(len(days), body, label)
