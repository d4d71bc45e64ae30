"""The policy variants' pages: the list with its archive buttons, the new-variant form showing its base
preset's values, and what archiving a variant hides (the launch form, the matrix's default) and keeps."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agents.policies import PRESETS
from tests.dom import page
from tests.factories import RunFactory
from tracer.experiments import experiment_launch
from tracer.models import Experiment, PolicyVariant, Run

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


def archive(client, name: str, archived: str = "1", **kwargs):
    return client.post(reverse("tracer:policy-archive", args=[name]), {"archived": archived}, **kwargs)


def variant(name: str = "patient", base: str = "structured") -> PolicyVariant:
    return PolicyVariant.objects.create(name=name, settings={**PRESETS[base].settings(), "name": name, "base": base})


def test_the_new_variant_form_shows_the_base_presets_values(admin_client):
    doc = page(admin_client.get(reverse("tracer:policy-create")))
    assert doc.one("select[name=base] option[selected]")["value"] == "structured"
    assert doc.one("input[name=max_attempts]")["value"] == "3"
    assert doc.one("input[name=consecutive_error_limit]")["value"] == "3"
    assert doc.one("select[name=error_format] option[selected]")["value"] == "structured"
    assert doc.one("select[name=stop_on_fatal] option[selected]")["value"] == "true"
    assert doc.one("input[name=name]").get("value") in (None, "")


def test_choosing_another_base_refills_the_form_and_keeps_the_name(admin_client):
    response = admin_client.get(
        reverse("tracer:policy-create"),
        {"base": "starter", "name": "mine"},
        headers={**HTMX, "HX-Target": "policy-form"},
    )
    doc = page(response)
    assert doc.elements[0]["id"] == "policy-form" and not doc.select("nav.top")  # the fragment only
    starter = PRESETS["starter"].settings()
    assert doc.one("select[name=base] option[selected]")["value"] == "starter"
    assert doc.one("input[name=max_attempts]")["value"] == str(starter["max_attempts"])
    assert doc.one("select[name=error_format] option[selected]")["value"] == starter["error_format"]
    assert doc.one("input[name=name]")["value"] == "mine"
    # an unknown base starts from the default preset rather than failing
    doc = page(admin_client.get(reverse("tracer:policy-create"), {"base": "<nope>"}))
    assert doc.one("select[name=base] option[selected]")["value"] == "structured"


def test_a_variant_made_from_the_prefilled_form_has_the_settings_shown(admin_client):
    doc = page(admin_client.get(reverse("tracer:policy-create"), {"base": "message"}))
    data = {"name": "message-5"}
    for node in doc.select("#policy-form input[name], #policy-form select[name]"):
        if node["name"] == "csrfmiddlewaretoken" or node["name"] == "name":
            continue
        if node.tag == "select":
            chosen = node.select("option[selected]")
            data[node["name"]] = chosen[0]["value"] if chosen else ""
        else:
            data[node["name"]] = node.get("value") or ""
    data["max_attempts"] = "5"
    response = admin_client.post(reverse("tracer:policy-create"), data)
    assert response.status_code == 302
    settings = PolicyVariant.objects.get(name="message-5").settings
    base = PRESETS["message"].settings()
    assert {k: settings[k] for k in base if k not in ("name", "description")} == {
        **{k: v for k, v in base.items() if k not in ("name", "description")},
        "max_attempts": 5,
    }
    # the values shown as they were are not differences from the base
    assert settings["description"] == "message with max_attempts=5"


def test_the_variants_page_lists_every_variant_with_its_settings(admin_client):
    variant("patient")
    doc = page(admin_client.get(reverse("tracer:policy-variants")))
    rows = doc.select("table.variants tbody tr")
    assert len(rows) == PolicyVariant.objects.count()
    assert "custom" in doc.one("#variant-patient").text and "Archive" in doc.one("#variant-patient").texts("button")
    assert doc.one("#variant-starter a")["href"] == reverse("tracer:policy-create") + "?base=starter"


def test_archiving_hides_a_variant_from_the_launch_form_and_keeps_its_runs(admin_client):
    variant("patient")
    RunFactory(policy_name="patient")
    response = archive(admin_client, "patient", headers={**HTMX, "HX-Target": "policy-list"})
    assert response.status_code == 200
    row = page(response).one("#variant-patient")
    assert "archived" in row.text and row.texts("button") == ["Unarchive"]
    assert PolicyVariant.objects.get(name="patient").archived_at is not None
    assert Run.objects.get(policy_name="patient").status == Run.Status.FINISHED  # untouched
    launch = page(admin_client.get(reverse("tracer:launch")))
    assert not launch.select('input[name=policies][value="patient"]')
    assert launch.select('input[name=policies][value="starter"]')
    response = admin_client.post(
        reverse("tracer:launch"),
        {"scenarios": ["refund-too-old"], "policies": ["patient"], "model_backend": "simulated", "repeats": "1"},
    )
    assert response.status_code == 200 and not Experiment.objects.exists()
    with pytest.raises(Exception) as refused:
        experiment_launch(scenarios=["refund-too-old"], policies=["patient", "starter"], model_backend="simulated")
    assert refused.value.message_dict["policies"] == [
        "the policy 'patient' is archived; unarchive it on the Policy variants page to launch it"
    ]
    assert not Experiment.objects.exists()
    # brought back: offered again
    response = archive(admin_client, "patient", "0")
    assert response.status_code == 302 and response["Location"].endswith("#variant-patient")
    assert PolicyVariant.objects.get(name="patient").archived_at is None
    assert page(admin_client.get(reverse("tracer:launch"))).select('input[name=policies][value="patient"]')


def test_the_matrix_leaves_archived_variants_out_unless_asked(admin_client):
    variant("patient")
    RunFactory(policy_name="patient")
    RunFactory(policy_name="starter", verdict=Run.Verdict.FAIL)
    archive(admin_client, "patient")
    doc = page(admin_client.get(reverse("tracer:policies")))
    assert doc.one("#policy-matrix").texts("thead th") == ["Scenario", "starter"]
    assert [t.split()[0] for t in doc.texts("table.totals tbody th")] == ["starter"]
    assert not doc.select('input[name=policy][value="patient"]')
    assert "patient" in doc.one(".archived-filter").text
    doc = page(admin_client.get(reverse("tracer:policies"), {"archived": "1"}))
    assert doc.one("#policy-matrix").texts("thead th") == ["Scenario", "patient", "starter"]
    assert doc.one(".archived-filter input")["checked"] is not None
    assert doc.one("form.columns input[name=archived]")["value"] == "1"  # the columns keep it


def test_archiving_needs_the_permission_to_create_variants_and_a_known_name(reviewer, admin_client):
    variant("patient")
    response = archive(reviewer, "patient")
    assert response.status_code == 403 and "not archive policy variants" in page(response).text
    assert PolicyVariant.objects.get(name="patient").archived_at is None
    assert reviewer.get(reverse("tracer:policy-create")).status_code == 403
    assert reverse("tracer:policy-create") not in page(reviewer.get(reverse("tracer:policies"))).hrefs
    assert not page(reviewer.get(reverse("tracer:policy-variants"))).select("td.actions")
    response = archive(admin_client, "nobody")
    assert response.status_code == 404 and "there is no policy variant named 'nobody'" in response.content.decode()
    response = archive(admin_client, "patient", "maybe")
    assert response.status_code == 400 and "expected 1 (archive) or 0 (bring back)" in response.content.decode()
    assert PolicyVariant.objects.get(name="patient").archived_at is None


def test_the_policies_page_costs_the_same_with_archived_variants_and_more_rows(admin_client):
    url = reverse("tracer:policies")
    for i in range(3):
        RunFactory(scenario=f"s{i}", policy_name="starter")

    def queries() -> int:
        admin_client.get(url)
        with CaptureQueriesContext(connection) as ctx:
            assert admin_client.get(url).status_code == 200
        return len(ctx.captured_queries)

    few = queries()
    for i in range(4):
        variant(f"v{i}")
        for j in range(5):
            RunFactory(scenario=f"s{j}", policy_name=f"v{i}")
    archive(admin_client, "v0")
    archive(admin_client, "v1")
    assert queries() == few
