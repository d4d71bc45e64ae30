"""Recorded runs as run documents (tracer/export/document.py): export then import gives the same steps
and fields, a run executed here imports as a run from outside, many runs in the order given."""

from __future__ import annotations

import json

import pytest

from tests.tracer.intake.samples import document, imported
from tracer.export import document as export_document
from tracer.models import Run

pytestmark = pytest.mark.django_db


# --- export -----------------------------------------------------------------------------------


def test_export_then_import_gives_the_same_steps_and_fields():
    first = imported(document(verdict="pass", verdict_reason="explained", labels={"team": "payments", "v": 2}))
    exported = export_document.run_export(run=first)
    again = imported(json.loads(export_document.document_dumps(exported)))
    second = export_document.run_export(run=again)
    assert second["steps"] == exported["steps"]
    assert second["run"] == exported["run"]
    assert again.pk != first.pk


def test_a_run_executed_here_exports_with_its_policy_settings_and_imports_as_a_run_from_outside(settings):
    from agents.events import RunEnd, RunStart
    from agents.policies import PRESETS
    from tests.factories import failed_attempt, final_step, tool_step
    from tracer import recording

    run = Run.objects.create(scenario="refund-too-old", policy_name="starter", status=Run.Status.QUEUED)
    recording.run_start(
        run=run,
        start=RunStart("refund-too-old", "starter", PRESETS["starter"].settings(), "simulated", "sim", "Refund 0871."),
    )
    recording.step_record(run=run, step=tool_step(1, [failed_attempt(n) for n in (1, 2, 3)]))
    recording.step_record(run=run, step=final_step(2))
    recording.run_finish(run=run, end=RunEnd("final_answer", final_answer="Done."))
    exported = export_document.run_export(run=Run.objects.get(pk=run.pk))
    assert exported["run"]["policy_settings"]["error_format"] == "bare" and exported["run"]["source"] == "agent"
    copy_run = imported(exported)
    assert copy_run.source == Run.Source.IMPORT and copy_run.model_backend == Run.ModelBackend.IMPORTED
    assert (copy_run.retry_count, copy_run.wasted_retry_count) == (2, 2)
    assert export_document.run_export(run=copy_run)["steps"] == exported["steps"]


def test_many_runs_export_in_the_order_given_with_their_own_steps():
    runs = [imported(document(external_id=f"t{k}", task=f"task {k}")) for k in range(3)]
    documents = list(export_document.runs_export(runs=runs[::-1]))
    assert [d["run"]["task"] for d in documents] == ["task 2", "task 1", "task 0"]
    assert all(len(d["steps"]) == 2 for d in documents)
