"""Experiments' writes: the preset policy variants and a queued run's snapshot of its policy.

Launching is tested with the run task in ``test_tasks.py``; the forms' use in ``test_views.py``.
"""

from __future__ import annotations

import pytest

from agents.policies import PRESETS
from tracer.experiments import run_create
from tracer.models import PolicyVariant, Run

pytestmark = pytest.mark.django_db


def test_the_presets_exist_as_policy_variants_with_their_settings():
    presets = {v.name: v for v in PolicyVariant.objects.filter(is_preset=True)}
    assert set(presets) == set(PRESETS)  # a row for every preset, and no other
    for name, variant in presets.items():
        assert variant.settings == PRESETS[name].settings()


def test_a_created_run_is_queued_with_a_snapshot_of_its_policy(starter):
    run = run_create(scenario="lookup-empty", policy=starter)
    starter.settings = {**starter.settings, "max_attempts": 9}
    starter.save()
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert run.policy_name == "starter"
    assert run.policy_settings["max_attempts"] == 3
