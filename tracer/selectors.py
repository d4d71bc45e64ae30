"""Reads for the dashboard. Each selector's query count is fixed: it never grows with runs or steps."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Avg, Count, F, Max, Q, QuerySet, Sum, Window
from django.db.models.functions import RowNumber
from django.shortcuts import get_object_or_404
from django.utils import timezone

from .divergence import Difference, Divergence, attempt_outcome, canonical, run_differences, run_divergence
from .models import Experiment, PolicyVariant, Run, Step, StopReview

GUARD_STOPS = (Run.StopReason.CONSECUTIVE_ERRORS, Run.StopReason.MAX_STEPS)
TRAILING_STEPS = 12  # enough to show any consecutive-error guard's streak
ACTIVE = (Run.Status.QUEUED, Run.Status.RUNNING)
# Columns the list and queue pages never show: kept out of their queries.
HEAVY_FIELDS = ("transcript", "search_text", "policy_settings", "task", "verdict_reason", "error", "labels")
STEP_FIELDS = ("index", "kind", "tool_name", "input", "attempts", "text", "is_error", "category", "retryable")


# --- runs ------------------------------------------------------------------------------------


def run_list(*, filters: dict[str, Any] | None = None) -> QuerySet[Run]:
    """Runs, newest first, narrowed by the list page's filters (blank values are ignored)."""
    f = {k: v for k, v in (filters or {}).items() if v not in (None, "")}
    qs = Run.objects.filter(parent__isnull=True).defer(*HEAVY_FIELDS)  # sub-agents are listed on their parent
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
        qs = qs.filter(Q(search_text__icontains=f["q"]) | Q(final_answer__icontains=f["q"]))
    return qs


def run_filter_values() -> dict[str, list[str]]:
    """The scenarios and policies runs exist for (the list's filter choices), in one query."""
    pairs = Run.objects.order_by().values_list("scenario", "policy_name").distinct()
    scenarios, policies = set(), set()
    for scenario, policy in pairs:
        scenarios.add(scenario)
        policies.add(policy)
    return {"scenarios": sorted(s for s in scenarios if s), "policies": sorted(p for p in policies if p)}


def runs_any_active(runs: Iterable[Run]) -> bool:
    return any(run.is_active for run in runs)


def run_get(*, pk: int) -> Run:
    return get_object_or_404(Run.objects.select_related("parent", "experiment", "review"), pk=pk)


def step_list(*, run: Run) -> list[Step]:
    return list(run.steps.order_by("index"))


def step_list_after(*, run: Run, after: Any) -> list[Step]:
    """Steps recorded after index ``after`` (all of them when ``after`` is not a number)."""
    return list(run.steps.filter(index__gt=index_or_zero(after)).order_by("index"))


def run_reruns(*, run: Run) -> list[Run]:
    """The runs queued to re-run ``run`` after it was interrupted (none while it is active)."""
    if run.is_active:
        return []
    return list(run.reruns.only("pk", "status").order_by("id"))


def run_children(*, run: Run) -> list[Run]:
    return list(run.children.defer(*HEAVY_FIELDS).order_by("id"))


def run_other_policies(*, run: Run) -> list[Run]:
    """The latest run of the same scenario under each other policy."""
    if not run.scenario:
        return []
    latest = (
        Run.objects.filter(scenario=run.scenario, parent__isnull=True)
        .exclude(policy_name=run.policy_name)
        .order_by()
        .values("policy_name")
        .annotate(latest=Max("id"))
        .values_list("latest", flat=True)
    )
    return list(Run.objects.defer(*HEAVY_FIELDS).filter(id__in=list(latest)).order_by("policy_name"))


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

    @property
    def same_scenario(self) -> bool:
        return self.a.scenario == self.b.scenario


def run_compare(*, a_id: int, b_id: int) -> Comparison:
    runs = {r.pk: r for r in Run.objects.defer("transcript", "search_text").filter(pk__in=[a_id, b_id])}
    a = runs.get(a_id) or get_object_or_404(Run, pk=a_id)
    b = runs.get(b_id) or get_object_or_404(Run, pk=b_id)
    steps: dict[int, list[dict]] = defaultdict(list)
    for row in Step.objects.filter(run_id__in=[a_id, b_id]).order_by("run_id", "index").values("run_id", *STEP_FIELDS):
        steps[row["run_id"]].append(row)
    divergence = run_divergence(steps[a_id], steps[b_id], left_policy=a.policy_settings, right_policy=b.policy_settings)
    return Comparison(a=a, b=b, divergence=divergence, differences=run_differences(a, b))


# --- policies --------------------------------------------------------------------------------


@dataclass
class MatrixCell:
    scenario: str
    policy: str
    runs: int
    passes: int
    mean_tool_calls: float
    wasted_retries: int
    guard_stops: int
    crashes: int
    imported: int = 0  # runs from outside (files, OTLP, the API) among ``runs``
    tool_calls_pct: int = 0  # bar lengths, against the largest value in the matrix
    wasted_pct: int = 0

    @property
    def pass_pct(self) -> int:
        return round(100 * self.passes / self.runs) if self.runs else 0


@dataclass
class MatrixRow:
    scenario: str
    cells: list[MatrixCell | None] = field(default_factory=list)


@dataclass
class Matrix:
    policies: list[str]
    rows: list[MatrixRow]
    available: list[str]


def policy_matrix(*, policies: list[str] | None = None, experiment_id: int | None = None) -> Matrix:
    """Scenario × policy repair metrics over finished top-level runs, aggregated in SQL."""
    runs = Run.objects.filter(status=Run.Status.FINISHED, parent__isnull=True).exclude(scenario="")
    if experiment_id:
        runs = runs.filter(experiment_id=experiment_id)
    cells = list(
        runs.order_by()
        .values("scenario", "policy_name")
        .annotate(
            runs=Count("id"),
            passes=Count("id", filter=Q(verdict=Run.Verdict.PASS)),
            mean_tool_calls=Avg("tool_call_count"),
            wasted_retries=Sum("wasted_retry_count"),
            guard_stops=Count("id", filter=Q(stop_reason__in=GUARD_STOPS)),
            crashes=Count("id", filter=Q(stop_reason=Run.StopReason.CRASHED)),
            imported=Count("id", filter=~Q(source=Run.Source.AGENT)),
        )
    )
    available = sorted({c["policy_name"] for c in cells})
    columns = [p for p in (policies or available) if p in available] or available
    by_key = {
        (c["scenario"], c["policy_name"]): MatrixCell(
            scenario=c["scenario"],
            policy=c["policy_name"],
            runs=c["runs"],
            passes=c["passes"],
            mean_tool_calls=round(c["mean_tool_calls"] or 0, 1),
            wasted_retries=c["wasted_retries"] or 0,
            guard_stops=c["guard_stops"],
            crashes=c["crashes"],
            imported=c["imported"],
        )
        for c in cells
        if c["policy_name"] in columns
    }
    top_calls = max((c.mean_tool_calls for c in by_key.values()), default=0) or 1
    top_wasted = max((c.wasted_retries for c in by_key.values()), default=0) or 1
    for cell in by_key.values():
        cell.tool_calls_pct = round(100 * cell.mean_tool_calls / top_calls)
        cell.wasted_pct = round(100 * cell.wasted_retries / top_wasted)
    scenarios = sorted({c["scenario"] for c in cells})
    rows = [MatrixRow(s, [by_key.get((s, p)) for p in columns]) for s in scenarios]
    return Matrix(policies=columns, rows=rows, available=available)


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
    errors: list[Step]  # the errors in a row that tripped the guard
    other: Run | None  # the same scenario under another policy
    review: StopReview | None

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


def stop_counts() -> dict[str, int]:
    stops = Run.objects.filter(stop_reason__in=GUARD_STOPS)
    counts = stops.aggregate(all=Count("id"), reviewed=Count("id", filter=Q(review__isnull=False)))
    return counts | {"unreviewed": counts["all"] - counts["reviewed"]}


def stop_queue(*, state: str = "unreviewed") -> QuerySet[Run]:
    stops = Run.objects.filter(stop_reason__in=GUARD_STOPS).defer(*HEAVY_FIELDS).select_related("review")
    if state == "unreviewed":
        stops = stops.filter(review__isnull=True)
    elif state == "reviewed":
        stops = stops.filter(review__isnull=False)
    return stops.order_by("-created_at", "-id")


def stop_cases(*, runs: list[Run]) -> list[StopCase]:
    """Each stopped run with its last failing calls and a run of the same scenario under another policy."""
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
    others: dict[str, list[Run]] = defaultdict(list)
    latest_ids = (
        Run.objects.filter(
            scenario__in={r.scenario for r in runs if r.scenario}, parent__isnull=True, status=Run.Status.FINISHED
        )
        .order_by()
        .values("scenario", "policy_name")
        .annotate(latest=Max("id"))
        .values_list("latest", flat=True)
    )
    for other in Run.objects.defer(*HEAVY_FIELDS).filter(id__in=list(latest_ids)).order_by("policy_name"):
        others[other.scenario].append(other)
    cases = []
    for run in runs:
        other = next((o for o in others[run.scenario] if o.policy_name != run.policy_name), None)
        review = getattr(run, "review", None)  # reverse one-to-one: absent raises AttributeError
        cases.append(StopCase(run=run, errors=tripping_errors(tail[run.pk]), other=other, review=review))
    return cases


# --- experiments -----------------------------------------------------------------------------


def experiment_get(*, pk: int) -> Experiment:
    return get_object_or_404(Experiment, pk=pk)


def experiment_recent(*, limit: int = 10) -> list[Experiment]:
    return list(Experiment.objects.order_by("-created_at")[:limit])


def experiment_runs(*, experiment: Experiment) -> list[Run]:
    return list(experiment.runs.filter(parent__isnull=True).defer(*HEAVY_FIELDS).order_by("id"))


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


def experiment_pairs(*, runs: list[Run], policies: list[str]) -> list[tuple[Run, Run]]:
    """Compare pairs: for each scenario and repeat, the first policy's run against each other policy's.

    A run that was interrupted and re-run is stood in for by its re-run.
    """
    groups: dict[tuple[str, int], dict[str, Run]] = defaultdict(dict)
    seen: dict[tuple[str, str], int] = defaultdict(int)
    replaced = {run.rerun_of_id for run in runs if run.rerun_of_id}
    for run in runs:
        if run.pk in replaced:
            continue
        repeat = seen[(run.scenario, run.policy_name)]
        seen[(run.scenario, run.policy_name)] += 1
        groups[(run.scenario, repeat)][run.policy_name] = run
    pairs = []
    for group in groups.values():
        present = [group[p] for p in policies if p in group]
        pairs.extend((present[0], other) for other in present[1:])
    return pairs
