"""Reads of the Policies page: the matrix's SQL aggregates and its columns."""

import pytest

from tests.factories import (
    ExperimentFactory,
    RunFactory,
    guard_stop,
    refund_too_old_starter,
    refund_too_old_structured,
)
from tracer.models import Run
from tracer.reads.matrix import policy_matrix

pytestmark = pytest.mark.django_db


def test_policy_matrix_aggregates_each_scenario_and_policy():
    refund_too_old_starter()
    refund_too_old_starter(verdict=Run.Verdict.PASS, tool_call_count=3)
    refund_too_old_structured()
    RunFactory(policy_name="fragile", stop_reason=Run.StopReason.CRASHED, verdict=Run.Verdict.FAIL)
    guard_stop(scenario="stuck-model")
    RunFactory(status=Run.Status.RUNNING, stop_reason="", verdict="")  # not finished: not counted
    RunFactory(parent=RunFactory(), policy_name="starter")  # sub-agent: not counted

    matrix = policy_matrix()

    assert matrix.policies == ["fragile", "starter", "structured"]
    assert [r.scenario for r in matrix.rows] == ["refund-too-old", "stuck-model"]
    fragile, starter, structured = matrix.rows[0].cells
    assert (starter.runs, starter.passes, starter.pass_pct) == (2, 1, 50)
    assert starter.mean_tool_calls == 2.0
    assert starter.wasted_retries == 4 and starter.wasted_pct == 100
    assert (structured.runs, structured.pass_pct, structured.wasted_retries) == (2, 100, 0)  # one is the parent
    assert fragile.crashes == 1
    assert matrix.rows[1].cells[0] is None and matrix.rows[1].cells[2].guard_stops == 1


def test_policy_matrix_keeps_only_chosen_known_columns_and_an_experiment():
    exp = ExperimentFactory()
    refund_too_old_starter(experiment=exp)
    refund_too_old_structured()
    assert policy_matrix(policies=["structured", "nope"]).policies == ["structured"]
    assert policy_matrix(policies=["nope"]).policies == ["starter", "structured"]
    assert policy_matrix(experiment_ids=[exp.pk]).policies == ["starter"]
