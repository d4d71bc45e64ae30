"""Reads of the runs list: its filters and sorts, its distinct values, its pages counted up to a cap, and its live
poll's changed and new rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import cache
from typing import Any, NamedTuple

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import F, QuerySet

from .. import search
from ..models import Finding, Run, StopReview, run_cost
from .common import index_or_zero, not_archived
from .prepared import Prepared


class RunRow(NamedTuple):
    """One row of the runs list (``tracer_tags.run_row``): the columns of the run it shows, the only
    ones the list's queries read (``ROW_FIELDS``), and its review (None: not reviewed)."""

    id: int
    label: str
    source: str
    source_detail: str
    scenario: str
    policy_name: str
    model_backend: str
    model_name: str
    status: str
    stop_reason: str
    verdict: str
    final_answer: str
    step_count: int
    error_count: int
    failed_attempt_count: int
    retry_count: int
    wasted_retry_count: int
    input_tokens: int
    output_tokens: int
    measured_ms: float
    created_at: datetime
    started_at: datetime | None
    finding_kinds: str  # its findings' kinds, comma-separated (tracer/diagnosis.py)
    review: StopReview | None

    @property
    def pk(self) -> int:
        return self.id

    @property
    def is_active(self) -> bool:
        return self.status != Run.Status.FINISHED

    @property
    def cost(self) -> Decimal | None:
        return run_cost(self.model_name, self.started_at or self.created_at, self.input_tokens, self.output_tokens)


ROW_FIELDS = RunRow._fields[:-1]  # all but the review
LIST_FIELDS = (
    *ROW_FIELDS,
    *("parent_id", "experiment_id"),
    # every column of the review and its reviewer (``run_review_filter``'s joins; the verdict cell reads them)
    *(f"review__{f.name}" for f in StopReview._meta.concrete_fields),
    "review__reviewer",
)


# --- runs ------------------------------------------------------------------------------------


def run_list(*, filters: dict[str, Any] | None = None, sort: str = "") -> QuerySet[Run]:
    """Runs narrowed by the list page's filters (blank values are ignored), in the order ``sort`` names
    (``run_sorted``: newest first unless told otherwise)."""
    f = {k: v for k, v in (filters or {}).items() if v not in (None, "")}
    qs = Run.objects.filter(parent__isnull=True).only(*LIST_FIELDS)  # sub-agents are listed on their parent
    for key in ("scenario", "policy_name", "model_backend", "source", "status", "stop_reason", "experiment_id"):
        if key in f:
            qs = qs.filter(**{key: f[key]})
    if "finding" in f:  # runs with a finding of this kind, through the findings' (kind, created) index
        qs = qs.filter(pk__in=Finding.objects.filter(kind=f["finding"]).values("run_id"))
    if "experiment_id" not in f:
        qs = qs.filter(not_archived())
    if "verdict" in f:
        qs = qs.filter(verdict="" if f["verdict"] == "unjudged" else f["verdict"])
    for key, column in (("min_steps", "step_count"), ("min_errors", "error_count"), ("min_retries", "retry_count")):
        if key in f:
            qs = qs.filter(**{f"{column}__gte": f[key]})
    if "started_from" in f:
        qs = qs.filter(created_at__date__gte=f["started_from"])
    if "started_to" in f:
        qs = qs.filter(created_at__date__lte=f["started_to"])
    if "q" in f:
        qs = search.runs_matching(qs, f["q"])
    qs = run_sorted(qs, sort=sort, searched="q" in f)
    return run_review_filter(qs, reviewed=f.get("reviewed", ""), tag=f.get("tag", ""))


def run_review_filter(runs: QuerySet[Run], *, reviewed: str = "", tag: str = "") -> QuerySet[Run]:
    """``runs`` with their reviews and tags (one query more, whatever the number), narrowed to reviewed
    (``yes``), unreviewed (``no``) or verdict-overridden (``overridden``) runs and to one review tag."""
    runs = runs.select_related("review__reviewer").prefetch_related("review__tags")
    if reviewed == "yes":
        runs = runs.filter(review__isnull=False)
    elif reviewed == "no":
        runs = runs.filter(review__isnull=True)
    elif reviewed == "overridden":
        runs = runs.filter(review__verdict_override__in=Run.Verdict.values)
    if tag:
        runs = runs.filter(review__tags__name=tag)
    return runs


def run_filter_values() -> dict[str, list[str]]:
    """The scenarios and policies runs exist for, and the tags reviewers have used (the list's filter
    choices), each sorted, in one query."""
    scenarios, policies, tags = run_distinct_values()
    return {
        "scenarios": [s for s in scenarios if s],
        "policies": [p for p in policies if p],
        "tags": tags,
    }


# --- the runs list: distinct values, sorts, pages, live rows ----------------------------------------

# Each of the two columns' distinct values, read from an index by one probe per value (a skip scan
# written as a recursive query, which both databases run): the cost grows with the scenarios and
# policies there are, not with the runs. And the review tags' names, from their (name, review) index.
_DISTINCT_SQL = """
WITH RECURSIVE scenarios(v) AS (
    SELECT MIN(scenario) FROM tracer_run
    UNION ALL
    SELECT (SELECT MIN(scenario) FROM tracer_run WHERE scenario > scenarios.v) FROM scenarios
    WHERE scenarios.v IS NOT NULL
), policies(v) AS (
    SELECT MIN(policy_name) FROM tracer_run
    UNION ALL
    SELECT (SELECT MIN(policy_name) FROM tracer_run WHERE policy_name > policies.v) FROM policies
    WHERE policies.v IS NOT NULL
)
SELECT 's', v FROM scenarios WHERE v IS NOT NULL
UNION ALL
SELECT 'p', v FROM policies WHERE v IS NOT NULL
UNION ALL
SELECT DISTINCT 't', name FROM tracer_reviewtag
"""


def run_distinct_values() -> tuple[list[str], list[str], list[str]]:
    """The scenarios and the policies runs exist for and the review tags' names, each sorted, in one
    query (the tags' own ORM query costs more to build than the three take to run)."""
    with connection.cursor() as cursor:
        cursor.execute(_DISTINCT_SQL)
        rows = cursor.fetchall()
    return tuple(sorted(v for kind, v in rows if kind == wanted) for wanted in "spt")


# The runs list's sortable columns (``?sort=steps``; ``?sort=-steps`` descending). Each has an index on
# (column, id) of top-level runs (``run_sort_*_idx``) and ties go by id in the same direction, so any
# sort reads one page of one index; "started" is the default's (parent, created_at, id) index.
RUN_SORTS = {
    "run": "id",
    "scenario": "scenario",
    "policy": "policy_name",
    "status": "status",
    "steps": "step_count",
    "errors": "error_count",
    "retries": "retry_count",
    "verdict": "verdict",
    "stop": "stop_reason",
    "duration": "measured_ms",
    "cost": "cost_usd",
    "started": "created_at",
}
DEFAULT_RUN_SORT = "-started"


def run_sorted(runs: QuerySet[Run], *, sort: str, searched: bool = False) -> QuerySet[Run]:
    """``runs`` in the order ``sort`` names (``RUN_SORTS``, ``-`` first for descending); the default,
    and anything not in ``RUN_SORTS``, is newest first. A search in the default order keeps the order
    its index hands the matches over in (``search.newest_first_from_index``)."""
    name = sort.removeprefix("-")
    if name not in RUN_SORTS or sort == DEFAULT_RUN_SORT:
        return search.newest_first_from_index(runs) if searched else runs.order_by("-created_at", "-id")
    sign = "-" if sort.startswith("-") else ""
    column = RUN_SORTS[name]
    if column == "cost_usd":  # an unknown cost (NULL) sorts as the least either way: one index reads both
        first = F(column).desc(nulls_last=True) if sign else F(column).asc(nulls_first=True)
        return runs.order_by(first, f"{sign}id")
    return runs.order_by(f"{sign}id") if column == "id" else runs.order_by(f"{sign}{column}", f"{sign}id")


# The list counts the runs that match up to this many and then says "more than": counting all of
# them would make every page's cost grow with the history. A search counts fewer: with a narrow
# filter beside a common word, each counted run costs many index entries read.
RUN_COUNT_CAP = 1000
# A page past the counted runs is asked as it is (past the end, it is empty), but never one whose
# offset would not fit the 64-bit integer both databases take for OFFSET.
PAGE_NUMBER_MAX = 10**9
SEARCH_COUNT_CAP = 200


@dataclass
class RunPage:
    """One page of the runs list: its runs, whether older ones follow, and the matches counted up to
    ``count_cap`` (beyond it, ``num_pages`` is None and the page says "more than 1000 runs")."""

    runs: list[RunRow]
    number: int
    count: int
    per_page: int
    has_next: bool
    count_cap: int = RUN_COUNT_CAP

    def __iter__(self):
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)

    @property
    def counted_all(self) -> bool:
        return self.count <= self.count_cap

    @property
    def num_pages(self) -> int | None:
        return max(1, -(-self.count // self.per_page)) if self.counted_all else None

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def has_other_pages(self) -> bool:
        return self.has_previous or self.has_next

    @property
    def previous_page_number(self) -> int:
        return self.number - 1

    @property
    def next_page_number(self) -> int:
        return self.number + 1


def run_page(*, runs: QuerySet[Run], page: Any, per_page: int, searched: bool = False) -> RunPage:
    """Page ``page`` (1 when it is not a page number; the last one when it is past the end) of
    ``runs`` as ``RunRow``s, in two queries: the page and one more run (are there older ones?), and
    the count up to ``RUN_COUNT_CAP`` + 1 (``SEARCH_COUNT_CAP`` + 1 for a search); two more when a run
    on the page is reviewed (``run_rows``)."""
    counted = run_count(runs=runs, searched=searched, per_page=per_page)
    number = min(index_or_zero(page) or 1, PAGE_NUMBER_MAX)
    if counted.counted_all:
        number = min(number, counted.num_pages)
    start = (number - 1) * per_page
    rows = run_rows(runs, start=start, stop=start + per_page + 1)
    more = len(rows) > per_page
    return RunPage(
        runs=rows[:per_page],
        number=number,
        count=counted.count,
        per_page=per_page,
        has_next=more,
        count_cap=counted.count_cap,
    )


def run_list_page(*, filters: dict[str, Any], sort: str, page: Any, per_page: int) -> RunPage:
    """The runs list's page as ``filters``, ``sort`` and ``page`` ask for it (``run_list``, ``run_page``).
    Unfiltered and newest first, the list most visits see, its first page's two queries are compiled
    once per process (``prepared``) rather than built for every request."""
    if any(v not in (None, "") for k, v in filters.items() if k != "sort") or (sort and sort != DEFAULT_RUN_SORT):
        runs = run_list(filters=filters, sort=sort)
        return run_page(runs=runs, page=page, per_page=per_page, searched=bool(filters.get("q")))
    counted = run_count(runs=None, per_page=per_page)
    number = min(index_or_zero(page) or 1, PAGE_NUMBER_MAX)
    if counted.counted_all:
        number = min(number, counted.num_pages)
    if number != 1:
        return run_page(runs=run_list(), page=page, per_page=per_page)
    rows = _rows_of(_newest_rows(per_page + 1)())
    more = len(rows) > per_page
    return RunPage(
        runs=rows[:per_page],
        number=1,
        count=counted.count,
        per_page=per_page,
        has_next=more,
        count_cap=counted.count_cap,
    )


@cache
def _newest_rows(limit: int) -> Prepared:
    """The first ``limit`` rows of the unfiltered list, newest first, and each one's review's id."""
    return Prepared(lambda: run_list().prefetch_related(None).values_list(*ROW_FIELDS, "review__id")[:limit])


@cache
def _unfiltered_count_sql(cap: int) -> tuple[str, tuple]:
    """``run_count``'s SQL of the unfiltered list (no values from a request in it), made once."""
    return _count_sql(run_list(), cap)


def _count_sql(runs: QuerySet[Run], cap: int) -> tuple[str, tuple]:
    sql, params = runs.order_by().values("id")[: cap + 1].query.sql_with_params()
    return f"SELECT COUNT(*) FROM ({sql}) counted", params


def run_count(*, runs: QuerySet[Run] | None, searched: bool = False, per_page: int = 50) -> RunPage:
    """How many runs ``runs`` has (None: the unfiltered list), counted up to ``RUN_COUNT_CAP`` + 1
    (``SEARCH_COUNT_CAP`` + 1 for a search), as an empty first page (what the list says above its
    table), in one query."""
    cap = SEARCH_COUNT_CAP if searched else RUN_COUNT_CAP
    # Plain SQL around the query of the ids: what Django's count() of a sliced query runs, at half
    # the CPU (its aggregate over a subquery is costly to build).
    try:
        sql, params = _unfiltered_count_sql(cap) if runs is None else _count_sql(runs, cap)
    except EmptyResultSet:  # a filter nothing can match (steps ≥ more than a column holds)
        count = 0
    else:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            count = cursor.fetchone()[0]
    return RunPage(runs=[], number=1, count=count, per_page=per_page, has_next=False, count_cap=cap)


def run_rows(runs: QuerySet[Run], *, start: int = 0, stop: int | None = None) -> list[RunRow]:
    """``runs[start:stop]`` (a ``run_list`` or the like) as ``RunRow``s: their ``ROW_FIELDS`` read as
    tuples (cheaper than building model instances with their reviews joined), and the reviews of those
    reviewed, with their reviewer and tags, in two queries more when there are any."""
    return _rows_of(list(runs.prefetch_related(None).values_list(*ROW_FIELDS, "review__id")[start:stop]))


def _rows_of(values: list[tuple]) -> list[RunRow]:
    """``RunRow``s of tuples of ``ROW_FIELDS`` and the review's id, with the reviews there are."""
    reviewed = [v[-1] for v in values if v[-1] is not None]
    reviews = {}
    if reviewed:
        found = StopReview.objects.filter(pk__in=reviewed).select_related("reviewer").prefetch_related("tags")
        reviews = {review.pk: review for review in found}
    return [RunRow(*v[:-1], reviews.get(v[-1])) for v in values]


def run_version(run: Run | RunRow) -> str:
    """What the list's live poll compares: a row changes when its run records a step or ends."""
    return _version(run.pk, run.step_count, run.status)


def _version(pk: int, step_count: int, status: str) -> str:
    return f"{pk}.{step_count}.{status}"


@dataclass
class RunsLive:
    """What the runs list's live poll found: of the runs it named, the rows of those that ``changed``
    since the page showed them and the ``active`` ones' versions (what the next poll names), newest
    first; and when it watches for new runs, the ``newest`` top-level run's id (0: none yet)."""

    changed: list[RunRow]
    active: list[str]
    newest: int | None = None


# The poll's first question, in plain SQL (the ORM takes longer to build it than a poll that finds
# nothing should cost): each named run's version, and the newest top-level run's id (the primary key
# read backwards to the first that is no sub-agent).
_NEWEST_TOP_LEVEL_SQL = "SELECT id FROM tracer_run WHERE parent_id IS NULL ORDER BY id DESC LIMIT 1"
_VERSIONS_SQL = "SELECT r.id, r.step_count, r.status{newest} FROM tracer_run r WHERE r.id IN ({ids}) ORDER BY r.id DESC"


def run_rows_changed(*, versions: dict[int, str], watch: bool = False) -> RunsLive:
    """Of the runs ``versions`` names (id: ``run_version`` as the page shows it), the rows of those
    that changed since and the versions of those still active; with ``watch``, also the newest
    top-level run's id. One query when nothing changed, whatever it names and watches; one more for
    the rows that changed (two more when one of them is reviewed)."""
    found, newest = [], None
    with connection.cursor() as cursor:
        if versions:
            placeholders = ", ".join(["%s"] * len(versions))
            sql = _VERSIONS_SQL.format(
                newest=f", ({_NEWEST_TOP_LEVEL_SQL}) AS newest" if watch else "", ids=placeholders
            )
            cursor.execute(sql, list(versions))
            found = cursor.fetchall()
            newest = found[0][3] if watch and found else None
        if watch and newest is None:
            cursor.execute(_NEWEST_TOP_LEVEL_SQL)
            newest = next(iter(cursor.fetchone() or ()), 0)
    current = [(row[0], _version(*row[:3]), row[2] != Run.Status.FINISHED) for row in found]
    changed = [pk for pk, version, _ in current if version != versions[pk]]
    rows = run_rows(Run.objects.filter(pk__in=changed).order_by("-id")) if changed else []
    return RunsLive(changed=rows, active=[version for _, version, active in current if active], newest=newest)


def run_rows_new(*, filters: dict[str, Any], after: int, newest: int, limit: int) -> list[RunRow]:
    """The top-level runs ``filters`` match (``run_list``'s) among those after id ``after`` up to
    ``newest``, newest first, at most ``limit``: read in that range of ids (of the primary key, the
    filter's index or the search's), so the cost is the new runs', however many came before."""
    runs = search.newest_between(run_list(filters=filters), after=after, upto=newest)
    return run_rows(runs, stop=limit)
