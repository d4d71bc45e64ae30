"""The runs list's search: a case-insensitive substring of a run's scenario, policy, tool names and
inputs, error messages or answers, served by an index on either database.

What is searched is five columns of ``Run``: ``scenario``, ``policy_name``, ``search_text`` (each
step's tool, input, error messages and text, appended by the recorder), ``final_answer`` and
``error``. Migration 0016 indexes them:

- **SQLite** (3.34 or newer): an FTS5 table with the trigram tokenizer, ``tracer_run_search``,
  whose content is those columns of ``tracer_run`` (no copy of the text) and which triggers on
  ``tracer_run`` keep in step with every insert, update and delete, whoever writes. A phrase query
  of three or more characters matches any substring, case-insensitively, and the table hands its
  matches over newest first (its rowid is the run's id), so the first page stops reading early.
- **PostgreSQL**: a pg_trgm GIN index on ``UPPER(column)`` of each column, the expression Django's
  ``icontains`` compares; the planner combines them (BitmapOr) or reads the newest runs in order and
  checks each, whichever its statistics say is cheaper.

Below three characters no trigram exists to look up: the form asks for three
(``SEARCH_MIN_CHARS``), and a shorter query given here anyway is matched by reading every run.
On an SQLite older than 3.34 (no trigram tokenizer) the migration creates no table and the search
reads every run, as it did before.
"""

from __future__ import annotations

import sqlite3
from functools import cache

from django.db import connection
from django.db.models import Q, QuerySet

from .models import Run

SEARCH_MIN_CHARS = 3  # a trigram
SEARCHED = ("scenario", "policy_name", "search_text", "final_answer", "error")
FTS_TABLE = "tracer_run_search"
FTS_MIN_SQLITE = (3, 34, 0)  # the trigram tokenizer


def fts_supported() -> bool:
    """Whether this SQLite library has FTS5's trigram tokenizer."""
    return sqlite3.sqlite_version_info >= FTS_MIN_SQLITE


@cache
def _fts_table_exists(alias: str, name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = %s", [FTS_TABLE])
        return cursor.fetchone() is not None


def fts_ready() -> bool:
    """SQLite with the trigram table in place (asked once per database and process)."""
    if connection.vendor != "sqlite" or not fts_supported():
        return False
    return _fts_table_exists(connection.alias, str(connection.settings_dict["NAME"]))


def fts_phrase(q: str) -> str:
    """``q`` as one FTS5 phrase: a substring match of the whole text, quotes doubled."""
    return '"' + q.replace('"', '""') + '"'


def runs_matching(runs: QuerySet[Run], q: str) -> QuerySet[Run]:
    """``runs`` whose searched columns contain ``q`` (case-insensitive). On SQLite with the trigram
    table they come newest first (by id, which grows with creation time) straight from the index;
    ``runs_ordered`` keeps that order for the default sort."""
    if len(q) >= SEARCH_MIN_CHARS and fts_ready():
        return runs.extra(
            tables=[FTS_TABLE],
            where=[f'"{FTS_TABLE}".rowid = "tracer_run"."id"', f'"{FTS_TABLE}" MATCH %s'],
            params=[fts_phrase(q)],
        )
    match = Q()
    for column in SEARCHED:
        match |= Q(**{f"{column}__icontains": q})
    return runs.filter(match)


def newest_first_from_index(runs: QuerySet[Run]) -> QuerySet[Run]:
    """``runs`` (from ``runs_matching``) newest first, in the order the trigram table gives its
    matches on SQLite (no sort of every match); by creation time elsewhere."""
    if fts_ready() and FTS_TABLE in runs.query.extra_tables:
        return runs.order_by().extra(order_by=[f"-{FTS_TABLE}.rowid"])
    return runs.order_by("-created_at", "-id")


def newest_between(runs: QuerySet[Run], *, after: int, upto: int) -> QuerySet[Run]:
    """``runs`` (from ``runs_matching`` or not) with ids after ``after`` up to ``upto``, newest (highest
    id) first. From the trigram table, its rowid is bounded too and gives the order, so it reads only
    the matches in that range from the newest down: SQLite does not carry the bound on the run's id
    over to the table, which would then read every match of a common word to find the few new runs
    among them."""
    runs = runs.filter(pk__gt=after, pk__lte=upto)
    if FTS_TABLE not in runs.query.extra_tables:
        return runs.order_by("-id")
    rowid = f'"{FTS_TABLE}".rowid'
    runs = runs.extra(where=[f"{rowid} > %s", f"{rowid} <= %s"], params=[after, upto])
    return runs.order_by().extra(order_by=[f"-{FTS_TABLE}.rowid"])
