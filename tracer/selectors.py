"""Reads for the dashboard. Each selector's query count is fixed: it never grows with runs or steps."""

from __future__ import annotations

import gc
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from copy import copy
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

import orjson
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import (
    BooleanField,
    Case,
    Count,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    Q,
    QuerySet,
    Sum,
    TextField,
    Value,
    When,
    Window,
)
from django.db.models.functions import Cast, RowNumber
from django.shortcuts import get_object_or_404
from django.utils import timezone

from . import compare_lines, search, waterfall
from .divergence import (
    Difference,
    Divergence,
    SettingRow,
    attempt_outcome,
    canonical,
    run_differences,
    run_divergence,
    settings_compare,
    settings_snapshot,
)
from .models import Experiment, PolicyVariant, Run, Step, StopReview
from .stats import Interval, beyond_noise, wilson_interval
from .waterfall import Waterfall

GUARD_STOPS = Run.GUARD_STOPS
TRAILING_STEPS = 12  # enough to show any consecutive-error guard's streak
ACTIVE = (Run.Status.QUEUED, Run.Status.RUNNING)


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
    retry_count: int
    wasted_retry_count: int
    created_at: datetime
    started_at: datetime | None
    review: StopReview | None

    @property
    def pk(self) -> int:
        return self.id

    @property
    def is_active(self) -> bool:
        return self.status != Run.Status.FINISHED


ROW_FIELDS = RunRow._fields[:-1]  # all but the review
LIST_FIELDS = (
    *ROW_FIELDS,
    *("parent_id", "experiment_id"),
    # every column of the review and its reviewer (``run_review_filter``'s joins; the verdict cell reads them)
    *(f"review__{f.name}" for f in StopReview._meta.concrete_fields),
    "review__reviewer",
)
# Columns the list and queue pages never show: kept out of their queries.
HEAVY_FIELDS = ("transcript", "search_text", "policy_settings", "task", "verdict_reason", "error", "labels")

# What the picture of a run reads of each step, and how many steps at a time.
WATERFALL_CHUNK = 60
WATERFALL_FIELDS = (
    *("index", "kind", "tool_name", "input", "is_error", "category", "result_content"),
    *("attempts", "model_attempts"),
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
    if "verdict" in f:
        qs = qs.filter(verdict="" if f["verdict"] == "unknown" else f["verdict"])
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


def runs_any_active(runs: Iterable[Run]) -> bool:
    return any(run.is_active for run in runs)


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
    query (the tags' own ORM query cost more to build than the three take to run)."""
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
    return runs.order_by(f"{sign}id") if column == "id" else runs.order_by(f"{sign}{column}", f"{sign}id")


# The list counts the runs that match up to this many and then says "more than": counting all of
# them would make every page's cost grow with the history. A search counts fewer: with a narrow
# filter beside a common word, each counted run costs many index entries read.
RUN_COUNT_CAP = 1000
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
    number = index_or_zero(page) or 1
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


def run_count(*, runs: QuerySet[Run], searched: bool = False, per_page: int = 50) -> RunPage:
    """How many runs ``runs`` has, counted up to ``RUN_COUNT_CAP`` + 1 (``SEARCH_COUNT_CAP`` + 1 for a
    search), as an empty first page (what the list says above its table), in one query."""
    cap = SEARCH_COUNT_CAP if searched else RUN_COUNT_CAP
    # Plain SQL around the query of the ids: what Django's count() of a sliced query runs, at half
    # the CPU (its aggregate over a subquery is costly to build).
    try:
        sql, params = runs.order_by().values("id")[: cap + 1].query.sql_with_params()
    except EmptyResultSet:  # a filter nothing can match (steps ≥ more than a column holds)
        count = 0
    else:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT COUNT(*) FROM ({sql}) counted", params)
            count = cursor.fetchone()[0]
    return RunPage(runs=[], number=1, count=count, per_page=per_page, has_next=False, count_cap=cap)


def run_rows(runs: QuerySet[Run], *, start: int = 0, stop: int | None = None) -> list[RunRow]:
    """``runs[start:stop]`` (a ``run_list`` or the like) as ``RunRow``s: their ``ROW_FIELDS`` read as
    tuples (a page of 50 runs built as model instances with their reviews joined cost 3 ms of CPU, as
    tuples 1 ms), and the reviews of those reviewed, with their reviewer and tags, in two queries more
    when there are any."""
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


# The poll's first question, in plain SQL (the ORM took longer to build it than a poll that finds
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


def run_get(*, pk: int) -> Run:
    """A run as its page shows it: with its experiment and its review's reviewer; not its search text,
    which no page shows (its parent is a link by ``parent_id``)."""
    runs = Run.objects.select_related("experiment", "review__reviewer").defer("search_text")
    return get_object_or_404(runs, pk=pk)


def run_reviewed(*, pk: int) -> Run:
    """A run with its review, the reviewer and the review's tags (two queries)."""
    runs = Run.objects.defer(*HEAVY_FIELDS).select_related("review__reviewer").prefetch_related("review__tags")
    return get_object_or_404(runs, pk=pk)


# The run page's timeline is windowed: it shows this many steps at first, and each "show more" (a
# click, or scrolling to it) this many more; a live run's page also shows its newest ``STEP_TAIL``.
STEP_WINDOW = 50
STEP_TAIL = 10


class StepRow(NamedTuple):
    """One step of the timeline (``timeline_tags.step_item``), which the picture of the run reads too:
    the columns it shows (``STEP_ROW_FIELDS``), read as tuples. Fifty steps built as model instances
    cost a quarter of the window's query more."""

    index: int
    kind: str
    tool_name: str
    input: Any
    attempts: list
    result_content: Any
    is_error: bool
    category: str
    retryable: bool | None
    retry_count: int
    latency_ms: float
    input_tokens: int
    output_tokens: int
    text: str
    api_stop_reason: str
    model_attempts: list


STEP_ROW_FIELDS = StepRow._fields


def _step_rows(steps: QuerySet[Step]) -> list[StepRow]:
    return [StepRow._make(values) for values in steps.values_list(*STEP_ROW_FIELDS)]


@dataclass
class StepGap:
    """Steps the timeline does not show yet: those after index ``after`` and before ``before`` (None:
    up to the run's end, ``last``)."""

    after: int
    before: int | None
    last: int

    @property
    def first(self) -> int:
        return self.after + 1

    @property
    def next_last(self) -> int:
        """The last step the gap's control shows when it is used."""
        return min(self.first + STEP_WINDOW - 1, self.last)

    @property
    def hidden(self) -> int:
        return self.last - self.after


@dataclass
class StepWindow:
    """What the timeline shows: ``gap_before``, ``steps``, ``gap_after``, then ``tail`` (a live run's
    newest steps, after a gap). Each gap is a control that loads its next ``STEP_WINDOW`` steps."""

    steps: list[StepRow]
    gap_before: StepGap | None = None
    gap_after: StepGap | None = None
    tail: list[StepRow] = field(default_factory=list)
    following: StepRow | None = None  # the step after ``steps``, read to know that more follow

    @property
    def last_index(self) -> int:
        """The newest step shown (0: none), where the live poll goes on from."""
        shown = self.tail or self.steps
        return shown[-1].index if shown else 0


def step_window(*, run: Run, after: int = 0, before: int | None = None, at: int = 0) -> StepWindow:
    """The steps between index ``after`` and ``before`` (None: the run's end) the timeline shows: the
    ``STEP_WINDOW`` from the one holding ``at`` (steps are windowed from ``after``, so a link to step
    ``at`` lands in the window that holds it; 0: from the first) with a gap before it when it does not
    start at the first, and a gap after it when more follow. One query, whatever the number of steps."""
    first = after + 1
    last = (before - 1) if before is not None else max(run.step_count, after)
    if at > first and (before is None or at < before):
        first += (at - first) // STEP_WINDOW * STEP_WINDOW
    rows = run.steps.filter(index__gte=first)
    if before is not None:
        rows = rows.filter(index__lt=before)
    steps = _step_rows(rows.order_by("index")[: STEP_WINDOW + 1])
    shown = steps[:STEP_WINDOW]
    if not shown:
        return StepWindow(steps=[])
    gap_before = StepGap(after=after, before=shown[0].index, last=shown[0].index - 1) if first > after + 1 else None
    gap_after = None
    if len(steps) > STEP_WINDOW:
        gap_after = StepGap(after=shown[-1].index, before=before, last=max(last, steps[-1].index))
    following = steps[STEP_WINDOW] if len(steps) > STEP_WINDOW else None
    return StepWindow(steps=shown, gap_before=gap_before, gap_after=gap_after, following=following)


def step_window_first(*, run: Run, at: int = 0) -> StepWindow:
    """The run page's timeline: the window from the first step (or the one holding step ``at``), and
    for a live run its newest ``STEP_TAIL`` steps too, the hidden ones between them a gap. Two
    queries at most, whatever the number of steps."""
    if not run.is_active:
        return step_window(run=run, at=at)
    tail = _step_rows(run.steps.order_by("-index")[:STEP_TAIL])[::-1]
    if not tail:
        return StepWindow(steps=[])
    before = tail[0].index
    window = step_window(run=run, before=before, at=at if at < before else 0)
    window.tail = tail
    return window


def step_window_new(*, run: Run, after: Any) -> StepWindow:
    """The live poll's steps: those recorded after index ``after``; when more than ``STEP_WINDOW``
    arrived, the newest ``STEP_TAIL`` behind a gap. One query, whatever the number of new steps."""
    after = index_or_zero(after)
    newest = _step_rows(run.steps.filter(index__gt=after).order_by("-index")[: STEP_WINDOW + 1])[::-1]
    if len(newest) <= STEP_WINDOW:
        return StepWindow(steps=newest)
    tail = newest[-STEP_TAIL:]
    gap = StepGap(after=after, before=tail[0].index, last=tail[0].index - 1)
    return StepWindow(steps=[], gap_after=gap, tail=tail)


def run_reruns(*, run: Run) -> list[Run]:
    """The runs queued to re-run ``run`` after it was interrupted (``execution``: only an interrupted
    run is re-run; no query for any other)."""
    if run.stop_reason != Run.StopReason.INTERRUPTED:
        return []
    return list(run.reruns.only("pk", "status").order_by("id"))


@dataclass
class SubAgents:
    """A run's sub-agents (child runs), for its page: ``by_step`` maps the index of the step that
    started them to those runs, in the order they started; ``unplaced`` are those recorded before a
    child kept its step (``Run.parent_step``). ``tokens``: (in, out) of those that ended, which count
    in the parent's own totals (``recording.run_finish``)."""

    runs: list[Run]
    by_step: dict[int, list[Run]]
    unplaced: list[Run]
    tokens: tuple[int, int]

    @property
    def running(self) -> list[Run]:
        """Those still running: their step is recorded only once they end, so the live line names them."""
        return [c for c in self.runs if c.is_active]


# What the run page shows of a sub-agent (under its step, in the aside, on the live line): the only
# columns read of each (a query deferring the heavy columns cost more to build than one naming these).
SUB_AGENT_FIELDS = (
    *("id", "parent", "parent_step", "label", "status", "stop_reason", "source", "source_detail"),
    *("model_backend", "model_name", "step_count", "error_count", "retry_count", "input_tokens"),
    *("output_tokens", "started_at", "finished_at"),
)


def run_sub_agents(*, run: Run) -> SubAgents:
    """One query, whatever the number of steps and sub-agents."""
    children = list(run.children.only(*SUB_AGENT_FIELDS).order_by("id"))
    by_step: dict[int, list[Run]] = defaultdict(list)
    for child in children:
        if child.parent_step is not None:
            by_step[child.parent_step].append(child)
    ended = [c for c in children if not c.is_active]
    return SubAgents(
        runs=children,
        by_step=dict(by_step),
        unplaced=[c for c in children if c.parent_step is None],
        tokens=(sum(c.input_tokens for c in ended), sum(c.output_tokens for c in ended)),
    )


def run_waterfall(*, run: Run, window: StepWindow | None = None) -> Waterfall:
    """The picture of ``run``'s steps (``waterfall``), read in chunks only until the picture's rows are
    full, so a long run's later steps are neither fetched nor decoded. ``window``: the timeline's steps
    of an ended run, already read; when they start at the first step the picture starts with them, and
    asks for the steps after them only if its rows are not full yet (one query at most)."""
    known: list[StepRow] = []
    whole = False
    if window is not None and not run.is_active and window.steps and window.steps[0].index == 1:
        known = [*window.steps, *([window.following] if window.following else [])]
        whole = window.gap_after is None  # nothing after them
    return waterfall.waterfall_build(steps=_steps_from(run=run, known=known, whole=whole), step_count=run.step_count)


def _steps_from(*, run: Run, known: list[StepRow], whole: bool) -> Iterator[StepRow | Step]:
    """``known`` (the run's first steps, in order; ``whole``: all of them), then the steps after them
    from the database, asked for only when the reader wants more."""
    yield from known
    if whole:
        return
    after = known[-1].index if known else 0
    rest = Step.objects.filter(run=run, index__gt=after).only(*WATERFALL_FIELDS).order_by("index")
    yield from rest[: waterfall.MAX_STEPS - len(known)].iterator(chunk_size=WATERFALL_CHUNK)


# What the run page's "Same scenario, other policies" shows of each: a link, the backend badge, status, verdict.
PEER_FIELDS = ("id", "policy_name", "status", "verdict", "source", "source_detail", "model_backend", "model_name")


def run_other_policies(*, run: Run) -> list[Run]:
    """The same scenario under each other policy (``run_policy_peers``), by policy name."""
    return run_policy_peers(runs=[run], fields=PEER_FIELDS)[run.pk]


# How a peer was found, best first: its ``pairing`` attribute.
PAIRINGS = ("same experiment and repeat", "same experiment", "newest run")


def _experiment_repeats(rows: list[dict]) -> dict[int, tuple]:
    """Each experiment run's place, ``(experiment, scenario, policy, repeat)``: the originals of one
    scenario and policy count repeats in the order they were created; a re-run takes the repeat of the
    run it re-runs (``rerun_of``), however late it was made."""
    by_id = {row["id"]: row for row in rows}
    counted: dict[tuple, int] = defaultdict(int)
    place: dict[int, tuple] = {}
    for row in sorted(rows, key=lambda r: r["id"]):
        root, hops = row, 0
        while root["rerun_of_id"] in by_id and hops < len(rows):
            root, hops = by_id[root["rerun_of_id"]], hops + 1
        if root is row:
            group = (row["experiment_id"], row["scenario"], row["policy_name"])
            place[row["id"]] = (*group, counted[group])
            counted[group] += 1
        else:
            place[row["id"]] = place[root["id"]]
    return place


def _newest_per_policy(*, scenarios: list[str], finished: bool) -> dict[tuple[str, str], int]:
    """The newest top-level run of each (scenario, policy) of ``scenarios``, by ``created_at`` then id.

    One query whose cost grows with the number of policies, not of runs: a recursive walk hops from
    each policy name to the next in the (scenario, policy_name, parent, -created_at, -id) index (a
    skip scan neither database does by itself), then takes each policy's newest run from the same
    index. A grouped MAX(id) read every run of the scenario instead: 10 ms at 100,000 runs.
    """
    status = "AND r.status = %s " if finished else ""
    seeds = " UNION ALL ".join("SELECT %s AS scenario" for _ in scenarios)
    table = Run._meta.db_table
    sql = (
        f"WITH RECURSIVE policies(scenario, name) AS ("
        f" SELECT s.scenario, (SELECT r.policy_name FROM {table} r WHERE r.scenario = s.scenario"
        f" AND r.parent_id IS NULL ORDER BY r.policy_name LIMIT 1) FROM ({seeds}) s"
        f" UNION ALL"
        f" SELECT p.scenario, (SELECT r.policy_name FROM {table} r WHERE r.scenario = p.scenario"
        f" AND r.parent_id IS NULL AND r.policy_name > p.name ORDER BY r.policy_name LIMIT 1)"
        f" FROM policies p WHERE p.name IS NOT NULL"
        f") SELECT p.scenario, p.name, (SELECT r.id FROM {table} r WHERE r.scenario = p.scenario"
        f" AND r.policy_name = p.name AND r.parent_id IS NULL {status}"
        f"ORDER BY r.created_at DESC, r.id DESC LIMIT 1) FROM policies p WHERE p.name IS NOT NULL"
    )
    params = [*scenarios, *([Run.Status.FINISHED] if finished else [])]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {(scenario, policy): pk for scenario, policy, pk in cursor.fetchall() if pk is not None}


def run_policy_peers(*, runs: list[Run], finished: bool = False, fields: Iterable[str] = ()) -> dict[int, list[Run]]:
    """For each run, one run of its scenario under each other policy, ordered by policy name, each with
    a ``pairing`` (``PAIRINGS``): from the run's own experiment and repeat when there is one (the newest
    re-run standing in for a run that was re-run), else from its experiment, else the newest anywhere.
    ``finished``: only runs that have ended; ``fields``: the only columns read of each (default: all
    but ``HEAVY_FIELDS``). Three queries, whatever the number of runs."""
    scenarios = {r.scenario for r in runs if r.scenario}
    out: dict[int, list[Run]] = {r.pk: [] for r in runs}
    if not scenarios:
        return out
    top = Run.objects.filter(scenario__in=scenarios, parent__isnull=True).order_by()
    experiments = {r.experiment_id for r in runs if r.experiment_id}
    mates = list(
        top.filter(experiment_id__in=experiments).values(
            "id", "experiment_id", "scenario", "policy_name", "rerun_of_id", "status"
        )
        if experiments
        else []
    )
    place = _experiment_repeats(mates)
    status = {row["id"]: row["status"] for row in mates}
    newest_in_place: dict[tuple, int] = {}
    for pk, key in place.items():  # the newest re-run stands in for its repeat
        newest_in_place[key] = max(pk, newest_in_place.get(key, 0))
    if finished:
        newest_in_place = {k: pk for k, pk in newest_in_place.items() if status[pk] == Run.Status.FINISHED}
    newest_in_experiment: dict[tuple, int] = {}
    for (experiment, scenario, policy, _), pk in newest_in_place.items():
        key = (experiment, scenario, policy)
        newest_in_experiment[key] = max(pk, newest_in_experiment.get(key, 0))
    newest = _newest_per_policy(scenarios=sorted(scenarios), finished=finished)
    chosen: dict[int, list[tuple[str, int, str]]] = {}
    for run in runs:
        mine = place.get(run.pk) or (run.experiment_id, run.scenario, run.policy_name, 0)
        picks = []
        for scenario, policy in newest:
            if scenario != run.scenario or policy == run.policy_name:
                continue
            if (found := newest_in_place.get((run.experiment_id, scenario, policy, mine[3]))) is not None:
                picks.append((policy, found, PAIRINGS[0]))
            elif (found := newest_in_experiment.get((run.experiment_id, scenario, policy))) is not None:
                picks.append((policy, found, PAIRINGS[1]))
            else:
                picks.append((policy, newest[(scenario, policy)], PAIRINGS[2]))
        chosen[run.pk] = sorted(picks)
    wanted = {pk for picks in chosen.values() for _, pk, _ in picks}
    peers = Run.objects.only(*fields) if fields else Run.objects.defer(*HEAVY_FIELDS)
    fetched = {r.pk: r for r in peers.filter(id__in=wanted)} if wanted else {}
    for run_pk, picks in chosen.items():
        for _, pk, pairing in picks:
            peer = copy(fetched[pk])
            peer.pairing = pairing
            out[run_pk].append(peer)
    return out


def index_or_zero(value: Any) -> int:
    """A step index or id from a query string; 0 when it is missing or not a number."""
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return 0


def run_guard_errors(*, run: Run) -> list[Step]:
    """For a guard stop, the errors in a row that tripped it (from the run's last steps)."""
    if run.stop_reason not in GUARD_STOPS:
        return []
    last = list(run.steps.order_by("-index")[:TRAILING_STEPS])
    return tripping_errors(last[::-1])


def tripping_errors(steps: list[Step]) -> list[Step]:
    """The errors in a row at the end of a run: what tripped a consecutive-error guard."""
    trailing: list[Step] = []
    for step in reversed(steps):
        if step.kind == Step.Kind.FINAL_ANSWER:
            continue
        if not step.is_error:
            break
        trailing.append(step)
    return trailing[::-1]


# --- compare ---------------------------------------------------------------------------------


@dataclass
class Comparison:
    a: Run
    b: Run
    divergence: Divergence
    differences: list[Difference]
    settings: list[SettingRow]  # the two policies' settings side by side
    settings_known: tuple[bool, bool]  # run A's, run B's: False when a run carries only its policy's name
    lines: list[compare_lines.Line] = field(default_factory=list)  # the aligned steps the page shows

    @property
    def same_scenario(self) -> bool:
        return self.a.scenario == self.b.scenario

    @property
    def unknown_settings(self) -> list[tuple[str, Run]]:
        """("A" or "B", the run) for each run whose policy settings are not known."""
        return [
            (side, run)
            for side, run, known in zip("AB", (self.a, self.b), self.settings_known, strict=True)
            if not known
        ]


# What divergence reads of every step of both runs: no model calls (only the shown rows' are read),
# no assistant text beside a tool call (the page never shows it), and the JSON columns as their text,
# decoded by orjson. Reading every column as dicts took half of a 500-step compare's steps query.
_COMPARE_STEP_COLUMNS = ("run_id", "index", "kind", "tool_name", "api_stop_reason", "input_text", "attempts_text")
_BIG_INTEGER = re.compile(r"[0-9]{20}")  # beyond 64 bits, where orjson gives a float


def _json(text: str | None, *, exact: bool = False) -> Any:
    """A JSON column's text decoded; ``exact``: an integer beyond 64 bits stays one (an input, which
    the page shows). In a tool's result orjson's float stands for it, close enough to compare on."""
    if text is None:
        return None
    if exact and _BIG_INTEGER.search(text):
        return json.loads(text)
    return orjson.loads(text)


class _JSONArray(Sequence):
    """A JSON array column's text, decoded when first read: divergence reads the attempts of the rows it
    checks (up to the split), folds (alike in both runs, or repeating the row before) or shows, which
    after the split of two runs that went different ways is often none of the others."""

    __slots__ = ("_items", "_text")

    def __init__(self, text: str | None) -> None:
        self._text, self._items = text, None

    def _decoded(self) -> list:
        if self._items is None:
            self._items = _json(self._text) or []
        return self._items

    def __len__(self) -> int:
        return len(self._decoded())

    def __getitem__(self, index):
        return self._decoded()[index]

    def __iter__(self):
        return iter(self._decoded())


def _compare_steps(*, a_id: int, b_id: int) -> dict[int, list[dict]]:
    """Both runs' steps as divergence reads them, in order, by run id. One query."""
    rows = (
        Step.objects.filter(run_id__in=[a_id, b_id])
        .order_by("run_id", "index")
        .annotate(
            input_text=Cast("input", TextField()),
            attempts_text=Cast("attempts", TextField()),
            shown_text=Case(When(kind=Step.Kind.TOOL_USE, then=Value("")), default=F("text"), output_field=TextField()),
        )
        .values_list(*_COMPARE_STEP_COLUMNS, "shown_text")
    )
    steps: dict[int, list[dict]] = {a_id: [], b_id: []}
    for run_id, index, kind, tool_name, api_stop_reason, input_text, attempts_text, text in rows:
        steps[run_id].append(
            {
                "index": index,
                "kind": kind,
                "tool_name": tool_name,
                "api_stop_reason": api_stop_reason,
                "input": _json(input_text, exact=True),
                "attempts": _JSONArray(attempts_text),
                "text": text,
            }
        )
    return steps


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a compare reads and aligns every step of both
    runs: it runs after every 700 containers made, and the tens of thousands a 5,000-step pair makes
    (none in a cycle) had it sweep the whole process over and over, a third of that pair's time. Left as
    it was found, so overlapping requests on other threads never leave it off."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _comparison(*, a_id: int, b_id: int) -> Comparison:
    both = Run.objects.defer("transcript", "search_text").filter(pk__in=[a_id, b_id])
    both = both.select_related("review__reviewer").prefetch_related("review__tags")  # overrides, beside the judge
    runs = {r.pk: r for r in both}
    a = runs.get(a_id) or get_object_or_404(Run, pk=a_id)
    b = runs.get(b_id) or get_object_or_404(Run, pk=b_id)
    left, right = (settings_snapshot(r.policy_settings, complete=not r.is_imported) for r in (a, b))
    with _collector_paused():
        steps = _compare_steps(a_id=a_id, b_id=b_id)
        divergence = run_divergence(
            steps[a_id],
            steps[b_id],
            left_policy=left,
            right_policy=right,
            left_stop=a.stop_reason,
            right_stop=b.stop_reason,
            comparable=a.scenario == b.scenario,
        )
    return Comparison(
        a=a,
        b=b,
        divergence=divergence,
        differences=run_differences(a, b),
        settings=settings_compare(left, right),
        settings_known=(bool(left), bool(right)),
    )


def _model_calls_fill(cmp: Comparison) -> None:
    """Each shown step's model call (``model_attempts``), read for those steps only. One query."""
    wanted: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for row in compare_lines.rows_shown(cmp.lines):
        for run, step in ((cmp.a, row.left), (cmp.b, row.right)):
            if step is not None:
                wanted[run.pk, step["index"]].append(step)
    if not wanted:
        return
    which = Q()
    for run in (cmp.a, cmp.b):
        indexes = [index for run_id, index in wanted if run_id == run.pk]
        if indexes:
            which |= Q(run_id=run.pk, index__in=indexes)
    for run_id, index, model_attempts in Step.objects.filter(which).values_list("run_id", "index", "model_attempts"):
        for step in wanted[run_id, index]:
            step["model_attempts"] = model_attempts


def run_compare(*, a_id: int, b_id: int, at: int = 0) -> Comparison:
    """Two runs aligned, their split, its cause and the settings behind it, over all their steps; of the
    aligned steps the first screen's lines (``compare_lines.first_screen``; ``at``: an aligned row a link
    names). Five queries, whatever the number of steps."""
    cmp = _comparison(a_id=a_id, b_id=b_id)
    cmp.lines = compare_lines.first_screen(cmp.divergence, at=at)
    _model_calls_fill(cmp)
    return cmp


def run_compare_rows(
    *, a_id: int, b_id: int, after: int, before: int | None = None, at: int = 0, plain: bool = False
) -> Comparison:
    """The comparison with the lines a gap loads (``compare_lines.gap_fill``). The same queries as
    ``run_compare``: the alignment, and so each row's place, needs every step of both runs."""
    cmp = _comparison(a_id=a_id, b_id=b_id)
    cmp.lines = compare_lines.gap_fill(cmp.divergence, after=after, before=before, at=at, plain=plain)
    _model_calls_fill(cmp)
    return cmp


# --- policies --------------------------------------------------------------------------------


@dataclass
class Tally:
    """Sums over counted runs: a matrix cell and a policy's totals are each one."""

    runs: int = 0
    passes: int = 0  # by effective verdict: a reviewer's override, else the judge's
    overridden: int = 0  # runs whose verdict a reviewer overrode
    tool_calls: int = 0
    retries: int = 0  # the harness's tool retries
    wasted_retries: int = 0  # retries after a non-retryable failure or an empty result
    model_retries: int = 0  # model API calls tried again (429, 529, 5xx, no answer): they cost time and money
    guard_stops: int = 0  # the consecutive-error guard stopped the run
    max_steps_stops: int = 0  # the step limit stopped the run
    cut_off: int = 0  # the API cut the model's reply off (stop_reason max_tokens): nothing of it executed
    refusals: int = 0  # the model declined to go on (stop_reason refusal)
    crashes: int = 0
    interrupted: int = 0  # a worker died and no re-run stands in for the run
    imported: int = 0  # runs from outside (files, OTLP, the API)
    simulated: int = 0  # runs of the simulated model
    tokens: int = 0  # input and output
    duration_s: float = 0.0
    timed: int = 0  # runs with a start and an end, which ``duration_s`` sums

    def add(self, other: Tally) -> None:
        for name in TALLY_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def subtract(self, other: Tally) -> None:
        for name in TALLY_FIELDS:
            setattr(self, name, getattr(self, name) - getattr(other, name))

    @property
    def pass_pct(self) -> int:
        return round(100 * self.passes / self.runs) if self.runs else 0

    @property
    def pass_interval(self) -> Interval:
        """The pass rate's 95 % Wilson score interval."""
        return wilson_interval(self.passes, self.runs)

    @property
    def mean_tool_calls(self) -> float:
        return round(self.tool_calls / self.runs, 1) if self.runs else 0.0

    @property
    def mean_wasted_retries(self) -> float:
        return round(self.wasted_retries / self.runs, 1) if self.runs else 0.0

    @property
    def mean_tokens(self) -> int:
        return round(self.tokens / self.runs) if self.runs else 0

    @property
    def mean_duration_s(self) -> float | None:
        return round(self.duration_s / self.timed, 1) if self.timed else None


TALLY_FIELDS = list(Tally.__dataclass_fields__)


@dataclass
class MatrixCell(Tally):
    scenario: str = ""
    policy: str = ""
    tool_calls_pct: int = 0  # bar lengths, against the largest value in the matrix
    wasted_pct: int = 0


@dataclass
class PolicyTotals(Tally):
    """One policy over every scenario the matrix shows."""

    policy: str = ""
    scenarios: set[str] = field(default_factory=set)
    wasted_pct: int = 0  # the chart's bar: mean wasted retries per run against the largest policy's


@dataclass
class PolicyVerdict:
    """The best policy's pass count against another's, and whether the gap is beyond the noise."""

    best: PolicyTotals
    other: PolicyTotals
    beyond_noise: bool  # Newcombe's 95 % interval of the difference leaves out zero
    same_scenarios: bool  # both ran the same scenarios, so their totals compare like with like


@dataclass
class MatrixRow:
    scenario: str
    cells: list[MatrixCell | None] = field(default_factory=list)


@dataclass
class Matrix:
    policies: list[str]
    rows: list[MatrixRow]
    available: list[str]
    totals: list[PolicyTotals] = field(default_factory=list)
    verdicts: list[PolicyVerdict] = field(default_factory=list)
    backends: dict[str, int] = field(default_factory=dict)  # counted runs per model backend
    experiments: int = 0  # experiments the counted runs belong to
    outside: int = 0  # counted runs of no experiment

    @property
    def runs(self) -> int:
        return sum(self.backends.values())


class Seconds(Func):
    """Seconds from the second datetime to the first, in SQL: the matrix sums run durations without
    Django's datetime subtraction, which SQLite computes in a Python function called once per row."""

    output_field = FloatField()
    arity = 2

    def as_sqlite(self, compiler, connection, **extra):
        template = "((julianday(%(expressions)s)) * 86400.0)"
        return self.as_sql(compiler, connection, template=template, arg_joiner=") - julianday(", **extra)

    def as_postgresql(self, compiler, connection, **extra):
        template = "EXTRACT(EPOCH FROM (%(expressions)s))"
        return self.as_sql(compiler, connection, template=template, arg_joiner=" - ", **extra)


MATRIX_KEYS = ("scenario", "policy_name", "model_backend", "experiment_id")  # run_matrix_cover_idx's order


def matrix_scope(*, experiment_ids: Iterable[int] = (), model_backend: str = "", of: str = "") -> Q:
    """The runs the matrix reads: finished top-level runs of a scenario, narrowed to experiments and a
    model backend when given (``of``: the path to the run, e.g. ``run__`` from a review)."""
    scope = Q(**{f"{of}status": Run.Status.FINISHED, f"{of}parent__isnull": True}) & ~Q(**{f"{of}scenario": ""})
    if experiment_ids:
        scope &= Q(**{f"{of}experiment_id__in": list(experiment_ids)})
    if model_backend:
        scope &= Q(**{f"{of}model_backend": model_backend})
    return scope


def matrix_groups(runs: QuerySet, *, of: str = "") -> list[dict[str, Any]]:
    """``runs`` (with ``of``, the runs they lead to, e.g. ``rerun_of__``) summed per scenario, policy,
    backend and experiment, passes by the judge's verdict; each row's keys come back as ``MATRIX_KEYS``.
    Rows also split on ``in_scope`` when the queryset annotates it."""
    extra = ["in_scope"] if "in_scope" in runs.query.annotations else []
    rows = (
        runs.order_by()
        .values(*(of + k for k in MATRIX_KEYS), *extra)
        .annotate(
            runs=Count(of + "id"),
            passes=Count(of + "id", filter=Q(**{of + "verdict": Run.Verdict.PASS})),
            tool_calls=Sum(of + "tool_call_count"),
            retries=Sum(of + "retry_count"),
            wasted_retries=Sum(of + "wasted_retry_count"),
            model_retries=Sum(of + "model_retry_count"),
            guard_stops=Count(of + "id", filter=Q(**{of + "stop_reason": Run.StopReason.CONSECUTIVE_ERRORS})),
            max_steps_stops=Count(of + "id", filter=Q(**{of + "stop_reason": Run.StopReason.MAX_STEPS})),
            cut_off=Count(of + "id", filter=Q(**{of + "stop_reason": Run.StopReason.MAX_TOKENS})),
            refusals=Count(of + "id", filter=Q(**{of + "stop_reason": Run.StopReason.REFUSAL})),
            crashes=Count(of + "id", filter=Q(**{of + "stop_reason": Run.StopReason.CRASHED})),
            interrupted=Count(of + "id", filter=Q(**{of + "stop_reason": Run.StopReason.INTERRUPTED})),
            imported=Count(of + "id", filter=~Q(**{of + "source": Run.Source.AGENT})),
            tokens=Sum(F(of + "input_tokens") + F(of + "output_tokens")),
            duration_s=Sum(Seconds(of + "finished_at", of + "started_at")),
            timed=Count(of + "id", filter=Q(**{of + "started_at__isnull": False, of + "finished_at__isnull": False})),
        )
    )
    return [{**row, **{k: row[of + k] for k in MATRIX_KEYS}} for row in rows if row.get("in_scope", True)]


def in_scope(scope: Q) -> ExpressionWrapper:
    """``scope`` as a value of each row rather than a filter: SQLite's planner, which has no statistics,
    then starts from the few rows the query's own filter finds (re-runs, overrides) instead of walking
    every run in scope through the matrix's index."""
    return ExpressionWrapper(scope, output_field=BooleanField())


def matrix_tallies(*, experiment_ids: Iterable[int] = (), model_backend: str = "") -> dict[tuple, Tally]:
    """What the matrix counts, per scenario, policy, backend and experiment, in three queries:

    - every run in scope, from ``run_matrix_cover_idx`` alone, in group order;
    - minus the runs that were interrupted and re-run (their re-runs stand in for them, and are counted
      by the first query once they finish): read from the re-runs, few;
    - the reviewers' verdict overrides among the counted runs (read from ``review_override_idx``, few),
      so a run counts as passed by its effective verdict: the reviewer's override, else the judge's."""
    narrowing = {"experiment_ids": experiment_ids, "model_backend": model_backend}
    tallies: dict[tuple, Tally] = {}
    for g in matrix_groups(Run.objects.filter(matrix_scope(**narrowing))):
        tallies[tuple(g[k] for k in MATRIX_KEYS)] = Tally(**{name: g.get(name) or 0 for name in TALLY_FIELDS})
    reruns = Run.objects.filter(rerun_of__isnull=False).annotate(
        in_scope=in_scope(matrix_scope(**narrowing, of="rerun_of__"))
    )
    for g in matrix_groups(reruns, of="rerun_of__"):
        tallies[tuple(g[k] for k in MATRIX_KEYS)].subtract(Tally(**{n: g.get(n) or 0 for n in TALLY_FIELDS}))
    overrides = (
        StopReview.objects.filter(verdict_override__in=Run.Verdict.values, run__reruns__isnull=True)
        .annotate(in_scope=in_scope(matrix_scope(**narrowing, of="run__")))
        .order_by()
        .values(*(f"run__{k}" for k in MATRIX_KEYS), "run__verdict", "verdict_override", "in_scope")
        .annotate(n=Count("id"))
    )
    for o in overrides:
        if not o["in_scope"]:
            continue
        tally = tallies[tuple(o[f"run__{k}"] for k in MATRIX_KEYS)]
        tally.overridden += o["n"]
        judged_pass = o["run__verdict"] == Run.Verdict.PASS
        if o["verdict_override"] == Run.Verdict.PASS and not judged_pass:
            tally.passes += o["n"]
        elif o["verdict_override"] == Run.Verdict.FAIL and judged_pass:
            tally.passes -= o["n"]
    for (_, _, backend, _), tally in tallies.items():
        tally.simulated = tally.runs if backend == Run.ModelBackend.SIMULATED else 0
    return {key: tally for key, tally in tallies.items() if tally.runs}


def policy_matrix(
    *, policies: list[str] | None = None, experiment_ids: Iterable[int] = (), model_backend: str = ""
) -> Matrix:
    """Scenario × policy repair metrics with totals per policy (``matrix_tallies``)."""
    cells: dict[tuple[str, str], MatrixCell] = {}
    matrix = Matrix(policies=[], rows=[], available=[])
    experiments = set()
    for (scenario, policy, backend, experiment), tally in matrix_tallies(
        experiment_ids=experiment_ids, model_backend=model_backend
    ).items():
        cells.setdefault((scenario, policy), MatrixCell(scenario=scenario, policy=policy)).add(tally)
        matrix.backends[backend] = matrix.backends.get(backend, 0) + tally.runs
        if experiment is None:
            matrix.outside += tally.runs
        else:
            experiments.add(experiment)
    matrix.experiments = len(experiments)
    matrix.backends = dict(sorted(matrix.backends.items()))
    matrix.available = sorted({policy for _, policy in cells})
    matrix.policies = [p for p in (policies or matrix.available) if p in matrix.available] or matrix.available
    shown = {key: cell for key, cell in cells.items() if key[1] in matrix.policies}
    top_calls = max((c.mean_tool_calls for c in shown.values()), default=0) or 1
    top_wasted = max((c.wasted_retries for c in shown.values()), default=0) or 1
    for cell in shown.values():
        cell.tool_calls_pct = round(100 * cell.mean_tool_calls / top_calls)
        cell.wasted_pct = round(100 * cell.wasted_retries / top_wasted)
    scenarios = sorted({scenario for scenario, _ in shown})
    matrix.rows = [MatrixRow(s, [shown.get((s, p)) for p in matrix.policies]) for s in scenarios]
    matrix.totals = policy_totals(shown.values(), policies=matrix.policies)
    matrix.verdicts = policy_verdicts(matrix.totals)
    return matrix


def policy_totals(cells: Iterable[MatrixCell], *, policies: list[str]) -> list[PolicyTotals]:
    """Each policy's cells summed, in column order."""
    totals = {p: PolicyTotals(policy=p) for p in policies}
    for cell in cells:
        totals[cell.policy].add(cell)
        totals[cell.policy].scenarios.add(cell.scenario)
    top_wasted = max((t.mean_wasted_retries for t in totals.values()), default=0) or 1
    for total in totals.values():
        total.wasted_pct = round(100 * total.mean_wasted_retries / top_wasted)
    return list(totals.values())


def policy_verdicts(totals: list[PolicyTotals]) -> list[PolicyVerdict]:
    """The best policy (highest pass rate, then fewest wasted retries per run) against each other one."""
    ranked = sorted((t for t in totals if t.runs), key=lambda t: (-t.passes / t.runs, t.mean_wasted_retries, t.policy))
    if len(ranked) < 2:
        return []
    best = ranked[0]
    return [
        PolicyVerdict(
            best=best,
            other=other,
            beyond_noise=beyond_noise((best.passes, best.runs), (other.passes, other.runs)),
            same_scenarios=best.scenarios == other.scenarios,
        )
        for other in ranked[1:]
    ]


def policy_variant_list() -> list[PolicyVariant]:
    return list(PolicyVariant.objects.all())


# --- stops -----------------------------------------------------------------------------------


@dataclass
class FailingCall:
    """One call (tool and input) the run kept making, how often, and each distinct error text."""

    tool_name: str
    input: Any
    times: int
    errors: list[tuple[str, str, int]]  # (outcome label, message, how many attempts said it)
    model_saw: Any  # the tool_result content of the last of these calls


@dataclass
class StopCase:
    run: Run
    errors: list[Step]  # the errors in a row at the end (what tripped a consecutive-error guard)
    other: Run | None  # the same scenario under another policy
    review: StopReview | None
    identical: int = 0  # other unreviewed stops identical to this one (``stop_signature``)

    @property
    def calls(self) -> list[FailingCall]:
        return failing_calls(self.errors)


def failing_calls(steps: list[Step]) -> list[FailingCall]:
    """Group repeated failing calls by tool and input, keeping each distinct error text once."""
    calls: dict[str, FailingCall] = {}
    for step in steps:
        key = step.tool_name + canonical(step.input)
        call = calls.setdefault(key, FailingCall(step.tool_name, step.input, 0, [], None))
        call.times += 1
        call.model_saw = step.result_content
        for attempt in step.attempts or []:
            if attempt.get("ok"):
                continue
            text = (attempt_outcome(attempt).label, attempt.get("message") or "")
            found = next((i for i, e in enumerate(call.errors) if e[:2] == text), None)
            if found is None:
                call.errors.append((*text, 1))
            else:
                call.errors[found] = (*text, call.errors[found][2] + 1)
    return list(calls.values())


STOP_FILTERS = ("unreviewed", "reviewed", "all")


def stops_filtered(*, policy: str = "", experiment_id: int | None = None, stop_reason: str = "") -> QuerySet[Run]:
    """Guard stops, narrowed to a policy, an experiment and one kind of stop when given."""
    stops = Run.objects.filter(stop_reason__in=[stop_reason] if stop_reason else GUARD_STOPS)
    if policy:
        stops = stops.filter(policy_name=policy)
    if experiment_id:
        stops = stops.filter(experiment_id=experiment_id)
    return stops


def stop_counts(**filters: Any) -> dict[str, int]:
    """Unreviewed, reviewed and all guard stops under ``filters`` (``stops_filtered``'s), in one query."""
    counts = stops_filtered(**filters).aggregate(all=Count("id"), reviewed=Count("id", filter=Q(review__isnull=False)))
    return counts | {"unreviewed": counts["all"] - counts["reviewed"]}


def stop_queue(*, state: str = "unreviewed", **filters: Any) -> QuerySet[Run]:
    stops = (
        stops_filtered(**filters)
        .defer(*HEAVY_FIELDS)
        .select_related("review__reviewer")
        .prefetch_related("review__tags")
    )
    if state == "unreviewed":
        stops = stops.filter(review__isnull=True)
    elif state == "reviewed":
        stops = stops.filter(review__isnull=False)
    return stops.order_by("-created_at", "-id")


def stop_filter_values() -> dict[str, list]:
    """The stop queue's filter choices: policies and experiments that have guard stops (two queries)."""
    stops = Run.objects.filter(stop_reason__in=GUARD_STOPS).order_by()
    policies = sorted(p for p in stops.values_list("policy_name", flat=True).distinct() if p)
    experiment_ids = stops.filter(experiment__isnull=False).values("experiment_id")
    experiments = list(Experiment.objects.filter(id__in=experiment_ids).order_by("-created_at", "-id"))
    return {"policies": policies, "experiments": experiments}


# A stop's signature: scenario, policy, stop reason, and the tool and error of its last step when that
# step is a failing tool call. Stops with one signature are "identical": one review may cover them all.
StopSignature = tuple[str, str, str, str, str]
SIGNATURE_STEP_FIELDS = ("kind", "tool_name", "is_error", "category", "attempts", "result_content")


def _failing_call(
    kind: str, tool_name: str, is_error: bool, category: str, attempts: list | None, result_content: Any
) -> tuple[str, str]:
    """(tool, error) of a failing tool call: the last failed attempt's category and message, or for a
    step recorded without attempts (imported) its category and what it returned; blank otherwise."""
    if kind != Step.Kind.TOOL_USE or not is_error:
        return ("", "")
    failed = [a for a in attempts or [] if not a.get("ok")]
    if failed:
        return (tool_name, f"{failed[-1].get('category') or ''}: {failed[-1].get('message') or ''}")
    return (tool_name, f"{category}: {canonical(result_content)}")


def stop_signature(run: Run, last_step: Step | None) -> StopSignature:
    """``run``'s signature from its last step (``None``: it has none)."""
    call = _failing_call(*(getattr(last_step, f) for f in SIGNATURE_STEP_FIELDS)) if last_step else ("", "")
    return (run.scenario, run.policy_name, run.stop_reason, *call)


def unreviewed_stop_signatures(*, kinds: Iterable[tuple[str, str, str]]) -> dict[int, StopSignature]:
    """The signature of every unreviewed guard stop of ``kinds`` (scenario, policy, stop reason), by run
    id, in one query: each run's last step found through the (run, index) index at ``step_count``."""
    alike = Q()
    for scenario, policy, reason in set(kinds):
        if reason in GUARD_STOPS:
            alike |= Q(run__scenario=scenario, run__policy_name=policy, run__stop_reason=reason)
    if not alike:
        return {}
    rows = (
        Step.objects.filter(alike, run__review__isnull=True, index=F("run__step_count"))
        .order_by()
        .values_list("run_id", "run__scenario", "run__policy_name", "run__stop_reason", *SIGNATURE_STEP_FIELDS)
    )
    return {row[0]: (row[1], row[2], row[3], *_failing_call(*row[4:])) for row in rows}


def stops_identical(*, run: Run) -> list[Run]:
    """The unreviewed guard stops identical to ``run`` (``stop_signature``), ``run`` left out; three queries."""
    signatures = unreviewed_stop_signatures(kinds=[(run.scenario, run.policy_name, run.stop_reason)])
    mine = stop_signature(run, run.steps.filter(index=run.step_count).first())
    ids = [pk for pk, signature in signatures.items() if signature == mine and pk != run.pk]
    return list(Run.objects.filter(pk__in=ids).only("id", "status", "verdict", "stop_reason").order_by("id"))


def stop_cases(*, runs: list[Run]) -> list[StopCase]:
    """Each stopped run with its last failing calls, a run of the same scenario under another policy, and
    how many unreviewed stops are identical to it. The same queries whatever the number of runs and steps."""
    ids = [r.pk for r in runs]
    tail: dict[int, list[Step]] = defaultdict(list)
    last_steps = (
        Step.objects.filter(run_id__in=ids)
        .annotate(from_end=Window(RowNumber(), partition_by=F("run_id"), order_by=F("index").desc()))
        .filter(from_end__lte=TRAILING_STEPS)
        .order_by("run_id", "index")
    )
    for step in last_steps:
        tail[step.run_id].append(step)
    peers = run_policy_peers(runs=runs, finished=True)
    unreviewed = unreviewed_stop_signatures(kinds=[(r.scenario, r.policy_name, r.stop_reason) for r in runs])
    alike = Counter(unreviewed.values())
    cases = []
    for run in runs:
        other = min(peers[run.pk], key=lambda peer: PAIRINGS.index(peer.pairing), default=None)
        review = getattr(run, "review", None)  # reverse one-to-one: absent raises AttributeError
        mine = stop_signature(run, tail[run.pk][-1] if tail[run.pk] else None)
        identical = alike[mine] - (run.pk in unreviewed)
        cases.append(
            StopCase(run=run, errors=tripping_errors(tail[run.pk]), other=other, review=review, identical=identical)
        )
    return cases


# --- experiments -----------------------------------------------------------------------------


def experiment_get(*, pk: int) -> Experiment:
    return get_object_or_404(Experiment, pk=pk)


def experiment_recent(*, limit: int = 10) -> list[Experiment]:
    return list(Experiment.objects.order_by("-created_at")[:limit])


_EXPERIMENTS_NEWEST_SQL = f"SELECT * FROM {Experiment._meta.db_table} ORDER BY created_at DESC, id DESC LIMIT %s"


def experiment_choices(*, selected: Iterable[int] = (), limit: int = 20) -> list[Experiment]:
    """The experiment pickers' choices: the ``limit`` newest experiments and any selected older one,
    newest first. One query, in plain SQL (the ORM's took three times the CPU, nearly all of it in
    building the query: the runs list asks it on every request), two when an older one is selected."""
    newest = "-created_at", "-id"
    experiments = list(Experiment.objects.raw(_EXPERIMENTS_NEWEST_SQL, [limit]))
    older = set(selected) - {e.pk for e in experiments}
    if older:
        experiments += Experiment.objects.filter(id__in=older).order_by(*newest)
        experiments.sort(key=lambda e: (e.created_at, e.pk), reverse=True)
    return experiments


def experiment_runs(*, experiment: Experiment) -> list[Run]:
    """An experiment's top-level runs, each with its review (an override shows beside the judge's verdict)."""
    runs = experiment.runs.filter(parent__isnull=True).defer(*HEAVY_FIELDS).order_by("id")
    return list(runs.select_related("review__reviewer").prefetch_related("review__tags"))


# An experiment page says it is waiting for a worker when nothing was claimed for this long.
WAITING_FOR_WORKER_AFTER_S = 10


@dataclass
class ExperimentProgress:
    """What an experiment page says about runs not yet taken, and how often it asks again."""

    queued: int
    running: int
    oldest_sent: datetime | None  # the queued run whose task was sent longest ago
    waiting_for_worker: bool  # queued runs, none running, and nothing claimed for a while
    poll_s: int


def experiment_progress(*, runs: list[Run], now: datetime | None = None) -> ExperimentProgress:
    """Progress read from the runs the page already has: no query of its own."""
    now = now or timezone.now()
    queued = [r for r in runs if r.status == Run.Status.QUEUED]
    running = sum(1 for r in runs if r.status == Run.Status.RUNNING)
    oldest_sent = min((r.enqueued_at or r.created_at for r in queued), default=None)
    last_claim = max((r.started_at for r in runs if r.started_at), default=None)
    quiet_since = max(filter(None, [last_claim, oldest_sent]), default=None)
    waiting = bool(queued) and not running and quiet_since is not None
    waiting = waiting and (now - quiet_since).total_seconds() > WAITING_FOR_WORKER_AFTER_S
    return ExperimentProgress(
        queued=len(queued),
        running=running,
        oldest_sent=oldest_sent,
        waiting_for_worker=waiting,
        poll_s=5 if waiting else 1,
    )


def experiment_pairs(*, runs: list[Run], policies: list[str], first_repeat: bool = False) -> list[tuple[Run, Run]]:
    """Compare pairs: for each scenario and repeat, the first policy's run against each other policy's;
    with ``first_repeat``, only each scenario's first repeat (one link per scenario and other policy).

    A run that was interrupted and re-run is stood in for by its re-run, in its own repeat
    (``_experiment_repeats``, as "other policy" links pair runs).
    """
    fields = ("experiment_id", "scenario", "policy_name", "rerun_of_id")
    place = _experiment_repeats([{"id": run.pk, **{f: getattr(run, f) for f in fields}} for run in runs])
    groups: dict[tuple[str, int], dict[str, Run]] = defaultdict(dict)
    for run in sorted(runs, key=lambda r: r.pk):  # the newest re-run stands in for its repeat
        _, scenario, policy, repeat = place[run.pk]
        groups[(scenario, repeat)][policy] = run
    pairs = []
    for (_, repeat), group in groups.items():
        if first_repeat and repeat:
            continue
        present = [group[p] for p in policies if p in group]
        pairs.extend((present[0], other) for other in present[1:])
    return pairs


# --- the compare picker ----------------------------------------------------------------------

COMPARE_CHOICES = 200  # the picker offers this many of the newest runs; the runs list ticks any two


class RunChoice(NamedTuple):
    """A run as the compare picker offers it (``tracer_tags.run_options``): its words, and a reviewer's
    override of its verdict ("" when none)."""

    id: int
    scenario: str
    policy_name: str
    status: str
    verdict: str
    verdict_override: str
    source: str
    model_backend: str
    model_name: str
    label: str

    @property
    def pk(self) -> int:
        return self.id


CHOICE_FIELDS = ("id", "scenario", "policy_name", "status", "verdict", "review__verdict_override")
CHOICE_FIELDS += ("source", "model_backend", "model_name", "label")


def compare_choices(*, include: Iterable[Run] = ()) -> list[tuple[str, list[RunChoice]]]:
    """The newest runs, and ``include`` (the pair on show), grouped by scenario: (scenario, runs)
    sorted by scenario, newest run first in each, with a reviewer's override of its verdict. One query,
    read as tuples (200 runs built as model instances with their reviews took 7 ms of CPU a compare)."""
    newest = Run.objects.order_by("-pk").values_list(*CHOICE_FIELDS)[:COMPARE_CHOICES]
    runs = {row[0]: RunChoice(*row[:5], row[5] or "", *row[6:]) for row in newest}
    for run in include:
        if run.pk not in runs:
            override = getattr(getattr(run, "review", None), "verdict_override", "") or ""
            fields = (run.scenario, run.policy_name, run.status, run.verdict, override)
            runs[run.pk] = RunChoice(run.pk, *fields, run.source, run.model_backend, run.model_name, run.label)
    groups: dict[str, list[RunChoice]] = defaultdict(list)
    for run in sorted(runs.values(), key=lambda r: -r.pk):
        groups[run.scenario or "unknown scenario"].append(run)
    return sorted(groups.items())


def run_ids_missing(*, ids: Iterable[int]) -> set[int]:
    """Which of ``ids`` no run has."""
    wanted = set(ids)
    return wanted - set(Run.objects.filter(pk__in=wanted).values_list("pk", flat=True))
