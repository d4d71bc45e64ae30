"""No run is orphaned: claims hold leases, late steps are refused, the sweep interrupts and re-runs runs
whose lease lapsed, sends lost tasks again and gives up on runs no worker takes; a launch with the
broker down writes nothing; a task that meets a transient error is retried. No worker process here
(test_recovery.py has those)."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from datetime import timedelta
from unittest import mock

import kombu.exceptions
import pytest
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.core.management import CommandError, call_command
from django.db import OperationalError, connection
from django.urls import reverse
from django.utils import timezone

from agents.events import RunEnd
from tests.dom import page
from tests.factories import final_step, ok_attempt, start_for, tool_step
from tracer import execution
from tracer.execution import LeaseHeartbeat, run_claim, run_execute, runs_sweep
from tracer.experiments import experiment_launch, run_create
from tracer.models import Experiment, Run, Step
from tracer.recording import DbRecorder, RecordingStopped, RunNotRunning, run_finish, step_record
from tracer.tasks import run_execute_task

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


@pytest.fixture
def sent_tasks():
    """The run ids whose tasks were sent, instead of sending them."""
    with mock.patch("tracer.delivery.current_app.send_task") as send_task:
        yield lambda: [c.kwargs["args"][0] for c in send_task.call_args_list]


def launched(**kwargs) -> Experiment:
    """An experiment launched as the dashboard does (tasks counted as sent, none delivered)."""
    return experiment_launch(**{"scenarios": ["refund-too-old"], "policies": ["starter"], **kwargs})


def claimed(run: Run, *, worker_name: str = "celery@gone", pid: int = 7) -> Run:
    token = run_claim(run_id=run.pk, worker_name=worker_name, worker_pid=pid)
    assert token
    run.refresh_from_db()
    return run


def lapse(run: Run, seconds: float = 1) -> None:
    """Its worker stopped renewing the lease ``seconds`` ago."""
    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=seconds))


# --- refused late steps ------------------------------------------------------------------------


def test_a_late_step_of_a_run_that_was_interrupted_is_refused_and_never_appended(starter):
    run = claimed(run_create(scenario="refund-too-old", policy=starter))
    recorder = DbRecorder(run, worker_name="celery@gone", worker_pid=7, claim_token=run.claim_token)
    recorder.run_started(start_for(run))
    recorder.step_recorded(tool_step(1, [ok_attempt(1)]))
    lapse(run)
    [interruption] = runs_sweep().interrupted
    assert interruption.run_id == run.pk

    with pytest.raises(
        RecordingStopped, match=rf"run {run.pk} already ended \(interrupted at .* UTC\); step 2 refused"
    ):
        recorder.step_recorded(tool_step(2, [ok_attempt(1)]))
    recorder.run_finished(RunEnd(stop_reason=Run.StopReason.FINAL_ANSWER, final_answer="done"))  # changes nothing
    run.refresh_from_db()
    assert run.stop_reason == Run.StopReason.INTERRUPTED and run.final_answer == ""
    assert run.step_count == run.steps.count() == 1
    assert run.finished_at is not None and not Step.objects.filter(run=run, created_at__gt=run.finished_at).exists()


def test_a_step_under_a_claim_the_run_no_longer_holds_is_refused_with_the_reason(starter):
    run = claimed(run_create(scenario="refund-too-old", policy=starter))
    with pytest.raises(RunNotRunning, match=rf"run {run.pk} is held by another claim now; step 1 refused"):
        step_record(run=run, step=tool_step(1, [ok_attempt(1)]), claim_token="not-this-claim")
    assert not run.steps.exists()


def test_a_writer_without_a_claim_records_while_the_run_has_not_ended_and_is_refused_after(starter):
    """How importers will record: no claim token, and no write after the run's end."""
    run = run_create(scenario="refund-too-old", policy=starter)
    step_record(run=run, step=tool_step(1, [ok_attempt(1)]))
    assert run_finish(run=run, end=RunEnd(stop_reason=Run.StopReason.FINAL_ANSWER, final_answer="ok"))
    with pytest.raises(RunNotRunning, match=rf"run {run.pk} already ended \(final_answer at .*\); step 2 refused"):
        step_record(run=run, step=final_step(2))
    run.refresh_from_db()
    assert run.step_count == run.steps.count() == 1


def test_a_sub_agent_of_an_interrupted_run_is_ended_with_it_and_refuses_its_late_steps(starter):
    run = claimed(run_create(scenario="coordinator-partial", policy=starter))
    recorder = DbRecorder(run, claim_token=run.claim_token)
    recorder.run_started(start_for(run))
    child = recorder.child(label="lookup order 1050")
    child.run_started(start_for(run))
    lapse(run)
    runs_sweep()
    child_run = Run.objects.get(parent=run)
    assert child_run.stop_reason == Run.StopReason.INTERRUPTED
    assert "coordinating run was interrupted" in child_run.error
    with pytest.raises(RecordingStopped, match="already ended"):
        child.step_recorded(tool_step(1, [ok_attempt(1)]))
    with pytest.raises(RecordingStopped, match="sub-agent 'another' refused"):
        recorder.child(label="another")
    assert Run.objects.filter(parent=run).count() == 1


def test_run_execute_stops_the_agent_loop_when_the_run_was_ended_elsewhere_and_does_not_end_it_again(starter):
    run = run_create(scenario="refund-too-old", policy=starter)
    real_step_record = step_record

    def interrupted_after_the_first_step(*, run, step, **rest):
        real_step_record(run=run, step=step, **rest)
        lapse(run)
        execution.run_interrupt_stale()

    with mock.patch("tracer.recording.step_record", side_effect=interrupted_after_the_first_step):
        returned = run_execute(run_id=run.pk, worker_name="celery@here")
    assert returned.stop_reason == Run.StopReason.INTERRUPTED
    assert returned.step_count == returned.steps.count() == 1
    assert "its lease lapsed" in returned.error


# --- leases: renewed by steps and by the heartbeat --------------------------------------------


def test_each_step_renews_the_lease_of_its_claim(starter, settings):
    settings.RLT_LEASE_S = 60
    run = claimed(run_create(scenario="refund-too-old", policy=starter))
    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() + timedelta(seconds=1))
    step_record(run=run, step=tool_step(1, [ok_attempt(1)]), claim_token=run.claim_token)
    run.refresh_from_db()
    assert run.lease_expires_at > timezone.now() + timedelta(seconds=55)


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_renews_the_lease_while_the_run_is_held_and_stops_when_asked(starter, settings):
    settings.RLT_LEASE_S = 60
    run = claimed(run_create(scenario="refund-too-old", policy=starter))
    lapse(run)
    heartbeat = LeaseHeartbeat(run_id=run.pk, claim_token=run.claim_token, interval_s=0.05).start()
    try:
        deadline = time.monotonic() + 10
        while Run.objects.get(pk=run.pk).lease_expires_at < timezone.now() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert Run.objects.get(pk=run.pk).lease_expires_at > timezone.now() + timedelta(seconds=50)
        assert runs_sweep().interrupted == []
    finally:
        heartbeat.stop()
    assert not heartbeat.alive and not heartbeat.lost


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_stops_by_itself_once_the_run_has_ended(starter):
    run = claimed(run_create(scenario="refund-too-old", policy=starter))
    heartbeat = LeaseHeartbeat(run_id=run.pk, claim_token=run.claim_token, interval_s=0.05).start()
    try:
        run_finish(run=run, end=RunEnd(stop_reason=Run.StopReason.FINAL_ANSWER), claim_token=run.claim_token)
        deadline = time.monotonic() + 10
        while heartbeat.alive and time.monotonic() < deadline:
            time.sleep(0.05)
        assert heartbeat.lost and not heartbeat.alive
    finally:
        heartbeat.stop()


@pytest.mark.django_db(transaction=True)
def test_a_run_stuck_in_a_call_past_its_time_limit_is_ended_crashed_by_its_heartbeat_and_its_late_step_refused(
    starter, monkeypatch
):
    monkeypatch.setattr(LeaseHeartbeat, "OVERRUN_S", 0.2)
    run = claimed(run_create(scenario="refund-too-old", policy=starter))
    step_record(run=run, step=tool_step(1, [ok_attempt(1)]), claim_token=run.claim_token)
    heartbeat = LeaseHeartbeat(run_id=run.pk, claim_token=run.claim_token, interval_s=30, time_limit_s=0.3).start()
    try:
        deadline = time.monotonic() + 10
        while heartbeat.alive and time.monotonic() < deadline:  # it wakes for the limit, not after 30 s
            time.sleep(0.05)
        assert not heartbeat.alive and heartbeat.ended_overdue
    finally:
        heartbeat.stop()
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED and run.stop_reason == Run.StopReason.CRASHED
    assert "RLT_RUN_TIME_LIMIT_S" in run.error and "watchdog" in run.error
    assert run.steps.count() == 1  # what it did before is kept
    with pytest.raises(RunNotRunning):  # the stuck call returns: its step is refused
        step_record(run=run, step=tool_step(2, [ok_attempt(1)]), claim_token=run.claim_token)


@pytest.mark.django_db(transaction=True)
def test_the_watchdog_leaves_a_run_that_ended_in_time_alone(starter, monkeypatch):
    monkeypatch.setattr(LeaseHeartbeat, "OVERRUN_S", 0.1)
    run = claimed(run_create(scenario="refund-too-old", policy=starter))
    heartbeat = LeaseHeartbeat(run_id=run.pk, claim_token=run.claim_token, interval_s=30, time_limit_s=0.2).start()
    run_finish(run=run, end=RunEnd(stop_reason=Run.StopReason.FINAL_ANSWER), claim_token=run.claim_token)
    deadline = time.monotonic() + 10
    while heartbeat.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    heartbeat.stop()
    run.refresh_from_db()
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER and not heartbeat.ended_overdue and heartbeat.lost


class HeartbeatSpy(LeaseHeartbeat):
    started: list[LeaseHeartbeat] = []

    def start(self):
        HeartbeatSpy.started.append(self)
        return super().start()


@pytest.mark.django_db(transaction=True)
def test_a_database_error_mid_run_leaves_no_heartbeat_running_and_the_run_interrupted_and_rerun(sent_tasks, settings):
    settings.RLT_LEASE_S = 0.6  # the recorder tries a lost database again for up to half of it
    experiment = launched()
    run = experiment.runs.get()
    HeartbeatSpy.started.clear()
    with (
        mock.patch("tracer.execution.LeaseHeartbeat", HeartbeatSpy),
        mock.patch("tracer.recording.step_record", side_effect=OperationalError("server closed the connection")),
    ):
        run_execute(run_id=run.pk, worker_name="celery@here")
    [heartbeat] = HeartbeatSpy.started
    assert not heartbeat.alive
    run.refresh_from_db()
    assert run.stop_reason == Run.StopReason.INTERRUPTED
    assert "lost its database connection mid-run (server closed the connection)" in run.error
    rerun = Run.objects.get(rerun_of=run)
    assert sent_tasks()[-1] == rerun.pk


@pytest.mark.django_db(transaction=True)
def test_an_error_that_escapes_the_run_still_stops_its_heartbeat(starter):
    run = run_create(scenario="refund-too-old", policy=starter)
    HeartbeatSpy.started.clear()
    with (
        mock.patch("tracer.execution.LeaseHeartbeat", HeartbeatSpy),
        mock.patch("tracer.execution._run_held", side_effect=OperationalError("the database is restarting")),
        pytest.raises(OperationalError),
    ):
        run_execute(run_id=run.pk, worker_name="celery@here")
    [heartbeat] = HeartbeatSpy.started
    assert not heartbeat.alive


@pytest.mark.django_db(transaction=True)
def test_a_step_lost_to_a_short_database_outage_is_written_once_when_it_comes_back(starter, settings):
    settings.RLT_LEASE_S = 60
    run = claimed(run_create(scenario="refund-too-old", policy=starter))
    recorder = DbRecorder(run, claim_token=run.claim_token)
    real_step_record = step_record
    calls = []

    def fails_once(**kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return real_step_record(**kwargs)

    with mock.patch("tracer.recording.step_record", side_effect=fails_once):
        recorder.step_recorded(tool_step(1, [ok_attempt(1)]))
    run.refresh_from_db()
    assert len(calls) == 2 and run.step_count == run.steps.count() == 1


# --- the sweep: interrupt and re-run ----------------------------------------------------------


def test_the_sweep_interrupts_a_run_whose_lease_lapsed_and_queues_exactly_one_linked_rerun(
    sent_tasks, django_capture_on_commit_callbacks
):
    experiment = launched(policies=["starter", "structured"])
    run, other = experiment.runs.order_by("id")
    run = claimed(run, worker_name="celery@web", pid=4321)
    step_record(run=run, step=tool_step(1, [ok_attempt(1)]), claim_token=run.claim_token)
    lapse(run, seconds=3)

    with django_capture_on_commit_callbacks(execute=True):
        report = runs_sweep()
    [interruption] = report.interrupted
    run.refresh_from_db()
    rerun = Run.objects.get(rerun_of=run)
    assert interruption.rerun_id == rerun.pk and sent_tasks() == [rerun.pk]
    assert run.stop_reason == Run.StopReason.INTERRUPTED and run.step_count == run.steps.count() == 1
    assert run.error.startswith("celery@web pid 4321 stopped before the run ended: its lease lapsed at ")
    assert (rerun.status, rerun.send_count, rerun.experiment_id) == (Run.Status.QUEUED, 1, experiment.pk)
    assert (rerun.scenario, rerun.policy_id, rerun.policy_settings, rerun.model_backend) == (
        run.scenario,
        run.policy_id,
        run.policy_settings,
        run.model_backend,
    )
    experiment.refresh_from_db()
    assert (experiment.finished_runs, experiment.total_runs) == (1, 3)
    assert Run.objects.get(pk=other.pk).status == Run.Status.QUEUED

    # Swept again: nothing more. The re-run interrupted in turn is not re-run again.
    assert runs_sweep().interrupted == []
    rerun = claimed(rerun)
    lapse(rerun)
    [second] = runs_sweep().interrupted
    assert (second.run_id, second.rerun_id) == (rerun.pk, None)
    experiment.refresh_from_db()
    assert (experiment.finished_runs, experiment.total_runs) == (2, 3)
    assert Run.objects.filter(rerun_of=rerun).count() == 0 and Run.objects.filter(rerun_of=run).count() == 1


def test_a_run_never_sent_to_the_workers_is_interrupted_but_not_rerun(starter):
    """``run_agent`` executes in its own process: if that dies, nothing asks a worker to run it again."""
    run = claimed(run_create(scenario="refund-too-old", policy=starter))
    lapse(run)
    [interruption] = runs_sweep().interrupted
    assert interruption.rerun_id is None and not Run.objects.filter(rerun_of=run).exists()


@pytest.mark.django_db(transaction=True)
def test_two_sweeps_at_once_interrupt_each_run_once_with_one_rerun(sent_tasks):
    experiment = launched(scenarios=["refund-too-old", "lookup-empty", "lookup-flaky"], policies=["starter"])
    runs = list(experiment.runs.all())
    for run in runs:
        claimed(run)
        lapse(run)
    barrier = threading.Barrier(2)
    reports = []

    def sweep():
        try:
            barrier.wait()
            reports.append(runs_sweep())
        finally:
            connection.close()

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    interrupted = sorted(i.run_id for report in reports for i in report.interrupted)
    assert len(reports) == 2 and interrupted == sorted(r.pk for r in runs)
    assert Run.objects.filter(rerun_of__isnull=False).count() == 3
    reruns = sorted(Run.objects.filter(rerun_of__isnull=False).values_list("pk", flat=True))
    assert sorted(sent_tasks()) == sorted(r.pk for r in runs) + reruns  # at launch, then each re-run once
    experiment.refresh_from_db()
    assert (experiment.finished_runs, experiment.total_runs) == (3, 6)


def test_a_redelivered_task_for_a_run_its_worker_held_in_a_process_now_gone_interrupts_and_reruns_it(sent_tasks):
    gone = subprocess.Popen(["true"])
    gone.wait()
    run = claimed(launched().runs.get(), worker_name="celery@web", pid=gone.pid)
    assert run_execute(run_id=run.pk, worker_name="celery@web") is None  # the redelivery: not queued
    run.refresh_from_db()
    assert run.stop_reason == Run.StopReason.INTERRUPTED
    assert f"celery@web pid {gone.pid} stopped before the run ended: that process is gone" in run.error
    assert Run.objects.filter(rerun_of=run).count() == 1
    # Another worker's name, or a live process: left to the lease.
    live = claimed(launched().runs.get(), worker_name="celery@web", pid=1)
    assert run_execute(run_id=live.pk, worker_name="celery@web") is None
    assert Run.objects.get(pk=live.pk).status == Run.Status.RUNNING


# --- the sweep: queued runs -------------------------------------------------------------------


def test_a_queued_run_whose_message_may_be_lost_is_sent_again_less_and_less_often(starter, settings, sent_tasks):
    settings.RLT_RESEND_AFTER_S = 30
    run = launched().runs.get()
    sent_at = run.enqueued_at
    assert runs_sweep().resent == 0  # sent a moment ago
    for count, due_after in ((1, 30), (2, 60), (3, 120), (6, 960), (9, 960)):
        Run.objects.filter(pk=run.pk).update(send_count=count, enqueued_at=sent_at)
        assert execution.runs_resend(now=sent_at + timedelta(seconds=due_after - 1)) == 0, count
        assert execution.runs_resend(now=sent_at + timedelta(seconds=due_after + 1)) == 1, count
        run.refresh_from_db()
        assert run.send_count == count + 1 and run.enqueued_at == sent_at + timedelta(seconds=due_after + 1)
    assert sent_tasks() == [run.pk] * 5


def test_a_send_that_fails_is_undone_so_the_run_is_due_again_at_the_next_sweep(settings):
    settings.RLT_RESEND_AFTER_S = 30
    run = launched().runs.get()
    later = run.enqueued_at + timedelta(seconds=31)
    refused = kombu.exceptions.OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
    with mock.patch("tracer.delivery.current_app.send_task", side_effect=refused):
        assert execution.runs_resend(now=later) == 0
    run.refresh_from_db()
    assert run.send_count == 1 and run.enqueued_at == later - timedelta(seconds=31)


def test_queued_runs_no_worker_takes_are_given_up_with_the_reason_and_the_experiment_ends(settings, starter):
    settings.RLT_QUEUED_GIVE_UP_S = 3600
    experiment = launched(policies=["starter", "structured"])
    Run.objects.filter(experiment=experiment).update(created_at=timezone.now() - timedelta(hours=2))
    report = runs_sweep()
    assert report.given_up == 2
    experiment.refresh_from_db()
    assert experiment.is_done
    for run in experiment.runs.all():
        assert run.stop_reason == Run.StopReason.INTERRUPTED
        assert run.error.startswith(
            f"no worker took this run in 1 h; is a worker running on queue '{settings.CELERY_TASK_DEFAULT_QUEUE}'?"
        )
        assert not Run.objects.filter(rerun_of=run).exists()


def test_queued_runs_are_left_to_wait_while_workers_are_getting_through_the_queue(settings, starter):
    settings.RLT_QUEUED_GIVE_UP_S = 3600
    experiment = launched(policies=["starter", "structured"])
    Run.objects.filter(experiment=experiment).update(created_at=timezone.now() - timedelta(hours=2))
    claimed(run_create(scenario="lookup-empty", policy=starter))  # a worker took a run a moment ago
    assert runs_sweep().given_up == 0
    assert experiment.runs.filter(status=Run.Status.QUEUED).count() == 2


def test_sub_agent_runs_left_open_under_an_ended_run_are_ended(starter):
    parent = run_create(scenario="coordinator-partial", policy=starter)
    child = Run.objects.create(parent=parent, scenario=parent.scenario, status=Run.Status.RUNNING)
    run_finish(run=parent, end=RunEnd(stop_reason=Run.StopReason.FINAL_ANSWER))
    assert runs_sweep().orphans_ended == 1
    assert Run.objects.get(pk=child.pk).stop_reason == Run.StopReason.INTERRUPTED


# --- launching with the broker down, and transient task failures --------------------------------


@contextlib.contextmanager
def broker(url: str):
    """This process's Celery app sends to ``url`` inside the block (read and write URLs too: Celery
    prefers a CELERY_BROKER_URL environment variable to ``broker_url``)."""
    from config.celery import app

    keys = ("broker_url", "broker_read_url", "broker_write_url", "broker_transport_options")
    saved = {key: app.conf.get(key) for key in keys}
    app.conf.update(broker_url=url, broker_read_url=url, broker_write_url=url, broker_transport_options={})
    app._pool = None
    try:
        yield
    finally:
        app.conf.update(saved)
        app._pool = None


CLOSED = "redis://:s3cret@127.0.0.1:1/0"  # nothing listens on port 1


def test_a_launch_with_the_broker_down_says_so_and_writes_nothing():
    with broker(CLOSED), pytest.raises(ValidationError) as info:
        launched()
    [message] = info.value.message_dict[NON_FIELD_ERRORS]
    assert message.startswith("the task broker (redis://:**@127.0.0.1:1/0) is not reachable: ")
    assert message.endswith("Nothing was launched; start it or check CELERY_BROKER_URL.")
    assert "s3cret" not in message
    assert ".." not in message  # the transport's own text may end in a full stop already
    assert not Experiment.objects.exists() and not Run.objects.exists()


def test_the_launch_page_and_run_experiment_show_the_broker_message(admin_client):
    with broker(CLOSED):
        response = admin_client.post(
            reverse("tracer:launch"),
            {"scenarios": ["refund-too-old"], "policies": ["starter"], "model_backend": "simulated", "repeats": "1"},
        )
        assert response.status_code == 200
        assert "the task broker (redis://:**@127.0.0.1:1/0) is not reachable" in page(response).text
        with pytest.raises(CommandError, match=r"cannot launch the experiment:\nthe task broker \(redis://:\*\*@"):
            call_command("run_experiment", "--scenario", "refund-too-old", "--policy", "starter")
    assert not Experiment.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_send_that_fails_after_the_launch_committed_leaves_the_runs_queued_for_the_sweep(caplog):
    refused = kombu.exceptions.OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
    with mock.patch("tracer.delivery.current_app.send_task", side_effect=refused):
        experiment = launched(policies=["starter", "structured"])
    assert experiment.runs.filter(status=Run.Status.QUEUED, send_count=1).count() == 2
    assert "could not send 2 run task(s) to the broker" in caplog.text
    assert "the sweep sends them again" in caplog.text


def test_a_task_that_meets_a_database_error_in_its_claim_is_retried_with_backoff_not_swallowed(starter):
    run = run_create(scenario="refund-too-old", policy=starter)
    task = run_execute_task._get_current_object()
    real_retry = type(task).retry
    countdowns = []

    def retry(self, *args, **kwargs):
        countdowns.append(kwargs["countdown"])
        return real_retry(self, *args, **kwargs)

    # Eagerly applied, Celery runs each retry at once instead of after its countdown.
    with (
        mock.patch.object(type(task), "retry", retry),
        mock.patch("tracer.execution.run_claim", side_effect=OperationalError("the database system is starting up")),
    ):
        result = run_execute_task.apply(args=[run.pk])
    assert len(countdowns) == 9  # 8 retries, then the 9th failure is the task's
    assert all(0 <= countdown <= 2 * 2**i for i, countdown in enumerate(countdowns))  # 2, 4, … 256 s, jittered
    assert result.state == "FAILURE" and isinstance(result.result, OperationalError)
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED  # still there for the sweep to send again


# --- pages ------------------------------------------------------------------------------------


def test_the_experiment_page_says_it_waits_for_a_worker_and_polls_slower_then_stops_when_the_runs_end(
    admin_client, settings
):
    experiment = launched(policies=["starter", "structured"])
    url = reverse("tracer:experiment", args=[experiment.pk])
    doc = page(admin_client.get(url, headers=HTMX))
    assert [p["hx-trigger"] for p in doc.pollers] == ["every 1s"] and "Waiting for a worker" not in doc.text

    Run.objects.filter(experiment=experiment).update(enqueued_at=timezone.now() - timedelta(minutes=2))
    doc = page(admin_client.get(url, headers=HTMX))
    assert [p["hx-trigger"] for p in doc.pollers] == ["every 5s"]
    assert "Waiting for a worker: 2 runs queued, the oldest sent 2 minutes ago." in doc.one("[role=status]").text

    settings.RLT_QUEUED_GIVE_UP_S = 60
    Run.objects.filter(experiment=experiment).update(created_at=timezone.now() - timedelta(minutes=2))
    runs_sweep()
    doc = page(admin_client.get(url, headers=HTMX))
    assert doc.pollers == [] and "Waiting for a worker" not in doc.text
    assert "2 of 2 runs finished — done" in doc.text


def test_the_run_page_links_an_interrupted_run_and_its_rerun_both_ways(admin_client, sent_tasks):
    run = claimed(launched().runs.get())
    lapse(run)
    [interruption] = runs_sweep().interrupted
    banner = page(admin_client.get(reverse("tracer:run", args=[run.pk]))).one(".banner")
    assert f"Re-run as run #{interruption.rerun_id} (queued)." in banner.text
    assert (f"run #{interruption.rerun_id}", f"/runs/{interruption.rerun_id}/") in banner.links
    assert "its lease lapsed at" in banner.text
    doc = page(admin_client.get(reverse("tracer:run", args=[interruption.rerun_id])))
    assert f"A re-run of run #{run.pk}, which was interrupted." in doc.text
    assert (f"run #{run.pk}", f"/runs/{run.pk}/") in doc.links
    experiment = page(admin_client.get(reverse("tracer:experiment", args=[run.experiment_id])))
    assert f"#{interruption.rerun_id} re-run of #{run.pk}" in experiment.texts("td")
