"""The loop as a recorder and the Messages API see it: order of reports, tool_results, retries, tokens."""

import json
import time

import pytest

from agents.events import Attempt, RunEnd, StepEvent
from agents.loop import format_result
from agents.policies import PRESETS, policy_from_dict
from agents.run import run_scenario
from agents.runner import Outcome
from agents.vocabulary import StepKind

SCENARIO_TASK = (
    "How much is 100 British pounds in US dollars? If pounds aren't supported, tell me what 100 US "
    "dollars is in euros instead."
)


class CallLog:
    """A recorder that notes the order of every report, children included."""

    def __init__(self, log=None, label="top"):
        self.log = [] if log is None else log
        self.label = label

    def run_started(self, start):
        self.log.append((self.label, "started", start.scenario))

    def step_recorded(self, step):
        self.log.append((self.label, "step", step.index))

    def run_finished(self, end):
        self.log.append((self.label, "finished", end.stop_reason))

    def child(self, *, label):
        return CallLog(self.log, label)


def test_the_recorder_hears_start_each_step_as_it_completes_then_the_end():
    log = CallLog()
    run_scenario("currency-unsupported", "structured", recorder=log)
    assert log.log == [
        ("top", "started", "currency-unsupported"),
        ("top", "step", 1),
        ("top", "step", 2),
        ("top", "step", 3),
        ("top", "finished", "final_answer"),
    ]


def test_a_sub_agent_reports_its_whole_run_to_a_child_recorder_before_the_parent_step():
    log = CallLog()
    run_scenario("coordinator-partial", "structured", recorder=log)
    first_child = [e for e in log.log if e[0].startswith("sub-agent 1")]
    assert first_child == [
        ("sub-agent 1: Look up order 1042 for Ana Ruiz.", "started", "coordinator-partial"),
        ("sub-agent 1: Look up order 1042 for Ana Ruiz.", "step", 1),
        ("sub-agent 1: Look up order 1042 for Ana Ruiz.", "step", 2),
        ("sub-agent 1: Look up order 1042 for Ana Ruiz.", "finished", "final_answer"),
    ]
    assert log.log.index(first_child[-1]) < log.log.index(("top", "step", 1))


def test_each_tool_result_answers_its_tool_use_by_id_with_is_error():
    result = run_scenario("currency-unsupported", "structured")
    transcript = result.end.transcript
    assert transcript[0] == {"role": "user", "content": SCENARIO_TASK}
    uses = [b for m in transcript if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"]
    results = [b for m in transcript if m["role"] == "user" and isinstance(m["content"], list) for b in m["content"]]
    assert [r["tool_use_id"] for r in results] == [u["id"] for u in uses] == [s.tool_use_id for s in result.steps[:2]]
    assert [r["is_error"] for r in results] == [True, False]
    assert json.loads(results[0]["content"])["error"]["errorCategory"] == "validation"


def test_steps_carry_the_tokens_of_the_response_that_produced_them():
    result = run_scenario("currency-unsupported", "structured")
    assert all(s.input_tokens > 0 and s.output_tokens > 0 for s in result.steps)
    assert result.steps[-1].kind == StepKind.FINAL_ANSWER and result.steps[-1].text == result.end.final_answer


def test_structured_backoff_grows_with_jitter_on_a_virtual_clock(monkeypatch):
    slept = []
    monkeypatch.setattr(time, "sleep", slept.append)
    result = run_scenario("lookup-flaky", "structured", seed=7)
    assert slept == []  # the backoff passed on the virtual clock: nothing slept
    waits = [a.backoff_s for a in result.steps[0].attempts]
    assert waits[0] == 0 and 0.2 <= waits[1] <= 0.3 and 0.4 <= waits[2] <= 0.6
    assert result.steps[0].latency_ms >= sum(waits) * 1000
    again = run_scenario("lookup-flaky", "structured", seed=7)
    assert [a.backoff_s for a in again.steps[0].attempts] == waits


def test_a_call_that_ran_a_sub_agent_measures_the_waits_the_sub_agent_passed_on_the_virtual_clock(monkeypatch):
    slept = []
    monkeypatch.setattr(time, "sleep", slept.append)
    result = run_scenario("coordinator-partial", "structured")
    assert slept == []
    (slow,) = [c for c in result.children if "1050" in c.label]
    waited = sum(a.backoff_s for s in slow.steps for a in s.attempts)
    assert waited > 0.1  # its retry's backoff
    step = next(s for s in result.steps if s.tool_name == "run_subagent" and "1050" in s.input["task"])
    (attempt,) = step.attempts
    assert attempt.latency_ms >= waited * 1000 + sum(a.latency_ms for s in slow.steps for a in s.attempts)


def test_a_custom_policy_without_retries_passes_the_first_503_to_the_model():
    policy = policy_from_dict({"base": "structured", "name": "no-retry", "retry_on": "none"})
    result = run_scenario("lookup-flaky", policy)
    first = result.steps[0]
    assert len(first.attempts) == 1 and first.result_content["error"]["message"] == "upstream returned 503"


def test_a_run_stops_at_max_steps_with_a_guard_message():
    result = run_scenario("stuck-model", {"base": "message", "name": "short", "max_steps": 2})
    assert result.end.stop_reason == "max_steps" and result.end.guard == "stopped at the 2-step limit"
    assert len(result.steps) == 2


def outcome(category, message, retryable=None):
    return Outcome(
        ok=False,
        content=message,
        category=category,
        retryable=category == "transient" if retryable is None else retryable,
        message=message,
    )


@pytest.mark.parametrize(
    "policy, expected",
    [
        ("starter", {"error": {"message": "Error"}}),
        ("message", "still failing after 3 attempts: upstream returned 503; try again later or use another source"),
        (
            "structured",
            {
                "isError": True,
                "error": {
                    "errorCategory": "transient",
                    "isRetryable": True,
                    "message": (
                        "still failing after 3 attempts: upstream returned 503; try again later or use another source"
                    ),
                },
            },
        ),
    ],
)
def test_an_exhausted_transient_failure_is_formatted_per_policy(policy, expected):
    assert format_result(PRESETS[policy], outcome("transient", "upstream returned 503"), attempts=3, tool="lookup") == (
        expected,
        True,
    )


def test_an_empty_result_is_an_error_only_when_the_policy_says_so():
    empty = Outcome(ok=True, content={"orders": [], "message": "No orders found."}, empty=True)
    assert format_result(PRESETS["structured"], empty, attempts=1, tool="lookup_orders") == (empty.content, False)
    variant = policy_from_dict({"base": "message", "name": "empty-err", "empty_is_error": True})
    assert format_result(variant, empty, attempts=1, tool="lookup_orders") == ("No orders found.", True)


def test_events_round_trip_through_plain_dicts():
    step = StepEvent(
        index=1,
        kind=StepKind.TOOL_USE,
        tool_name="lookup",
        input={"key": "answer"},
        attempts=[
            Attempt(
                number=1,
                ok=False,
                content="x",
                category="transient",
                retryable=True,
                message="upstream returned 503",
                result_content={"error": {"message": "Error"}},
            )
        ],
        is_error=True,
        category="transient",
        retryable=True,
    )
    assert StepEvent.from_dict(json.loads(json.dumps(step.to_dict()))) == step
    end = run_scenario("refund-too-old", "structured").end
    assert RunEnd.from_dict(json.loads(json.dumps(end.to_dict()))) == end
