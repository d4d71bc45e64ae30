"""Structured tool errors in the dashboard: the nested-flag variant built on the policies page, run,
and compared against structured; a fatal stop's run page says no tool_result was sent."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from tests.dom import page
from tracer.models import PolicyVariant, Run

pytestmark = pytest.mark.django_db(transaction=True)


def run_agent(scenario: str, policy: str) -> Run:
    call_command("run_agent", "--scenario", scenario, "--policy", policy, stdout=StringIO())
    return Run.objects.filter(scenario=scenario, policy_name=policy).latest("pk")


def test_the_nested_flag_variant_is_built_in_the_form_and_compare_shows_where_it_did_not_retry(admin_client):
    response = admin_client.post(
        reverse("tracer:policy-create"),
        {"name": "top-level-flag", "base": "structured", "retry_flag_path": "isRetryable"},
    )
    assert response.status_code in (200, 302)
    variant = PolicyVariant.objects.get(name="top-level-flag")
    assert variant.settings["retry_flag_path"] == "isRetryable" and variant.settings["error_format"] == "structured"
    buggy, right = run_agent("lookup-flaky", "top-level-flag"), run_agent("lookup-flaky", "structured")
    assert (buggy.retry_count, right.retry_count) == (0, 2)
    doc = page(admin_client.get(reverse("tracer:compare"), {"a": buggy.pk, "b": right.pk}))
    assert doc.text.count("This is where the runs split") == 1
    left, other = doc.one(".attempt-line.is-split").select(".cell")
    assert "no retry" in left.text and "Retry · attempt 2" in other.text


def test_a_bad_retry_flag_path_is_refused_naming_the_field(admin_client):
    response = admin_client.post(
        reverse("tracer:policy-create"), {"name": "oops", "base": "structured", "retry_flag_path": "retryable"}
    )
    assert "retry_flag_path" in response.content.decode() or "Select a valid choice" in response.content.decode()
    assert not PolicyVariant.objects.filter(name="oops").exists()


def test_the_run_page_of_a_fatal_stop_says_no_tool_result_was_sent(admin_client):
    run = run_agent("fatal-credentials", "structured")
    text = page(admin_client.get(reverse("tracer:run", args=[run.pk]))).text
    assert "No tool_result was sent to the model: the fatal error stopped the run here." in text
    assert "tool_result sent to the model" not in text and "is_error" not in text


def test_the_lessons_mistakes_are_preset_rows_the_launch_form_offers_and_run_agent_runs(admin_client):
    before = PolicyVariant.objects.count()
    nested, swallowed = (
        PolicyVariant.objects.get(name="nested-flag-bug"),
        PolicyVariant.objects.get(name="swallowed-errors"),
    )
    assert nested.is_preset and nested.settings["retry_flag_path"] == "isRetryable"
    assert swallowed.is_preset and swallowed.settings["swallow_errors"] is True
    offered = page(admin_client.get(reverse("tracer:launch"))).texts("label.check")
    assert {"nested-flag-bug", "swallowed-errors"} <= set(offered)
    buggy = run_agent("lookup-flaky", "nested-flag-bug")
    assert buggy.policy == nested and buggy.retry_count == 0 and buggy.verdict == Run.Verdict.FAIL
    quiet = run_agent("lookup-timeout-swallowed", "swallowed-errors")
    step = quiet.steps.get(index=1)
    assert step.result_content == [] and not step.is_error and quiet.verdict == Run.Verdict.FAIL
    assert PolicyVariant.objects.count() == before  # the preset rows ran, no variant was made


def test_the_model_retries_preset_is_a_policy_row():
    variant = PolicyVariant.objects.get(name="model-retries")
    assert variant.is_preset and variant.settings["ask_model_to_retry"] and variant.settings["retry_on"] == "none"
