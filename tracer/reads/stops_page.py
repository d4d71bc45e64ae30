"""Reads of the stop queue: guard stops filtered and counted, each with its failing calls, another policy's run and
the identical stops one review may cover."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import (
    BooleanField,
    Count,
    Exists,
    OuterRef,
    Q,
    QuerySet,
)
from django.db.models.expressions import RawSQL

from ..divergence import (
    attempt_outcome,
    canonical,
)
from ..models import GUARD_STOP_REASONS, Experiment, Run, Step, StopReview
from ..signatures import SIGNATURE_STEP_FIELDS, stop_key
from .common import HEAVY_FIELDS, not_archived
from .peers import PAIRINGS, run_policy_peers

GUARD_STOPS = Run.GUARD_STOPS
TRAILING_STEPS = 12  # enough to show any consecutive-error guard's streak


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


@dataclass
class FailingCall:
    """One call (tool and input) the run kept making, how often, and each distinct error text."""

    tool_name: str
    input: Any
    times: int
    # (outcome label, message, how many attempts said it, the first one's step index and its attempt's place)
    errors: list[tuple[str, str, int, int, int]]
    model_saw: Any  # the tool_result content of the last of these calls
    index: int  # the first of these calls' step index


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
        call = calls.setdefault(key, FailingCall(step.tool_name, step.input, 0, [], None, step.index))
        call.times += 1
        call.model_saw = step.result_content
        for position, attempt in enumerate(step.attempts or [], 1):
            if attempt.get("ok"):
                continue
            text = (attempt_outcome(attempt).label, attempt.get("message") or "")
            found = next((i for i, e in enumerate(call.errors) if e[:2] == text), None)
            if found is None:
                call.errors.append((*text, 1, step.index, position))
            else:
                label, message, count, index, first = call.errors[found]
                call.errors[found] = (label, message, count + 1, index, first)
    return list(calls.values())


STOP_FILTERS = ("unreviewed", "reviewed", "all")
STOPS_PER_PAGE = 20
# run_stop_unsigned_idx's condition as literals: SQLite uses a partial index only for a query whose terms
# are its condition's, and a stop reason passed as a parameter is not one.
UNSIGNED_GUARD_STOP = RawSQL(
    f"stop_signature IS NULL AND stop_reason IN ({', '.join(repr(str(r)) for r in GUARD_STOPS)})",
    [],
    output_field=BooleanField(),
)


# The queue's kind for runs whose two judges (the rules and the model judge) disagree.
JUDGES_DISAGREE = "judges_disagree"
# In the queue (``models.IN_REVIEW_QUEUE``), as the literal condition of run_queue_created_idx and
# run_queue_policy_idx: each read of the whole queue (its pages, the tabs' counts, the filter's choices)
# then reads one of those instead of every run.
# Unqualified: a subquery reads the runs under another alias, and no table the queue joins has these names.
IN_QUEUE = RawSQL(
    f"(stop_reason IN ({', '.join(repr(str(r)) for r in GUARD_STOP_REASONS)}) OR judges_disagree)",
    [],
    output_field=BooleanField(),
)


def stops_filtered(*, policy: str = "", experiment_id: int | None = None, stop_reason: str = "") -> QuerySet[Run]:
    """The review queue: guard stops and runs whose two judges disagree, narrowed to a policy, an
    experiment and one kind (a stop reason, or ``JUDGES_DISAGREE``) when given."""
    if stop_reason == JUDGES_DISAGREE:
        stops = Run.objects.filter(judges_disagree=True)
    elif stop_reason:
        stops = Run.objects.filter(stop_reason=stop_reason)
    else:
        stops = Run.objects.filter(IN_QUEUE)
    if policy:
        stops = stops.filter(policy_name=policy)
    if experiment_id:
        stops = stops.filter(experiment_id=experiment_id)
    else:
        stops = stops.filter(not_archived())
    return stops


def stop_counts(**filters: Any) -> dict[str, int]:
    """Unreviewed, reviewed and all guard stops under ``filters`` (``stops_filtered``'s), in one query."""
    counts = stops_filtered(**filters).aggregate(all=Count("id"), reviewed=Count("id", filter=Q(review__isnull=False)))
    return counts | {"unreviewed": counts["all"] - counts["reviewed"]}


def stop_page(*, state: str, counts: dict[str, int], number: Any, **filters: Any) -> Page:
    """Page ``number`` of the queue in ``state``, of ``STOPS_PER_PAGE`` stops, counted by ``counts``
    (``stop_counts`` under the same filters) rather than by a second count of the same stops."""
    paginator = Paginator(stop_queue(state=state, **filters), STOPS_PER_PAGE)
    paginator.count = counts[state]  # a cached property: what it would have counted
    return paginator.get_page(number)


# A run's JSON columns a card never shows, besides ``HEAVY_FIELDS``: left unread and undecoded.
QUEUE_UNSHOWN = ("tools", "failed_model_call", "rolled_up")
# What a card shows of the same scenario's run under another policy.
PEER_FIELDS = (
    "policy_name",
    "model_backend",
    "model_name",
    "source",
    "source_detail",
    "stop_reason",
    "verdict",
    "tool_call_count",
    "error_count",
    "failed_attempt_count",
    "final_answer",
)
# What a card reads of its run's last steps (``tripping_errors``, ``failing_calls``, the signature).
TAIL_STEP_FIELDS = ("run_id", "index", "input", *SIGNATURE_STEP_FIELDS)


def stop_queue(*, state: str = "unreviewed", **filters: Any) -> QuerySet[Run]:
    stops = (
        stops_filtered(**filters)
        .defer(*HEAVY_FIELDS, *QUEUE_UNSHOWN)
        .select_related("review__reviewer")
        .prefetch_related("review__tags")
    )
    if state == "unreviewed":
        # NOT EXISTS rather than the review join's IS NULL: PostgreSQL then estimates how many stops are
        # left and reads the queue's index newest first until the page is full, instead of every stop.
        stops = stops.filter(~Exists(StopReview.objects.filter(run_id=OuterRef("pk"))))
    elif state == "reviewed":
        stops = stops.filter(review__isnull=False)
    return stops.order_by("-created_at", "-id")


def stop_filter_values() -> dict[str, list]:
    """The stop queue's filter choices: policies and experiments with runs in the queue (two queries,
    each reading the queue's own index, not the runs)."""
    stops = Run.objects.filter(IN_QUEUE).order_by()
    policies = sorted(p for p in stops.values_list("policy_name", flat=True).distinct() if p)
    experiment_ids = stops.filter(experiment__isnull=False).values("experiment_id")
    experiments = list(Experiment.objects.filter(id__in=experiment_ids).order_by("-created_at", "-id"))
    return {"policies": policies, "experiments": experiments}


def _last_step(step: Step | None) -> tuple | None:
    return tuple(getattr(step, f) for f in SIGNATURE_STEP_FIELDS) if step is not None else None


def run_stop_key(run: Run, last_step: Step | None) -> str | None:
    """``run``'s signature key: as stored, else (not yet diagnosed) from its last step (``None``: none)."""
    if run.stop_signature is not None or run.stop_reason not in GUARD_STOPS:
        return run.stop_signature
    return stop_key(run.scenario, run.policy_name, run.stop_reason, _last_step(last_step))


def _columns(model: type, names: Iterable[str]) -> str:
    """``names``' columns of ``model``'s table, each qualified by the table and quoted."""
    table = connection.ops.quote_name(model._meta.db_table)
    return ", ".join(f"{table}.{connection.ops.quote_name(model._meta.get_field(n).column)}" for n in names)


@cache
def _unsigned_sql() -> tuple[str, str]:
    """``_unsigned_unreviewed``'s query around its kinds' condition, and one kind's condition: the SQL
    the ORM would build for it, written once, because building its OR of kinds through the ORM costs
    more than running the query."""
    step, run, review = (connection.ops.quote_name(m._meta.db_table) for m in (Step, Run, StopReview))
    q = connection.ops.quote_name
    head = (
        f"SELECT {_columns(Step, ('id', 'run_id', *SIGNATURE_STEP_FIELDS))}, {_columns(Run, KIND_FIELDS)} "
        f"FROM {step} INNER JOIN {run} ON ({step}.{q('run_id')} = {run}.{q('id')}) "
        f"LEFT OUTER JOIN {review} ON ({run}.{q('id')} = {review}.{q('run_id')}) WHERE ("
    )
    tail = (
        f") AND ({UNSIGNED_GUARD_STOP.sql}) AND {step}.{q('index')} = ({run}.{q('step_count')}) "
        f"AND {review}.{q('id')} IS NULL"
    )
    kind = "(" + " AND ".join(f"{run}.{q(name)} = %s" for name in KIND_FIELDS) + ")"
    return head + "{}" + tail, kind


KIND_FIELDS = ("scenario", "policy_name", "stop_reason")


def _unsigned_unreviewed(kinds: Iterable[tuple[str, str, str]]) -> dict[int, str]:
    """The unreviewed guard stops of ``kinds`` (scenario, policy, stop reason) not yet given a signature
    (their end not diagnosed), by run id, with the key their last step gives: one query through
    ``run_stop_unsigned_idx``, which holds only those."""
    wanted = sorted({kind for kind in kinds if kind[2] in GUARD_STOPS})
    if not wanted:
        return {}
    sql, one = _unsigned_sql()
    params = [value for kind in wanted for value in kind]
    found = {}
    for step in Step.objects.raw(sql.format(" OR ".join([one] * len(wanted))), params):
        last = tuple(getattr(step, f) for f in SIGNATURE_STEP_FIELDS)
        found[step.run_id] = stop_key(step.scenario, step.policy_name, step.stop_reason, last)
    return found


def unreviewed_identical(*, keys: Iterable[str], kinds: Iterable[tuple[str, str, str]]) -> Counter:
    """How many unreviewed guard stops have each signature key of ``keys``, in two queries: the signed
    ones counted through ``run_stop_signature_idx``, and those of ``kinds`` not yet signed."""
    keys = {k for k in keys if k}
    counts: Counter = Counter()
    if keys:
        signed = (
            Run.objects.filter(stop_signature__in=keys, review__isnull=True)
            .order_by()
            .values_list("stop_signature")
            .annotate(n=Count("id"))
        )
        counts.update(dict(signed))
    counts.update(k for k in _unsigned_unreviewed(kinds).values() if k in keys)
    return counts


def stops_identical(*, run: Run) -> list[Run]:
    """The unreviewed guard stops identical to ``run`` (``tracer/signatures.py``), ``run`` left out; at most
    four queries."""
    mine = run_stop_key(run, None if run.stop_signature else run.steps.filter(index=run.step_count).first())
    if mine is None:
        return []
    kind = [(run.scenario, run.policy_name, run.stop_reason)]
    ids = {pk for pk, key in _unsigned_unreviewed(kind).items() if key == mine}
    ids |= set(Run.objects.filter(stop_signature=mine, review__isnull=True).values_list("id", flat=True))
    ids.discard(run.pk)
    return list(Run.objects.filter(pk__in=ids).only("id", "status", "verdict", "stop_reason").order_by("id"))


def _tail_sql(runs: list[Run]) -> tuple[str, list[int]]:
    """The query of ``runs``' last ``TRAILING_STEPS`` steps by ``TAIL_STEP_FIELDS``, in order: each run's a
    range of the (run, index) key, as the ORM would write it, written by hand because the ORM's OR of
    ranges costs more to build than to run."""
    q = connection.ops.quote_name
    step = q(Step._meta.db_table)
    one = f"({step}.{q('index')} > %s AND {step}.{q('run_id')} = %s)"
    sql = (
        f"SELECT {_columns(Step, ('id', *TAIL_STEP_FIELDS))} FROM {step} WHERE ({' OR '.join([one] * len(runs))}) "
        f"ORDER BY {step}.{q('run_id')} ASC, {step}.{q('index')} ASC"
    )
    return sql, [value for run in runs for value in (run.step_count - TRAILING_STEPS, run.pk)]


def stop_cases(*, runs: list[Run]) -> list[StopCase]:
    """Each stopped run with its last failing calls, a run of the same scenario under another policy, and
    how many unreviewed stops are identical to it. The same queries whatever the number of runs and steps."""
    tail: dict[int, list[Step]] = defaultdict(list)
    # Each run's last steps as a range of its (run, index) key, its last step's index being its step
    # count: a long run's other steps are not read.
    if runs:
        for step in Step.objects.raw(*_tail_sql(runs)):
            tail[step.run_id].append(step)
    peers = run_policy_peers(runs=runs, finished=True, fields=PEER_FIELDS)
    keys = {run.pk: run_stop_key(run, tail[run.pk][-1] if tail[run.pk] else None) for run in runs}
    alike = unreviewed_identical(keys=keys.values(), kinds=[(r.scenario, r.policy_name, r.stop_reason) for r in runs])
    cases = []
    for run in runs:
        other = min(peers[run.pk], key=lambda peer: PAIRINGS.index(peer.pairing), default=None)
        review = getattr(run, "review", None)  # reverse one-to-one: absent raises AttributeError
        mine = keys[run.pk]
        identical = max(alike[mine] - (review is None), 0) if mine else 0
        cases.append(
            StopCase(run=run, errors=tripping_errors(tail[run.pk]), other=other, review=review, identical=identical)
        )
    return cases
