"""The model judge in the tracer: chosen at launch (or ``run_agent --judge claude``), asked by the worker through
the real anthropic SDK (against the fake Messages API); its verdict and rationale stored beside the rules'
verdict, labelled "model judge (Claude)" on the run page, and a disagreement marked there and put in the
review queue. A model judge failure leaves its verdict empty with the reason: never a crash, never a fail."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from tests.dom import page
from tests.fake_messages_api import error, reply, text
from tracer.execution import run_execute
from tracer.experiments import run_create
from tracer.models import Experiment, PolicyVariant, Run

pytestmark = pytest.mark.django_db


def judged_run(judge: str = "claude", scenario: str = "refund-too-old") -> Run:
    run = run_create(scenario=scenario, policy=PolicyVariant.objects.get(name="structured"), judge=judge)
    run_execute(run_id=run.pk)
    return Run.objects.get(pk=run.pk)


def said(verdict: str, rationale: str):
    return reply(text(json.dumps({"verdict": verdict, "rationale": rationale})))


def test_a_disagreement_is_stored_marked_on_the_run_page_and_lands_in_the_review_queue(fake_api, admin_client):
    fake_api.script(said("fail", "It says the refund window is 30 days but never why 0871 is outside it."))
    run = judged_run()
    assert (run.verdict, run.model_verdict, run.judges_disagree) == ("pass", "fail", True)
    assert run.model_verdict_reason == (
        "claude-haiku-4-5: It says the refund window is 30 days but never why 0871 is outside it."
    )

    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    line = doc.one(".model-verdict")
    assert "disagree" in line.get("class")
    assert " ".join(line.text.split()) == (
        "model judge (Claude) fail disagrees with the rules (pass): for review — claude-haiku-4-5: It says the "
        "refund window is 30 days but never why 0871 is outside it."
    )

    queue = page(admin_client.get(reverse("tracer:stops")))
    assert f"/runs/{run.pk}/" in queue.one(f"#stop-{run.pk}").hrefs
    assert "disagrees with the rules (pass)" in queue.one(f"#stop-{run.pk}").text
    only = page(admin_client.get(reverse("tracer:stops"), {"stop_reason": "judges_disagree"}))
    assert [a.get("id") for a in only.select("article.stop-case")] == [f"stop-{run.pk}"]


def test_an_agreeing_model_judge_is_shown_and_the_run_stays_out_of_the_queue(fake_api, admin_client):
    fake_api.script(said("pass", "Refuses the refund: 239 days is past the 30-day window."))
    run = judged_run()
    assert (run.verdict, run.model_verdict, run.judges_disagree) == ("pass", "pass", False)
    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    assert "model judge (Claude) pass" in " ".join(doc.one(".model-verdict").text.split())
    assert page(admin_client.get(reverse("tracer:stops"))).select("article.stop-case") == []


def test_a_model_judge_failure_leaves_its_verdict_empty_with_the_reason_never_a_fail(fake_api, admin_client):
    fake_api.script(error(400))
    run = judged_run()
    assert (run.status, run.stop_reason, run.verdict) == ("finished", "final_answer", "pass")
    assert (run.model_verdict, run.judges_disagree) == ("", False)
    assert run.model_verdict_reason == "claude-haiku-4-5: no verdict: the API answered 400: invalid request"
    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    assert "model judge (Claude) no verdict" in " ".join(doc.one(".model-verdict").text.split())


def test_runs_are_judged_by_the_rules_alone_unless_the_model_judge_is_chosen(fake_api, admin_client):
    run = judged_run(judge="rules")
    assert (run.judge, run.model_verdict, run.model_verdict_reason, run.judges_disagree) == (None, None, None, None)
    assert fake_api.bodies() == []
    assert page(admin_client.get(reverse("tracer:run", args=[run.pk]))).select(".model-verdict") == []


def test_the_launch_form_and_run_agent_take_the_judge_and_name_a_bad_one(fake_api, admin_client):
    choices = {"scenarios": "refund-too-old", "policies": "starter", "model_backend": "simulated", "repeats": "1"}
    doc = page(admin_client.post(reverse("tracer:launch"), {**choices, "judge": "gpt"}))
    assert "Judge: Select a valid choice. gpt is not one of the available choices." in doc.text
    assert not Experiment.objects.exists()
    form = page(admin_client.get(reverse("tracer:launch")))
    assert "the rules and the model judge (Claude)" in form.one("select[name=judge]").text

    response = admin_client.post(reverse("tracer:launch"), {**choices, "judge": "claude"})
    assert response.status_code == 302
    assert list(Run.objects.values_list("judge", flat=True)) == ["claude"]
    admin_client.post(reverse("tracer:launch"), choices)  # not chosen: the rules alone
    assert list(Run.objects.order_by("pk").values_list("judge", flat=True)) == ["claude", None]

    fake_api.script(said("fail", "Retried a refusal three times."))
    out = StringIO()
    call_command("run_agent", "--scenario", "refund-too-old", "--policy", "starter", "--judge", "claude", stdout=out)
    newest = Run.objects.order_by("-pk").first()
    assert (newest.judge, newest.model_verdict) == ("claude", "fail")
    assert "model judge (Claude), claude-haiku-4-5: FAIL: Retried a refusal three times." in out.getvalue()
