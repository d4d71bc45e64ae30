"""Anthropic Messages transcripts as runs (tracer/intake/transcripts.py, conversation.py): tool_use to
tool_result by id, a call repeated after an error as a step of its own, structured errors, the final answer."""

from __future__ import annotations

import json

import pytest

from tests.tracer.intake.samples import (
    TASK,
    TOO_OLD,
    starter_transcript,
    structured_error,
    structured_transcript,
    tool_result,
    tool_use,
)
from tracer.intake import files
from tracer.intake.errors import IngestError
from tracer.intake.transcripts import transcript_arrival

pytestmark = pytest.mark.django_db


def test_a_call_repeated_right_after_an_error_is_a_step_of_its_own_each_time():
    doc = transcript_arrival(transcript=starter_transcript())
    assert [s.kind for s in doc.steps] == ["tool_use"] * 3 + ["final_answer"]
    refunds = doc.steps[:3]
    assert [(len(s.attempts), s.retry_count, s.is_error) for s in refunds] == [(1, 0, True)] * 3
    assert [s.attempts[0].message for s in refunds] == ["Error"] * 3
    assert doc.start.task == TASK and doc.start.model_name == "claude-haiku-4-5"
    assert doc.end.stop_reason == "final_answer" and doc.steps[3].text == "The system returned a generic error."


def test_a_structured_error_fills_category_and_retryable():
    doc = transcript_arrival(transcript=structured_transcript())
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
    attempt = transcript_arrival(transcript=transcript).steps[0].attempts[0]
    assert (attempt.ok, attempt.category, attempt.retryable) == (False, "transient", True)


def test_an_empty_result_is_not_an_error():
    transcript = structured_transcript()
    transcript["messages"][2]["content"] = [tool_result("toolu_01", '{"orders": [], "message": "no orders"}')]
    attempt = transcript_arrival(transcript=transcript).steps[0].attempts[0]
    assert attempt.ok and attempt.empty and attempt.category is None


def test_a_different_call_after_an_error_is_a_new_step():
    transcript = structured_transcript()
    transcript["messages"][3] = {"role": "assistant", "content": [tool_use("toolu_02", order_id="0872")]}
    transcript["messages"].append({"role": "user", "content": [tool_result("toolu_02", '{"refunded": true}')]})
    transcript["messages"].append({"role": "assistant", "content": "Refunded 0872."})
    doc = transcript_arrival(transcript=transcript)
    assert [len(s.attempts) for s in doc.steps] == [1, 1, 0]
    assert doc.steps[1].input == {"order_id": "0872"} and not doc.steps[1].is_error


def test_a_tool_result_for_an_unknown_tool_use_id_names_its_path():
    transcript = structured_transcript()
    transcript["messages"][2]["content"][0]["tool_use_id"] = "toolu_99"
    with pytest.raises(IngestError) as caught:
        transcript_arrival(transcript=transcript)
    assert caught.value.errors[0]["path"] == "messages[2].content[0].tool_use_id"
    assert "'toolu_99' matches no tool_use" in caught.value.errors[0]["message"]


def test_a_transcript_with_a_bad_role_or_content_names_the_message():
    transcript = structured_transcript()
    transcript["messages"][1]["role"] = "tool"
    transcript["messages"][3]["content"] = 7
    with pytest.raises(IngestError) as caught:
        transcript_arrival(transcript=transcript)
    paths = {e["path"] for e in caught.value.errors}
    assert {"messages[1].role", "messages[3].content"} <= paths


def test_a_transcript_is_stored_on_its_run_and_its_labels_come_from_the_importer():
    meta = {"scenario": "refund-too-old", "policy": "starter-transcript"}
    run = files.run_import(arrival=transcript_arrival(transcript=starter_transcript(), **meta))
    run.refresh_from_db()
    assert run.transcript["messages"][0]["content"] == TASK
    assert (run.scenario, run.policy_name, run.retry_count, run.wasted_retry_count) == (
        "refund-too-old",
        "starter-transcript",
        0,  # the model sent the call again, twice: repeats, not the harness's retries
        0,  # bare "Error" says nothing of retrying: a repeat of it is not counted as wasted
    )
    assert [s.repeat_of for s in run.steps.order_by("index")] == [None, 1, 2, None]
    assert (run.error_count, run.failed_attempt_count) == (3, 3)


def test_a_last_turn_without_results_keeps_its_calls_unanswered_and_no_final_answer():
    transcript = structured_transcript()
    transcript["messages"] = transcript["messages"][:2]
    doc = transcript_arrival(transcript=transcript)
    assert len(doc.steps) == 1 and doc.steps[0].attempts == []
    run = files.run_import(arrival=doc)
    run.refresh_from_db()
    assert run.stop_reason == "" and run.step_count == 1 and run.steps.get().attempts == []


# --- files and batches ------------------------------------------------------------------------


def test_a_server_tools_error_in_a_transcript_is_a_step_with_its_error_code():
    transcript = {
        "messages": [
            {"role": "user", "content": TASK},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "server_tool_use",
                        "id": "srvtoolu_01",
                        "name": "web_search",
                        "input": {"query": "refunds"},
                    },
                    {
                        "type": "web_search_tool_result",
                        "tool_use_id": "srvtoolu_01",
                        "content": {"type": "web_search_tool_result_error", "error_code": "too_many_requests"},
                    },
                    {"type": "text", "text": "I could not search."},
                ],
                "stop_reason": "end_turn",
            },
        ]
    }
    arrival = transcript_arrival(transcript=transcript)
    search, answer = arrival.steps
    assert (search.tool_name, search.is_error, search.attempts[0].message) == ("web_search", True, "too_many_requests")
    assert answer.kind == "final_answer" and answer.api_stop_reason == "end_turn"
