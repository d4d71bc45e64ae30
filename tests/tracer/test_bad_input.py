"""Bad input gets a clear answer, never a 500: a review's ``next`` that is not a path on this site, ids
beyond 64 bits, a policy name taken by a simultaneous request."""

from __future__ import annotations

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.urls import reverse

from tests.dom import page
from tests.factories import RunFactory, guard_stop
from tracer.experiments import policy_variant_create
from tracer.models import PolicyVariant

pytestmark = pytest.mark.django_db

BIG = str(2**70)
ID_RANGE = "a whole number from 1 to 9223372036854775807"
HTMX = {"HX-Request": "true"}


# --- redirects -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "next_url", ["abc", "tracer:runs", "//evil.example/stops/", "https://evil.example/", "javascript:alert(1)", ""]
)
def test_a_review_without_javascript_goes_back_only_to_a_path_on_this_site(admin_client, next_url):
    run = guard_stop()
    response = admin_client.post(reverse("tracer:run-review", args=[run.pk]), {"verdict": "expected", "next": next_url})
    assert response.status_code == 302 and response["Location"] == reverse("tracer:run", args=[run.pk])


def test_a_review_goes_back_to_the_stop_queue_page_it_came_from(admin_client):
    run = guard_stop()
    back = "/stops/?state=reviewed&page=2"
    response = admin_client.post(reverse("tracer:run-review", args=[run.pk]), {"verdict": "expected", "next": back})
    assert response["Location"] == back


# --- ids beyond 64 bits ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "url,params,message",
    [
        ("tracer:compare", {"a": BIG, "b": "1"}, f"Run A: expected the id of a run, {ID_RANGE}"),
        ("tracer:compare", {"a": "1", "b": "-5"}, f"Run B: expected the id of a run, {ID_RANGE}"),
        ("tracer:compare", {"run": ["1", BIG]}, f"Run B: expected the id of a run, {ID_RANGE}"),
        ("tracer:runs", {"experiment": BIG}, f"Experiment: expected the id of an experiment, {ID_RANGE}"),
        ("tracer:policies", {"experiment": BIG}, f"Experiment: expected the id of an experiment, {ID_RANGE}"),
    ],
)
def test_an_id_beyond_64_bits_is_named_with_its_range_not_a_server_error(admin_client, url, params, message):
    RunFactory()
    response = admin_client.get(reverse(url), params)
    assert response.status_code == 200
    assert message in response.content.decode()


@pytest.mark.parametrize("target", ["run-rows", "run-table"])
def test_an_id_beyond_64_bits_in_an_htmx_request_is_no_server_error(admin_client, target):
    RunFactory()
    response = admin_client.get(reverse("tracer:runs"), {"experiment": BIG}, headers={**HTMX, "HX-Target": target})
    assert response.status_code == 200


def test_a_page_of_a_row_beyond_64_bits_is_not_found(admin_client):
    for name in ("tracer:run", "tracer:run-steps", "tracer:experiment"):
        assert admin_client.get(reverse(name, args=[2**70]), headers=HTMX).status_code == 404


# --- a lost race for a policy name -----------------------------------------------------------


def test_a_policy_name_taken_between_the_check_and_the_insert_is_a_form_error(admin_client):
    """Another request creates the same name after this one checked it: the insert fails on the unique
    name, and the user gets the form's 'already exists' message, not a 500."""

    won = []

    def the_other_request_wins_after_the_check(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if not won and 'FROM "tracer_policyvariant"' in sql and "LIMIT 1" in sql:
            won.append(True)
            PolicyVariant.objects.create(name="patient", settings={})
        return result

    with connection.execute_wrapper(the_other_request_wins_after_the_check):
        response = admin_client.post(
            reverse("tracer:policy-create"), {"name": "patient", "base": "structured"}, headers=HTMX
        )
    assert response.status_code == 200
    assert "a policy named 'patient' already exists; choose another name" in page(response).one("#error-name").text
    assert PolicyVariant.objects.filter(name="patient").count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_simultaneous_creations_of_one_name_give_one_policy_and_one_form_error():
    """Two threads, each with its own connection, both pass the name check before either inserts."""
    both_checked = threading.Barrier(2)
    outcomes: list[object] = []

    def pause_after_the_name_check(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if not context["connection"].rlt_checked and 'FROM "tracer_policyvariant"' in sql and "LIMIT 1" in sql:
            context["connection"].rlt_checked = True
            both_checked.wait(timeout=20)
        return result

    def create() -> None:
        connection.rlt_checked = False
        try:
            with connection.execute_wrapper(pause_after_the_name_check):
                outcomes.append(policy_variant_create(name="twin", settings={"base": "structured"}))
        except ValidationError as exc:
            outcomes.append(exc)
        except Exception as exc:  # an IntegrityError here is the bug this test is about
            outcomes.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=create) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    created = [o for o in outcomes if isinstance(o, PolicyVariant)]
    refused = [o for o in outcomes if isinstance(o, ValidationError)]
    assert len(created) == 1 and len(refused) == 1, outcomes
    assert refused[0].message_dict == {"name": ["a policy named 'twin' already exists; choose another name"]}
    assert PolicyVariant.objects.filter(name="twin").count() == 1


# --- input no view can use -------------------------------------------------------------------


@pytest.mark.parametrize(
    "url,params,named",
    [
        ("/", {"q": "refund\x00"}, "q"),
        ("/admin/tracer/run/", {"status__exact": "\x00"}, "status__exact"),  # a 500 on PostgreSQL before
        ("/admin/tracer/run/", {"policy_name__exact": "a\x00b"}, "policy_name__exact"),
    ],
)
def test_a_nul_character_in_any_parameter_is_a_400_naming_it(admin_client, url, params, named):
    RunFactory()
    response = admin_client.get(url, params)
    assert response.status_code == 400
    assert f"The value of “{named}” contains a NUL character, which no field accepts." in response.content.decode()


def test_a_nul_character_in_a_form_value_is_a_400_naming_it(admin_client):
    run = guard_stop()
    response = admin_client.post(reverse("tracer:run-review", args=[run.pk]), {"verdict": "expected", "note": "\x00"})
    assert response.status_code == 400 and "“note”" in response.content.decode()


def test_an_empty_to_field_on_an_admin_page_is_a_400(admin_client):
    run = RunFactory()
    for url in (reverse("admin:tracer_run_change", args=[run.pk]), reverse("admin:auth_group_changelist")):
        response = admin_client.get(url, {"_to_field": ""})
        assert response.status_code == 400 and "“_to_field” is empty" in response.content.decode()


def test_a_number_past_64_bits_in_an_admin_filter_is_a_400_naming_it(admin_client):
    for params in ({"groups": "10000000000000000000"}, {"id__exact": "-99999999999999999999"}, {"p": "9" * 30}):
        response = admin_client.get(reverse("admin:auth_user_changelist"), params)
        assert response.status_code == 400, params
        [name] = params
        assert f"The value of “{name}” is a number past 9,223,372,036,854,775,807" in response.content.decode()
    # the largest id is still a filter, and the text search takes any digits
    assert admin_client.get(reverse("admin:auth_user_changelist"), {"groups": str(2**63 - 1)}).status_code == 200
    assert admin_client.get(reverse("admin:auth_user_changelist"), {"q": "1" * 30}).status_code == 200
