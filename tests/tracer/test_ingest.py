"""Runs from outside (tracer/ingest.py): run documents, Messages transcripts, batches, re-sent ids,
runs that arrive step by step, and export. Every write goes through the recorder, so counters and
divergence are the same as for runs executed here."""

from __future__ import annotations

import copy
import json
from datetime import timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracer import ingest
from tracer.execution import run_interrupt_stale
from tracer.models import Run, Step

pytestmark = pytest.mark.django_db

TOO_OLD = "Refunds close after 30 days. This order is 239 days old."


def structured_error(category: str, message: str, retryable: bool = False) -> str:
    return json.dumps(
        {"isError": True, "error": {"errorCategory": category, "isRetryable": retryable, "message": message}}
    )


def document(**run) -> dict:
    """The lesson's refund-too-old run under structured errors, as a run document."""
    return {
        "format": "rlt.run/1",
        "run": {"scenario": "refund-too-old", "policy": "structured", "model": "claude-haiku-4-5", **run},
        "steps": [
            {
                "index": 1,
                "kind": "tool_use",
                "tool_name": "process_refund",
                "tool_use_id": "toolu_01",
                "input": {"order_id": "0871"},
                "attempts": [
                    {"number": 1, "ok": False, "category": "business", "retryable": False, "message": TOO_OLD}
                ],
                "input_tokens": 120,
                "output_tokens": 30,
            },
            {"index": 2, "kind": "final_answer", "text": "I couldn't refund order 0871.", "output_tokens": 40},
        ],
    }


def imported(data: dict, **kwargs) -> Run:
    run = ingest.run_import(document=ingest.document_parse(data=data), **kwargs)
    run.refresh_from_db()
    return run


def refused(data) -> list[dict[str, str]]:
    with pytest.raises(ingest.IngestError) as caught:
        ingest.document_parse(data=data)
    return caught.value.errors


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
    later = ingest.imported_steps_append(run=run, steps=[ingest.StepIn(kind="final_answer", text="Later.")])
    assert [s.index for s in later] == [3]


def test_the_document_knows_every_field_of_an_attempt_and_a_step():
    from dataclasses import fields

    from agents.events import Attempt, StepEvent

    assert {f.name for f in fields(Attempt)} <= set(ingest.AttemptIn.model_fields)
    assert {f.name for f in fields(StepEvent)} == set(ingest.StepIn.model_fields)


# --- export -----------------------------------------------------------------------------------


def test_export_then_import_gives_the_same_steps_and_fields():
    first = imported(document(verdict="pass", verdict_reason="explained", labels={"team": "payments", "v": 2}))
    exported = ingest.run_export(run=first)
    again = imported(json.loads(ingest.document_dumps(exported)))
    second = ingest.run_export(run=again)
    assert second["steps"] == exported["steps"]
    assert second["run"] == exported["run"]
    assert again.pk != first.pk


def test_a_run_executed_here_exports_with_its_policy_settings_and_imports_as_a_run_from_outside(settings):
    from agents.events import RunEnd, RunStart
    from agents.policies import PRESETS
    from tests.factories import failed_attempt, final_step, tool_step
    from tracer import recording

    run = Run.objects.create(scenario="refund-too-old", policy_name="starter", status=Run.Status.QUEUED)
    recording.run_start(
        run=run,
        start=RunStart("refund-too-old", "starter", PRESETS["starter"].settings(), "simulated", "sim", "Refund 0871."),
    )
    recording.step_record(run=run, step=tool_step(1, [failed_attempt(n) for n in (1, 2, 3)]))
    recording.step_record(run=run, step=final_step(2))
    recording.run_finish(run=run, end=RunEnd("final_answer", final_answer="Done."))
    exported = ingest.run_export(run=Run.objects.get(pk=run.pk))
    assert exported["run"]["policy_settings"]["error_format"] == "bare" and exported["run"]["source"] == "agent"
    copy_run = imported(exported)
    assert copy_run.source == Run.Source.IMPORT and copy_run.model_backend == Run.ModelBackend.IMPORTED
    assert (copy_run.retry_count, copy_run.wasted_retry_count) == (2, 2)
    assert ingest.run_export(run=copy_run)["steps"] == exported["steps"]


def test_many_runs_export_in_the_order_given_with_their_own_steps():
    runs = [imported(document(external_id=f"t{k}", task=f"task {k}")) for k in range(3)]
    documents = list(ingest.runs_export(runs=runs[::-1]))
    assert [d["run"]["task"] for d in documents] == ["task 2", "task 1", "task 0"]
    assert all(len(d["steps"]) == 2 for d in documents)


# --- a re-sent external id --------------------------------------------------------------------


def test_the_same_external_id_sent_again_dedupes_instead_of_adding_a_run(django_user_model):
    user = django_user_model.objects.create_user("ada")
    first = ingest.run_import_outcome(document=ingest.document_parse(data=document(external_id="trace-1")), user=user)
    again = ingest.run_import_outcome(document=ingest.document_parse(data=document(external_id="trace-1")), user=user)
    assert first.action == "created" and again.action == "unchanged" and again.run.pk == first.run.pk
    assert Run.objects.count() == 1 and Step.objects.count() == 2


def test_a_changed_document_under_the_same_external_id_replaces_the_run_in_place():
    first = imported(document(external_id="trace-1"))
    data = document(external_id="trace-1", verdict="pass", verdict_reason="ok")
    data["steps"][1]["text"] = "Refunds close after 30 days."
    outcome = ingest.run_import_outcome(document=ingest.document_parse(data=data))
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
    outcome = ingest.run_import_outcome(document=ingest.document_parse(data=changed))
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
    again = ingest.run_import_outcome(document=ingest.document_parse(data=copy.deepcopy(data)))
    assert again.action == "unchanged"
    counted = ingest.run_import_outcome(
        document=ingest.document_parse(data=dict(data, run=dict(data["run"], model_retry_count=4)))
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
    outcome = ingest.run_import_outcome(document=ingest.document_parse(data=document(external_id="trace-9")))
    assert outcome.action == "completed" and outcome.run.pk == open_run.pk
    run = Run.objects.get()
    assert run.status == Run.Status.FINISHED and run.step_count == 2


# --- runs that arrive step by step ------------------------------------------------------------


def step(index=None, **fields) -> ingest.StepIn:
    values = {"kind": "tool_use", "tool_name": "lookup_orders", "input": {"customer": "c-7"}} | fields
    if index is not None:
        values["index"] = index
    return ingest.StepIn.model_validate(values)


def test_steps_arrive_one_batch_at_a_time_and_the_run_ends_when_closed(django_user_model):
    user = django_user_model.objects.create_user("ada")
    run = ingest.imported_run_open(user=user, source=Run.Source.API, run=ingest.RunMeta(scenario="lookup-flaky"))
    assert run.status == Run.Status.RUNNING and run.owner == user and run.source == Run.Source.API
    rows = ingest.imported_steps_append(run=run, steps=[step(1), step(2, is_error=True, category="transient")])
    assert [r.index for r in rows] == [1, 2]
    ingest.imported_steps_append(run=run, steps=[step(kind="final_answer", tool_name="", input=None, text="Found it.")])
    closed = ingest.imported_run_close(run=run, end=ingest.RunEndIn())
    assert closed.status == Run.Status.FINISHED and closed.stop_reason == "final_answer"
    assert closed.final_answer == "Found it." and closed.error_count == 1 and closed.step_count == 3


def test_a_step_sent_twice_is_recorded_once_and_a_conflicting_one_is_refused():
    run = ingest.imported_run_open(user=None, source=Run.Source.API, run=ingest.RunMeta())
    ingest.imported_steps_append(run=run, steps=[step(1)])
    again = ingest.imported_steps_append(run=run, steps=[step(1), step(2)])
    assert [r.index for r in again] == [1, 2] and Step.objects.count() == 2
    with pytest.raises(ingest.StepConflict) as caught:
        ingest.imported_steps_append(run=run, steps=[step(2, input={"customer": "c-8"})])
    assert caught.value.errors[0]["path"] == "steps[0].index" and "next new step is 3" in str(caught.value)
    with pytest.raises(ingest.IngestError) as gap:
        ingest.imported_steps_append(run=run, steps=[step(5)])
    assert gap.value.errors == [
        {"path": "steps[0].index", "message": "expected 3 (steps are numbered 1, 2, 3… in order); got 5"}
    ]
    assert Run.objects.get().step_count == 2


def test_a_finished_run_refuses_more_steps_with_a_clear_error():
    run = ingest.imported_run_open(user=None, source=Run.Source.API, run=ingest.RunMeta())
    ingest.imported_run_close(run=run, end=ingest.RunEndIn(stop_reason="max_steps"))
    with pytest.raises(ingest.RunEnded, match=r"has already ended \(max_steps\); steps refused"):
        ingest.imported_steps_append(run=run, steps=[step(1)])
    assert ingest.imported_run_close(run=run, end=ingest.RunEndIn(stop_reason="max_steps")).pk == run.pk
    with pytest.raises(ingest.RunEnded):
        ingest.imported_run_close(run=run, end=ingest.RunEndIn(stop_reason="crashed"))


def test_a_run_executed_here_takes_no_steps_from_outside():
    run = Run.objects.create(status=Run.Status.RUNNING)
    with pytest.raises(ingest.RunEnded, match="executed here"):
        ingest.imported_steps_append(run=run, steps=[step(1)])


def test_the_sweep_leaves_an_open_imported_run_alone():
    run = ingest.imported_run_open(user=None, source=Run.Source.OTLP, run=ingest.RunMeta())
    assert run_interrupt_stale(now=timezone.now() + timedelta(days=1)) == []
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING


def test_opening_the_same_external_id_twice_returns_the_open_run():
    meta = ingest.RunMeta(external_id="span-trace-1")
    first = ingest.imported_run_open(user=None, source=Run.Source.OTLP, run=meta)
    assert ingest.imported_run_open(user=None, source=Run.Source.OTLP, run=meta).pk == first.pk


# --- Messages transcripts ---------------------------------------------------------------------


def tool_use(use_id: str, name: str = "process_refund", **input) -> dict:
    return {"type": "tool_use", "id": use_id, "name": name, "input": input or {"order_id": "0871"}}


def tool_result(use_id: str, content, is_error: bool | None = None) -> dict:
    block = {"type": "tool_result", "tool_use_id": use_id, "content": content}
    if is_error is not None:
        block["is_error"] = is_error
    return block


TASK = "Please refund order 0871, the laptop stand is wobbly."


def starter_transcript() -> dict:
    """Three bare "Error"s, the model repeating the call each time, then a guess."""
    messages = [{"role": "user", "content": TASK}]
    for n in (1, 2, 3):
        messages.append({"role": "assistant", "content": [tool_use(f"toolu_0{n}")]})
        messages.append(
            {"role": "user", "content": [tool_result(f"toolu_0{n}", '{"error": {"message": "Error"}}', True)]}
        )
    messages.append({"role": "assistant", "content": "The system returned a generic error."})
    return {"model": "claude-haiku-4-5", "system": "You are Lumen Supply's agent.", "tools": [], "messages": messages}


def structured_transcript() -> dict:
    return {
        "model": "claude-haiku-4-5",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": TASK}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Refunding."}, tool_use("toolu_01")]},
            {
                "role": "user",
                "content": [
                    tool_result("toolu_01", [{"type": "text", "text": structured_error("business", TOO_OLD)}], True)
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Refunds close after 30 days."}]},
        ],
    }


def test_a_call_repeated_right_after_an_error_is_one_step_with_three_attempts():
    doc = ingest.transcript_to_document(transcript=starter_transcript())
    assert [s.kind for s in doc.steps] == ["tool_use", "final_answer"]
    refund = doc.steps[0]
    assert len(refund.attempts) == 3 and refund.retry_count == 2 and refund.is_error
    assert [a.message for a in refund.attempts] == ["Error"] * 3
    assert doc.run.task == TASK and doc.run.model == "claude-haiku-4-5"
    assert doc.run.stop_reason == "final_answer" and doc.steps[1].text == "The system returned a generic error."


def test_a_structured_error_fills_category_and_retryable():
    doc = ingest.transcript_to_document(transcript=structured_transcript())
    attempt = doc.steps[0].attempts[0]
    assert (attempt.ok, attempt.category, attempt.retryable, attempt.message) == (False, "business", False, TOO_OLD)
    assert doc.steps[0].text == "Refunding."  # the assistant text that came with the call


def test_an_mcp_call_tool_result_with_is_error_fails_the_attempt_without_the_api_flag():
    call_tool_result = {
        "content": [{"type": "text", "text": structured_error("transient", "payment service timed out", True)}],
        "isError": True,
    }
    transcript = structured_transcript()
    transcript["messages"][2]["content"] = [tool_result("toolu_01", json.dumps(call_tool_result))]
    attempt = ingest.transcript_to_document(transcript=transcript).steps[0].attempts[0]
    assert (attempt.ok, attempt.category, attempt.retryable) == (False, "transient", True)


def test_an_empty_result_is_not_an_error():
    transcript = structured_transcript()
    transcript["messages"][2]["content"] = [tool_result("toolu_01", '{"orders": [], "message": "no orders"}')]
    attempt = ingest.transcript_to_document(transcript=transcript).steps[0].attempts[0]
    assert attempt.ok and attempt.empty and attempt.category is None


def test_a_different_call_after_an_error_is_a_new_step():
    transcript = structured_transcript()
    transcript["messages"][3] = {"role": "assistant", "content": [tool_use("toolu_02", order_id="0872")]}
    transcript["messages"].append({"role": "user", "content": [tool_result("toolu_02", '{"refunded": true}')]})
    transcript["messages"].append({"role": "assistant", "content": "Refunded 0872."})
    doc = ingest.transcript_to_document(transcript=transcript)
    assert [len(s.attempts) for s in doc.steps] == [1, 1, 0]
    assert doc.steps[1].input == {"order_id": "0872"} and not doc.steps[1].is_error


def test_a_tool_result_for_an_unknown_tool_use_id_names_its_path():
    transcript = structured_transcript()
    transcript["messages"][2]["content"][0]["tool_use_id"] = "toolu_99"
    with pytest.raises(ingest.IngestError) as caught:
        ingest.transcript_to_document(transcript=transcript)
    assert caught.value.errors[0]["path"] == "messages[2].content[0].tool_use_id"
    assert "'toolu_99' matches no tool_use" in caught.value.errors[0]["message"]


def test_a_transcript_with_a_bad_role_or_content_names_the_message():
    transcript = structured_transcript()
    transcript["messages"][1]["role"] = "tool"
    transcript["messages"][3]["content"] = 7
    with pytest.raises(ingest.IngestError) as caught:
        ingest.transcript_to_document(transcript=transcript)
    paths = {e["path"] for e in caught.value.errors}
    assert {"messages[1].role", "messages[3].content"} <= paths


def test_a_transcript_is_stored_on_its_run_and_its_labels_come_from_the_importer():
    meta = ingest.RunMeta(scenario="refund-too-old", policy="starter-transcript")
    run = ingest.run_import(document=ingest.transcript_to_document(transcript=starter_transcript(), meta=meta))
    run.refresh_from_db()
    assert run.transcript["messages"][0]["content"] == TASK
    assert (run.scenario, run.policy_name, run.retry_count, run.wasted_retry_count) == (
        "refund-too-old",
        "starter-transcript",
        2,
        0,  # bare "Error" says nothing of retrying: a retry of it is not counted as wasted
    )


def test_a_last_turn_without_results_keeps_its_calls_unanswered_and_no_final_answer():
    transcript = structured_transcript()
    transcript["messages"] = transcript["messages"][:2]
    doc = ingest.transcript_to_document(transcript=transcript)
    assert len(doc.steps) == 1 and doc.steps[0].attempts == []
    run = ingest.run_import(document=doc)
    run.refresh_from_db()
    assert run.stop_reason == "" and run.step_count == 1 and run.steps.get().attempts == []


# --- files and batches ------------------------------------------------------------------------


def jsonl(*items) -> bytes:
    return "\n".join(item if isinstance(item, str) else json.dumps(item) for item in items).encode()


def test_a_json_lines_batch_imports_each_line_on_its_own_and_reports_each():
    bad = document()
    bad["steps"][0]["attempts"][0]["category"] = "x"
    report = ingest.file_import(name="batch.jsonl", data=jsonl(document(), bad, "{not json", starter_transcript()))
    assert (report.imported, report.refused) == (2, 2)
    by_line = {item.where: item for item in report.items}
    assert by_line["line 1"].ok and by_line["line 4"].ok
    assert by_line["line 2"].errors[0]["path"] == "steps[0].attempts[0].category"
    assert "malformed JSON" in by_line["line 3"].errors[0]["message"]
    assert Run.objects.count() == 2 and set(Run.objects.values_list("source_detail", flat=True)) == {"batch.jsonl"}


def test_a_file_labels_every_run_with_the_scenario_and_policy_given():
    ingest.file_import(name="t.json", data=json.dumps(starter_transcript()).encode(), scenario="refund-too-old")
    assert Run.objects.get().scenario == "refund-too-old"


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\xff\xfe", "not UTF-8"),
        (b'{"format": "rlt.run/1", "steps": [', "malformed JSON at line 1"),
        (b"", "malformed JSON"),
        (b"[1]", "expected a run document"),
        (b'{"hello": 1}', 'a JSON object with "format"'),
    ],
)
def test_a_file_that_is_not_a_run_says_what_was_expected(data, says):
    report = ingest.file_import(name="x.json", data=data)
    assert report.imported == 0 and says in report.items[0].errors[0]["message"]
    assert not Run.objects.exists()


def test_a_json_array_is_a_batch_of_documents():
    report = ingest.file_import(name="runs.json", data=json.dumps([document(), document(), {"x": 1}]).encode())
    assert (report.imported, report.refused) == (2, 1) and report.items[2].where == "[2]"


def test_the_transcript_json_is_kept_intact_by_a_deep_copy():
    transcript = starter_transcript()
    before = copy.deepcopy(transcript)
    ingest.transcript_to_document(transcript=transcript)
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
        report = ingest.file_import(name=name, data=data)
        for item in report.items:
            assert item.ok or all(e["message"] for e in item.errors)
    assert Step.objects.filter(run__isnull=True).count() == 0


def test_a_replaced_run_loses_the_fields_its_new_document_leaves_blank():
    imported(document(external_id="trace-1", task="first"))
    data = document(external_id="trace-1", scenario="", policy="", model="")
    run = ingest.run_import(document=ingest.document_parse(data=data))
    assert (run.scenario, run.policy_name, run.model_name, run.task) == ("", "", "", "")
