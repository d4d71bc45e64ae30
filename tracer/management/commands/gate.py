"""``manage.py gate``: a regression gate for CI, a candidate experiment against a baseline.

Prints, as a Markdown table per scenario and in all, each side's pass rate with its 95 % interval (the
matrix's tallies and Wilson intervals: ``reads.matrix``, ``tracer.stats``), wasted retries per run and
findings per run, then the verdict. Exits 1 when the candidate is worse beyond the noise, by the
matrix's own test (Newcombe's interval of the difference leaves out zero): its pass rate lower, or its
share of runs with a finding higher. A difference inside the noise passes, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Count, Q

from tracer.models import Experiment, Finding, Run
from tracer.reads.matrix import Tally, policy_matrix
from tracer.stats import beyond_noise, difference_interval, wilson_interval

WORSE = 1


@dataclass
class Side:
    """One experiment's figures for one scenario (or all of them)."""

    tally: Tally = field(default_factory=Tally)
    runs: int = 0  # top-level runs, the findings' denominator
    with_findings: int = 0  # of those, runs with any finding
    findings: int = 0

    @property
    def judged(self) -> int:
        """Runs with a verdict: the pass rate's denominator (unjudged runs are neither passes nor fails)."""
        return self.tally.judged

    def pass_said(self) -> str:
        if not self.judged:
            return "unjudged" if self.tally.runs else "—"
        i = wilson_interval(self.tally.passes, self.judged)
        unjudged = f", {self.tally.unjudged} unjudged" if self.tally.unjudged else ""
        return f"{self.tally.passes}/{self.judged} ({i.low_pct}–{i.high_pct} %{unjudged})"

    def wasted_said(self) -> str:
        return f"{self.tally.wasted_retries / self.tally.runs:.2f}" if self.tally.runs else "—"

    def findings_said(self) -> str:
        return f"{self.findings / self.runs:.2f}" if self.runs else "—"

    def add(self, other: Side) -> None:
        self.tally.add(other.tally)
        self.runs += other.runs
        self.with_findings += other.with_findings
        self.findings += other.findings


def experiment_find(value: str) -> Experiment:
    """An experiment by id, or by its name when exactly one has it; a CommandError naming recent ones."""
    found = None
    if value.isdigit():
        found = Experiment.objects.filter(pk=int(value)).first()
    if found is None:
        named = list(Experiment.objects.filter(name=value)[:2])
        if len(named) > 1:
            raise CommandError(f"{value!r}: more than one experiment has this name; give its id")
        found = named[0] if named else None
    if found is None:
        recent = ", ".join(f"{e.pk} ({e.name or 'unnamed'})" for e in Experiment.objects.order_by("-pk")[:10])
        raise CommandError(f"no experiment {value!r}; expected an id or a name, e.g. {recent or 'none yet'}")
    return found


def experiment_sides(experiment: Experiment) -> dict[str, Side]:
    """Per scenario: the matrix's tally of the experiment's runs (every policy in it) and its findings."""
    sides: dict[str, Side] = {}
    matrix = policy_matrix(experiment_ids=[experiment.pk])
    for row in matrix.rows:
        side = sides.setdefault(row.scenario, Side())
        for cell in row.cells:
            if cell is not None:
                side.tally.add(cell)
    top = Run.objects.filter(experiment_id=experiment.pk, parent__isnull=True)
    for row in top.values("scenario").annotate(runs=Count("id"), hit=Count("id", filter=~Q(finding_kinds=""))):
        side = sides.setdefault(row["scenario"], Side())
        side.runs, side.with_findings = row["runs"], row["hit"]
    by_scenario = Finding.objects.filter(run__experiment_id=experiment.pk, run__parent__isnull=True)
    for row in by_scenario.values("scenario").annotate(n=Count("id")):
        sides.setdefault(row["scenario"], Side()).findings = row["n"]
    return sides


def worse(base: Side, cand: Side) -> list[str]:
    """What makes the candidate worse than the baseline beyond the noise, said with its interval."""
    out = []
    a, b = (cand.tally.passes, cand.judged), (base.tally.passes, base.judged)
    if a[1] and b[1] and beyond_noise(a, b) and a[0] / a[1] < b[0] / b[1]:
        d = difference_interval(a, b)
        out.append(
            f"pass rate {round(100 * a[0] / a[1])} % against {round(100 * b[0] / b[1])} % "
            f"(difference {100 * (a[0] / a[1] - b[0] / b[1]):+.0f} points, 95 % interval "
            f"{100 * d.low:+.0f} to {100 * d.high:+.0f})"
        )
    a, b = (cand.with_findings, cand.runs), (base.with_findings, base.runs)
    if a[1] and b[1] and beyond_noise(a, b) and a[0] / a[1] > b[0] / b[1]:
        d = difference_interval(a, b)
        out.append(
            f"runs with a finding {round(100 * a[0] / a[1])} % against {round(100 * b[0] / b[1])} % "
            f"(difference {100 * (a[0] / a[1] - b[0] / b[1]):+.0f} points, 95 % interval "
            f"{100 * d.low:+.0f} to {100 * d.high:+.0f})"
        )
    return out


class Command(BaseCommand):
    help = (
        "Compare a candidate experiment with a baseline: pass rates with their 95 % intervals, wasted retries "
        "and findings per run, side by side as a Markdown table per scenario; exit 1 when the candidate is worse "
        "beyond the noise (its pass rate lower, or its share of runs with a finding higher, by Newcombe's "
        "interval of the difference, as the Policies page's matrix decides)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--baseline", required=True, metavar="EXPERIMENT", help="an experiment's id or name")
        parser.add_argument("--candidate", required=True, metavar="EXPERIMENT", help="an experiment's id or name")

    def handle(self, *args, **opts):
        base_exp, cand_exp = experiment_find(opts["baseline"]), experiment_find(opts["candidate"])
        if base_exp.pk == cand_exp.pk:
            raise CommandError(f"--candidate: experiment {cand_exp.pk} is the baseline too; give another one")
        base, cand = experiment_sides(base_exp), experiment_sides(cand_exp)
        if not any(s.tally.runs for s in cand.values()):
            raise CommandError(f"--candidate: experiment {cand_exp.pk} has no finished runs to compare yet")
        self.stdout.write(self._table(base_exp, cand_exp, base, cand))
        total_base, total_cand = Side(), Side()
        for s in base.values():
            total_base.add(s)
        for s in cand.values():
            total_cand.add(s)
        reasons = worse(total_base, total_cand)
        self.stdout.write("")
        if reasons:
            self.stdout.write("**The candidate is worse beyond the noise:** " + "; ".join(reasons) + ".")
            return self._exit(WORSE)
        self.stdout.write("**No regression beyond the noise** (95 % intervals of the differences include zero).")
        return None

    def _exit(self, code: int) -> None:
        self.stdout.flush()
        raise SystemExit(code)

    def _table(self, base_exp: Experiment, cand_exp: Experiment, base: dict, cand: dict) -> str:
        head = (
            f"| scenario | baseline #{base_exp.pk} pass | candidate #{cand_exp.pk} pass "
            "| wasted retries / run (baseline → candidate) | findings / run (baseline → candidate) |"
        )
        lines = [head, "| --- | --- | --- | --- | --- |"]
        total_base, total_cand = Side(), Side()
        for scenario in sorted(set(base) | set(cand)):
            b, c = base.get(scenario, Side()), cand.get(scenario, Side())
            total_base.add(b)
            total_cand.add(c)
            lines.append(self._row(scenario or "(no scenario)", b, c))
        lines.append(self._row("**all**", total_base, total_cand, mark=bool(worse(total_base, total_cand))))
        return "\n".join(lines)

    def _row(self, name: str, b: Side, c: Side, *, mark: bool | None = None) -> str:
        flag = " ⚠" if (mark if mark is not None else bool(worse(b, c))) else ""
        cell = name.replace("|", "\\|")
        return (
            f"| {cell}{flag} | {b.pass_said()} | {c.pass_said()} "
            f"| {b.wasted_said()} → {c.wasted_said()} | {b.findings_said()} → {c.findings_said()} |"
        )
