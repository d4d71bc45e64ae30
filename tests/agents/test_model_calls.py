"""Model calls against the fake Messages API: bounded by the run's time limit, each attempt
recorded (status, request-id, wait), retry-after capped, readable failures, and a faithful record/replay."""

import json
import time

import pytest

from agents.events import model_retries
from agents.llm.base import RETRY_AFTER_CAP_ENV, retry_after_cap
from agents.run import run_scenario
from tests.fake_messages_api import error, hang, malformed, pause_turn, reply, text, tool_use


def statuses(attempts):
    return [a.status for a in attempts]


def test_an_overloaded_then_rate_limited_call_keeps_each_attempt_on_its_step(fake_api):
    fake_api.script(error(529, retry_after=0.05), error(429, retry_after=0.1))
    result = run_scenario("lookup-flaky", "structured", model="claude")
    first = result.steps[0].model_attempts
    assert statuses(first) == [529, 429, 200]
    assert [a.request_id for a in first] == ["req_fake000001", "req_fake000002", "req_fake000003"]
    assert [a.wait_s for a in first] == [0.0, 0.05, 0.1]
    assert [a.error_type for a in first] == ["overloaded_error", "rate_limit_error", None]
    assert first[1].retry_after_s == 0.1
    assert statuses(result.steps[1].model_attempts) == [200]  # the next call went through at once
    assert result.end.stop_reason == "final_answer"


def test_a_retry_after_longer_than_the_cap_is_waited_only_up_to_the_cap(fake_api, monkeypatch):
    monkeypatch.setenv(RETRY_AFTER_CAP_ENV, "0.2")
    fake_api.script(error(429, retry_after=3600))
    began = time.monotonic()
    result = run_scenario("lookup-flaky", "structured", model="claude")
    assert time.monotonic() - began < 30
    asked, answered = result.steps[0].model_attempts
    assert asked.retry_after_s == 3600 and answered.wait_s == 0.2 and answered.status == 200


def test_a_bad_retry_after_cap_is_refused_naming_the_variable():
    with pytest.raises(ValueError, match=f"{RETRY_AFTER_CAP_ENV} must be a number of seconds"):
        retry_after_cap({RETRY_AFTER_CAP_ENV: "soon"})


def test_a_call_that_stays_overloaded_crashes_the_run_saying_so_and_what_was_done(fake_api):
    fake_api.script(
        reply(tool_use("lookup", {"key": "answer"})),
        error(529, retry_after=0.01),
        error(529, retry_after=0.01),
        error(529, retry_after=0.01),
    )
    result = run_scenario("lookup-flaky", "structured", model="claude")
    assert result.end.stop_reason == "crashed"
    assert result.end.error.startswith("the model API was overloaded (529) three times (request-id req_fake000004)")
    assert "gave up after 2 retries" in result.end.error
    assert "Done before it stopped: step 1 lookup" in result.end.error
    assert "Error" not in result.end.error.split(".")[0]  # no SDK class name or repr
    assert statuses(result.end.model_attempts) == [529, 529, 529]


def test_the_api_saying_not_to_retry_is_obeyed(fake_api):
    fake_api.script(error(500, should_retry=False))
    result = run_scenario("lookup-flaky", "structured", model="claude")
    assert result.end.stop_reason == "crashed" and len(result.end.model_attempts) == 1
    assert result.end.error.startswith("the model API failed (500)")


def test_a_model_call_that_never_answers_ends_the_run_at_its_time_limit(fake_api):
    fake_api.script(hang(300))
    began = time.monotonic()
    result = run_scenario("lookup-flaky", "structured", model="claude", time_limit_s=2)
    assert time.monotonic() - began < 6
    assert result.end.stop_reason == "crashed"
    assert "gave no answer within" in result.end.error
    assert "the run's time limit (2 s, RLT_RUN_TIME_LIMIT_S) was reached" in result.end.error
    assert result.end.model_attempts[0].error_type == "timeout"


def test_a_retry_after_past_the_time_limit_stops_the_run_at_once_instead_of_sleeping(fake_api):
    fake_api.script(error(429, retry_after=20))
    began = time.monotonic()
    result = run_scenario("lookup-flaky", "structured", model="claude", time_limit_s=5)
    assert time.monotonic() - began < 3
    assert result.end.stop_reason == "crashed"
    assert "the next try would wait 20 s (its retry-after), past the run's time limit (5 s" in result.end.error


def test_a_malformed_body_is_not_retried_recorded_or_not(fake_api, tmp_path):
    fake_api.script(malformed())
    plain = run_scenario("lookup-flaky", "structured", model="claude")
    fake_api.script(malformed())
    recorded = run_scenario("lookup-flaky", "structured", model="claude", record_to=tmp_path / "m.json")
    for result in (plain, recorded):
        assert result.end.stop_reason == "crashed" and len(result.end.model_attempts) == 1
        assert "answered 200 with a body that is not JSON" in result.end.error
    replayed = run_scenario("lookup-flaky", "structured", model="replay", cassette=tmp_path / "m.json")
    assert replayed.end.error.split(".")[0] == recorded.end.error.split(".")[0]


@pytest.mark.parametrize(
    "body, said",
    [
        (b'{"foo": 1}', "its type is None, not 'message'"),
        (b"[]", "it is a JSON list, not an object"),
        (b'{"type": "message", "content": "hi", "stop_reason": "end_turn"}', "its content is not a list of blocks"),
        (b'{"type": "message", "content": [{"type": "tool_use"}], "stop_reason": "tool_use"}',
         "tool_use block 0 lacks its id, name or input"),
    ],
    ids=["object", "list", "content-text", "tool-use-without-id"],
)  # fmt: skip
def test_a_200_whose_json_is_not_a_message_crashes_the_run_saying_what_is_wrong(fake_api, body, said):
    fake_api.script(malformed(body))
    result = run_scenario("lookup-flaky", "structured", model="claude")
    assert result.end.stop_reason == "crashed" and result.steps == []  # nothing of it was executed
    assert result.end.error.startswith(f"the model API answered 200 with a body that is not a message ({said})")
    (only,) = result.end.model_attempts
    assert (only.status, only.error_type, only.request_id) == (200, "malformed", "req_fake000001")


def test_a_paused_turns_continuation_numbers_its_attempts_on_and_is_not_a_retry(fake_api):
    fake_api.script(pause_turn("Looking."), error(529, retry_after=0.01), reply(tool_use("lookup", {"key": "answer"})))
    result = run_scenario("lookup-flaky", "structured", model="claude")
    attempts = result.steps[0].model_attempts
    assert [(a.number, a.status, a.continuation) for a in attempts] == [
        (1, 200, False),
        (2, 529, True),  # the continuation's first attempt: a new call, not a retry
        (3, 200, False),  # its retry
    ]
    assert model_retries(attempts) == 1
    assert [a.number for a in result.steps[1].model_attempts] == [1]  # the next step's call starts again


def test_a_paused_turn_whose_continuation_fails_keeps_the_whole_turn_as_the_failed_call(fake_api):
    fake_api.script(pause_turn("Looking."), *[error(529, retry_after=0.01)] * 3)
    result = run_scenario("lookup-flaky", "structured", model="claude")
    assert result.end.stop_reason == "crashed" and result.steps == []
    assert [(a.number, a.status) for a in result.end.model_attempts] == [(1, 200), (2, 529), (3, 529), (4, 529)]
    assert model_retries(result.end.model_attempts) == 2
    assert result.end.error.startswith("the model API was overloaded (529) three times")


def test_recording_keeps_error_responses_with_their_headers_and_waits_the_same(fake_api, tmp_path):
    cassette = tmp_path / "errors.json"
    fake_api.script(error(429, retry_after=0.3))
    run_scenario("lookup-flaky", "structured", model="claude", record_to=cassette)
    first = json.loads(cassette.read_text())["interactions"][0]
    assert first["status"] == 429
    assert first["headers"]["retry-after"] == "0.3" and first["headers"]["request-id"] == "req_fake000001"
    assert first["response"]["error"]["type"] == "rate_limit_error"
    assert first["then"] == {"wait_s": 0.3}


def test_record_then_replay_of_a_run_with_api_errors_has_the_same_steps_waits_and_stop(fake_api, tmp_path):
    cassette = tmp_path / "flaky.json"
    fake_api.script(error(529), error(429, retry_after=0.2), reply(tool_use("lookup", {"key": "answer"})))
    fake_api.script(error(500), error(529), error(529))
    recorded = run_scenario("lookup-flaky", "structured", model="claude", record_to=cassette)
    began = time.monotonic()
    replayed = run_scenario("lookup-flaky", "structured", model="replay", cassette=cassette)
    assert time.monotonic() - began < 1  # the waits are replayed on a virtual clock

    def shape(result):
        return (
            [(s.kind, [(a.status, a.request_id, a.wait_s) for a in s.model_attempts]) for s in result.steps],
            result.end.stop_reason,
            result.end.error,
            [(a.status, a.wait_s) for a in result.end.model_attempts],
        )

    assert shape(replayed) == shape(recorded)
    assert recorded.end.stop_reason == "crashed" and recorded.steps[0].model_attempts[0].wait_s == 0.0
    assert recorded.steps[0].model_attempts[1].wait_s > 0  # the SDK's backoff, jittered, replayed as it was


def test_a_recorded_time_limit_stop_replays_as_the_same_stop(fake_api, tmp_path):
    cassette = tmp_path / "hang.json"
    fake_api.script(hang(300))
    recorded = run_scenario("lookup-flaky", "structured", model="claude", record_to=cassette, time_limit_s=1)
    replayed = run_scenario("lookup-flaky", "structured", model="replay", cassette=cassette)
    assert json.loads(cassette.read_text())["interactions"][0]["error"]["type"] == "ReadTimeout"
    assert replayed.end.stop_reason == recorded.end.stop_reason == "crashed"
    assert replayed.end.error == recorded.end.error


def test_an_answer_after_errors_shows_no_error_in_its_final_step(fake_api):
    fake_api.script(reply(text("The value is 42.")))
    result = run_scenario("lookup-flaky", "structured", model="claude")
    (only,) = result.steps[0].model_attempts
    assert only.status == 200 and only.error is None and only.request_id == "req_fake000001"


def test_a_version_1_cassette_of_answers_only_still_replays(tmp_path):
    cassette = tmp_path / "v1.json"
    recorded = run_scenario("refund-too-old", "structured", record_to=cassette)
    data = json.loads(cassette.read_text())
    data["version"] = 1
    data["interactions"] = [{"request": i["request"], "response": i["response"]} for i in data["interactions"]]
    cassette.write_text(json.dumps(data))
    replayed = run_scenario("refund-too-old", "structured", model="replay", cassette=cassette)
    assert replayed.end.final_answer == recorded.end.final_answer and replayed.end.verdict.passed
