"""Run documents, JSON arrays and JSON Lines files imported whole (tracer/intake/files.py, schema.py):
each item all or nothing, refusals naming the path, a re-sent external id deduped or replaced."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.events import Attempt
from tests.tracer.intake.samples import TOO_OLD, document, imported, jsonl, refused, starter_transcript
from tracer.intake import files, live, schema
from tracer.intake.transcripts import transcript_arrival
from tracer.models import Run, Step

pytestmark = pytest.mark.django_db


# --- run documents ----------------------------------------------------------------------------


def test_a_run_document_becomes_a_finished_imported_run_with_the_recorders_counters():
    run = imported(document())
    assert run.source == Run.Source.IMPORT and run.model_backend == Run.ModelBackend.IMPORTED
    assert run.status == Run.Status.FINISHED and run.stop_reason == Run.StopReason.FINAL_ANSWER
    assert run.final_answer == "I couldn't refund order 0871."
    assert (run.step_count, run.tool_call_count, run.error_count, run.retry_count) == (2, 1, 1, 0)
    assert (run.input_tokens, run.output_tokens) == (120, 70)
    assert run.verdict == "" and run.model_name == "claude-haiku-4-5"
    first = run.steps.get(index=1)
    assert first.is_error and first.category == "business" and first.retryable is False
    assert "0871" in run.search_text


def test_fields_left_out_of_a_step_are_made_from_its_attempts():
    data = document()
    attempts = data["steps"][0]["attempts"]
    attempts[0]["retryable"] = True
    attempts[0]["category"] = "transient"
    attempts.append({"number": 2, "ok": True, "content": {"refunded": True}, "backoff_s": 0.5, "latency_ms": 10})
    run = imported(data)
    step = run.steps.get(index=1)
    assert not step.is_error and step.category == "" and step.retry_count == 1
    assert step.latency_ms == 510  # latency plus backoff
    assert run.retry_count == 1 and run.wasted_retry_count == 0


def test_a_retry_after_a_refusal_counts_as_wasted_as_for_runs_executed_here():
    data = document()
    data["steps"][0]["attempts"] += [
        {"number": 2, "ok": False, "category": "business", "retryable": False, "message": TOO_OLD},
        {"number": 3, "ok": False, "category": "business", "retryable": False, "message": TOO_OLD},
    ]
    run = imported(data)
    assert (run.retry_count, run.wasted_retry_count) == (2, 2)


def test_a_verdict_is_stored_only_when_the_document_gives_one():
    run = imported(document(verdict="fail", verdict_reason="the refund window was not explained"))
    assert run.verdict == "fail" and run.verdict_reason == "the refund window was not explained"


def test_a_bad_category_names_its_path_and_the_categories_expected():
    data = document()
    data["steps"][0]["attempts"][0]["category"] = "x"
    assert refused(data) == [
        {
            "path": "steps[0].attempts[0].category",
            "message": "expected one of validation, transient, permission, business, fatal; got 'x'",
        }
    ]


@pytest.mark.parametrize(
    ("change", "path", "says"),
    [
        (lambda d: d.pop("format"), "format", "required; expected 'rlt.run/1'"),
        (lambda d: d.update(format="rlt.run/2"), "format", "unknown format version 'rlt.run/2'"),
        (lambda d: d["steps"][0].pop("kind"), "steps[0].kind", "required"),
        (lambda d: d["steps"][0].update(kind="tool_call"), "steps[0].kind", "expected one of tool_use, final_answer"),
        (lambda d: d["steps"][0].update(input_tokens="many"), "steps[0].input_tokens", "expected a whole number"),
        (lambda d: d["steps"][0].update(input_tokens=-1), "steps[0].input_tokens", "at least 0"),
        (lambda d: d["steps"][0]["attempts"][0].update(ok="no"), "steps[0].attempts[0].ok", "expected true or false"),
        (lambda d: d["steps"][0].update(input=["0871"]), "steps[0].input", "expected an object"),
        (lambda d: d["steps"][0].update(tool_nmae="x"), "steps[0].tool_nmae", "unknown field"),
        (lambda d: d["steps"][1].update(index=5), "steps[1].index", "expected 2"),
        (lambda d: d["steps"][0]["attempts"][0].update(number=2), "steps[0].attempts[0].number", "expected 1"),
        (lambda d: d["steps"][0].update(tool_name=""), "steps[0].tool_name", "required for a tool_use step"),
        (lambda d: d["run"].update(started_at="2025-01-31T09:30:00"), "run.started_at", "with a timezone"),
        (lambda d: d["run"].update(status="queued"), "run.status", "expected one of running, finished"),
        (lambda d: d["steps"][1].update(text="a\x00b"), "steps[1].text", "NUL character"),
        (lambda d: d["steps"][0].update(input={"order_id": "\ud800"}), "steps[0].input.order_id", "lone surrogate"),
        (lambda d: d["run"].update(scenario="s" * 101), "run.scenario", "at most 100 characters"),
    ],
)
def test_a_bad_document_is_refused_naming_the_field_and_what_was_expected(change, path, says):
    data = document()
    change(data)
    errors = refused(data)
    assert any(e["path"] == path and says in e["message"] for e in errors), errors


def test_every_problem_of_a_document_is_reported_at_once_and_nothing_is_written():
    data = document()
    data["steps"][0]["attempts"][0]["category"] = "x"
    data["steps"][1]["kind"] = "answer"
    assert {e["path"] for e in refused(data)} == {"steps[0].attempts[0].category", "steps[1].kind"}
    assert not Run.objects.exists() and not Step.objects.exists()


def test_a_document_that_fails_while_writing_leaves_nothing_half_written(monkeypatch):
    def fail(**kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr("tracer.recording.values_insert", fail)  # after the run's row is inserted
    with pytest.raises(RuntimeError):
        imported(document())
    assert not Run.objects.exists() and not Step.objects.exists()


def test_a_run_document_with_status_running_stays_open_for_more_steps():
    run = imported(document(status="running"))
    assert run.status == Run.Status.RUNNING and run.is_active
    later = live.imported_steps_append(run=run, steps=[schema.StepIn(kind="final_answer", text="Later.")])
    assert [s.index for s in later] == [3]


def test_the_document_knows_every_field_of_an_attempt_and_a_step():
    from dataclasses import fields

    from agents.events import StepEvent

    assert {f.name for f in fields(Attempt)} <= set(schema.AttemptIn.model_fields)
    assert {f.name for f in fields(StepEvent)} == set(schema.StepIn.model_fields)


# --- a re-sent external id --------------------------------------------------------------------


def test_the_same_external_id_sent_again_dedupes_instead_of_adding_a_run(django_user_model):
    user = django_user_model.objects.create_user("ada")
    first = files.run_import_outcome(arrival=files.item_arrival(data=document(external_id="trace-1"), user=user))
    again = files.run_import_outcome(arrival=files.item_arrival(data=document(external_id="trace-1"), user=user))
    assert first.action == "created" and again.action == "unchanged" and again.run.pk == first.run.pk
    assert Run.objects.count() == 1 and Step.objects.count() == 2


def test_a_changed_document_under_the_same_external_id_replaces_the_run_in_place():
    first = imported(document(external_id="trace-1"))
    data = document(external_id="trace-1", verdict="pass", verdict_reason="ok")
    data["steps"][1]["text"] = "Refunds close after 30 days."
    outcome = files.run_import_outcome(arrival=files.item_arrival(data=data))
    assert outcome.action == "replaced" and outcome.run.pk == first.pk
    run = Run.objects.get()
    assert run.final_answer == "Refunds close after 30 days." and run.verdict == "pass"
    assert (run.step_count, run.error_count, Step.objects.count()) == (2, 1, 2)


def test_a_replaced_run_counts_its_model_retries_once_not_once_per_version():
    attempts = [{"number": 1, "status": 529, "error": "overloaded (529)"}, {"number": 2, "status": 200, "wait_s": 0.5}]
    first = document(external_id="trace-2")
    first["steps"][0]["model_attempts"] = attempts
    imported(first)
    assert Run.objects.get().model_retry_count == 1
    changed = copy.deepcopy(first)
    changed["steps"][1]["text"] = "Refunds close after 30 days."
    outcome = files.run_import_outcome(arrival=files.item_arrival(data=changed))
    assert outcome.action == "replaced"
    assert Run.objects.get().model_retry_count == 1


OVERLOADED = [
    {"number": 1, "status": 529, "error": "was overloaded (529)", "error_type": "overloaded_error"},
    {"number": 2, "status": 529, "error": "was overloaded (529)", "wait_s": 0.5, "request_id": "req_2"},
]


def test_a_run_whose_model_call_failed_keeps_that_call_counts_its_retry_and_dedupes_when_sent_again():
    data = document(external_id="trace-4", stop_reason="crashed", failed_model_call=OVERLOADED)
    del data["steps"][1]
    run = imported(data)
    assert run.stop_reason == "crashed" and run.model_retry_count == 1  # left out: counted from the call
    assert [(a["number"], a["wait_s"], a["request_id"]) for a in run.failed_model_call] == [
        (1, 0.0, None),
        (2, 0.5, "req_2"),
    ]
    again = files.run_import_outcome(arrival=files.item_arrival(data=copy.deepcopy(data)))
    assert again.action == "unchanged"
    counted = files.run_import_outcome(
        arrival=files.item_arrival(data=dict(data, run=dict(data["run"], model_retry_count=4)))
    )
    assert counted.action == "replaced" and Run.objects.get().model_retry_count == 4  # the sender's count stands


def test_a_running_run_has_no_failed_model_call_yet():
    data = document(status="running", failed_model_call=OVERLOADED)
    assert refused(data) == [{"path": "run.failed_model_call", "message": "a running run has not ended; leave it out"}]


def test_external_ids_are_per_owner_and_per_source(django_user_model):
    ada, bob = (django_user_model.objects.create_user(n) for n in ("ada", "bob"))
    for user in (ada, bob, None):
        imported(document(external_id="trace-1"), user=user)
    imported(document(external_id="trace-1"), source=Run.Source.OTLP)
    assert Run.objects.count() == 4
    assert Run.objects.get(owner=ada).external_id == "trace-1"


def test_an_open_run_sent_whole_again_is_completed_with_its_new_steps():
    data = document(external_id="trace-9", status="running")
    data["steps"] = data["steps"][:1]
    open_run = imported(data)
    outcome = files.run_import_outcome(arrival=files.item_arrival(data=document(external_id="trace-9")))
    assert outcome.action == "completed" and outcome.run.pk == open_run.pk
    run = Run.objects.get()
    assert run.status == Run.Status.FINISHED and run.step_count == 2


# --- runs that arrive step by step ------------------------------------------------------------


def test_a_json_lines_batch_imports_each_line_on_its_own_and_reports_each():
    bad = document()
    bad["steps"][0]["attempts"][0]["category"] = "x"
    report = files.file_import(name="batch.jsonl", data=jsonl(document(), bad, "{not json", starter_transcript()))
    assert (report.imported, report.refused) == (2, 2)
    by_line = {item.where: item for item in report.items}
    assert by_line["line 1"].ok and by_line["line 4"].ok
    assert by_line["line 2"].errors[0]["path"] == "steps[0].attempts[0].category"
    assert "malformed JSON" in by_line["line 3"].errors[0]["message"]
    assert Run.objects.count() == 2 and set(Run.objects.values_list("source_detail", flat=True)) == {"batch.jsonl"}


def test_a_file_labels_every_run_with_the_scenario_and_policy_given():
    files.file_import(name="t.json", data=json.dumps(starter_transcript()).encode(), scenario="refund-too-old")
    assert Run.objects.get().scenario == "refund-too-old"


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\xff\xfe", "not UTF-8"),
        (b'{"format": "rlt.run/1", "steps": [', "malformed JSON at line 1"),
        (b"", "the file is empty"),
        (b" \n\n", "the file is empty"),
        (b"[1]", "expected a run document"),
        (b'{"hello": 1}', 'a JSON object with "format"'),
    ],
)
def test_a_file_that_is_not_a_run_says_what_was_expected(data, says):
    report = files.file_import(name="x.json", data=data)
    assert report.imported == 0 and says in report.items[0].errors[0]["message"]
    assert not Run.objects.exists()


def test_a_json_array_is_a_batch_of_documents():
    report = files.file_import(name="runs.json", data=json.dumps([document(), document(), {"x": 1}]).encode())
    assert (report.imported, report.refused) == (2, 1) and report.items[2].where == "[2]"


def test_the_transcript_json_is_kept_intact_by_a_deep_copy():
    transcript = starter_transcript()
    before = copy.deepcopy(transcript)
    transcript_arrival(transcript=transcript)
    assert transcript == before


# --- anything at all --------------------------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=12)
shapes = st.recursive(
    scalars | st.sampled_from(["tool_use", "tool_result", "text", "user", "assistant", "rlt.run/1", "toolu_1"]),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(
        st.sampled_from(
            ["format", "run", "steps", "messages", "role", "content", "type", "id", "name", "input", "tool_use_id",
             "is_error", "isError", "text", "kind", "attempts", "number", "ok", "index", "usage", "tool_name"]
        ),
        inner,
        max_size=5,
    ),
    max_leaves=25,
)  # fmt: skip


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(value=shapes, raw=st.binary(max_size=40))
def test_any_file_is_imported_or_refused_with_a_message_never_an_exception(value, raw):
    for name, data in (("x.json", json.dumps(value).encode()), ("x.jsonl", raw)):
        report = files.file_import(name=name, data=data)
        for item in report.items:
            assert item.ok or all(e["message"] for e in item.errors)
    assert Step.objects.filter(run__isnull=True).count() == 0


def test_a_replaced_run_loses_the_fields_its_new_document_leaves_blank():
    imported(document(external_id="trace-1", task="first"))
    data = document(external_id="trace-1", scenario="", policy="", model="")
    run = files.run_import(arrival=files.item_arrival(data=data))
    assert (run.scenario, run.policy_name, run.model_name, run.task) == ("", "", "", "")


def test_a_failed_attempt_a_retry_then_fixed_is_counted_among_the_failed_attempts_not_the_failed_steps(admin_client):
    from django.urls import reverse

    from tests.dom import page

    data = document()
    data["steps"][0]["attempts"] = [
        {"number": 1, "ok": False, "category": "transient", "retryable": True, "message": "payment service 503"},
        {"number": 2, "ok": True, "content": {"refunded": True}, "backoff_s": 0.5},
    ]
    run = imported(data)
    assert (run.error_count, run.failed_attempt_count, run.retry_count) == (0, 1, 1)
    stats = page(admin_client.get(reverse("tracer:run", args=[run.pk]))).select(".stats")[0].text
    assert "0 failed steps" in stats and "Failed attempts 1" in " ".join(stats.split())
