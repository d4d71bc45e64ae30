"""A run's failed attempts beside its failed steps, with one definition on every page and command that
counts errors: a 503 the harness retried until it worked is failed attempts and no failed step, on the
runs list, the experiment page, compare, the stops page's words, the Tools page, the API and the CLI."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents.events import failures_words
from tests.agents.test_cli import run_cli
from tests.dom import page
from tests.factories import ExperimentFactory
from tracer.execution import run_execute
from tracer.experiments import run_create
from tracer.models import PolicyVariant, Run, ToolDay
from tracer.templatetags.tracer_tags import failures

pytestmark = pytest.mark.django_db


def execute(scenario: str, policy: str) -> Run:
    return run_execute(run_id=run_create(scenario=scenario, policy=PolicyVariant.objects.get(name=policy)).pk)


@pytest.fixture
def flaky():
    """lookup-flaky under structured: the lookup fails with a 503 twice, the harness retries it, it works."""
    run = execute("lookup-flaky", "structured")
    assert (run.error_count, run.failed_attempt_count, run.retry_count) == (0, 2, 2)
    return run


def test_the_runs_list_and_the_experiment_page_show_failed_attempts_beside_failed_steps(admin_client, flaky):
    refused = execute("refund-too-old", "structured")  # one failed step, one failed attempt
    experiment = ExperimentFactory(scenarios=["lookup-flaky", "refund-too-old"], policies=["structured"])
    Run.objects.filter(pk__in=[flaky.pk, refused.pk]).update(experiment=experiment)
    listed = page(admin_client.get(reverse("tracer:runs")))
    shown = page(admin_client.get(reverse("tracer:experiment", args=[experiment.pk])))
    for doc, row in ((listed, f"#run-row-{flaky.pk}"), (shown, f"a[href='/runs/{flaky.pk}/']")):
        cells = doc.one(f"#run-row-{flaky.pk}") if row.startswith("#") else doc.one(row).parent.parent
        assert "0 (2 failed attempts)" in cells.texts("td"), cells.texts("td")
        assert cells.one(".failed-attempts")["title"].startswith("failed attempts")
    # where every failed attempt was a failed step the figure is said once
    refused_row = listed.one(f"#run-row-{refused.pk}")
    assert "1" in refused_row.texts("td") and not refused_row.select(".failed-attempts")


def test_compare_the_tools_page_and_the_api_count_the_same_failed_attempts(admin_client, flaky):
    refused = execute("refund-too-old", "structured")
    doc = page(admin_client.get(reverse("tracer:compare"), {"a": flaky.pk, "b": refused.pk}))
    rows = {tr.one("th").text: tr.texts("td") for tr in doc.select("table.diffs tbody tr")}
    assert rows["Failed steps"] == ["0", "1"] and rows["Failed attempts"] == ["2", "1"]
    tools = page(admin_client.get(reverse("tracer:tools")))
    (card,) = [c for c in tools.select("section.tool-card") if c.get("data-tool") == "lookup"]
    figures = dict(zip(card.texts("dl.figures dt"), card.texts("dl.figures dd"), strict=True))
    assert figures["Failed"].startswith("0 ") and figures["Failed attempts"] == "2"
    assert ToolDay.objects.get(tool="lookup").failed_attempts == flaky.failed_attempt_count
    # the stops page and the sub-agent lines word it the same
    assert failures(flaky) == failures_words(0, 2) == "0 failed steps, 2 failed attempts"


def test_the_cli_summary_says_failed_steps_and_failed_attempts():
    code, out, _ = run_cli("run", "--scenario", "lookup-flaky", "--policy", "structured")
    assert code == 0
    assert "tool calls: 1 (0 failed steps, 2 failed attempts)" in out.splitlines()


def test_manage_py_run_agent_prints_the_same_summary(capsys):
    from django.core.management import call_command

    call_command("run_agent", "--scenario", "refund-too-old", "--policy", "structured")
    assert "tool calls: 1 (1 failed step, 1 failed attempt)" in capsys.readouterr().out.splitlines()


def test_a_built_in_run_whose_model_repeats_a_call_marks_the_repeat():
    """The simulated model told to retry a retryable failure itself (model-retries: no harness retry)
    sends the failed lookup again: a new step, marked as a repeat, counted once on the Tools page."""
    run = execute("lookup-flaky", "model-retries")
    steps = list(run.steps.order_by("index"))
    repeats = [s for s in steps if s.repeat_of is not None]
    assert repeats and all(s.retry_count == 0 for s in steps)
    for step in repeats:
        earlier = steps[step.repeat_of - 1]
        assert (earlier.tool_name, earlier.input, earlier.is_error) == (step.tool_name, step.input, True)
    assert ToolDay.objects.get(tool="lookup", policy_name="model-retries").repeats == len(repeats)
