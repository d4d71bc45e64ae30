"""Retention: runs are removed only by the rule RLT_RETENTION_DAYS sets, in batches, with what went
logged; an experiment goes with all its runs; nothing active, nothing newer, nothing of another source."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.utils import timezone

from tests.factories import ExperimentFactory, RunFactory, StepFactory, guard_stop, refund_too_old_starter
from tracer import retention
from tracer.models import Experiment, Run, Step, StopReview
from tracer.tasks import runs_purge_task

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


def aged(run: Run, days: float) -> Run:
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - days * DAY)
    return run


def test_the_rule_reads_one_number_or_one_per_source_with_a_default():
    assert retention.retention_parse("") == {}
    assert retention.retention_parse("90") == {"*": 90}
    assert retention.retention_parse("otlp=7, api=30, 90") == {"otlp": 7, "api": 30, "*": 90}
    with pytest.raises(retention.RetentionError, match="names the source 'spans'; expected one of agent, api"):
        retention.retention_parse("spans=7")
    with pytest.raises(retention.RetentionError, match="'otlp=soon' is not a whole number of days"):
        retention.retention_parse("otlp=soon")


def test_a_rule_that_cannot_be_read_stops_the_process_at_start(settings):
    from django.apps import apps

    settings.RLT_RETENTION_DAYS = "0"
    with pytest.raises(ImproperlyConfigured, match="RLT_RETENTION_DAYS: '0' is not a whole number of days"):
        apps.get_app_config("tracer").ready()


def test_old_ended_runs_go_with_their_steps_and_reviews_and_the_rest_stays():
    old = aged(guard_stop(source=Run.Source.IMPORT), 40)
    StopReview.objects.create(run=old, verdict="expected")
    young = aged(refund_too_old_starter(source=Run.Source.IMPORT), 10)
    running = aged(RunFactory(source=Run.Source.IMPORT, status=Run.Status.RUNNING), 400)
    other_source = aged(refund_too_old_starter(source=Run.Source.OTLP), 400)
    rerun = RunFactory(source=Run.Source.IMPORT, rerun_of=old)
    report = retention.runs_purge(rules={"import": 30})
    assert not Run.objects.filter(pk=old.pk).exists() and not Step.objects.filter(run_id=old.pk).exists()
    assert not StopReview.objects.filter(run_id=old.pk).exists()
    assert set(Run.objects.values_list("pk", flat=True)) == {young.pk, running.pk, other_source.pk, rerun.pk}
    rerun.refresh_from_db()
    assert rerun.rerun_of is None  # the re-run stays, without its link
    assert report.runs_by_source == {"import": 1} and report.rows["tracer.Step"] == old.step_count


def test_an_experiment_goes_whole_once_it_is_old_and_none_of_its_runs_is_active():
    done = ExperimentFactory()
    Experiment.objects.filter(pk=done.pk).update(created_at=timezone.now() - 100 * DAY)
    for _ in range(3):
        StepFactory(run=RunFactory(experiment=done))
    busy = ExperimentFactory()
    Experiment.objects.filter(pk=busy.pk).update(created_at=timezone.now() - 100 * DAY)
    RunFactory(experiment=busy)
    RunFactory(experiment=busy, status=Run.Status.QUEUED)
    report = retention.runs_purge(rules={"*": 30})
    assert list(Experiment.objects.values_list("pk", flat=True)) == [busy.pk]
    assert Run.objects.filter(experiment=busy).count() == 2
    assert report.experiments == 1 and report.runs_by_source == {"agent": 3}


def test_a_dry_run_says_what_would_go_and_removes_nothing(capsys):
    for _ in range(3):
        aged(refund_too_old_starter(source=Run.Source.API), 50)
    aged(refund_too_old_starter(source=Run.Source.API), 5)
    steps = Step.objects.count()
    call_command("purge", "--dry-run", "--days", "api=30")
    out = capsys.readouterr().out
    assert "would remove 3 top-level runs (3 api)" in out and "dry run: nothing was removed" in out
    assert f"{Step.objects.count() * 3 // 4} step" in out
    assert Run.objects.count() == 4 and Step.objects.count() == steps
    call_command("purge", "--days", "api=30")
    assert "removed 3 top-level runs (3 api)" in capsys.readouterr().out
    assert Run.objects.count() == 1


def test_purge_without_a_rule_says_how_to_set_one(settings):
    from django.core.management.base import CommandError

    settings.RLT_RETENTION_DAYS = ""
    with pytest.raises(CommandError, match="no retention rule: set RLT_RETENTION_DAYS"):
        call_command("purge")


def test_beats_purge_logs_what_it_removed_with_counts(settings, caplog):
    settings.RLT_RETENTION_DAYS = "otlp=7"
    aged(refund_too_old_starter(source=Run.Source.OTLP), 8)
    with caplog.at_level(logging.WARNING, logger="tracer.tasks"):
        runs_purge_task()
    assert "retention (otlp: 7 days): removed 1 top-level runs (1 otlp) and 0 experiments" in caplog.text
    assert not Run.objects.exists()


def test_the_purge_is_sent_by_beat(settings):
    assert settings.CELERY_BEAT_SCHEDULE["runs-purge"]["task"] == runs_purge_task.name
