"""manage.py gate: a candidate experiment against a baseline as a Markdown table; exit 1 when worse beyond the noise."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from tracer.execution import run_execute
from tracer.experiments import run_create
from tracer.models import Experiment, PolicyVariant

pytestmark = pytest.mark.django_db
SCENARIOS = ["refund-too-old", "refund-bad-id", "room-book-permission", "lookup-empty", "currency-unsupported"]


def experiment(policy: str, *, repeats: int = 2, name: str = "") -> Experiment:
    exp = Experiment.objects.create(name=name or policy, scenarios=SCENARIOS, policies=[policy], repeats=repeats)
    variant = PolicyVariant.objects.get(name=policy)
    for scenario in SCENARIOS:
        for _ in range(repeats):
            run_execute(run_id=run_create(scenario=scenario, policy=variant, experiment=exp).pk)
    return exp


def gate(capsys, baseline, candidate) -> tuple[int, str]:
    code = 0
    try:
        call_command("gate", "--baseline", str(baseline), "--candidate", str(candidate))
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().out


def test_a_candidate_with_more_findings_beyond_the_noise_fails_the_gate_with_the_table(capsys):
    structured, starter = experiment("structured"), experiment("starter")
    code, out = gate(capsys, structured.pk, starter.pk)
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith(f"| scenario | baseline #{structured.pk} pass | candidate #{starter.pk} pass")
    (refund,) = [line for line in lines if line.startswith("| refund-too-old")]
    assert "| 2/2 (34–100 %) | 0/2 (0–66 %) |" in refund and "0.00 → 2.00" in refund
    assert "| 0.00 → 2.00 |" in refund  # findings per run: retried-refusal and vague-error
    assert any(line.startswith("| **all** ⚠ |") for line in lines)
    assert "**The candidate is worse beyond the noise:**" in out and "runs with a finding" in out


def test_a_better_candidate_or_a_difference_inside_the_noise_passes(capsys):
    starter = experiment("starter", repeats=1)
    experiment("structured", repeats=1, name="fixed")
    code, out = gate(capsys, starter.pk, "fixed")
    assert code == 0 and "**No regression beyond the noise**" in out


def test_an_unknown_experiment_names_the_ones_there_are():
    exp = experiment("structured", repeats=1)
    with pytest.raises(
        CommandError, match=rf"no experiment 'nope'; expected an id or a name, e.g. {exp.pk} \(structured\)"
    ):
        call_command("gate", "--baseline", "nope", "--candidate", str(exp.pk))
    with pytest.raises(CommandError, match="is the baseline too"):
        call_command("gate", "--baseline", str(exp.pk), "--candidate", "structured")


def test_unjudged_runs_are_neither_passes_nor_fails_in_the_gate(capsys):
    from tracer.models import Run

    baseline = experiment("structured", repeats=2)
    candidate = experiment("structured", repeats=2, name="imported")
    runs = Run.objects.filter(experiment=candidate)
    runs.filter(scenario="refund-too-old").update(verdict="")  # two runs nobody judged
    runs.exclude(scenario="refund-too-old").update(verdict="fail")
    code, out = gate(capsys, baseline.pk, candidate.pk)
    (refund,) = [line for line in out.splitlines() if line.startswith("| refund-too-old")]
    assert "| 2/2 (34–100 %) | unjudged |" in refund  # not 0/2
    (total,) = [line for line in out.splitlines() if line.startswith("| **all**")]
    assert "| 0/8 (0–33 %, 2 unjudged) |" in total
    assert code == 1 and "pass rate 0 % against 100 %" in out  # over the 8 judged runs, not 10
