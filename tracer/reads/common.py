"""What the pages' reads share: the columns no list or queue reads, the experiments the default views
leave out, and a step index or id read from a query string."""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from ..models import Experiment

# Columns the list and queue pages never show: kept out of their queries.
HEAVY_FIELDS = ("transcript", "search_text", "policy_settings", "task", "verdict_reason", "error", "labels")


def index_or_zero(value: Any) -> int:
    """A step index or id from a query string; 0 when it is missing or not a number."""
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return 0


def not_archived(of: str = "") -> Q:
    """Runs outside archived experiments (``of``: the path to the run). The runs list, the matrix, the
    stop queue and the pickers read only these unless an experiment is asked for by name; an archived
    experiment's page and its runs' pages still show them."""
    archived = Experiment.objects.filter(archived_at__isnull=False).values("id")
    return ~Q(**{f"{of}experiment_id__in": archived})
