"""The run page's findings panel, above the timeline, with each finding's steps marked."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.dom import page
from tracer.execution import run_execute
from tracer.experiments import run_create
from tracer.models import PolicyVariant

pytestmark = pytest.mark.django_db


def execute(scenario: str, policy: str):
    return run_execute(run_id=run_create(scenario=scenario, policy=PolicyVariant.objects.get(name=policy)).pk)


def test_the_run_page_shows_its_findings_above_the_timeline_with_the_fix_and_the_lesson(admin_client):
    run = execute("refund-too-old", "starter")
    response = admin_client.get(reverse("tracer:run", args=[run.pk]))
    html = response.content.decode()
    assert html.index('id="run-findings"') < html.index('id="step-list"')
    doc = page(response)
    assert doc.texts(".finding .finding-head .badge") == ["retried-refusal", "vague-error"]
    panel = doc.one("#run-findings").text
    assert "retry_on: transient" in panel and "retries a permission error ten times" in panel
    assert doc.texts("#step-1 .step-head a.badge.finding") == ["retried-refusal", "vague-error"]


def test_a_clean_run_says_none_were_found_and_its_rule_set(admin_client):
    run = execute("refund-too-old", "structured")
    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    assert "None of the lessons' mistakes found" in doc.one("#run-findings").text
    assert not doc.select(".step.has-finding")


def test_the_runs_list_shows_each_runs_findings_and_filters_by_kind(admin_client):
    starter = execute("refund-too-old", "starter")
    structured = execute("refund-too-old", "structured")
    doc = page(admin_client.get(reverse("tracer:runs")))
    assert doc.texts(f"#run-row-{starter.pk} .findings-cell .badge") == ["retried-refusal", "vague-error"]
    assert doc.texts(f"#run-row-{structured.pk} .findings-cell .badge") == []
    shown = page(admin_client.get(reverse("tracer:runs"), {"finding": "retried-refusal"}))
    assert [tr["id"] for tr in shown.select("#run-rows tr[id]")] == [f"run-row-{starter.pk}"]


def test_compare_shows_the_findings_one_run_has_and_the_other_has_not_first(admin_client):
    starter = execute("refund-too-old", "starter")
    structured = execute("refund-too-old", "structured")
    doc = page(admin_client.get(reverse("tracer:compare"), {"a": starter.pk, "b": structured.pk}))
    rows = doc.select("#compare-findings tbody tr")
    assert [(r["data-kind"], "differs" in r.classes) for r in rows] == [
        ("retried-refusal", True),
        ("vague-error", True),
    ]
    assert "the harness retried it 2 times" in rows[0].texts("td")[0] and rows[0].texts("td")[1] == "not found"
    same = page(
        admin_client.get(reverse("tracer:compare"), {"a": structured.pk, "b": execute("lookup-empty", "structured").pk})
    )
    assert "Neither run has any of the lessons' mistakes" in same.one("#compare-findings").text
