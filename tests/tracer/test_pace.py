"""The pace of an experiment: seconds a worker pauses after each step, chosen on the launch form,
stored on the experiment, checked, and honoured by the worker over its own ``RLT_STEP_DELAY_S``."""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.urls import reverse

from tests.dom import page
from tracer import recording
from tracer.experiments import STEP_DELAY_MAX_S, experiment_launch
from tracer.models import Experiment, Run
from tracer.tasks import run_execute_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def pauses(monkeypatch) -> list[float]:
    """Every pause the recorder makes, instead of making it (so no test waits for a pace)."""
    made: list[float] = []
    monkeypatch.setattr(recording, "time", SimpleNamespace(sleep=made.append, monotonic=time.monotonic))
    return made


def launch(**kwargs) -> Experiment:
    return experiment_launch(**{"scenarios": ["refund-too-old"], "policies": ["starter"], **kwargs})


def test_a_launch_keeps_its_pace_and_none_leaves_it_to_the_worker():
    assert launch(step_delay_s=1.5).step_delay_s == 1.5
    assert launch(step_delay_s=0).step_delay_s == 0
    assert launch().step_delay_s is None


@pytest.mark.parametrize("bad", [-0.5, STEP_DELAY_MAX_S + 0.1, math.nan, math.inf, "fast", True])
def test_a_pace_out_of_range_or_not_a_number_is_refused_naming_the_field_and_nothing_is_written(bad):
    with pytest.raises(ValidationError) as refused:
        launch(step_delay_s=bad)
    (message,) = refused.value.message_dict["step_delay_s"]
    assert message.startswith(f"expected seconds between steps from 0 to {STEP_DELAY_MAX_S:g}")
    assert not Experiment.objects.exists() and not Run.objects.exists()


def test_the_launch_form_takes_a_pace_and_names_a_bad_one(admin_client):
    choices = {"scenarios": "refund-too-old", "policies": "starter", "model_backend": "simulated", "repeats": "1"}
    doc = page(admin_client.post(reverse("tracer:launch"), {**choices, "step_delay_s": "soon"}))
    assert f"Pace: expected seconds between steps, a number from 0 to {STEP_DELAY_MAX_S:g}" in doc.text
    doc = page(admin_client.post(reverse("tracer:launch"), {**choices, "step_delay_s": "99"}))
    assert f"Pace: expected seconds between steps, a number from 0 to {STEP_DELAY_MAX_S:g}" in doc.text
    assert not Experiment.objects.exists()

    response = admin_client.post(reverse("tracer:launch"), {**choices, "step_delay_s": "0.75"})
    experiment = Experiment.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("tracer:experiment", args=[experiment.pk])
    assert experiment.step_delay_s == 0.75
    doc = page(admin_client.get(response["Location"]))
    assert "paced: 0.75 s after each step" in doc.one(".page-head").text
    admin_client.post(reverse("tracer:launch"), {**choices, "step_delay_s": ""})
    assert Experiment.objects.order_by("-pk").first().step_delay_s is None


def test_run_experiment_takes_a_pace_and_names_a_bad_one():
    call_command("run_experiment", "--scenario", "refund-too-old", "--policy", "starter", "--pace", "0.5")
    assert Experiment.objects.get().step_delay_s == 0.5
    with pytest.raises(CommandError) as refused:
        call_command("run_experiment", "--scenario", "refund-too-old", "--policy", "starter", "--pace", "99")
    assert f"--pace: expected seconds between steps from 0 to {STEP_DELAY_MAX_S:g}" in str(refused.value)


def test_the_worker_pauses_after_each_step_at_the_experiments_pace_instead_of_its_own(settings, pauses):
    settings.RLT_STEP_DELAY_S = 30
    run = launch(step_delay_s=0.25).runs.get()
    run_execute_task(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED and run.step_count == 2
    assert pauses == [0.25, 0.25]


def test_a_pace_of_zero_overrides_a_worker_that_pauses(settings, pauses):
    settings.RLT_STEP_DELAY_S = 30
    run = launch(step_delay_s=0).runs.get()
    run_execute_task(run.pk)
    assert Run.objects.get(pk=run.pk).step_count == 2
    assert pauses == []


def test_without_a_pace_the_worker_pauses_its_own_delay(settings, pauses):
    settings.RLT_STEP_DELAY_S = 0.5
    run = launch().runs.get()
    run_execute_task(run.pk)
    assert pauses == [0.5, 0.5]


def test_sub_agents_keep_their_coordinators_pace(settings, pauses):
    settings.RLT_STEP_DELAY_S = 0
    run = launch(scenarios=["coordinator-partial"], policies=["structured"], step_delay_s=0.1).runs.get()
    run_execute_task(run.pk)
    run.refresh_from_db()
    children = list(run.children.all())
    assert children
    assert len(pauses) == run.step_count + sum(c.step_count for c in children)
    assert set(pauses) == {0.1}
