"""The live step API (/api/): tokens, ownership, the live run lifecycle through the recorder, bad
input as 400 with paths, size limits, JSON Lines batches and the published OpenAPI description."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from tracer.models import Run, Step
from tracer.tokens import token_create, token_revoke

pytestmark = pytest.mark.django_db

JSON = "application/json"


def may_add_runs(user):
    """The import permission, which writing through the API needs (as the upload page does)."""
    user.user_permissions.add(Permission.objects.get(codename="add_run", content_type__app_label="tracer"))
    return user


@pytest.fixture
def alice(django_user_model):
    return may_add_runs(django_user_model.objects.create_user("alice"))


@pytest.fixture
def bob(django_user_model):
    return may_add_runs(django_user_model.objects.create_user("bob"))


class Api:
    """A client that speaks to /api/ with one token (or none)."""

    def __init__(self, secret: str | None) -> None:
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {secret}"} if secret else {}

    def get(self, path: str, **params):
        return self.client.get(f"/api{path}", params, headers=self.headers)

    def post(self, path: str, body=None, *, raw: bytes | str | None = None, content_type: str = JSON):
        data = raw if raw is not None else json.dumps(body)
        return self.client.post(f"/api{path}", data, content_type=content_type, headers=self.headers)


@pytest.fixture
def api(alice):
    return Api(token_create(user=alice, name="test agent")[1])


@pytest.fixture
def bobs_api(bob):
    return Api(token_create(user=bob, name="bob's agent")[1])


def tool_use(tool="lookup_order", *, ok=True, category=None, retryable=None, content="found", **extra):
    attempt = {"number": 1, "ok": ok, "content": content if ok else None}
    if not ok:
        attempt |= {"category": category or "business", "retryable": retryable, "message": content}
    return (
        {"kind": "tool_use", "tool_name": tool, "tool_use_id": "toolu_1", "input": {"order_id": "0871"}}
        | {"attempts": [attempt]}
        | extra
    )


def final(text="Order 0871 cannot be refunded: it is 239 days old."):
    return {"kind": "final_answer", "text": text, "input_tokens": 20, "output_tokens": 8}


def document(*steps, external_id="", **run):
    return {
        "format": "rlt.run/1",
        "run": {"external_id": external_id, "scenario": "refund-too-old"} | run,
        "steps": list(steps),
    }


def errors_of(response) -> dict[str, str]:
    return {e["path"]: e["message"] for e in response.json()["errors"]}


# --- access ------------------------------------------------------------------------------------


def test_a_call_without_a_token_is_401_and_says_how_to_get_one():
    response = Api(None).post("/runs", {"scenario": "refund-too-old"})
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert "Authorization" in errors_of(response) and "API tokens page" in errors_of(response)["Authorization"]
    assert not Run.objects.exists()


def test_a_revoked_token_is_401(alice):
    token, secret = token_create(user=alice, name="old")
    client = Api(secret)
    assert client.get("/runs").status_code == 200
    token_revoke(user=alice, token_id=token.pk)
    assert client.get("/runs").status_code == 401
    assert client.post("/runs", {}).status_code == 401


def test_an_unknown_token_is_401():
    assert Api("rlt_not-a-token-anyone-made").get("/runs").status_code == 401


def test_a_token_whose_user_may_not_add_runs_reads_but_cannot_write(api, django_user_model):
    reader = django_user_model.objects.create_user("reader")
    client = Api(token_create(user=reader, name="granted before")[1])
    assert client.get("/runs").status_code == 200
    for response in (client.post("/runs", {}), client.post("/imports", document(final()))):
        assert response.status_code == 403
        assert "import permission" in errors_of(response)["Authorization"]
    run_id = api.post("/runs", {}).json()["id"]
    assert client.post(f"/runs/{run_id}/steps", {"steps": [final()]}).status_code == 403
    assert not Run.objects.filter(owner=reader).exists()


def test_another_users_run_is_404_everywhere(api, bobs_api):
    run_id = api.post("/runs", {"scenario": "refund-too-old"}).json()["id"]
    for response in (
        bobs_api.get(f"/runs/{run_id}"),
        bobs_api.post(f"/runs/{run_id}/steps", {"steps": [final()]}),
        bobs_api.post(f"/runs/{run_id}/finish", {}),
    ):
        assert response.status_code == 404
        assert "run_id" in errors_of(response)
    assert bobs_api.get("/runs").json()["count"] == 0
    assert Run.objects.get(pk=run_id).step_count == 0


def test_a_run_executed_here_is_not_the_apis(api):
    run = Run.objects.create(scenario="refund-too-old", status=Run.Status.RUNNING)
    assert api.get(f"/runs/{run.pk}").status_code == 404
    assert api.post(f"/runs/{run.pk}/steps", {"steps": [final()]}).status_code == 404


# --- the live run ------------------------------------------------------------------------------


def test_a_run_summary_gives_the_api_stop_reason_and_model_retries(api):
    run_id = api.post("/runs", {"scenario": "refund-too-old", "policy": "structured"}).json()["id"]
    retried = [
        {"number": 1, "status": 529, "error": "was overloaded (529)"},
        {"number": 2, "status": 200, "wait_s": 0.5},
    ]
    cut = {"kind": "model_stop", "text": "The value st", "api_stop_reason": "max_tokens"}
    appended = api.post(f"/runs/{run_id}/steps", {"steps": [tool_use(model_attempts=retried), cut]})
    assert appended.status_code == 200, appended.content
    assert appended.json()["run"]["model_retry_count"] == 1
    body = api.post(f"/runs/{run_id}/finish", {"stop_reason": "max_tokens", "api_stop_reason": "max_tokens"}).json()
    assert (body["stop_reason"], body["api_stop_reason"], body["model_retry_count"]) == ("max_tokens", "max_tokens", 1)
    (listed,) = api.get("/runs").json()["items"]
    assert (listed["api_stop_reason"], listed["model_retry_count"]) == ("max_tokens", 1)


def test_open_append_finish_records_through_the_recorder(api, alice):
    opened = api.post(
        "/runs",
        {
            "scenario": "refund-too-old",
            "policy": "structured",
            "model": "claude-haiku-4-5",
            "task": "Refund 0871",
            "labels": {"team": "support"},
            "external_id": "trace-1",
        },
    )
    assert opened.status_code == 201, opened.content
    run_id = opened.json()["id"]
    assert opened.json()["status"] == "running" and opened.json()["url"] == f"/runs/{run_id}/"
    run = Run.objects.get(pk=run_id)
    assert (run.source, run.owner, run.status, run.policy_name) == (
        Run.Source.API,
        alice,
        Run.Status.RUNNING,
        "structured",
    )

    first = api.post(
        f"/runs/{run_id}/steps",
        {"steps": [tool_use(ok=False, category="business", retryable=False, content="order is 239 days old")]},
    )
    assert first.status_code == 200, first.content
    assert first.json()["indexes"] == [1]
    second = api.post(f"/runs/{run_id}/steps", {"steps": [tool_use("lookup_policy"), final()]})
    assert second.json()["indexes"] == [2, 3]

    finished = api.post(f"/runs/{run_id}/finish", {"verdict": "pass"})
    assert finished.status_code == 200, finished.content
    body = finished.json()
    assert body["status"] == "finished" and body["stop_reason"] == "final_answer" and body["verdict"] == "pass"

    run.refresh_from_db()
    steps = list(Step.objects.filter(run=run).order_by("index"))
    assert [s.index for s in steps] == [1, 2, 3]
    assert run.step_count == len(steps) == 3
    assert run.tool_call_count == 2 and run.error_count == 1
    assert run.input_tokens == sum(s.input_tokens for s in steps)
    assert run.final_answer.startswith("Order 0871 cannot be refunded")
    assert steps[0].category == "business" and steps[0].retryable is False and steps[0].is_error

    exported = api.get(f"/runs/{run_id}").json()
    assert exported["format"] == "rlt.run/1"
    assert [s["kind"] for s in exported["steps"]] == ["tool_use", "tool_use", "final_answer"]
    assert exported["run"]["labels"] == {"team": "support"}


def test_appending_to_a_finished_run_is_refused_with_409_and_nothing_is_written(api):
    run_id = api.post("/runs", {}).json()["id"]
    api.post(f"/runs/{run_id}/steps", {"steps": [final()]})
    assert api.post(f"/runs/{run_id}/finish", {}).status_code == 200
    late = api.post(f"/runs/{run_id}/steps", {"steps": [tool_use()]})
    assert late.status_code == 409
    assert "already ended" in " ".join(errors_of(late).values())
    assert Run.objects.get(pk=run_id).step_count == 1 == Step.objects.filter(run_id=run_id).count()


def test_a_run_whose_sender_went_quiet_is_ended_interrupted_by_the_sweep_and_a_late_step_refused(api, settings):
    from datetime import timedelta

    from django.utils import timezone

    from tests.factories import RunFactory
    from tracer.execution import runs_sweep

    settings.RLT_OUTSIDE_IDLE_S = 3600
    quiet = api.post("/runs", {}).json()["id"]
    busy = api.post("/runs", {}).json()["id"]
    now = timezone.now()
    Run.objects.filter(pk__in=[quiet, busy]).update(created_at=now - timedelta(hours=3))
    api.post(f"/runs/{busy}/steps", {"steps": [tool_use()]})  # a step now: the sender is still there
    executed_here = RunFactory(status=Run.Status.RUNNING, lease_expires_at=now + timedelta(minutes=5))
    Run.objects.filter(pk=executed_here.pk).update(created_at=now - timedelta(hours=3))

    assert runs_sweep(now=now).idle_outside_ended == 1
    ended = Run.objects.get(pk=quiet)
    assert (ended.status, ended.stop_reason) == (Run.Status.FINISHED, Run.StopReason.INTERRUPTED)
    assert "no step or span of this run arrived for 1 h (RLT_OUTSIDE_IDLE_S)" in ended.error
    assert Run.objects.get(pk=busy).status == Run.Status.RUNNING
    assert Run.objects.get(pk=executed_here.pk).status == Run.Status.RUNNING  # its worker's lease rules it
    late = api.post(f"/runs/{quiet}/steps", {"steps": [tool_use()]})
    assert late.status_code == 409 and "already ended (interrupted" in " ".join(errors_of(late).values())

    assert runs_sweep(now=now + timedelta(hours=1, minutes=1)).idle_outside_ended == 1  # quiet since its step
    assert Run.objects.get(pk=busy).stop_reason == Run.StopReason.INTERRUPTED
    assert runs_sweep(now=now + timedelta(hours=2)).idle_outside_ended == 0  # each ended once


def test_finishing_twice_the_same_way_is_harmless(api):
    run_id = api.post("/runs", {}).json()["id"]
    assert api.post(f"/runs/{run_id}/finish", {"stop_reason": "max_steps"}).status_code == 200
    assert api.post(f"/runs/{run_id}/finish", {"stop_reason": "max_steps"}).status_code == 200
    assert api.post(f"/runs/{run_id}/finish", {"stop_reason": "crashed"}).status_code == 409


def test_a_resent_batch_of_steps_is_harmless_and_other_content_is_a_conflict(api):
    run_id = api.post("/runs", {}).json()["id"]
    batch = {"steps": [tool_use() | {"index": 1}]}
    assert api.post(f"/runs/{run_id}/steps", batch).json()["indexes"] == [1]
    assert api.post(f"/runs/{run_id}/steps", batch).json()["indexes"] == [1]
    clash = api.post(f"/runs/{run_id}/steps", {"steps": [tool_use("other_tool") | {"index": 1}]})
    assert clash.status_code == 409 and "steps[0].index" in errors_of(clash)
    assert Run.objects.get(pk=run_id).step_count == 1


def test_the_list_holds_own_runs_filtered_and_paged(api, bobs_api):
    for scenario, policy in [("a", "starter"), ("a", "structured"), ("b", "starter")]:
        api.post("/runs", {"scenario": scenario, "policy": policy})
    bobs_api.post("/runs", {"scenario": "a", "policy": "starter"})
    everything = api.get("/runs").json()
    assert everything["count"] == 3 and everything["pages"] == 1 and everything["page"] == 1
    assert [r["scenario"] for r in api.get("/runs", scenario="a").json()["items"]] == ["a", "a"]
    assert api.get("/runs", scenario="a", policy="starter").json()["count"] == 1
    assert api.get("/runs", page=2).json()["items"] == []


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "path", "expected"),
    [
        ({"steps": [{"kind": "thinking"}]}, "steps[0].kind", "tool_use, final_answer"),
        ({"steps": [{"tool_name": "x"}]}, "steps[0].kind", "required"),
        ({"steps": [{"kind": "final_answer", "input_tokens": "many"}]}, "steps[0].input_tokens", "whole number"),
        ({"steps": [{"kind": "tool_use"}]}, "steps[0].tool_name", "required"),
        ({"steps": []}, "steps", "at least 1"),
        ({"steps": [{"kind": "final_answer", "txt": "hi"}]}, "steps[0].txt", "unknown field"),
        ({"step": [final()]}, "steps", "required"),
        ({"steps": [{"kind": "final_answer", "text": "a\u0000b"}]}, "steps[0].text", "NUL"),
        (
            {"steps": [tool_use() | {"attempts": [{"number": 1, "ok": "yes"}]}]},
            "steps[0].attempts[0].ok",
            "true or false",
        ),
    ],
    ids=[
        "unknown-kind",
        "missing-kind",
        "wrong-type",
        "tool-without-name",
        "empty",
        "misspelt",
        "no-steps",
        "nul",
        "attempt-ok",
    ],
)
def test_a_bad_step_is_a_400_naming_its_path_and_what_was_expected(api, body, path, expected):
    run_id = api.post("/runs", {}).json()["id"]
    response = api.post(f"/runs/{run_id}/steps", body)
    assert response.status_code == 400, response.content
    found = errors_of(response)
    assert path in found, found
    assert expected in found[path]
    assert Run.objects.get(pk=run_id).step_count == 0


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"steps": [', "not valid JSON"),
        ('{"steps": [{"kind": "final_answer", "latency_ms": NaN}]}', "not valid JSON"),
        ("", "JSON object is required"),
        ("[1, 2]", "object"),
        (b"\xff\xfe", "UTF-8"),
    ],
    ids=["truncated", "nan", "empty", "not-an-object", "not-utf8"],
)
def test_a_body_that_is_not_a_json_object_is_a_400_that_says_so(api, raw, expected):
    run_id = api.post("/runs", {}).json()["id"]
    response = api.post(f"/runs/{run_id}/steps", raw=raw)
    assert response.status_code == 400, response.content
    assert expected in " ".join(errors_of(response).values())


def test_a_form_body_is_refused_as_not_json(api):
    response = api.client.post("/api/runs", {"scenario": "x"}, headers=api.headers)  # multipart, as a form posts
    assert response.status_code == 415 and "JSON" in errors_of(response)["Content-Type"]
    assert not Run.objects.exists()


@pytest.mark.parametrize("path", ["/runs", "/imports"])
def test_a_url_encoded_form_body_is_415_not_a_json_error(api, path):
    response = api.post(path, raw="scenario=refund-too-old", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415, response.content
    assert "application/json" in errors_of(response)["Content-Type"]


def test_finishing_with_a_verdict_reason_but_no_verdict_is_a_400_and_the_run_stays_open(api):
    run_id = api.post("/runs", {"scenario": "refund-too-old"}).json()["id"]
    response = api.post(f"/runs/{run_id}/finish", {"verdict_reason": "explained the 30 days"})
    assert response.status_code == 400 and "needs a verdict" in errors_of(response)["verdict_reason"]
    assert api.get(f"/runs/{run_id}").json()["run"]["status"] == "running"


def test_a_bad_id_or_page_is_a_400_not_a_database_error(api):
    assert api.get(f"/runs/{2**70}").status_code == 400
    assert "run_id" in errors_of(api.get(f"/runs/{2**70}"))
    assert "page" in errors_of(api.get("/runs", page=0))
    nul = api.get("/runs", scenario="a\x00b")  # refused before any view, as JSON (an HTML page before)
    assert nul.status_code == 400 and "NUL" in errors_of(nul)["scenario"]


def test_any_iso_offset_is_stored_as_the_same_moment_in_utc(api):
    # PostgreSQL takes offsets up to ±15:59 only; Schemathesis found a -20:49 answering 500 there
    response = api.post("/runs", {"started_at": "2025-01-31T09:30:00-20:49"})
    assert response.status_code == 201, response.content
    assert response.json()["started_at"] == "2025-02-01T06:19:00Z"
    too_early = api.post("/runs", {"started_at": "0001-01-01T00:00:00+05:00"})
    assert too_early.status_code == 400 and "started_at" in errors_of(too_early)


def test_an_unknown_format_version_is_a_400_naming_format(api):
    response = api.post("/imports", document(final()) | {"format": "rlt.run/9"})
    assert response.status_code == 400
    assert "unknown format version" in errors_of(response)["format"]


def test_a_tool_result_answering_no_tool_use_is_a_400_naming_it(api):
    transcript = {
        "model": "claude-haiku-4-5",
        "messages": [
            {"role": "user", "content": "Refund order 0871"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup_order", "input": {}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "found"}]},
        ],
    }
    run_id = api.post("/runs", {}).json()["id"]
    response = api.post(f"/runs/{run_id}/finish", {"transcript": transcript})
    # A live run's transcript is stored as sent; a transcript imported as a run is checked.
    assert response.status_code == 200
    imported = api.post("/imports", transcript)
    assert imported.status_code == 400
    assert any("matches no tool_use" in m for m in errors_of(imported).values())


def test_a_body_over_the_limit_is_413_naming_the_limit(api, settings):
    settings.RLT_API_MAX_BYTES = 1000
    response = api.post("/imports", document(final("x" * 2000)))
    assert response.status_code == 413
    message = " ".join(errors_of(response).values())
    assert "1000 bytes" in message and "RLT_API_MAX_BYTES" in message
    assert not Run.objects.exists()


# --- whole runs: documents, lists, JSON Lines -----------------------------------------------------


def test_one_document_is_imported_as_an_api_run(api, alice):
    response = api.post("/imports", document(tool_use(), final(), external_id="doc-1"))
    assert response.status_code == 201, response.content
    item = response.json()["items"][0]
    run = Run.objects.get(pk=item["run_id"])
    assert (run.source, run.owner, run.status, run.step_count) == (Run.Source.API, alice, Run.Status.FINISHED, 2)
    again = api.post("/imports", document(tool_use(), final(), external_id="doc-1"))
    assert again.status_code == 200 and again.json()["items"][0]["action"] == "unchanged"
    assert Run.objects.count() == 1


def test_a_json_lines_batch_imports_the_good_lines_and_reports_the_bad_ones_whole(api):
    lines = [
        json.dumps(document(tool_use(), final(), external_id="l1")),
        json.dumps(document(tool_use(), {"kind": "final_answer", "input_tokens": -1}, external_id="l2")),
        "{not json",
        "",
        json.dumps(document(final(), external_id="l5")),
    ]
    response = api.post("/imports", raw="\n".join(lines), content_type="application/x-ndjson")
    assert response.status_code == 200, response.content
    report = response.json()
    assert (report["imported"], report["refused"]) == (2, 2)
    by_line = {item["where"]: item for item in report["items"]}
    assert by_line["line 1"]["ok"] and by_line["line 5"]["ok"]
    assert by_line["line 2"]["errors"][0]["path"] == "steps[1].input_tokens"
    assert "not valid JSON" in by_line["line 3"]["errors"][0]["message"]
    # each line all or nothing: the refused document left no run and no step behind
    assert sorted(Run.objects.values_list("external_id", flat=True)) == ["l1", "l5"]
    assert Step.objects.count() == 3


def test_a_batch_with_nothing_importable_is_a_400_with_the_report(api):
    response = api.post("/imports", [document({"kind": "nope"})])
    assert response.status_code == 400
    body = response.json()
    assert body["refused"] == 1 and "[0].steps[0].kind" in errors_of(response)


# --- the description ---------------------------------------------------------------------------


def test_the_openapi_description_is_published_without_a_token_and_is_valid():
    import schemathesis

    response = Client().get("/api/openapi.json")
    assert response.status_code == 200
    spec = response.json()
    schemathesis.openapi.from_dict(spec).validate()  # against the OpenAPI 3.1 schema; raises if invalid
    assert {
        "/api/runs",
        "/api/runs/{run_id}/steps",
        "/api/runs/{run_id}/finish",
        "/api/runs/{run_id}",
        "/api/imports",
    } <= set(spec["paths"])
    assert spec["components"]["securitySchemes"]["BearerToken"] == {"type": "http", "scheme": "bearer"}
    assert "StepIn" in spec["components"]["schemas"]


# --- the example agent (examples/report_steps.py) -------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_example_agent_reports_each_step_over_http(live_server, django_user_model):
    from examples.report_steps import Tracer, run_agent

    user = may_add_runs(django_user_model.objects.create_user("agent-owner"))
    run = run_agent(Tracer(live_server.url, token_create(user=user, name="example")[1]))
    assert run["status"] == "finished" and run["stop_reason"] == "final_answer"
    recorded = Run.objects.get(pk=run["id"])
    steps = list(recorded.steps.order_by("index"))
    # the wrong id (validation, repaired), the refusal (business, not retryable), the explanation
    assert [(s.kind, s.category) for s in steps] == [
        ("tool_use", "validation"),
        ("tool_use", "business"),
        ("final_answer", ""),
    ]
    assert steps[1].input == {"order_id": "0871"} and steps[1].retryable is False
    assert "239 days" in recorded.final_answer
    assert recorded.step_count == 3 and recorded.source == Run.Source.API and recorded.owner == user
