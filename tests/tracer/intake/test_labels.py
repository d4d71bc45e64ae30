"""A run's scenario key and policy label are checked as a policy variant's name is (agents.names) on
every way in: the step API, an uploaded file, the upload page's own fields, OTLP attributes; over-long
text is refused naming the limit, never cut; nothing is written for a refusal."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.dom import page
from tests.tracer.intake.otlp.test_receiver import Tracer, answer, importer, pb_body, post
from tests.tracer.intake.samples import document, starter_transcript
from tests.tracer.intake.test_import_pages import HTMX, upload
from tests.tracer.test_api import Api, errors_of, may_add_runs
from tracer.models import ApiToken, PolicyVariant, Run
from tracer.tokens import token_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(django_user_model):
    return Api(token_create(user=may_add_runs(django_user_model.objects.create_user("alice")), name="agent")[1])


@pytest.fixture
def sender():
    user = importer("agent-team")
    return user, *token_create(user=user, name="ci agent")


CHARS = "expected lowercase letters, digits, - and _, starting with a letter or digit"


def test_the_step_api_refuses_a_bad_policy_label_and_a_long_scenario_key_and_writes_nothing(api):
    response = api.post("/runs", {"scenario": "refund-too-old", "policy": "Bad Label!"})
    assert response.status_code == 400
    assert errors_of(response)["policy"] == f"{CHARS}, at most 40 characters; got 'Bad Label!'"
    response = api.post("/runs", {"scenario": "s" * 101})
    assert errors_of(response)["scenario"] == f"{CHARS}, at most 100 characters; got 101 characters"
    response = api.post("/runs", {"policy": "p" * 41})
    assert errors_of(response)["policy"] == f"{CHARS}, at most 40 characters; got 41 characters"
    assert not Run.objects.exists()


def test_a_run_document_with_a_script_for_a_scenario_is_refused_on_upload(admin_client):
    bad = document()
    bad["run"]["scenario"] = "<script>alert(1)</script>"
    response = admin_client.post(reverse("tracer:import"), {"files": [upload("bad.json", bad)]}, headers=HTMX)
    refused = page(response).one("tr.refused").text
    assert "run.scenario" in refused and f"{CHARS}, at most 100 characters; got '<script>alert(1)</script>'" in refused
    assert not Run.objects.exists()


def test_the_upload_pages_labels_are_checked_before_any_file_is_read(admin_client):
    files = [upload("chat.json", starter_transcript())]
    response = admin_client.post(
        reverse("tracer:import"), {"files": files, "scenario": "Refund Too Old", "policy": "x" * 41}, headers=HTMX
    )
    assert response.status_code == 400
    text = page(response).text
    assert f"{CHARS}, at most 100 characters; got 'Refund Too Old'" in text
    assert "at most 40 characters; got 41" in text
    assert not Run.objects.exists()


def test_an_otlp_trace_with_a_bad_label_is_imported_without_it_and_the_answer_says_so(client, sender):
    user, _, secret = sender
    tr = Tracer(resource={"service.name": "My Agent", "rlt.scenario": "refund-too-old", "rlt.policy": "Bad Label!"})
    spans = [tr.span("root", {"openinference.span.kind": "AGENT", "output.value": "done"})]
    response = post(client, secret, pb_body(spans))
    assert response.status_code == 200
    partial = answer(response).partial_success
    assert partial.rejected_spans == 0  # every span is taken: a warning, as OTLP's partial_success allows
    assert f"rlt.policy: not taken as the run's policy label, {CHARS}, at most 40 characters; got 'Bad Label!'" in (
        partial.error_message
    )
    run = Run.objects.get(owner=user)
    assert (run.scenario, run.policy_name) == ("refund-too-old", "")  # not the label, nor the service's name


def test_an_otlp_service_name_that_is_a_name_stands_for_the_policy_label(client, sender):
    user, _, secret = sender
    tr = Tracer(resource={"service.name": "refund-bot"})
    spans = [tr.span("root", {"openinference.span.kind": "AGENT", "output.value": "done"})]
    response = post(client, secret, pb_body(spans))
    assert not answer(response).HasField("partial_success")
    assert Run.objects.get(owner=user).policy_name == "refund-bot"


def test_an_over_long_token_name_is_refused_naming_the_limit(admin_client, admin_user):
    response = admin_client.post(reverse("tracer:token-create"), {"name": "t" * 150}, headers=HTMX)
    assert "at most 100 characters; got 150" in page(response).text
    assert not ApiToken.objects.exists()
    with pytest.raises(Exception, match="at most 100 characters; got 150"):
        token_create(user=admin_user, name="t" * 150)


def test_an_over_long_variant_name_is_refused_not_cut_and_its_input_has_no_maxlength(admin_client):
    doc = page(admin_client.get(reverse("tracer:policies")))
    assert not [i for i in doc.select("input") if "maxlength" in i.attrs]
    response = admin_client.post(reverse("tracer:policy-create"), {"name": "v" * 41, "base": "starter"}, headers=HTMX)
    assert "at most 40 characters; got 41" in page(response).one("#error-name").text
    assert not PolicyVariant.objects.filter(is_preset=False).exists()


def test_a_file_whose_name_is_over_long_is_refused_naming_the_limit_not_cut(admin_client):
    name = "r" * 196 + ".json"
    response = admin_client.post(reverse("tracer:import"), {"files": [upload(name, document())]}, headers=HTMX)
    assert "the file's name is at most 200 characters; got 201: rename it" in page(response).one("tr.refused").text
    assert not Run.objects.exists()
