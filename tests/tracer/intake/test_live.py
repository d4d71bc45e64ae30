"""Runs that arrive step by step through the live API's writes (tracer/intake/live.py): opened,
appended batch by batch (a re-sent step harmless, a conflicting one refused), closed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tracer.execution import run_interrupt_stale
from tracer.intake import live, schema
from tracer.intake.errors import IngestError, RunEnded, StepConflict
from tracer.models import Run, Step

pytestmark = pytest.mark.django_db


def step(index=None, **fields) -> schema.StepIn:
    values = {"kind": "tool_use", "tool_name": "lookup_orders", "input": {"customer": "c-7"}} | fields
    if index is not None:
        values["index"] = index
    return schema.StepIn.model_validate(values)


def test_steps_arrive_one_batch_at_a_time_and_the_run_ends_when_closed(django_user_model):
    user = django_user_model.objects.create_user("ada")
    run = live.imported_run_open(user=user, source=Run.Source.API, run=schema.RunMeta(scenario="lookup-flaky"))
    assert run.status == Run.Status.RUNNING and run.owner == user and run.source == Run.Source.API
    rows = live.imported_steps_append(run=run, steps=[step(1), step(2, is_error=True, category="transient")])
    assert [r.index for r in rows] == [1, 2]
    live.imported_steps_append(run=run, steps=[step(kind="final_answer", tool_name="", input=None, text="Found it.")])
    closed = live.imported_run_close(run=run, end=schema.RunEndIn())
    assert closed.status == Run.Status.FINISHED and closed.stop_reason == "final_answer"
    assert closed.final_answer == "Found it." and closed.error_count == 1 and closed.step_count == 3


def test_a_step_sent_twice_is_recorded_once_and_a_conflicting_one_is_refused():
    run = live.imported_run_open(user=None, source=Run.Source.API, run=schema.RunMeta())
    live.imported_steps_append(run=run, steps=[step(1)])
    again = live.imported_steps_append(run=run, steps=[step(1), step(2)])
    assert [r.index for r in again] == [1, 2] and Step.objects.count() == 2
    with pytest.raises(StepConflict) as caught:
        live.imported_steps_append(run=run, steps=[step(2, input={"customer": "c-8"})])
    assert caught.value.errors[0]["path"] == "steps[0].index" and "next new step is 3" in str(caught.value)
    with pytest.raises(IngestError) as gap:
        live.imported_steps_append(run=run, steps=[step(5)])
    assert gap.value.errors == [
        {"path": "steps[0].index", "message": "expected 3 (steps are numbered 1, 2, 3… in order); got 5"}
    ]
    assert Run.objects.get().step_count == 2


def test_a_finished_run_refuses_more_steps_with_a_clear_error():
    run = live.imported_run_open(user=None, source=Run.Source.API, run=schema.RunMeta())
    live.imported_run_close(run=run, end=schema.RunEndIn(stop_reason="max_steps"))
    with pytest.raises(RunEnded, match=r"has already ended \(max_steps\); steps refused"):
        live.imported_steps_append(run=run, steps=[step(1)])
    assert live.imported_run_close(run=run, end=schema.RunEndIn(stop_reason="max_steps")).pk == run.pk
    with pytest.raises(RunEnded):
        live.imported_run_close(run=run, end=schema.RunEndIn(stop_reason="crashed"))


def test_a_run_executed_here_takes_no_steps_from_outside():
    run = Run.objects.create(status=Run.Status.RUNNING)
    with pytest.raises(RunEnded, match="executed here"):
        live.imported_steps_append(run=run, steps=[step(1)])


def test_the_sweep_leaves_an_open_imported_run_alone():
    run = live.imported_run_open(user=None, source=Run.Source.OTLP, run=schema.RunMeta())
    assert run_interrupt_stale(now=timezone.now() + timedelta(days=1)) == []
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING


def test_opening_the_same_external_id_twice_returns_the_open_run():
    meta = schema.RunMeta(external_id="span-trace-1")
    first = live.imported_run_open(user=None, source=Run.Source.OTLP, run=meta)
    assert live.imported_run_open(user=None, source=Run.Source.OTLP, run=meta).pk == first.pk


# --- Messages transcripts ---------------------------------------------------------------------
