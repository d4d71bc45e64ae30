"""The run task and experiment launch, with the real agent core and no worker (the task called directly)."""

from __future__ import annotations

from unittest import mock

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings

from agents.events import ListRecorder
from agents.policies import PRESETS
from agents.run import run_scenario
from tracer.experiments import experiment_launch, run_create
from tracer.models import Experiment, PolicyVariant, Run, Step
from tracer.tasks import run_execute_task

pytestmark = pytest.mark.django_db


def in_process(scenario: str, policy_settings: dict, seed: int) -> ListRecorder:
    recorder = ListRecorder()
    run_scenario(scenario, policy_settings, recorder=recorder, seed=seed)
    return recorder


def queued(scenario: str, policy: str, **kwargs) -> Run:
    return run_create(scenario=scenario, policy=PolicyVariant.objects.get(name=policy), **kwargs)


def test_delivering_the_same_runs_task_twice_records_its_steps_once():
    run = queued("refund-too-old", "starter")
    run_execute_task(run.pk)
    first = list(Step.objects.filter(run=run).values_list("id", "index"))
    run_execute_task(run.pk)  # a redelivery: the run is no longer queued
    run.refresh_from_db()
    assert list(Step.objects.filter(run=run).values_list("id", "index")) == first
    assert run.step_count == len(first) > 0
    assert run.status == Run.Status.FINISHED


@pytest.mark.parametrize(
    "scenario, policy",
    [
        ("refund-too-old", "starter"),
        ("refund-too-old", "structured"),
        ("lookup-empty", "starter"),
        ("currency-unsupported", "structured"),
        ("fatal-credentials", "structured"),
    ],
)
def test_a_run_executed_by_the_task_records_what_the_agent_core_reports(scenario, policy):
    run = queued(scenario, policy)
    run_execute_task(run.pk)
    run.refresh_from_db()
    expected = in_process(scenario, run.policy_settings, seed=run.pk)
    assert run.stop_reason == expected.end.stop_reason
    assert run.verdict == ("pass" if expected.end.verdict.passed else "fail")
    assert run.final_answer == (expected.end.final_answer or "")
    steps = list(run.steps.order_by("index"))
    assert [(s.index, s.tool_name or None, s.is_error, s.retry_count) for s in steps] == [
        (e.index, e.tool_name, e.is_error, e.retry_count) for e in expected.steps
    ]
    assert run.step_count == len(steps)
    assert run.retry_count == sum(e.retry_count for e in expected.steps)
    assert run.error_count == sum(e.is_error for e in expected.steps)


def test_starter_retries_a_business_refusal_and_the_retries_count_as_wasted():
    run = queued("refund-too-old", "starter")
    run_execute_task(run.pk)
    run.refresh_from_db()
    assert run.retry_count == 2 and run.wasted_retry_count == 2
    structured = queued("refund-too-old", "structured")
    run_execute_task(structured.pk)
    structured.refresh_from_db()
    assert structured.retry_count == 0 and structured.wasted_retry_count == 0


def test_the_coordinators_sub_agents_are_recorded_as_child_runs():
    run = queued("coordinator-partial", "structured")
    run_execute_task(run.pk)
    children = list(Run.objects.filter(parent=run))
    assert len(children) == 4
    assert all(c.status == Run.Status.FINISHED and c.label and c.step_count > 0 for c in children)
    assert all(c.experiment_id is None for c in children)


@override_settings(ANTHROPIC_API_KEY="")
def test_a_claude_run_without_an_api_key_ends_with_a_clear_error():
    run = queued("refund-too-old", "structured", model_backend="claude")
    run_execute_task(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED
    assert run.stop_reason == Run.StopReason.CRASHED
    assert "ANTHROPIC_API_KEY" in run.error
    assert run.step_count == 0


def test_an_exception_outside_the_agent_loop_ends_the_run_crashed_with_the_exception():
    run = queued("refund-too-old", "structured")
    with mock.patch("agents.run.run_scenario", side_effect=OSError("disk full")):
        run_execute_task(run.pk)
    run.refresh_from_db()
    assert run.stop_reason == Run.StopReason.CRASHED
    assert run.error.startswith("OSError: disk full")


def test_launching_an_experiment_queues_every_combination_and_sends_tasks_on_commit(django_capture_on_commit_callbacks):
    with mock.patch("tracer.delivery.current_app.send_task") as send_task:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            experiment = experiment_launch(
                scenarios=["refund-too-old", "lookup-empty"], policies=["starter", "structured"], repeats=2
            )
        assert send_task.call_count == 0  # nothing is sent before the transaction commits
        for callback in callbacks:
            callback()
    runs = list(experiment.runs.all())
    assert experiment.total_runs == len(runs) == 8
    assert all(r.status == Run.Status.QUEUED and r.send_count == 1 and r.enqueued_at for r in runs)
    assert {(r.scenario, r.policy_name) for r in runs} == {
        (s, p) for s in ("refund-too-old", "lookup-empty") for p in ("starter", "structured")
    }
    assert {c.args[0] for c in send_task.call_args_list} == {run_execute_task.name}
    assert sorted(c.kwargs["args"][0] for c in send_task.call_args_list) == sorted(r.pk for r in runs)


def test_a_bad_launch_names_each_field_and_writes_nothing():
    with pytest.raises(ValidationError) as info:
        experiment_launch(scenarios=["refund-too-old", "refund-to-old"], policies=[], model_backend="gpt", repeats=0)
    errors = info.value.message_dict
    assert "unknown scenario 'refund-to-old'; expected one of: " in errors["scenarios"][0]
    assert "refund-too-old" in errors["scenarios"][0]
    assert errors["policies"][0].startswith("choose at least one policy")
    assert "unknown model backend 'gpt'" in errors["model_backend"][0]
    assert errors["repeats"] == ["expected a whole number from 1 to 50, got 0"]
    assert not Experiment.objects.exists() and not Run.objects.exists()


@override_settings(ANTHROPIC_API_KEY="")
def test_launching_on_claude_without_an_api_key_says_what_to_set():
    with pytest.raises(ValidationError) as info:
        experiment_launch(scenarios=["refund-too-old"], policies=["structured"], model_backend="claude")
    assert "ANTHROPIC_API_KEY" in info.value.message_dict["model_backend"][0]


def test_replay_is_refused_for_experiments_with_the_way_to_replay_one_run():
    with pytest.raises(ValidationError) as info:
        experiment_launch(scenarios=["refund-too-old"], policies=["structured"], model_backend="replay")
    assert "run_agent --model replay --cassette" in info.value.message_dict["model_backend"][0]


def test_a_custom_policy_variant_can_be_launched_like_a_preset():
    PolicyVariant.objects.create(
        name="patient", settings={**PRESETS["structured"].settings(), "name": "patient", "max_attempts": 5}
    )
    experiment = experiment_launch(scenarios=["lookup-flaky-exhausted"], policies=["patient"])
    run = experiment.runs.get()
    run_execute_task(run.pk)
    run.refresh_from_db()
    assert run.policy_settings["max_attempts"] == 5
    assert run.status == Run.Status.FINISHED


def test_a_run_the_agent_core_cannot_start_ends_crashed_with_its_reason():
    run = queued("refund-too-old", "structured")
    Run.objects.filter(pk=run.pk).update(scenario="refund-withdrawn")  # a scenario since removed from the core
    run_execute_task(run.pk)
    run.refresh_from_db()
    assert run.stop_reason == Run.StopReason.CRASHED
    assert run.error.startswith("the run could not start: ")
    assert "refund-withdrawn" in run.error


def test_a_run_past_its_time_limit_is_stopped_after_the_current_step(settings):
    settings.RLT_RUN_TIME_LIMIT_S = 1
    settings.RLT_STEP_DELAY_S = 1.1  # the first step ends past the limit
    run = queued("stuck-model", "starter")
    run_execute_task(run.pk)
    run.refresh_from_db()
    assert run.stop_reason == Run.StopReason.CRASHED
    assert "the run went on for more than 1 s (RLT_RUN_TIME_LIMIT_S) and was stopped" in run.error
    assert run.step_count == run.steps.count() == 1


def test_a_sub_agent_that_runs_out_of_time_ends_its_coordinator_with_the_same_plain_reason(settings):
    settings.RLT_RUN_TIME_LIMIT_S = 1
    settings.RLT_STEP_DELAY_S = 0.6  # the sub-agent's steps take the run past its limit
    run = queued("coordinator-partial", "structured")
    run_execute_task(run.pk)
    run.refresh_from_db()
    reason = "the run went on for more than 1 s (RLT_RUN_TIME_LIMIT_S) and was stopped"
    assert run.stop_reason == Run.StopReason.CRASHED and run.error == reason
    children = list(run.children.all())
    assert children and all(child.status == Run.Status.FINISHED for child in children)
    assert any(child.error == reason for child in children)


def test_a_run_with_no_time_left_does_not_ask_the_model(settings):
    settings.RLT_RUN_TIME_LIMIT_S = 0
    run = queued("stuck-model", "starter")
    run_execute_task(run.pk)
    run.refresh_from_db()
    assert run.stop_reason == Run.StopReason.CRASHED and run.step_count == 0
    assert run.error.startswith("the run's time limit (0 s, RLT_RUN_TIME_LIMIT_S) was reached before the model")
