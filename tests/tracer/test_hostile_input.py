"""Hostile input never gets a 5xx: Hypothesis sends generated values to every page's query string,
form fields and path ids, as a page request and as the htmx fragment requests the pages make, to
every admin changelist's search, ordering, paging and list filters, every admin page of one row and
every admin add form, and JSON nested past any reader's depth to every JSON reader (the Import page,
OTLP JSON, the API, the admin's JSON fields). The module prints how many requests each endpoint was
sent and how it answered, by status class (``-s`` shows it).

Every URL pattern of the dashboard (and the login page) must be described in ``SURFACE``, so a new
page cannot be left out: the first test fails naming it.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.contrib import admin
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.factories import ExperimentFactory, RunFactory, guard_stop, refund_too_old_starter
from tracer import reviews
from tracer.api import api
from tracer.forms import (
    CompareForm,
    FindingsFilterForm,
    ImportForm,
    LaunchForm,
    MatrixFilterForm,
    PolicyVariantForm,
    RunFilterForm,
    RunReviewForm,
    StopFilterForm,
    ToolsFilterForm,
)
from tracer.json_input import MAX_DEPTH, too_deep
from tracer.models import BulkReview
from tracer.tokens import token_create

pytestmark = pytest.mark.django_db

# url name -> (GET params, POST fields, htmx targets the pages ask for). POST fields None: GET only.
SURFACE: dict[str, tuple[list[str], list[str] | None, list[str]]] = {
    "tracer:runs": ([*RunFilterForm.base_fields, "page"], None, ["run-rows", "run-table"]),
    "tracer:run-rows-live": (["v", "after", *RunFilterForm.base_fields], None, []),
    "tracer:run": (["at"], None, []),
    "tracer:run-steps": (["after", "before", "at"], None, ["step-poll", "step-gap-51"]),
    "tracer:step-value": ([], None, []),
    "tracer:run-value": ([], None, []),
    "tracer:compare": ([*CompareForm.base_fields, "run"], None, []),
    "tracer:compare-suggest": (["side", "a", "b"], None, []),
    "tracer:policies": (
        ["policy", "page", "cells", "archived", *MatrixFilterForm.base_fields],
        None,
        ["policy-matrix"],
    ),
    "tracer:policy-variants": ([], None, ["policy-list"]),
    "tracer:policy-create": (["base", "name", "description"], list(PolicyVariantForm.base_fields), ["policy-form"]),
    "tracer:policy-archive": ([], ["archived"], ["policy-list"]),
    "tracer:stops": ([*StopFilterForm.base_fields, "page"], None, ["stop-counts", "stop-cases"]),
    "tracer:tools": ([*ToolsFilterForm.base_fields], None, ["tool-list"]),
    "tracer:findings": ([*FindingsFilterForm.base_fields, "page"], None, ["finding-body", "finding-list"]),
    "tracer:run-review": ([], [*RunReviewForm.base_fields, "next"], ["run-review"]),
    "tracer:bulk-review-undo": ([], ["next"], []),
    "tracer:launch": ([], list(LaunchForm.base_fields), []),
    "tracer:experiment": ([], None, ["experiment-progress"]),
    "tracer:run-export": ([], None, []),
    "tracer:run-otlp": ([], None, []),
    "tracer:compare-export": ([*CompareForm.base_fields], None, []),
    "tracer:experiment-export": ([], None, []),
    "tracer:import": ([], list(ImportForm.base_fields), ["import-report"]),
    "login": (["next"], ["username", "password", "next"], []),
    "tracer:tokens": ([], None, ["token-list"]),
    "tracer:token-create": ([], ["name"], ["token-form"]),  # ApiTokenForm's one field
    "tracer:token-revoke": ([], [], ["token-list"]),
}
# Not probed here: logging out ends the session the probe runs in; the admin has its own probe below;
# the API (/api/) answers JSON, and Schemathesis fuzzes it from its OpenAPI description (test_api_fuzz.py);
# the OTLP receiver (/v1/traces) takes protobuf or JSON bodies, fuzzed in tests/tracer/intake/otlp/test_receiver.py.
NOT_PROBED = {"logout", "otlp-traces"} | {f"api:{pattern.name}" for pattern in api.urls[0] if pattern.name}

EXAMPLES_PER_PAGE = 60  # requests per URL pattern: 11 patterns, 660 requests
EXAMPLES_PER_ADMIN_MODEL = 25  # requests per model in the admin: 8 models, 200 requests
BIG = 2**70
hostile_text = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=300),  # unicode, NUL and lone controls
    st.sampled_from(["\x00", "1\x00", "abc", "-1", "0", "", " ", "1e309", "nan", "inf", "2024-13-45", "on"]),
    st.sampled_from(["//evil.example", "https://evil.example/", "javascript:alert(1)", "/stops/?x=\n1", "/\x00"]),
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
    st.sampled_from([str(BIG), str(-BIG), str(2**63), str(2**63 - 1), str(2**31), "9" * 400]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
hostile_values = st.lists(hostile_text, min_size=1, max_size=3)  # a list: the same key sent several times
path_ids = st.one_of(st.integers(min_value=0, max_value=2**80), st.sampled_from([1, 2, 3, 2**63 - 1, 2**63, BIG]))


def probe(examples: int):
    """Hypothesis' settings for a probe: ``examples`` requests, no deadline (the machine is shared)."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


ANSWERED: Counter = Counter()  # (endpoint, status class) -> requests, printed at the end of the module


@pytest.fixture(scope="module", autouse=True)
def _counts_by_endpoint():
    yield
    if ANSWERED:
        endpoints = sorted({endpoint for endpoint, _ in ANSWERED})
        print(f"\n[hostile input, {connection.vendor}] requests by endpoint and status class:")
        for endpoint in endpoints:
            shown = ", ".join(
                f"{ANSWERED[endpoint, k]} × {k}" for k in ("2xx", "3xx", "4xx", "5xx") if ANSWERED[endpoint, k]
            )
            print(f"  {endpoint}: {shown}")


def _answered(endpoint: str, response) -> None:
    ANSWERED[endpoint, f"{response.status_code // 100}xx"] += 1


def _url_names(patterns, namespace: str = "") -> set[str]:
    names = set()
    for p in patterns:
        if isinstance(p, URLResolver):
            if p.namespace == "admin":
                continue
            names |= _url_names(p.url_patterns, f"{namespace}{p.namespace}:" if p.namespace else namespace)
        elif isinstance(p, URLPattern) and p.name:
            names.add(f"{namespace}{p.name}")
    return names


def test_every_page_is_probed():
    assert _url_names(get_resolver().url_patterns) - NOT_PROBED == set(SURFACE)


@dataclass
class Recorded:
    client: Client
    ids: dict[str, list[int]]  # url name -> ids of rows that exist, for pages of one row


@pytest.fixture
def recorded(admin_client, admin_user):
    """A few rows to point the probe at: a retried refusal, a guard stop, an experiment's run."""
    experiment = ExperimentFactory()
    runs = [RunFactory(experiment=experiment).pk, refund_too_old_starter().pk, guard_stop().pk]
    alike = guard_stop(scenario="alike")
    guard_stop(scenario="alike")
    reviews.run_review_save(run=alike, verdict="expected", identical=True, user=admin_user)  # one to undo
    bulk = BulkReview.objects.get()
    ids = {
        "tracer:token-revoke": [token_create(user=admin_user, name="probe")[0].pk],
        "tracer:run": runs,
        "tracer:run-steps": runs,
        "tracer:step-value": runs,
        "tracer:run-value": runs,
        "tracer:run-review": runs,
        "tracer:bulk-review-undo": [bulk.pk],
        "tracer:experiment": [experiment.pk],
        "tracer:run-export": runs,
        "tracer:run-otlp": runs,
        "tracer:experiment-export": [experiment.pk],
    }
    return Recorded(client=admin_client, ids=ids)


def _url(name: str, data, existing: list[int]) -> str:
    if name == "tracer:policy-archive":  # a variant by name: one that exists, else any text a path holds
        names = st.one_of(st.sampled_from(["starter", "structured"]), st.text(min_size=1, max_size=60))
        return reverse(name, kwargs={"name": data.draw(names.filter(lambda t: "/" not in t), label="name")})
    slugs = st.from_regex(r"[-a-zA-Z0-9_]{1,40}", fullmatch=True)
    if name == "tracer:step-value":  # a step's value: fields the run page names, else any slug
        fields = st.one_of(
            st.sampled_from(["input", "text", "result", "attempt-1-message", "model-attempt-1-error"]), slugs
        )
        pk = data.draw(st.one_of(st.sampled_from(existing), path_ids), label="pk")
        index = data.draw(st.one_of(st.integers(1, 4), path_ids), label="index")
        return reverse(name, kwargs={"pk": pk, "index": index, "field": data.draw(fields, label="field")})
    if name == "tracer:run-value":
        names = st.one_of(st.sampled_from(["final_answer", "error", "task", "model-attempt-1-error"]), slugs)
        pk = data.draw(st.one_of(st.sampled_from(existing), path_ids), label="pk")
        return reverse(name, kwargs={"pk": pk, "name": data.draw(names, label="name")})
    try:
        return reverse(name)
    except NoReverseMatch:  # a page of one row: mostly rows that exist, else any id, huge ones included
        pk = data.draw(st.one_of(st.sampled_from(existing), path_ids), label="pk")
        return reverse(name, kwargs={"pk": pk})


@pytest.mark.parametrize("name", sorted(SURFACE))
@probe(EXAMPLES_PER_PAGE)
@given(data=st.data())
def test_hostile_input_never_gets_a_server_error(recorded, name, data):
    params, post_fields, targets = SURFACE[name]
    url = _url(name, data, recorded.ids.get(name, []))
    method = "post" if post_fields is not None and data.draw(st.booleans(), label="post") else "get"
    fields = post_fields if method == "post" else params
    chosen = data.draw(st.lists(st.sampled_from(fields), unique=True), label="fields") if fields else []
    payload = {field: data.draw(hostile_values, label=field) for field in chosen}
    headers = {}
    if data.draw(st.booleans(), label="htmx"):
        headers = {"HX-Request": "true"}
        if targets:
            headers["HX-Target"] = data.draw(st.sampled_from(targets), label="target")
    response = getattr(recorded.client, method)(url, payload, headers=headers)
    _answered(f"{method.upper()} {name}", response)
    assert response.status_code < 500, f"{method.upper()} {url} {payload} {headers} -> {response.status_code}"


# --- the admin ---------------------------------------------------------------------------------
ADMIN_MODELS = sorted(f"{m._meta.app_label}.{m._meta.model_name}" for m in admin.site._registry)


def _admin_params(model_admin) -> list[str]:
    """A changelist's own parameters and each list filter's lookups."""
    params = ["q", "o", "p", "e", "all", "_to_field", "_popup", "_changelist_filters"]
    for entry in model_admin.list_filter:
        if isinstance(entry, str):
            params += [entry, f"{entry}__exact", f"{entry}__isnull", f"{entry}__id__exact", f"{entry}__gte"]
    if model_admin.date_hierarchy:
        params += [f"{model_admin.date_hierarchy}__{part}" for part in ("year", "month", "day")]
    return params


@pytest.mark.parametrize("model", ADMIN_MODELS)
@probe(EXAMPLES_PER_ADMIN_MODEL)
@given(data=st.data())
def test_hostile_input_never_gets_a_server_error_in_the_admin(recorded, model, data):
    app_label, model_name = model.split(".")
    model_admin = admin.site._registry[apps.get_model(app_label, model_name)]
    page = data.draw(st.sampled_from(["changelist", "change", "delete", "history"]), label="page")
    if page == "changelist":
        url = reverse(f"admin:{app_label}_{model_name}_changelist")
    else:
        pk = data.draw(st.one_of(st.sampled_from(["1", "2", "abc", "-1", "%00"]), path_ids.map(str)), label="pk")
        url = reverse(f"admin:{app_label}_{model_name}_{page}", args=[pk])
    fields = data.draw(st.lists(st.sampled_from(_admin_params(model_admin)), unique=True), label="fields")
    payload = {field: data.draw(hostile_values, label=field) for field in fields}
    response = recorded.client.get(url, payload)
    _answered(f"GET /admin/{app_label}/{model_name}/ (changelist, change, delete, history)", response)
    assert response.status_code < 500, f"GET {url} {payload} -> {response.status_code}"


DATED_ADMINS = [m for m in ADMIN_MODELS if admin.site._registry[apps.get_model(*m.split("."))].date_hierarchy]


@pytest.mark.parametrize("model", DATED_ADMINS)
@pytest.mark.parametrize("part", ["year", "month", "day"])
def test_a_date_too_large_for_a_date_hierarchy_is_answered_as_a_bad_lookup_not_a_server_error(recorded, model, part):
    # Hypothesis found ?attempt_time__year=10000000000 on django-axes' logs: OverflowError in Django's
    # date hierarchy, a 500. Now Django's own answer to a bad lookup: the changelist again with ?e=1.
    app_label, model_name = model.split(".")
    field = admin.site._registry[apps.get_model(app_label, model_name)].date_hierarchy
    payload = {f"{field}__year": "2026", f"{field}__{part}": "10000000000"}
    response = recorded.client.get(reverse(f"admin:{app_label}_{model_name}_changelist"), payload)
    assert response.status_code == 302
    assert response["Location"].endswith("?e=1")


# --- bodies nested deeper than any reader should recurse, huge pages and ids -----------------------
# One bounded decoder reads every JSON body (tracer/json_input.py): a document nested deeper than
# MAX_DEPTH is a 4xx naming the limit wherever it is sent, at any depth and in any place in a document.
EXAMPLES_PER_BODY = 25


def _nested(depth: int, opens: list[bool], leaf: str) -> str:
    """``leaf`` inside ``depth`` arrays and objects, an object where ``opens`` says so (cycled)."""
    head, tail = [], []
    for level in range(depth):
        if opens[level % len(opens)]:
            head.append('{"k":')
            tail.append("}")
        else:
            head.append("[")
            tail.append("]")
    return "".join(head) + leaf + "".join(reversed(tail))


depths = st.one_of(
    st.sampled_from([MAX_DEPTH - 5, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 3000, 20000]),
    st.integers(min_value=1, max_value=5000),
)
deep_values = st.builds(
    _nested, depths, st.lists(st.booleans(), min_size=1, max_size=4), st.sampled_from(["1", '"x"', "null", "[]"])
)


def _run_document(deep: str, where: str) -> str:
    """A run document (rlt.run/1) holding ``deep`` as its labels, a step's input or a whole value."""
    if where == "whole":
        return deep
    step = '{"kind": "tool_call", "tool_name": "t", "input": ' + (deep if where == "input" else "{}") + "}"
    run = '{"scenario": "s", "policy": "p", "stop_reason": "final_answer", "labels": '
    return (
        '{"format": "rlt.run/1", "run": ' + run + (deep if where == "labels" else "{}") + '}, "steps": [' + step + "]}"
    )


@pytest.fixture
def otlp_sender(admin_user):
    return token_create(user=admin_user, name="hostile")[1]


def _otlp_json(deep: str, where: str) -> str:
    """An OTLP JSON request with ``deep`` as the body, an attribute's kvlist value or JSON text in a string."""
    if where == "whole":
        return deep
    if where == "string":
        attribute = json.dumps({"key": "input.value", "value": {"stringValue": deep}})
    else:
        attribute = '{"key": "k", "value": {"kvlistValue": {"values": [{"key": "a", "value": ' + deep + "}]}}}"
    span = json.dumps(
        {
            "traceId": "5b8efff798038103d269b633813fc60c",
            "spanId": "eee19b7ec3c1b174",
            "name": "s",
            "startTimeUnixNano": "1",
            "endTimeUnixNano": "2",
        }
    )
    span = span[:-1] + ', "attributes": [' + attribute + "]}"
    return '{"resourceSpans": [{"scopeSpans": [{"spans": [' + span + "]}]}]}"


@probe(EXAMPLES_PER_BODY)
@given(deep=deep_values, where=st.sampled_from(["whole", "labels", "input"]), lines=st.booleans())
def test_json_nested_deep_on_the_import_page_is_refused_naming_the_limit(admin_client, deep, where, lines):
    name = "runs.jsonl" if lines else "runs.json"
    upload = SimpleUploadedFile(name, _run_document(deep, where).encode(), content_type="application/json")
    response = admin_client.post(reverse("tracer:import"), {"files": [upload]})
    _answered("POST /import/", response)
    assert response.status_code == 200, response.status_code  # the page's report, as for any refused file
    if too_deep(deep):
        assert f"nested deeper than {MAX_DEPTH} levels" in response.content.decode()


@probe(EXAMPLES_PER_BODY)
@given(deep=deep_values, where=st.sampled_from(["whole", "kvlist", "string"]))
def test_json_nested_deep_on_otlp_is_a_400_naming_the_limit(client, otlp_sender, deep, where):
    body = _otlp_json(deep, where).encode()
    response = client.post(
        "/v1/traces", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {otlp_sender}"
    )
    _answered("POST /v1/traces (JSON)", response)
    assert response.status_code < 500, response.content[:300]
    if too_deep(body):
        assert response.status_code == 400
        assert f"nested deeper than {MAX_DEPTH} levels" in response.content.decode()


@probe(EXAMPLES_PER_BODY)
@given(deep=deep_values, where=st.sampled_from(["whole", "labels", "input"]), path=st.sampled_from(["imports", "runs"]))
def test_json_nested_deep_on_the_api_is_a_400_naming_the_limit(client, otlp_sender, deep, where, path):
    body = _run_document(deep, where) if path == "imports" else deep
    response = client.post(
        f"/api/{path}", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {otlp_sender}"
    )
    _answered(f"POST /api/{path}", response)
    assert response.status_code < 500, response.content[:300]
    if too_deep(body):
        assert response.status_code == 400
        assert f"nested deeper than {MAX_DEPTH} levels" in response.json()["errors"][0]["message"]


@probe(EXAMPLES_PER_BODY)
@given(deep=deep_values)
def test_json_nested_deep_in_the_admins_policy_variant_settings_is_a_form_error_naming_the_limit(admin_client, deep):
    form = {"name": "deep", "description": "", "settings": deep, "is_preset": ""}
    response = admin_client.post(reverse("admin:tracer_policyvariant_add"), form)
    _answered("POST /admin/tracer/policyvariant/add/", response)
    assert response.status_code < 500
    if too_deep(deep):
        assert response.status_code == 200  # the form again, with the error
        assert f"nested deeper than {MAX_DEPTH} levels" in response.content.decode()


@pytest.mark.parametrize("page", [str(2**63), str(2**63 - 1), str(2**64), "9" * 40, str(10**9 + 1)])
def test_a_page_number_past_any_offset_is_an_empty_page_not_a_server_error(admin_client, monkeypatch, page):
    # Past RUN_COUNT_CAP the list does not count every run, so a page number is not clamped to the last page.
    monkeypatch.setattr("tracer.reads.runs_list.RUN_COUNT_CAP", 1)
    RunFactory.create_batch(3)
    for headers in ({}, {"HX-Request": "true", "HX-Target": "run-table"}):
        response = admin_client.get(reverse("tracer:runs"), {"page": page}, headers=headers)
        _answered("GET /?page=", response)
        assert response.status_code == 200


_SUPERUSER_ASKS = SimpleNamespace(user=SimpleNamespace(is_active=True, is_superuser=True, has_perm=lambda *a: True))
ADMIN_ADD_FORMS = sorted(
    f"{m._meta.app_label}.{m._meta.model_name}"
    for m, model_admin in admin.site._registry.items()
    if model_admin.has_add_permission(_SUPERUSER_ASKS)
)


@pytest.mark.parametrize("model", ADMIN_ADD_FORMS)
@probe(EXAMPLES_PER_ADMIN_MODEL)
@given(data=st.data())
def test_hostile_values_in_every_admin_add_form_never_get_a_server_error(recorded, model, data):
    """Every field of every add form, ids of 2**63 and more for the choice fields among them."""
    app_label, model_name = model.split(".")
    model_class = apps.get_model(app_label, model_name)
    fields = [f.name for f in model_class._meta.get_fields() if f.concrete or f.many_to_many]
    chosen = data.draw(st.lists(st.sampled_from(fields), unique=True, min_size=1), label="fields")
    payload = {
        field: data.draw(st.one_of(hostile_values, path_ids.map(lambda i: [str(i)])), label=field) for field in chosen
    }
    response = recorded.client.post(reverse(f"admin:{app_label}_{model_name}_add"), payload)
    _answered(f"POST /admin/{app_label}/{model_name}/add/", response)
    assert response.status_code < 500, f"POST {model} {payload} -> {response.status_code}"


@pytest.mark.parametrize("permission_id", [2**63, 2**63 - 1, 2**64, 10**30])
def test_a_group_form_with_a_permission_id_past_64_bits_is_a_form_error(admin_client, permission_id):
    response = admin_client.post(reverse("admin:auth_group_add"), {"name": "g", "permissions": [str(permission_id)]})
    _answered("POST /admin/auth/group/add/", response)
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
