"""Management commands, as an engineer types them."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import CommandError, call_command
from django.test import RequestFactory

from agents.events import ListRecorder
from agents.policies import PRESETS
from agents.run import run_scenario
from agents.scenarios import scenario_names
from agents.trace import format_end, format_step
from tracer.models import Experiment, Run

pytestmark = pytest.mark.django_db


def call(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


REFUND = ("run_agent", "--scenario", "refund-too-old", "--policy", "structured")  # then the model options


def test_run_agent_prints_the_trace_like_the_agents_command_line_and_the_runs_page():
    out = call("run_agent", "--scenario", "currency-unsupported", "--policy", "structured")
    run = Run.objects.get()
    expected = ListRecorder()
    run_scenario("currency-unsupported", PRESETS["structured"].settings(), recorder=expected, seed=run.pk)
    for step in expected.steps:
        assert format_step(step) in out
    assert format_end(expected.end) in out
    assert f"/runs/{run.pk}/" in out
    assert run.status == Run.Status.FINISHED and run.step_count == len(expected.steps)
    assert "ok: 100.0 USD = 92.0 EUR" in out


def test_run_agent_names_each_bad_option_and_what_is_expected():
    with pytest.raises(CommandError) as info:
        call("run_agent", "--scenario", "refund-to-old", "--policy", "careful", "--model", "gpt")
    message = str(info.value)
    assert "--scenario: unknown scenario 'refund-to-old'; expected one of:" in message
    assert "--policy: unknown policy 'careful'; expected one of: " in message
    assert "--model: unknown model backend 'gpt'" in message
    assert not Run.objects.exists()


def test_run_agent_replay_without_a_cassette_says_so():
    with pytest.raises(CommandError, match="--cassette: the replay backend needs a cassette"):
        call(*REFUND, "--model", "replay")


def test_run_agent_records_a_cassette_that_replays_to_the_same_trace(tmp_path):
    cassette = tmp_path / "refund.json"
    recorded = call(*REFUND, "--record", str(cassette))
    assert f"recorded to {cassette}" in recorded
    replayed = call(*REFUND, "--model", "replay", "--cassette", str(cassette))

    def trace(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith(("step ", "final answer:", "verdict:"))]

    assert trace(recorded) == trace(replayed) != []
    assert list(Run.objects.values_list("model_backend", flat=True).order_by("id")) == ["simulated", "replay"]


def test_run_agent_refuses_claude_without_an_api_key_before_recording_anything(settings):
    settings.ANTHROPIC_API_KEY = ""
    with pytest.raises(
        CommandError, match="--model: the claude backend calls the Anthropic API: set ANTHROPIC_API_KEY"
    ):
        call(*REFUND, "--model", "claude")
    assert not Run.objects.exists()


@pytest.mark.parametrize("after", [0, 1], ids=["before-its-first-step", "after-a-step"])
def test_run_agent_fails_for_a_claude_run_that_crashed(fake_api, settings, after):
    """A crashed run is a failure for a script or CI (exit code 1), whenever it crashed; a run the API
    overloaded after one tool call crashed after that step."""
    from tests.fake_messages_api import error

    settings.ANTHROPIC_API_KEY = fake_api.key
    fake_api.script(*([None] * after), error(401))  # None: the automatic model answers that request
    with pytest.raises(CommandError, match="crashed " + ("after 1 step:" if after else "before its first step")):
        call(*REFUND, "--model", "claude")
    run = Run.objects.get()
    assert run.stop_reason == "crashed" and run.step_count == after and "401" in run.error


def test_run_experiment_expands_all_and_queues_the_runs():
    out = call("run_experiment", "--scenario", "all", "--policy", "starter,structured", "--repeats", "2")
    experiment = Experiment.objects.get()
    assert experiment.total_runs == len(scenario_names()) * 2 * 2 == experiment.runs.count()
    assert f"experiment {experiment.pk}: {experiment.total_runs} runs queued" in out


def test_run_experiment_names_the_bad_options():
    with pytest.raises(CommandError) as info:
        call("run_experiment", "--scenario", "nope", "--policy", "structured", "--repeats", "0")
    message = str(info.value)
    assert "--scenario: unknown scenario 'nope'" in message
    assert "--repeats: expected a whole number from 1 to 50, got 0" in message
    assert not Experiment.objects.exists()


def test_ensure_login_prints_a_working_password_once():
    first = call("ensure_login")
    password = re.search(r"password (\S+)", first).group(1)
    user = authenticate(RequestFactory().post("/login/"), username="admin", password=password)  # as the login page
    assert user is not None and user.is_superuser
    second = call("ensure_login")
    assert password not in second and "changepassword admin" in second
    assert get_user_model().objects.count() == 1


def _claimed(scenario: str, *, worker_name: str, pid: int, lapsed: bool = True) -> Run:
    from datetime import timedelta

    from django.utils import timezone

    from tracer.execution import run_claim
    from tracer.experiments import run_create
    from tracer.models import PolicyVariant

    run = run_create(scenario=scenario, policy=PolicyVariant.objects.get(name="starter"))
    run_claim(run_id=run.pk, worker_name=worker_name, worker_pid=pid)
    if lapsed:  # its worker stopped renewing the lease a second ago
        Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    return run


def test_interrupt_stale_finishes_runs_whose_lease_lapsed_and_never_one_whose_worker_renews_it():
    gone = _claimed("lookup-flaky", worker_name="celery@gone", pid=7)
    live = _claimed("lookup-flaky", worker_name="celery@gone", pid=8, lapsed=False)
    out = call("interrupt_stale", "--worker", "celery@gone")
    gone.refresh_from_db()
    assert "1 run(s) marked interrupted" in out
    assert f"run {gone.pk}: celery@gone pid 7 stopped before the run ended: its lease lapsed at " in out
    assert gone.stop_reason == Run.StopReason.INTERRUPTED
    assert Run.objects.get(pk=live.pk).status == Run.Status.RUNNING
    assert "1 run(s) marked interrupted" not in call("interrupt_stale")  # without options: the same rule


def test_interrupt_stale_for_one_worker_leaves_a_worker_whose_name_starts_the_same_alone():
    gone = _claimed("lookup-flaky", worker_name="w@web", pid=7)
    other = _claimed("lookup-flaky", worker_name="w@web2", pid=8)
    out = call("interrupt_stale", "--worker", "w@web")
    assert "1 run(s) marked interrupted" in out
    assert Run.objects.get(pk=gone.pk).stop_reason == Run.StopReason.INTERRUPTED
    assert Run.objects.get(pk=other.pk).status == Run.Status.RUNNING


def test_interrupt_stale_older_than_only_narrows_the_runs_whose_lease_lapsed():
    from datetime import timedelta

    from django.utils import timezone

    recent = _claimed("lookup-flaky", worker_name="w@web", pid=7)
    old_live = _claimed("lookup-flaky", worker_name="w@web", pid=8, lapsed=False)
    Run.objects.filter(pk=old_live.pk).update(started_at=timezone.now() - timedelta(hours=3))
    assert "0 run(s) marked interrupted" in call("interrupt_stale", "--older-than", "60")
    assert Run.objects.get(pk=recent.pk).status == Run.Status.RUNNING  # lapsed, but started a moment ago
    assert Run.objects.get(pk=old_live.pk).status == Run.Status.RUNNING  # old, but its worker renews it


def test_sweep_runs_sweeps_once_and_says_what_it_did():
    gone = _claimed("lookup-flaky", worker_name="w@web", pid=7)
    out = call("sweep_runs")
    assert "1 run(s) interrupted (lease lapsed)" in out
    assert Run.objects.get(pk=gone.pk).stop_reason == Run.StopReason.INTERRUPTED


def test_run_agent_names_a_cassette_it_cannot_read(tmp_path):
    missing = tmp_path / "missing.json"
    with pytest.raises(CommandError, match=f"--cassette: cassette {missing} does not exist; expected a file written"):
        call(*REFUND, "--model", "replay", "--cassette", str(missing))
    assert not Run.objects.exists()
