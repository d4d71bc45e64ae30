"""The Messages API's stop_reason through the claude backend against the fake API (tests/fake_messages_api.py):
a reply cut off by max_tokens or refused ends the run with its own stop reason and executes nothing,
pause_turn is continued, and every step and the run keep the API's stop_reason."""

import pytest

from agents.loop import MAX_PAUSES
from agents.run import run_scenario
from agents.trace import format_step
from tests.fake_messages_api import pause_turn, refusal, reply, text, tool_use, truncated_text, truncated_tool_use


def claude_run(scenario="refund-too-old", policy="structured"):
    return run_scenario(scenario, policy, model="claude")


def test_a_reply_cut_off_by_max_tokens_is_not_the_final_answer(fake_api):
    fake_api.script(truncated_text("The value st"))
    result = claude_run()
    assert result.end.stop_reason == "max_tokens" and result.end.final_answer is None
    assert result.end.api_stop_reason == "max_tokens"
    assert "cut off at the 1024-token limit" in result.end.error and "'The value st'" in result.end.error
    (step,) = result.steps
    assert step.kind == "model_stop" and step.text == "The value st" and step.api_stop_reason == "max_tokens"
    assert step.input_tokens > 0  # its tokens still count
    assert "answer gives the 30-day window (within 12%) ✗ (no answer: it ended max_tokens)" in result.end.verdict.reason
    assert "answered ✗ (it ended max_tokens: the model's reply was cut off" in result.end.verdict.reason


def test_a_tool_use_cut_off_by_max_tokens_is_never_executed(fake_api):
    fake_api.script(truncated_tool_use("process_refund", said="I'll refund it."))
    result = claude_run()
    (step,) = result.steps
    assert step.kind == "model_stop" and step.tool_name == "process_refund" and step.attempts == []
    assert "NOT EXECUTED" in format_step(step)
    assert result.end.stop_reason == "max_tokens"
    assert "while writing a call to process_refund, which was not executed" in result.end.error
    assert "refund asked for once ✗ (asked 0 times)" in result.end.verdict.reason  # the shop never heard of it
    assert len(fake_api.bodies()) == 1  # no tool_result for a call that did not run


def test_a_complete_tool_use_beside_a_cut_off_one_is_not_executed_either(fake_api):
    whole = tool_use("lookup_orders", {"customer": "me"})
    fake_api.script(reply(whole, tool_use("process_refund", {}), stop_reason="max_tokens"))
    result = claude_run()
    assert [s.kind for s in result.steps] == ["model_stop"] and result.steps[0].tool_name == "process_refund"


def test_a_refusal_ends_the_run_as_a_refusal_not_an_empty_answer(fake_api):
    fake_api.script(refusal("I can't help with that."))
    result = claude_run()
    assert result.end.stop_reason == "refusal" and result.end.final_answer is None
    assert result.end.error == 'the model declined to go on (stop_reason refusal): "I can\'t help with that."'
    assert [(s.kind, s.api_stop_reason) for s in result.steps] == [("model_stop", "refusal")]
    assert "answered ✗ (it ended refusal: the model declined to answer)" in result.end.verdict.reason


def test_a_refusal_with_no_text_says_so(fake_api):
    fake_api.script(refusal())
    result = claude_run()
    assert result.end.error == "the model declined to go on (stop_reason refusal)"
    assert result.steps[0].text is None


def test_a_paused_turn_is_continued_with_its_content_sent_back(fake_api):
    fake_api.script(pause_turn("Let me look."), reply(text("Still looking."), tool_use("lookup_orders", {})))
    result = claude_run()
    paused, continued, *_ = fake_api.bodies()
    assert paused["messages"][-1]["role"] == "user"
    assert continued["messages"][-1] == {"role": "assistant", "content": [text("Let me look.")]}
    assert result.end.stop_reason == "final_answer" and result.end.final_answer == fake_api.answer
    first = result.steps[0]
    assert first.tool_name == "lookup_orders" and first.text == "Let me look.\nStill looking."
    assert first.api_stop_reason == "tool_use"
    # One assistant message for the whole turn, so the next request still alternates (the fake API checks).
    assistant = [m for m in result.end.transcript if m["role"] == "assistant"]
    assert assistant[0]["content"][0] == text("Let me look.") and assistant[0]["content"][-1]["type"] == "tool_use"


def test_a_turn_paused_again_and_again_is_stopped_by_a_guard(fake_api):
    fake_api.script(*[pause_turn(f"part {n}") for n in range(MAX_PAUSES + 1)])
    result = claude_run()
    assert result.end.stop_reason == "max_steps"
    assert result.end.guard == f"the API paused one turn {MAX_PAUSES + 1} times in a row (pause_turn)"
    assert len(fake_api.bodies()) == MAX_PAUSES + 1
    (step,) = result.steps  # the paused turn, unexecuted, with the tokens of all its responses
    assert (step.kind, step.api_stop_reason) == ("model_stop", "pause_turn")
    assert step.text.startswith("part 0\npart 1") and step.input_tokens > MAX_PAUSES


@pytest.mark.parametrize("scenario", ["lookup-flaky", "refund-too-old"])
def test_every_step_and_the_run_keep_the_api_stop_reason(fake_api, scenario):
    result = claude_run(scenario)
    assert [s.api_stop_reason for s in result.steps] == ["tool_use", "end_turn"]
    assert result.end.api_stop_reason == "end_turn" and result.end.stop_reason == "final_answer"


@pytest.mark.parametrize(
    "behaviour, stop_reason", [(pause_turn("Looking."), "final_answer"), (truncated_text(), "max_tokens")]
)
def test_a_recorded_run_replays_to_the_same_steps_and_stop_reasons(fake_api, tmp_path, behaviour, stop_reason):
    cassette = tmp_path / "run.json"
    fake_api.script(behaviour)
    recorded = run_scenario("refund-too-old", "structured", model="claude", record_to=cassette)
    replayed = run_scenario("refund-too-old", "structured", model="replay", cassette=cassette)
    assert recorded.end.stop_reason == replayed.end.stop_reason == stop_reason
    assert replayed.end.api_stop_reason == recorded.end.api_stop_reason
    assert [(s.kind, s.api_stop_reason, s.text) for s in replayed.steps] == [
        (s.kind, s.api_stop_reason, s.text) for s in recorded.steps
    ]
