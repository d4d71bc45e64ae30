"""Who may do what: recorded history is read-only in the admin, only a superuser deletes an experiment
(confirmed and logged), a reviewer browses, compares and reviews stops but changes no settings, and a
plain logged-in user only browses."""

from __future__ import annotations

import logging

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Permission
from django.urls import reverse

from tests.dom import page
from tests.factories import ExperimentFactory, RunFactory, StopReviewFactory, guard_stop, refund_too_old_starter
from tests.tracer.test_security import pages_to_check
from tracer.models import Experiment, PolicyVariant, Run, Step, StopReview

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


# --- the admin: recorded history is read-only --------------------------------------------------


def test_runs_and_steps_are_read_only_in_the_admin(admin_client):
    run = refund_too_old_starter()
    change = reverse("admin:tracer_run_change", args=[run.pk])
    doc = page(admin_client.get(change))
    assert "refund-too-old" in doc.text and "Delete" not in doc.text
    buttons = doc.texts("button") + [control.get("value", "") for control in doc.select("input[type=submit]")]
    assert not [label for label in buttons if label.startswith("Save")], buttons  # no Save button of any kind
    assert admin_client.post(change, {"scenario": "edited"}).status_code == 403
    assert admin_client.get(reverse("admin:tracer_run_add")).status_code == 403
    assert admin_client.get(reverse("admin:tracer_run_delete", args=[run.pk])).status_code == 403
    changelist = page(admin_client.get(reverse("admin:tracer_run_changelist")))
    assert not changelist.select("option[value=delete_selected]")
    run.refresh_from_db()
    assert run.scenario == "refund-too-old" and Step.objects.filter(run=run).count() == run.step_count


def test_a_stop_review_can_be_changed_in_the_admin(admin_client):
    review = StopReviewFactory(run=guard_stop(), verdict="expected")
    change = reverse("admin:tracer_stopreview_change", args=[review.pk])
    response = admin_client.post(change, {"verdict": "unhelpful_error", "note": "on second look"})
    assert response.status_code == 302
    review.refresh_from_db()
    assert review.verdict == "unhelpful_error" and review.note == "on second look"


def test_nobody_deletes_an_experiment_in_the_admin_and_a_superuser_archives_it_instead(
    admin_client, client, admin_user, django_user_model, caplog
):
    experiment = ExperimentFactory(name="old trial")
    run = refund_too_old_starter(experiment=experiment)
    steps = Step.objects.filter(run=run).count()
    changelist = reverse("admin:tracer_experiment_changelist")
    assert admin_client.get(reverse("admin:tracer_experiment_delete", args=[experiment.pk])).status_code == 403
    assert not page(admin_client.get(changelist)).select("option[value=delete_selected]")

    staff = django_user_model.objects.create_user("sam", password="a-long-test-password", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(content_type__app_label="tracer"))  # every permission
    client.force_login(staff)
    assert not page(client.get(changelist)).select("option[value=archive]")  # a superuser's action only
    client.post(changelist, {"action": "archive", "_selected_action": [experiment.pk]})
    assert Experiment.objects.get(pk=experiment.pk).archived_at is None

    runs = reverse("tracer:runs")
    assert f"#{run.pk}" in page(admin_client.get(runs)).text
    with caplog.at_level(logging.WARNING, logger="tracer.admin"):
        response = admin_client.post(changelist, {"action": "archive", "_selected_action": [experiment.pk]})
    assert response.status_code == 302
    experiment.refresh_from_db()
    assert experiment.archived_at is not None
    assert Run.objects.filter(pk=run.pk).exists() and Step.objects.filter(run=run).count() == steps  # kept
    entry = LogEntry.objects.get(action_flag=CHANGE, object_id=str(experiment.pk))
    assert entry.user == admin_user and entry.get_change_message() == "Archived."
    assert f"experiment {experiment.pk} ('old trial') archived by admin" in caplog.text

    assert f"#{run.pk}" not in page(admin_client.get(runs)).text  # out of the default list
    assert f"#{run.pk}" in page(admin_client.get(runs, {"experiment": experiment.pk})).text  # asked for by name
    assert admin_client.get(reverse("tracer:experiment", args=[experiment.pk])).status_code == 200

    admin_client.post(changelist, {"action": "unarchive", "_selected_action": [experiment.pk]})
    assert Experiment.objects.get(pk=experiment.pk).archived_at is None
    assert f"#{run.pk}" in page(admin_client.get(runs)).text


# --- roles -----------------------------------------------------------------------------------


def test_a_reviewer_browses_compares_and_reviews_stops(reviewer):
    starter = refund_too_old_starter()
    stopped = guard_stop()
    for url in pages_to_check(reviewer):
        if url == reverse("tracer:launch"):
            continue
        assert reviewer.get(url).status_code == 200, url
    response = reviewer.post(reverse("tracer:run-review", args=[stopped.pk]), {"verdict": "expected"}, headers=HTMX)
    assert response.status_code == 200 and "runReviewed" in response["HX-Trigger"]
    assert StopReview.objects.get(run=stopped).verdict == "expected"
    assert reviewer.get(reverse("tracer:compare"), {"a": starter.pk, "b": stopped.pk}).status_code == 200


def test_a_reviewer_cannot_launch_or_create_a_policy_and_is_told_why(reviewer):
    launch = reviewer.get(reverse("tracer:launch"))
    assert launch.status_code == 403
    assert "can browse and compare runs but not launch experiments" in page(launch).text
    response = reviewer.post(
        reverse("tracer:launch"),
        {"scenarios": ["refund-too-old"], "policies": ["starter"], "model_backend": "simulated", "repeats": "1"},
    )
    assert response.status_code == 403 and not Experiment.objects.exists()
    response = reviewer.post(reverse("tracer:policy-create"), {"name": "mine", "base": "structured"}, headers=HTMX)
    assert response.status_code == 403 and not PolicyVariant.objects.filter(name="mine").exists()
    assert "not create policy variants" in page(response).text


def test_a_reviewer_sees_no_control_they_cannot_use(reviewer, admin_client):
    RunFactory()
    guard_stop()
    launch = reverse("tracer:launch")
    for name in ("tracer:runs", "tracer:policies", "tracer:stops"):
        assert launch not in page(reviewer.get(reverse(name))).hrefs, name
        assert launch in page(admin_client.get(reverse(name))).hrefs, name
    assert "Create policy" not in page(reviewer.get(reverse("tracer:policies"))).texts("button")
    assert "Save review" in page(reviewer.get(reverse("tracer:stops"))).texts("button")


def test_a_plain_user_browses_but_cannot_review(plain_user):
    stopped = guard_stop()
    doc = page(plain_user.get(reverse("tracer:stops")))
    assert f"Run #{stopped.pk}" in doc.text and "Save review" not in doc.texts("button")
    assert "Reviewing runs needs the reviewer role." in doc.one(f"#stop-{stopped.pk}").text
    response = plain_user.post(reverse("tracer:run-review", args=[stopped.pk]), {"verdict": "expected"})
    assert response.status_code == 403 and not StopReview.objects.exists()


def test_a_permission_given_or_revoked_shows_on_the_next_page_whether_held_directly_or_through_a_group(
    client, django_user_model
):
    """The controls a page offers follow the user's permissions as stored now: read afresh with each
    request (``access.user_permissions_load``), never remembered from an earlier one."""
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user("lena", password="a-long-test-password")
    client.force_login(user)
    launch, runs = reverse("tracer:launch"), reverse("tracer:runs")
    assert launch not in page(client.get(runs)).hrefs
    add_experiment = Permission.objects.get(content_type__app_label="tracer", codename="add_experiment")
    user.user_permissions.add(add_experiment)
    assert launch in page(client.get(runs)).hrefs and client.get(launch).status_code == 200
    user.user_permissions.remove(add_experiment)
    assert launch not in page(client.get(runs)).hrefs and client.get(launch).status_code == 403

    launchers = Group.objects.create(name="launchers")
    launchers.permissions.add(add_experiment)
    user.groups.add(launchers)
    assert launch in page(client.get(runs)).hrefs
    launchers.permissions.remove(add_experiment)  # taken from the group: from every member at once
    assert launch not in page(client.get(runs)).hrefs
    launchers.permissions.add(add_experiment)
    user.groups.remove(launchers)
    assert launch not in page(client.get(runs)).hrefs
    user.is_active = False  # a deactivated account is logged out, whatever it held
    user.save()
    assert client.get(runs).status_code == 302


def test_a_users_permissions_cost_one_query_a_page_however_many_they_hold(client, django_user_model):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    user = django_user_model.objects.create_user("lena", password="a-long-test-password")
    client.force_login(user)
    runs = reverse("tracer:runs")
    client.get(runs)
    with CaptureQueriesContext(connection) as none_held:
        client.get(runs)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="tracer"))
    with CaptureQueriesContext(connection) as all_held:
        doc = page(client.get(runs))
    assert reverse("tracer:launch") in doc.hrefs and reverse("tracer:import") in doc.hrefs
    assert len(all_held.captured_queries) == len(none_held.captured_queries)
    assert len([q for q in all_held.captured_queries if "auth_permission" in q["sql"]]) == 1
