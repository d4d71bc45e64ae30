"""Every scenario under every preset, and the lessons' traces, end to end through the SDK (simulated model)."""

import pytest

from agents.events import ListRecorder
from agents.policies import PRESETS
from agents.run import run_scenario
from agents.scenarios import registry, scenario_names
from agents.trace import format_end, format_step
from agents.vocabulary import StepKind

P, F = True, False
# scenario: verdict under fragile, starter, message, structured, model-retries, nested-flag-bug,
# swallowed-errors
EXPECTED = {
    "currency-unsupported": (F, F, P, P, P, P, F),
    "currency-bad-amount": (F, F, P, P, P, P, F),
    "currency-bad-amount-vague": (F, F, F, F, F, F, F),
    "room-date-format": (F, F, P, P, P, P, F),
    "room-book-permission": (F, F, P, P, P, P, F),
    "lookup-flaky": (F, P, P, P, F, F, F),
    "lookup-flaky-exhausted": (F, F, P, P, F, F, F),
    "refund-too-old": (F, F, P, P, P, P, F),
    "refund-bad-id": (F, F, P, P, P, P, F),
    "refund-other-customer": (F, F, P, P, P, P, F),
    "refund-flaky-payment": (F, P, P, P, P, F, F),
    "lookup-empty": (P, F, P, P, P, P, P),
    "fatal-credentials": (F, F, P, P, P, P, P),
    "stuck-model": (F, F, F, P, P, P, F),
    "lookup-order-ambiguous": (F, F, F, P, P, P, F),
    "lookup-timeout-swallowed": (F, P, P, P, P, P, F),
    "lookup-access-denied": (F, F, P, P, P, P, F),
    "refund-not-found-permission": (F, F, F, P, P, P, F),
    "customer-search-first": (F, F, P, P, P, P, F),
    "invoice-internal-error": (F, F, F, P, P, P, F),
    "charge-timeout-after-charge": (F, F, F, P, P, F, F),
    "coordinator-partial": (F, F, P, P, P, P, F),
}


def trace(result):
    return [format_step(s) for s in result.steps if s.kind == StepKind.TOOL_USE] + [format_end(result.end)]


def test_the_expected_table_covers_every_scenario_and_preset():
    assert sorted(EXPECTED) == sorted(scenario_names())
    assert list(PRESETS) == [
        "fragile",
        "starter",
        "message",
        "structured",
        "model-retries",
        "nested-flag-bug",
        "swallowed-errors",
    ]


@pytest.mark.parametrize("policy", list(PRESETS))
@pytest.mark.parametrize("scenario", list(EXPECTED))
def test_each_scenario_gets_its_expected_verdict_under_each_preset(scenario, policy):
    recorder = ListRecorder()
    result = run_scenario(scenario, policy, recorder=recorder)
    expected = EXPECTED[scenario][list(PRESETS).index(policy)]
    assert result.end.verdict.passed is expected, result.end.verdict.reason
    assert recorder.end is result.end and recorder.steps == result.steps
    assert recorder.start.scenario == scenario and recorder.start.model_backend == "simulated"


def test_currency_under_structured_prints_lesson_000s_three_lines():
    lines = "\n".join(trace(run_scenario("currency-unsupported", "structured"))).splitlines()
    assert lines[:3] == [
        "step 1: convert_currency({'amount': 100, 'from_currency': 'GBP', 'to_currency': 'USD'}) -> ERROR (is_error): "
        "Invalid input -> from_currency: Input should be 'JPY', 'USD' or 'EUR'",
        "step 2: convert_currency({'amount': 100, 'from_currency': 'USD', 'to_currency': 'EUR'}) -> ok: "
        "100.0 USD = 92.0 EUR",
        "final answer: 100 USD is about 92.0 EUR.",
    ]


def test_room_date_under_message_repairs_the_date_and_answers_as_lesson_001():
    result = run_scenario("room-date-format", "message")
    lines = "\n".join(trace(result)).splitlines()
    assert lines[:3] == [
        "step 1: free_slots({'date': '02/10/2026'}) -> ERROR (is_error): date '02/10/2026' is not in YYYY-MM-DD "
        "format; resend it in that format, e.g. '2026-10-02'",
        'step 2: free_slots({\'date\': \'2026-10-02\'}) -> ok: {"date": "2026-10-02", "free": ["10:00", "11:00", '
        '"12:00", "13:00", "15:00", "16:00"]}',
        "final answer: On 2026-10-02 the room is free at: 10:00, 11:00, 12:00, 13:00 (and 2 more slots).",
    ]


def test_starter_tries_a_too_old_refund_three_times_and_blames_a_generic_error():
    result = run_scenario("refund-too-old", "starter")
    (step,) = [s for s in result.steps if s.kind == StepKind.TOOL_USE]
    assert len(step.attempts) == 3 and step.retry_count == 2
    assert [a.result_content for a in step.attempts] == [{"error": {"message": "Error"}}] * 3
    assert "generic error" in result.end.final_answer


def test_structured_tries_a_too_old_refund_once_and_explains_the_window():
    result = run_scenario("refund-too-old", "structured")
    (step,) = [s for s in result.steps if s.kind == StepKind.TOOL_USE]
    assert (len(step.attempts), step.category, step.retryable) == (1, "business", False)
    assert step.result_content["error"]["errorCategory"] == "business"
    assert "30 days" in result.end.final_answer and "239 days" in result.end.final_answer


@pytest.mark.parametrize("policy", ["starter", "structured"])
def test_a_flaky_payment_is_retried_once_and_refunded_once(policy):
    result = run_scenario("refund-flaky-payment", policy)
    (step,) = [s for s in result.steps if s.kind == StepKind.TOOL_USE]
    assert step.retry_count == 1 and not step.is_error
    assert "refunded" in result.end.final_answer
    assert "refund applied exactly once ✓" in result.end.verdict.reason


def test_structured_answers_no_orders_after_one_call_without_an_error():
    result = run_scenario("lookup-empty", "structured")
    (step,) = [s for s in result.steps if s.kind == StepKind.TOOL_USE]
    assert (len(step.attempts), step.is_error, step.attempts[0].empty) == (1, False, True)
    assert "no orders" in result.end.final_answer


def test_starter_treats_an_empty_result_as_a_failure_and_retries_it():
    result = run_scenario("lookup-empty", "starter")
    (step,) = [s for s in result.steps if s.kind == StepKind.TOOL_USE]
    assert step.is_error and len(step.attempts) == 3
    assert "wasn't able to look up your orders" in result.end.final_answer


@pytest.mark.parametrize("policy", ["structured", {"base": "message", "consecutive_error_limit": 3}])
def test_a_consecutive_error_limit_of_three_stops_the_stuck_model_after_three_errors(policy):
    result = run_scenario("stuck-model", policy)
    assert result.end.stop_reason == "consecutive_errors"
    assert result.end.guard == "3 tool errors in a row"
    assert [s.is_error for s in result.steps] == [True, True, True]
    assert {tuple(s.input.items()) for s in result.steps} == {(("date", "next Friday"),)}


def test_without_a_guard_the_stuck_model_runs_to_the_step_limit():
    result = run_scenario("stuck-model", "message")
    assert result.end.stop_reason == "max_steps" and len(result.steps) == PRESETS["message"].max_steps


def test_fragile_ends_crashed_with_the_exception_recorded():
    result = run_scenario("stuck-model", "fragile")
    assert result.end.stop_reason == "crashed"
    assert result.end.error.startswith("ToolFailure: date 'next Friday' is not in YYYY-MM-DD format")
    assert result.steps[0].is_error and result.steps[0].result_content is None
    assert format_step(result.steps[0]).endswith(
        "-> CRASHED (no tool_result sent): " + result.steps[0].attempts[0].message
    )


def test_a_fatal_error_stops_the_run_with_a_clear_reason_and_no_answer():
    result = run_scenario("fatal-credentials", "structured")
    assert result.end.stop_reason == "fatal_error" and result.end.final_answer is None
    assert "credentials" in result.end.error and "revoked" in result.end.error
    assert len(result.steps) == 1 and len(result.steps[0].attempts) == 1


def test_the_structured_coordinator_reports_failed_tried_partial_next_from_four_child_runs():
    recorder = ListRecorder()
    result = run_scenario("coordinator-partial", "structured", recorder=recorder)
    assert result.end.final_answer == (
        "failed:  lookup for order 1050, timed out twice\n"
        "tried:   retried once, locally\n"
        "partial: orders 1042 and 1043 found, 1050 not checked\n"
        "next:    the customer can wait for a call back or ask again"
    )
    assert [c.label for c in recorder.children] == [
        "sub-agent 1: Look up order 1042 for Ana Ruiz.",
        "sub-agent 2: Look up order 1043 for Ana Ruiz.",
        "sub-agent 3: Look up order 1050 for Ana Ruiz.",
        "sub-agent 4: Check whether support can call Ana Ruiz back.",
    ]
    assert all(c.start and c.end and c.steps for c in recorder.children)
    slow = recorder.children[2].steps[0]
    assert (slow.tool_name, len(slow.attempts), slow.category) == ("lookup_order", 2, "transient")
    assert [c.end.final_answer for c in result.children] == [c.end.final_answer for c in recorder.children]


def test_the_starter_coordinator_loses_the_partial_results():
    result = run_scenario("coordinator-partial", "starter")
    assert "1042" not in result.end.final_answer and "generic error" in result.end.final_answer
    assert len(result.children) == 6  # the failing sub-agent was started three times


def test_every_scenario_has_a_title_task_and_description():
    for s in registry().scenarios.values():
        assert s.title and s.task and s.description


def test_an_unknown_scenario_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match="unknown scenario 'nope'; expected one of currency-unsupported"):
        run_scenario("nope", "structured")


def test_an_unknown_policy_is_refused_naming_the_presets():
    with pytest.raises(ValueError, match="expected one of fragile, starter, message, structured"):
        run_scenario("lookup-flaky", "sturdy")
