"""Reads of the Policies page: the scenario × policy matrix's tallies in SQL, each policy's totals, the headline
verdicts, and the saved variants.

The page shows the matrix a page of scenarios at a time (``SCENARIOS_PER_PAGE`` rows, by name) and at
most ``COLUMNS_MAX`` policies, so its size stays bounded however many distinct scenario and policy
keys the runs carry (traces from outside name their own); the totals and verdicts above it count
every scenario of the policies shown."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import (
    BooleanField,
    Count,
    ExpressionWrapper,
    F,
    FloatField,
    Q,
    QuerySet,
    Sum,
)

from ..models import Experiment, MatrixTally, PolicyVariant, Run, StopReview
from ..stats import Interval, beyond_noise, wilson_interval
from ..waterfall import seconds_text
from .common import index_or_zero, not_archived

SCENARIOS_PER_PAGE = 50  # the Policies page's matrix rows per page
COLUMNS_MAX = 12  # policies shown side by side at most: those with the most runs unless chosen


@dataclass
class Tally:
    """Sums over counted runs: a matrix cell and a policy's totals are each one."""

    runs: int = 0
    passes: int = 0  # by effective verdict: a reviewer's override, else the judge's
    unjudged: int = 0  # runs with no effective verdict: neither passes nor fails, left out of the pass rate
    overridden: int = 0  # runs whose verdict a reviewer overrode
    tool_calls: int = 0
    retries: int = 0  # the harness's tool retries
    wasted_retries: int = 0  # retries and model repeats after a non-retryable failure or an empty result
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
    duration_s: float = 0.0  # the timed runs' durations (``Run.measured_ms``) summed
    timed: int = 0  # runs with a recorded duration, which ``duration_s`` sums

    def add(self, other: Tally) -> None:
        for name in TALLY_FIELDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def subtract(self, other: Tally) -> None:
        for name in TALLY_FIELDS:
            setattr(self, name, getattr(self, name) - getattr(other, name))

    @property
    def judged(self) -> int:
        """Runs with a verdict (pass or fail): the pass rate's denominator."""
        return self.runs - self.unjudged

    @property
    def pass_pct(self) -> int:
        """Passes among the judged runs, in percent (0 when none was judged: ``judged`` says so)."""
        return round(100 * self.passes / self.judged) if self.judged else 0

    @property
    def pass_interval(self) -> Interval:
        """The pass rate's 95 % Wilson score interval, over the judged runs (0–1 when none was)."""
        return wilson_interval(self.passes, self.judged)

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
        """The mean of the timed runs' durations (``Run.measured_ms``, as each run's page gives it)."""
        return self.duration_s / self.timed if self.timed else None

    @property
    def mean_duration_text(self) -> str:
        return "not recorded" if self.mean_duration_s is None else seconds_text(self.mean_duration_s)


TALLY_FIELDS = list(Tally.__dataclass_fields__)


@dataclass
class MatrixCell(Tally):
    scenario: str = ""
    policy: str = ""
    tool_calls_pct: int = 0  # bar lengths, against the largest value in the matrix
    wasted_pct: int = 0

    @property
    def heat_step(self) -> int:
        """The heat map's shade: ``pass_pct`` in fifths, 0 (0–19 %) to 4 (80–100 %)."""
        return min(4, self.pass_pct // 20)

    @property
    def alarms(self) -> int:
        """Runs that ended by a stop, a cut-off, a refusal, a crash or an interruption."""
        return self.guard_stops + self.max_steps_stops + self.cut_off + self.refusals + self.crashes + self.interrupted

    @property
    def heat_words(self) -> str:
        """The heat map square's figures in words: its title and its accessible name."""
        if self.judged:
            low, high = self.pass_interval.low_pct, self.pass_interval.high_pct
            words = [
                f"{self.scenario} under {self.policy}: {self.passes}/{self.judged} judged passed, {self.pass_pct} %"
            ]
            words[0] += f" (95 % interval {low}–{high} %)"
        else:
            words = [f"{self.scenario} under {self.policy}: no verdict, unjudged"]
        words.append(f"{self.runs} run{'s' if self.runs != 1 else ''}")
        counts = [
            (self.unjudged if self.judged else 0, "unjudged", "unjudged"),
            (self.simulated, "simulated", "simulated"),
            (self.imported, "imported", "imported"),
            (self.guard_stops, "guard stop", "guard stops"),
            (self.max_steps_stops, "max-steps stop", "max-steps stops"),
            (self.cut_off, "cut off", "cut off"),
            (self.refusals, "refusal", "refusals"),
            (self.crashes, "crash", "crashes"),
            (self.interrupted, "interrupted", "interrupted"),
        ]
        words += [f"{n} {one if n == 1 else many}" for n, one, many in counts if n]
        words.append(f"{self.mean_tool_calls} tool calls/run, {self.wasted_retries} wasted retries")
        return "; ".join(words)


@dataclass
class PolicyTotals(Tally):
    """One policy over every scenario the matrix shows."""

    policy: str = ""
    scenarios: set[str] = field(default_factory=set)
    wasted_pct: int = 0  # the chart's bar: mean wasted retries per run against the largest policy's


@dataclass
class PolicyVerdict:
    """The best policy's pass count against another's (both over judged runs), and whether the gap is
    beyond the noise."""

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
    unjudged_policies: list[PolicyTotals] = field(default_factory=list)  # runs, none judged: never compared
    backends: dict[str, int] = field(default_factory=dict)  # counted runs per model backend
    experiments: int = 0  # experiments the counted runs belong to
    outside: int = 0  # counted runs of no experiment
    scenarios: int = 0  # scenarios with runs under the policies shown, on every page
    page: int = 1  # the page of scenarios in ``rows``
    pages: int = 1
    columns_left_out: list[str] = field(default_factory=list)  # policies past COLUMNS_MAX, not shown

    @property
    def has_previous(self) -> bool:
        return self.page > 1

    @property
    def has_next(self) -> bool:
        return self.page < self.pages

    @property
    def runs(self) -> int:
        return sum(self.backends.values())


MATRIX_KEYS = ("scenario", "policy_name", "model_backend", "experiment_id")  # run_matrix_cover_idx's order
TALLY_KEYS = ("scenario", "policy_name", "model_backend", "experiment")  # MatrixTally's, experiment 0 for none
# What MatrixTally keeps as it is; the duration it keeps in microseconds. The rest is applied as the matrix reads.
STORED_FIELDS = [name for name in TALLY_FIELDS if name not in ("duration_s", "overridden", "simulated")]


def matrix_scope(*, experiment_ids: Iterable[int] = (), model_backend: str = "", of: str = "") -> Q:
    """The runs the matrix reads: finished top-level runs of a scenario, narrowed to experiments and a
    model backend when given (``of``: the path to the run, e.g. ``run__`` from a review)."""
    scope = Q(**{f"{of}status": Run.Status.FINISHED, f"{of}parent__isnull": True}) & ~Q(**{f"{of}scenario": ""})
    if experiment_ids:
        scope &= Q(**{f"{of}experiment_id__in": list(experiment_ids)})
    else:
        scope &= not_archived(of)
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
            unjudged=Count(of + "id", filter=~Q(**{of + "verdict__in": Run.Verdict.values})),
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
            duration_s=Sum(F(of + "measured_ms") / 1000.0, output_field=FloatField()),
            timed=Count(of + "id", filter=Q(**{of + "measured_ms__gt": 0})),
        )
    )
    return [{**row, **{k: row[of + k] for k in MATRIX_KEYS}} for row in rows if row.get("in_scope", True)]


def in_scope(scope: Q) -> ExpressionWrapper:
    """``scope`` as a value of each row rather than a filter: SQLite's planner, which has no statistics,
    then starts from the few rows the query's own filter finds (re-runs, overrides) instead of walking
    every run in scope through the matrix's index."""
    return ExpressionWrapper(scope, output_field=BooleanField())


def stored_tallies(*, experiment_ids: Iterable[int] = (), model_backend: str = "") -> dict[tuple, Tally]:
    """``matrix_groups`` of the runs in ``matrix_scope``, as the triggers of ``tracer/tallies.py`` keep
    them in ``MatrixTally``: one query over a few rows per scenario, policy, backend and experiment."""
    rows = MatrixTally.objects.filter(runs__gt=0)
    if experiment_ids:
        rows = rows.filter(experiment__in=list(experiment_ids))
    else:
        rows = rows.exclude(experiment__in=Experiment.objects.filter(archived_at__isnull=False).values("id"))
    if model_backend:
        rows = rows.filter(model_backend=model_backend)
    tallies: dict[tuple, Tally] = {}
    for row in rows.values(*TALLY_KEYS, *STORED_FIELDS, "duration_us"):
        key = (row["scenario"], row["policy_name"], row["model_backend"], row["experiment"] or None)
        tallies[key] = Tally(**{name: row[name] for name in STORED_FIELDS}, duration_s=row["duration_us"] / 1e6)
    return tallies


def matrix_tallies(*, experiment_ids: Iterable[int] = (), model_backend: str = "") -> dict[tuple, Tally]:
    """What the matrix counts, per scenario, policy, backend and experiment, in three queries:

    - every run in scope, as the database keeps them summed (``stored_tallies``);
    - minus the runs that were interrupted and re-run (their re-runs stand in for them, and are counted
      by the first query once they finish): read from the re-runs, few;
    - the reviewers' verdict overrides among the counted runs (read from ``review_override_idx``, few),
      so a run counts as passed by its effective verdict: the reviewer's override, else the judge's (an
      override of a run the judge left unjudged makes it judged)."""
    narrowing = {"experiment_ids": experiment_ids, "model_backend": model_backend}
    tallies = stored_tallies(**narrowing)
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
        if o["run__verdict"] not in Run.Verdict.values:
            tally.unjudged -= o["n"]
        if o["verdict_override"] == Run.Verdict.PASS and not judged_pass:
            tally.passes += o["n"]
        elif o["verdict_override"] == Run.Verdict.FAIL and judged_pass:
            tally.passes -= o["n"]
    for (_, _, backend, _), tally in tallies.items():
        tally.simulated = tally.runs if backend == Run.ModelBackend.SIMULATED else 0
    return {key: tally for key, tally in tallies.items() if tally.runs}


def policy_matrix(
    *,
    policies: list[str] | None = None,
    experiment_ids: Iterable[int] = (),
    model_backend: str = "",
    page: object = None,
    leave_out: Iterable[str] = (),
) -> Matrix:
    """Scenario × policy repair metrics with totals per policy (``matrix_tallies``). With ``page`` (a
    number, as a query string gives it: 1 when not one) only that page of ``SCENARIOS_PER_PAGE``
    scenarios is in ``rows`` and at most ``COLUMNS_MAX`` policies are columns; without it, every
    scenario and every policy asked for (the experiment page, the gate). The policies in ``leave_out``
    (archived variants) are neither columns nor totals, nor offered as columns."""
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
    left_out = set(leave_out)
    matrix.available = sorted({policy for _, policy in cells if policy not in left_out})
    matrix.policies = [p for p in (policies or matrix.available) if p in matrix.available] or matrix.available
    if page is not None and len(matrix.policies) > COLUMNS_MAX:
        runs: dict[str, int] = {}
        for (_, policy), cell in cells.items():
            runs[policy] = runs.get(policy, 0) + cell.runs
        # the ones asked for in the order asked, else those with the most runs, shown in name order
        kept = set(
            matrix.policies[:COLUMNS_MAX] if policies else sorted(matrix.policies, key=lambda p: -runs[p])[:COLUMNS_MAX]
        )
        matrix.columns_left_out = [p for p in matrix.policies if p not in kept]
        matrix.policies = [p for p in matrix.policies if p in kept]
    shown = {key: cell for key, cell in cells.items() if key[1] in matrix.policies}
    top_calls = max((c.mean_tool_calls for c in shown.values()), default=0) or 1
    top_wasted = max((c.wasted_retries for c in shown.values()), default=0) or 1
    for cell in shown.values():
        cell.tool_calls_pct = round(100 * cell.mean_tool_calls / top_calls)
        cell.wasted_pct = round(100 * cell.wasted_retries / top_wasted)
    scenarios = sorted({scenario for scenario, _ in shown})
    matrix.scenarios = len(scenarios)
    if page is not None:
        matrix.pages = max(1, -(-len(scenarios) // SCENARIOS_PER_PAGE))
        matrix.page = min(index_or_zero(page) or 1, matrix.pages)
        start = (matrix.page - 1) * SCENARIOS_PER_PAGE
        scenarios = scenarios[start : start + SCENARIOS_PER_PAGE]
    matrix.rows = [MatrixRow(s, [shown.get((s, p)) for p in matrix.policies]) for s in scenarios]
    matrix.totals = policy_totals(shown.values(), policies=matrix.policies)
    matrix.verdicts = policy_verdicts(matrix.totals)
    matrix.unjudged_policies = [t for t in matrix.totals if t.runs and not t.judged]
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


def policy_rank(total: Tally) -> tuple:
    """The headline's order: the lower bound of the pass rate's Wilson interval first, so that a few
    lucky runs (1/1, whose interval reaches down to 21 %) never outrank many (33/33: 90 %), then the pass
    rate, then fewest wasted retries per run."""
    return (-total.pass_interval.low, -total.passes / total.judged, total.mean_wasted_retries)


def policy_verdicts(totals: list[PolicyTotals]) -> list[PolicyVerdict]:
    """The best policy (``policy_rank``) against each other one, over judged runs only: a policy none
    of whose runs has a verdict is compared with nothing."""
    ranked = sorted((t for t in totals if t.judged), key=lambda t: (*policy_rank(t), t.policy))
    if len(ranked) < 2:
        return []
    best = ranked[0]
    return [
        PolicyVerdict(
            best=best,
            other=other,
            beyond_noise=beyond_noise((best.passes, best.judged), (other.passes, other.judged)),
            same_scenarios=best.scenarios == other.scenarios,
        )
        for other in ranked[1:]
    ]


def policy_variant_list(*, archived: bool | None = None) -> list[PolicyVariant]:
    """The saved variants, presets first; only the archived ones or only the others when ``archived``
    says which."""
    variants = PolicyVariant.objects.all()
    if archived is not None:
        variants = variants.filter(archived_at__isnull=not archived)
    return list(variants)


def policy_archived_names() -> list[str]:
    """The names of the archived variants, which the Policies page's matrix leaves out by default."""
    return list(PolicyVariant.objects.filter(archived_at__isnull=False).order_by("name").values_list("name", flat=True))
