"""Reads of the runs list: its filters, search and filter choices."""

import datetime

import pytest
from django.utils import timezone

from tests.factories import (
    ExperimentFactory,
    RunFactory,
    refund_too_old_starter,
    refund_too_old_structured,
)
from tracer import reviews
from tracer.models import Run
from tracer.reads import runs_list

pytestmark = pytest.mark.django_db


def test_run_list_filters_by_each_column_and_hides_sub_agents():
    starter = refund_too_old_starter()
    structured = refund_too_old_structured()
    running = RunFactory(scenario="lookup-flaky", status=Run.Status.RUNNING, stop_reason="", verdict="")
    claude = RunFactory(scenario="lookup-empty", model_backend="claude", verdict="")
    RunFactory(parent=starter, label="sub-agent")

    def ids(**filters):
        return {r.pk for r in runs_list.run_list(filters=filters)}

    assert ids() == {starter.pk, structured.pk, running.pk, claude.pk}
    assert ids(scenario="refund-too-old") == {starter.pk, structured.pk}
    assert ids(policy_name="starter") == {starter.pk}
    assert ids(model_backend="claude") == {claude.pk}
    assert ids(status="running") == {running.pk}
    assert ids(verdict="fail") == {starter.pk}
    assert ids(verdict="unjudged") == {running.pk, claude.pk}
    assert ids(stop_reason="final_answer") == {starter.pk, structured.pk, claude.pk}
    assert ids(min_retries=1) == {starter.pk}
    assert ids(min_errors=1, min_steps=2) == {starter.pk, structured.pk}
    assert ids(scenario="", policy_name=None) == ids()  # blank filters are ignored


def test_run_list_filters_by_start_date_and_experiment():
    old = RunFactory()
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - datetime.timedelta(days=10))
    exp = ExperimentFactory()
    new = RunFactory(experiment=exp)
    today = timezone.now().date()
    assert {r.pk for r in runs_list.run_list(filters={"started_from": today})} == {new.pk}
    assert {r.pk for r in runs_list.run_list(filters={"started_to": today - datetime.timedelta(days=5)})} == {old.pk}
    assert {r.pk for r in runs_list.run_list(filters={"experiment_id": exp.pk})} == {new.pk}


def test_run_list_searches_tool_inputs_and_final_answers():
    by_input = RunFactory(search_text='process_refund {"order_id": "0999"}')
    by_answer = RunFactory(final_answer="Order 0999 was refunded.")
    RunFactory(final_answer="Something else.")
    assert {r.pk for r in runs_list.run_list(filters={"q": "0999"})} == {by_input.pk, by_answer.pk}


def test_run_filter_values_lists_known_scenarios_policies_and_review_tags():
    run = refund_too_old_starter()
    RunFactory(scenario="", policy_name="")  # imported, unknown
    reviews.run_review_save(run=run, note="n", tags="zz-last, a-first")
    assert runs_list.run_filter_values() == {
        "scenarios": ["refund-too-old"],
        "policies": ["starter"],
        "tags": ["a-first", "zz-last"],
    }
