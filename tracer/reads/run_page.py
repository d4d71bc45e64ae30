"""Reads of a run's page: the run, its windowed timeline, its sub-agents, its picture, the other policies' runs, the
errors that tripped a guard and its re-runs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from django.db.models import Q, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from .. import waterfall
from ..models import Run, Step
from ..previews import RUN_TEXTS, shown_annotations
from ..waterfall import Waterfall
from .common import HEAVY_FIELDS, index_or_zero
from .peers import run_policy_peers, sub_agent_policy_peers
from .prepared import Prepared
from .stops_page import GUARD_STOPS, TRAILING_STEPS, tripping_errors

# What the picture of a run reads of each step, and how many steps at a time.
WATERFALL_CHUNK = 60
WATERFALL_FIELDS = (
    *("index", "kind", "tool_name", "input", "is_error", "category", "result_content"),
    *("attempts", "model_attempts", "input_tokens", "output_tokens"),
)


def run_get(*, pk: int) -> Run:
    """A run whole, with its experiment and its review's reviewer; not its search text, which no page
    shows (its parent is a link by ``parent_id``)."""
    runs = Run.objects.select_related("experiment", "review__reviewer").defer("search_text")
    return get_object_or_404(runs, pk=pk)


_RUN_SHOWN = Prepared(
    lambda pk: (
        Run.objects.select_related("experiment", "review__reviewer")
        .defer("search_text", *RUN_TEXTS)
        .annotate(**shown_annotations(*RUN_TEXTS))
        .filter(pk=pk)
    )
)


def run_shown(*, pk: int) -> Run:
    """A run as its page shows it: ``run_get``'s, its long texts (``previews.RUN_TEXTS``) read only as
    their first characters and their sizes (``<name>_shown``, ``<name>_bytes``), never whole. Its SQL
    is compiled once per process (``Prepared``): every run page and live poll asks it."""
    found = _RUN_SHOWN(pk=pk)
    if not found:
        raise Http404(f"no run {pk}")
    return found[0]


def run_text(*, pk: int, name: str) -> Any:
    """One of a run's long texts (``previews.RUN_TEXTS``) whole, or the attempts of the model call that
    ended it (``failed_model_call``), for a show-all control; 404 for a run that does not exist."""
    if name not in RUN_TEXTS and name != "failed_model_call":
        raise Http404(f"a run has no text {name!r}")
    found = Run.objects.filter(pk=pk).values_list("pk", name).first()
    if found is None:
        raise Http404(f"no run {pk}")
    return found[1] if found[1] is not None else ""


def step_get(*, run_id: int, index: int) -> Step:
    """Step ``index`` of run ``run_id`` whole, for a show-all control; 404 when there is none."""
    return get_object_or_404(Step.objects.only(*STEP_ROW_FIELDS), run_id=run_id, index=index)


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
    text: str  # its first ``previews.PREVIEW_CHARS`` characters
    api_stop_reason: str
    model_attempts: list
    text_bytes: int  # the size of the whole text


STEP_ROW_FIELDS = StepRow._fields[:-1]
_STEP_ROW_COLUMNS = tuple("text_shown" if name == "text" else name for name in StepRow._fields)


def _step_rows(steps: QuerySet[Step]) -> list[StepRow]:
    return [StepRow._make(values) for values in _step_values(steps)]


def _step_values(steps: QuerySet[Step]) -> QuerySet:
    return steps.annotate(**shown_annotations("text")).values_list(*_STEP_ROW_COLUMNS)


def _prepared_rows(build: Callable[..., QuerySet[Step]]) -> Callable[..., list[StepRow]]:
    """A prepared read of ``StepRow``s: ``build(**values)`` gives the steps, ordered and sliced."""
    prepared = Prepared(lambda **values: _step_values(build(**values)))
    return lambda **values: [StepRow._make(row) for row in prepared(**values)]


# The timeline's windows, each a read of one run's steps by index the pages ask again and again.
_STEPS_FROM = _prepared_rows(
    lambda run_id, first: Step.objects.filter(run_id=run_id, index__gte=first).order_by("index")[: STEP_WINDOW + 1]
)
_STEPS_BETWEEN = _prepared_rows(
    lambda run_id, first, before: Step.objects.filter(run_id=run_id, index__gte=first, index__lt=before).order_by(
        "index"
    )[: STEP_WINDOW + 1]
)
_STEPS_NEWEST = _prepared_rows(lambda run_id: Step.objects.filter(run_id=run_id).order_by("-index")[:STEP_TAIL])


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
    if before is None:
        steps = _STEPS_FROM(run_id=run.pk, first=first)
    else:
        steps = _STEPS_BETWEEN(run_id=run.pk, first=first, before=before)
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
    tail = _STEPS_NEWEST(run_id=run.pk)[::-1]
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
    child kept its step (``Run.parent_step``), and those whose step never came (the run ended while
    they ran); ``pending`` those whose step the page does not have yet (a live run's sub-agent that
    is running, or ended a moment before its step). ``steps``: the steps each sub-agent the page
    shows nests under its fold (``SUB_STEPS`` of them: a running one's newest, else its first).
    ``tokens``: (in, out) of those that ended, which count in the parent's own totals
    (``recording.run_finish``)."""

    runs: list[Run]
    by_step: dict[int, list[Run]]
    unplaced: list[Run]
    tokens: tuple[int, int]
    pending: list[Run] = field(default_factory=list)
    steps: dict[int, list[StepRow]] = field(default_factory=dict)

    @property
    def running(self) -> list[Run]:
        """Those still running: their step is recorded only once they end, so the live line names them."""
        return [c for c in self.runs if c.is_active]


# What the run page shows of a sub-agent (under its step, in the aside, on the live line, its fold's
# summary and its steps): the only columns read of each (a query deferring the heavy columns cost
# more to build than one naming these).
SUB_AGENT_FIELDS = (
    *("id", "parent", "parent_step", "label", "status", "stop_reason", "source", "source_detail"),
    *("model_backend", "model_name", "step_count", "error_count", "failed_attempt_count", "retry_count"),
    *("input_tokens", "policy_name", "policy_settings", "verdict", "scenario"),
    *("output_tokens", "measured_ms", "created_at", "started_at", "finished_at"),
)
_CHILDREN = Prepared(lambda parent_id: Run.objects.filter(parent_id=parent_id).only(*SUB_AGENT_FIELDS).order_by("id"))
# The steps a sub-agent's fold nests at most; the rest are on its own page, a link away.
SUB_STEPS = 20
# The sub-agents' steps a page (or a poll, or a gap's window) nests at most, all folds together: the
# folds past it read theirs when they are opened (``sub_agent_steps_first``), so a coordinator of many
# sub-agents keeps a small page.
NESTED_STEPS = 60


def run_sub_agents(*, run: Run, shown: Iterable[int] = (), last: int | None = None, nest: bool = True) -> SubAgents:
    """The run's sub-agents, with the steps of those the page nests (``nest``): the ones under the
    steps ``shown`` (their indices), those after the page's newest step ``last`` (None: the run's
    last) and those with no step. Two queries, whatever the number of steps and sub-agents."""
    children = _CHILDREN(parent_id=run.pk)
    shown = set(shown)
    if last is None:
        last = max(run.step_count, *shown, 0)
    by_step: dict[int, list[Run]] = defaultdict(list)
    unplaced, pending = [], []
    for child in children:
        if child.parent_step is None or (child.parent_step > last and not run.is_active):
            unplaced.append(child)
        elif child.parent_step > last:
            pending.append(child)
        else:
            by_step[child.parent_step].append(child)
    nested, budget = [], NESTED_STEPS
    for child in [*pending, *(c for index in sorted(shown) for c in by_step.get(index, ())), *unplaced]:
        cost = max(1, min(child.step_count, SUB_STEPS))
        if child.is_active or cost <= budget:  # a running one's steps come with every poll
            nested.append(child)
            budget -= cost
    ended = [c for c in children if not c.is_active]
    return SubAgents(
        runs=children,
        by_step=dict(by_step),
        unplaced=unplaced,
        pending=pending,
        tokens=(sum(c.input_tokens for c in ended), sum(c.output_tokens for c in ended)),
        steps=sub_agent_steps(children=nested) if nest else {},
    )


def sub_agent_steps(*, children: list[Run]) -> dict[int, list[StepRow]]:
    """The steps each of ``children`` nests: a running one's newest ``SUB_STEPS``, an ended one's
    first. One query for all of them (none when there are none)."""
    if not children:
        return {}
    first = [c.pk for c in children if not c.is_active]
    which = Q(run_id__in=first, index__lte=SUB_STEPS) if first else Q(pk__in=[])
    for child in children:
        if child.is_active:
            which |= Q(run_id=child.pk, index__gt=child.step_count - SUB_STEPS)
    rows = Step.objects.filter(which).order_by("run_id", "index").annotate(**shown_annotations("text"))
    rows = rows.values_list("run_id", *_STEP_ROW_COLUMNS)
    steps: dict[int, list[StepRow]] = {c.pk: [] for c in children}
    for run_id, *values in rows:
        steps[run_id].append(StepRow._make(values))
    return steps


def sub_agent_steps_first(*, run: Run) -> list[StepRow]:
    """A sub-agent's first ``SUB_STEPS`` steps, for its fold when it is opened (one query)."""
    return _step_rows(run.steps.filter(index__lte=SUB_STEPS).order_by("index"))


def window_indices(window: StepWindow) -> list[int]:
    """The indices of the steps a timeline window shows."""
    return [s.index for s in (*window.steps, *window.tail)]


def run_waterfall(*, run: Run, window: StepWindow | None = None, sub_agents: SubAgents | None = None) -> Waterfall:
    """The picture of ``run``'s steps (``waterfall``), read in chunks only until the picture's rows are
    full, so a long run's later steps are neither fetched nor decoded. ``window``: the timeline's steps
    of an ended run, already read; when they start at the first step the picture starts with them, and
    asks for the steps after them only if its rows are not full yet (one query at most). The sub-agents
    that ended under its steps (``sub_agents``, else read) are nested with their first steps: one query
    for all of them."""
    known: list[StepRow] = []
    whole = False
    if window is not None and not run.is_active and window.steps and window.steps[0].index == 1:
        known = [*window.steps, *([window.following] if window.following else [])]
        whole = window.gap_after is None  # nothing after them
    if sub_agents is None:
        sub_agents = run_sub_agents(run=run, nest=False)
    return waterfall.waterfall_build(
        steps=_steps_from(run=run, known=known, whole=whole),
        step_count=run.step_count,
        sub_agents=_picture_sub_agents(sub_agents),
    )


def _picture_sub_agents(sub_agents: SubAgents) -> dict[int, list[waterfall.SubAgentSteps]]:
    """The ended sub-agents under the run's first steps, as many as the picture's rows can hold, with
    their first steps (one query; none without sub-agents)."""
    placed = sorted(
        (c for index, children in sub_agents.by_step.items() for c in children if not c.is_active),
        key=lambda c: (c.parent_step, c.pk),
    )[: waterfall.MAX_ROWS // 2]
    if not placed:
        return {}
    steps: dict[int, list[Step]] = {c.pk: [] for c in placed}
    rows = Step.objects.filter(run_id__in=list(steps), index__lte=waterfall.SUB_STEPS_READ)
    for step in rows.only("run_id", *WATERFALL_FIELDS).order_by("run_id", "index"):
        steps[step.run_id].append(step)
    nested: dict[int, list[waterfall.SubAgentSteps]] = defaultdict(list)
    for child in placed:
        nested[child.parent_step].append(
            waterfall.SubAgentSteps(pk=child.pk, label=child.label, step_count=child.step_count, steps=steps[child.pk])
        )
    return dict(nested)


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
    """The same scenario under each other policy (``run_policy_peers``), by policy name; for a
    sub-agent, the matching sub-agent under each other policy (``sub_agent_policy_peers``)."""
    if run.parent_id is not None:
        return sub_agent_policy_peers(run=run, fields=PEER_FIELDS)
    return run_policy_peers(runs=[run], fields=PEER_FIELDS)[run.pk]


def run_guard_errors(*, run: Run) -> list[Step]:
    """For a guard stop, the errors in a row that tripped it (from the run's last steps)."""
    if run.stop_reason not in GUARD_STOPS:
        return []
    return tripping_errors(_LAST_STEPS(run_id=run.pk)[::-1])


# What the guard's errors show of each of the run's last steps, and what finds them.
_LAST_STEPS = Prepared(
    lambda run_id: (
        Step.objects.filter(run_id=run_id)
        .only("id", "index", "kind", "is_error", "tool_name", "input", "result_content")
        .order_by("-index")[:TRAILING_STEPS]
    )
)
