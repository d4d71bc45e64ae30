"""What the pages' reads share: the columns no list or queue reads, and a step index or id read from a query string."""

from __future__ import annotations

from typing import Any

# Columns the list and queue pages never show: kept out of their queries.
HEAVY_FIELDS = ("transcript", "search_text", "policy_settings", "task", "verdict_reason", "error", "labels")


def index_or_zero(value: Any) -> int:
    """A step index or id from a query string; 0 when it is missing or not a number."""
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return 0
