"""Reads of an experiment's page: its compare pairs."""

import pytest

from tests.factories import (
    ExperimentFactory,
    RunFactory,
)
from tracer.reads import experiment_page

pytestmark = pytest.mark.django_db


def test_experiment_pairs_compare_the_first_policy_with_each_other_per_scenario_and_repeat():
    exp = ExperimentFactory(policies=["starter", "structured", "message"])
    runs = [
        RunFactory(experiment=exp, scenario=s, policy_name=p)
        for _ in range(2)
        for s in ("a", "b")
        for p in ("starter", "structured", "message")
    ]
    pairs = experiment_page.experiment_pairs(runs=runs, policies=exp.policies)
    assert len(pairs) == 8
    assert pairs[0] == (runs[0], runs[1]) and pairs[1] == (runs[0], runs[2])
    assert all(a.policy_name == "starter" and a.scenario == b.scenario for a, b in pairs)
