"""The API's findings: a run's, and the findings query by kind, tool and since, in the OpenAPI description."""

from __future__ import annotations

import pytest

from tests.tracer.test_api import Api, may_add_runs
from tests.tracer.test_findings_stored import REFUSED_THRICE
from tracer.tokens import token_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(django_user_model):
    return Api(token_create(user=may_add_runs(django_user_model.objects.create_user("alice")), name="agent")[1])


@pytest.fixture
def bobs_api(django_user_model):
    return Api(token_create(user=may_add_runs(django_user_model.objects.create_user("bob")), name="bob's")[1])


def sent(api) -> int:
    response = api.post("/imports", REFUSED_THRICE)
    assert response.status_code == 201, response.content
    return response.json()["items"][0]["run_id"]


def test_a_runs_findings_are_its_kinds_in_step_order_with_evidence_fix_and_cost(api):
    run_id = sent(api)
    body = api.get(f"/runs/{run_id}/findings").json()
    assert body["run"] == run_id and body["diagnosed"] and body["rule_set"]
    kinds = [(f["kind"], f["tool"], f["steps"]) for f in body["findings"]]
    assert kinds == [("retried-refusal", "process_refund", [1]), ("vague-error", "process_refund", [1])]
    retried = body["findings"][0]
    assert retried["setting"] == {"retry_on": "transient"} and retried["evidence"] == "sent to the model: 'Error'"
    assert retried["wasted_calls"] == 2 and retried["price_basis"]


def test_another_users_run_has_no_findings_to_read(api, bobs_api):
    run_id = sent(api)
    assert bobs_api.get(f"/runs/{run_id}/findings").status_code == 404
    assert bobs_api.get("/findings").json()["items"] == []


def test_the_findings_query_narrows_by_kind_tool_and_since(api):
    run_id = sent(api)
    every = api.get("/findings").json()
    assert [(f["kind"], f["run"]) for f in every["items"]] == [("retried-refusal", run_id), ("vague-error", run_id)]
    assert [f["kind"] for f in api.get("/findings", kind="vague-error").json()["items"]] == ["vague-error"]
    assert len(api.get("/findings", kind="vague-error,retried-refusal", tool="process_refund").json()["items"]) == 2
    assert api.get("/findings", since="2999-01-01").json()["items"] == []
    assert len(api.get("/findings", since="2000-01-01T00:00:00Z").json()["items"]) == 2


@pytest.mark.parametrize(
    ("params", "path", "said"),
    [
        ({"kind": "retried-refusal,bogus"}, "kind", "unknown finding kind 'bogus'; expected one of retried-refusal"),
        ({"tool": "no_such_tool"}, "tool", "no run called a tool named 'no_such_tool'; tools seen: process_refund"),
        ({"since": "last week"}, "since", "'last week' is not a date; expected YYYY-MM-DD"),
        ({"since": "2026-01-01T25:00"}, "since", "is not a date; expected YYYY-MM-DD or an ISO 8601 time"),
    ],
)
def test_an_unknown_kind_tool_or_date_is_a_400_naming_what_is_valid(api, params, path, said):
    sent(api)
    response = api.get("/findings", **params)
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["path"] == path and said in error["message"]


def test_the_openapi_description_has_both_operations_and_the_kinds(api):
    spec = api.get("/openapi.json").json()
    assert "/api/runs/{run_id}/findings" in spec["paths"] and "/api/findings" in spec["paths"]
    parameters = {p["name"]: p for p in spec["paths"]["/api/findings"]["get"]["parameters"]}
    assert set(parameters) >= {"kind", "tool", "since", "page"}
    assert "retried-refusal" in parameters["kind"]["description"]
