"""The Messages API's stop_reason as the dashboard keeps and shows it: claude runs executed against the
fake API (tests/fake_messages_api.py) through the worker's path, ``run_execute``."""

import json

import pytest
from django.db.models import Sum
from django.urls import reverse

from tests.conftest import WorkerProcess, purge_test_queue, wait_until
from tests.dom import page
from tests.fake_messages_api import pause_turn, refusal, reply, tool_use, truncated_text, truncated_tool_use
from tracer.execution import run_execute
from tracer.experiments import experiment_launch, run_create
from tracer.models import Run, Step

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _key_in_settings(fake_api, settings):
    """The settings read ANTHROPIC_API_KEY when they load, before the fake API set it."""
    settings.ANTHROPIC_API_KEY = fake_api.key


def claude_run(starter) -> Run:
    run = run_create(scenario="refund-too-old", policy=starter, model_backend="claude")
    return run_execute(run_id=run.pk, worker_name="celery@here")


def test_a_cut_off_tool_use_is_stored_unexecuted_and_the_run_ends_max_tokens(fake_api, starter, admin_client):
    fake_api.script(truncated_tool_use("process_refund", said="Refunding <b>now</b>."))
    run = claude_run(starter)
    assert (run.stop_reason, run.api_stop_reason) == ("max_tokens", "max_tokens")
    assert run.final_answer == "" and run.tool_call_count == 0 and run.input_tokens > 0
    step = Step.objects.get(run=run)
    assert (step.kind, step.api_stop_reason, step.tool_name, step.attempts) == (
        "model_stop",
        "max_tokens",
        "process_refund",
        [],
    )
    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    banner = doc.one(".banner").text
    assert "Stopped: Max tokens" in banner and "API stop_reason: max_tokens" in banner
    assert "which was not executed" in banner
    shown = doc.one("#step-1").text
    assert "Model stopped" in shown and "not executed" in shown and "Refunding <b>now</b>." in shown  # escaped


def test_a_refusal_is_stored_and_shown_as_a_refusal(fake_api, starter, admin_client):
    fake_api.script(refusal("No."))
    run = claude_run(starter)
    assert (run.stop_reason, run.api_stop_reason, run.final_answer) == ("refusal", "refusal", "")
    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    assert "Stopped: Refusal" in doc.one(".banner").text
    assert "the model declined to go on" in doc.one("#step-1").text


def test_an_ordinary_claude_run_keeps_each_steps_api_stop_reason(fake_api, starter):
    run = claude_run(starter)
    assert run.stop_reason == "final_answer" and run.api_stop_reason == "end_turn"
    assert list(Step.objects.filter(run=run).values_list("kind", "api_stop_reason")) == [
        ("tool_use", "tool_use"),
        ("final_answer", "end_turn"),
    ]


def test_the_run_list_filters_by_the_new_stop_reasons(fake_api, starter, admin_client):
    fake_api.script(truncated_text(), refusal())
    cut, refused = claude_run(starter), claude_run(starter)
    answered = claude_run(starter)

    def listed(stop_reason):
        doc = page(admin_client.get(reverse("tracer:runs"), {"stop_reason": stop_reason}))
        return {href for href in doc.one("#run-rows").hrefs if href.startswith("/runs/")}

    assert listed("max_tokens") == {reverse("tracer:run", args=[cut.pk])}
    assert listed("refusal") == {reverse("tracer:run", args=[refused.pk])}
    assert reverse("tracer:run", args=[answered.pk]) in listed("final_answer")
    badges = page(admin_client.get(reverse("tracer:runs"))).texts("#run-rows .stop")
    assert {"Max tokens", "Refusal", "Final answer"} <= set(badges)


def test_the_matrix_counts_cut_off_and_refused_runs_in_columns_of_their_own(fake_api, starter, admin_client):
    fake_api.script(truncated_text(), truncated_tool_use("process_refund"), refusal())
    for _ in range(4):  # two cut off, one refused, one answered
        claude_run(starter)
    doc = page(admin_client.get(reverse("tracer:policies")))
    table = doc.one("table.totals")
    heads = table.texts("thead th")
    (row,) = table.select("tbody tr")
    cells = row.texts("td")
    assert cells[heads.index("Cut off") - 1] == "2" and cells[heads.index("Refusals") - 1] == "1"
    assert cells[heads.index("Runs") - 1] == "4"
    square = doc.one("table.matrix a.heat")["aria-label"]  # the heat map, the default, says it in words
    assert "2 cut off" in square and "1 refusal;" in square
    flags = page(admin_client.get(reverse("tracer:policies"), {"cells": "detail"})).one("table.matrix .flags").text
    assert "2 cut off" in flags and "1 refusal" in flags


def test_a_coordinators_total_counts_its_sub_agents_tokens(starter, admin_client):
    run = run_create(scenario="coordinator-partial", policy=starter)
    run = run_execute(run_id=run.pk, worker_name="celery@here")
    run.refresh_from_db()
    children = list(run.children.all())
    own = Step.objects.filter(run=run).aggregate(i=Sum("input_tokens"), o=Sum("output_tokens"))
    assert children and all(c.input_tokens > 0 for c in children)
    assert run.input_tokens == own["i"] + sum(c.input_tokens for c in children)
    assert run.output_tokens == own["o"] + sum(c.output_tokens for c in children)
    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    assert f"{run.input_tokens} in · {run.output_tokens} out" in doc.one("#run-status").text
    note = f"({sum(c.input_tokens for c in children)} in · {sum(c.output_tokens for c in children)} out)"
    assert note in doc.text


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_ends_cut_off_and_refused_runs_with_their_stop_reasons_and_continues_a_paused_turn(
    fake_api, admin_client
):
    purge_test_queue()
    worker = WorkerProcess(env=fake_api.env)
    try:
        worker.wait_ready()

        def executed_by_the_worker(*behaviours, scenario="refund-too-old") -> Run:
            fake_api.script(*behaviours)
            experiment = experiment_launch(scenarios=[scenario], policies=["structured"], model_backend="claude")
            return wait_until(
                lambda: Run.objects.filter(experiment=experiment, status=Run.Status.FINISHED).first(),
                timeout=60,
                what="the run to end",
                worker=worker,
            )

        cut = executed_by_the_worker(truncated_tool_use("process_refund"))
        assert (cut.stop_reason, cut.api_stop_reason, cut.tool_call_count) == ("max_tokens", "max_tokens", 0)
        assert "not executed" in page(admin_client.get(reverse("tracer:run", args=[cut.pk]))).one("#step-1").text

        refused = executed_by_the_worker(refusal("No."))
        assert (refused.stop_reason, refused.api_stop_reason, refused.final_answer) == ("refusal", "refusal", "")

        paused = executed_by_the_worker(pause_turn("Looking."))
        assert (paused.stop_reason, paused.api_stop_reason) == ("final_answer", "end_turn")
        assert Step.objects.get(run=paused, index=1).text == "Looking."
        assert fake_api.bodies()[-2]["messages"][-1]["role"] == "assistant"  # the continuation

        # A coordinator whose sub-agent's reply is cut off: the sub-agent ends max_tokens, the
        # coordinator's call fails saying so, and the coordinator's total counts the sub-agent's tokens.
        job = "Look up order 1042 for Ana Ruiz."
        coordinator = executed_by_the_worker(
            reply(tool_use("run_subagent", {"task": job})),
            truncated_text("Order 1042 is"),
            scenario="coordinator-partial",
        )
        (child,) = coordinator.children.all()
        assert (child.stop_reason, child.api_stop_reason) == ("max_tokens", "max_tokens")
        call = Step.objects.get(run=coordinator, index=1)
        assert call.is_error and "the model's reply was cut off" in json.dumps(call.result_content)
        own = Step.objects.filter(run=coordinator).aggregate(i=Sum("input_tokens"))["i"]
        assert coordinator.input_tokens == own + child.input_tokens > own
    finally:
        worker.stop()


def test_a_cut_off_run_exports_and_imports_with_its_stop_reasons(fake_api, starter):
    from tracer.export import document as export_document
    from tracer.intake import files

    fake_api.script(truncated_tool_use("process_refund", said="On it."))
    exported = export_document.run_export(run=claude_run(starter))
    assert exported["run"]["stop_reason"] == "max_tokens" and exported["run"]["api_stop_reason"] == "max_tokens"
    (step,) = exported["steps"]
    assert (step["kind"], step["api_stop_reason"], step["tool_name"]) == ("model_stop", "max_tokens", "process_refund")
    again = files.run_import(arrival=files.item_arrival(data=exported))
    assert (again.stop_reason, again.api_stop_reason) == ("max_tokens", "max_tokens")
    assert export_document.run_export(run=again)["steps"] == exported["steps"]
