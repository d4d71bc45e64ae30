"""Structured tool errors: the structured fields decide, the lessons' missing cases, and traces that
say only what happened. Each scenario test runs the wrong policy and the right one."""

import io

import pytest

from agents.__main__ import main
from agents.policies import MODEL_RETRY_PROMPT
from agents.run import run_scenario
from agents.vocabulary import StepKind

NESTED_FLAG_BUG, SWALLOW = "nested-flag-bug", "swallowed-errors"  # the presets of the two lessons' mistakes


def tool_steps(result):
    return [s for s in result.steps if s.kind == StepKind.TOOL_USE]


def cli(*argv):
    out = io.StringIO()
    assert main(list(argv), out, io.StringIO()) == 0
    return out.getvalue()


def test_the_nested_flag_bug_never_retries_a_timeout_that_says_it_is_retryable():
    buggy, right = run_scenario("lookup-flaky", NESTED_FLAG_BUG), run_scenario("lookup-flaky", "structured")
    first = tool_steps(buggy)[0]
    assert first.result_content["error"]["isRetryable"] is True and first.retry_count == 0
    assert not buggy.end.verdict.passed
    assert tool_steps(right)[0].retry_count == 2 and right.end.verdict.passed


@pytest.mark.parametrize(
    "scenario,wrong,right",
    [
        ("lookup-order-ambiguous", "message", "structured"),  # only the category says the id is wrong
        ("lookup-timeout-swallowed", SWALLOW, "structured"),
        ("lookup-access-denied", SWALLOW, "structured"),
        ("refund-not-found-permission", "message", "structured"),
        ("customer-search-first", "starter", "structured"),
        ("coordinator-partial", SWALLOW, "structured"),  # lesson 002's quiz: a sub-agent swallows its timeout
    ],
)
def test_each_new_scenario_fails_under_the_wrong_policy_and_passes_under_the_right_one(scenario, wrong, right):
    assert not run_scenario(scenario, wrong).end.verdict.passed
    verdict = run_scenario(scenario, right).end.verdict
    assert verdict.passed, verdict.reason


def test_a_swallowed_timeout_is_reported_as_nothing_found():
    result = run_scenario("lookup-timeout-swallowed", SWALLOW)
    [step] = tool_steps(result)
    assert step.result_content == [] and not step.is_error
    assert "answer does not say there are no orders ✗" in result.end.verdict.reason


def test_the_nested_flag_preset_runs_from_the_cli_and_prints_the_timeout_it_did_not_retry():
    out = cli("run", "--scenario", "lookup-flaky", "--policy", "nested-flag-bug")
    assert "policy: nested-flag-bug (Structured errors, but the retry rule reads isRetryable at the top level" in out
    assert "step 1: lookup({'key': 'answer'}) -> ERROR (is_error): upstream returned 503\n" in out
    assert "    attempt " not in out  # one attempt: the flag said retryable, the rule read nothing
    assert "final answer: I couldn't look up 'answer': upstream returned 503." in out
    assert "verdict: FAIL: answered ✓; answer gives the value 42 ✗;" in out
    assert "[transient-not-retried] Transient error not retried · lookup · step 1" in out
    assert "fix: `retry_flag_path: error.isRetryable` (this run's policy has isRetryable)" in out
    right = cli("run", "--scenario", "lookup-flaky", "--policy", "structured")
    assert "    attempt 3 after 0.5516s backoff: ok" in right and "verdict: PASS" in right


def test_the_swallowed_errors_preset_runs_from_the_cli_and_prints_the_timeout_as_an_empty_result():
    out = cli("run", "--scenario", "lookup-timeout-swallowed", "--policy", "swallowed-errors")
    assert "policy: swallowed-errors (Every failure becomes an empty result with no is_error" in out
    assert "step 1: lookup_orders({'customer': 'Ana Ruiz'}) -> ok: []\n" in out
    assert "final answer: Here is what lookup_orders returned: none." in out
    assert (
        'verdict: FAIL: answered ✓; answer does not say there are no orders ✗ (it says "returned: none", but Ana '
        "Ruiz has 5 orders); answer says the lookup failed ✗"
    ) in out
    right = cli("run", "--scenario", "lookup-timeout-swallowed", "--policy", "structured")
    assert "-> ERROR (is_error): still failing after 3 attempts: the order history service timed out" in right
    assert "verdict: PASS" in right


def test_the_lessons_mistakes_are_listed_with_the_presets():
    listed = cli("list")
    assert "  nested-flag-bug          Structured errors, but the retry rule reads isRetryable" in listed
    assert "  swallowed-errors         Every failure becomes an empty result with no is_error" in listed


def test_a_misleading_not_found_is_not_repaired_when_the_category_says_permission():
    trusting, structured = (
        run_scenario("refund-not-found-permission", "message"),
        run_scenario("refund-not-found-permission", "structured"),
    )
    assert tool_steps(trusting)[0].input["order_id"] == "0912" and len(tool_steps(trusting)) == 2
    assert [s.input["order_id"] for s in tool_steps(structured)] == ["0912"]


def test_the_good_error_points_to_the_search_tool_which_the_model_uses():
    result = run_scenario("customer-search-first", "structured")
    assert [(s.tool_name, s.input) for s in tool_steps(result)] == [
        ("customer_orders", {"customer_id": "Ana Ruiz"}),
        ("search_customers", {"query": "Ana Ruiz"}),
        ("customer_orders", {"customer_id": "C-0417"}),
    ]
    assert "search_customers" in tool_steps(result)[0].result_content["error"]["message"]
    assert len(tool_steps(result)[0].result_content["error"]["message"]) < 100  # not a list of 1,201 ids


def test_the_model_retries_preset_asks_in_the_prompt_and_the_model_retries_once():
    result = run_scenario("refund-flaky-payment", "model-retries")
    assert result.start.system.endswith(MODEL_RETRY_PROMPT)
    first, second = tool_steps(result)
    assert first.retry_count == 0 and first.result_content["error"]["isRetryable"] is True
    assert second.input == first.input and not second.is_error and result.end.verdict.passed
    unprompted = run_scenario(
        "refund-flaky-payment", {"base": "model-retries", "name": "u", "ask_model_to_retry": False}
    )
    assert len(tool_steps(unprompted)) == 1 and not unprompted.end.verdict.passed


# --- part 5: traces say only what happened ----------------------------------------------------------


def test_a_fatal_stop_sends_no_tool_result_and_the_cli_says_so():
    result = run_scenario("fatal-credentials", "structured")
    [step] = tool_steps(result)
    assert step.result_content is None and step.attempts[-1].result_content is None
    assert all(m["role"] != "user" or isinstance(m["content"], str) for m in result.end.transcript)
    out = cli("run", "--scenario", "fatal-credentials", "--policy", "structured")
    assert "ERROR (is_error)" not in out and "tool_result sent" not in out.replace("no tool_result sent", "")
    assert "step 1: process_refund({'order_id': '0934'}) -> FATAL, the run stopped (no tool_result sent): " in out


def test_starter_attempt_lines_label_the_category_only_the_tool_knew():
    out = cli("run", "--scenario", "refund-too-old", "--policy", "starter")
    attempts = [line for line in out.splitlines() if line.startswith("    attempt ")]
    assert len(attempts) == 3
    assert all(line.endswith(": Error (tool knew: business, not retryable)") for line in attempts)
    structured = cli("run", "--scenario", "lookup-flaky", "--policy", "structured")
    assert "    attempt 1: upstream returned 503 [transient, retryable]" in structured


@pytest.mark.parametrize("policy", ["structured", "message"])
def test_only_the_last_attempt_says_retries_ran_out(policy):
    [step] = tool_steps(run_scenario("lookup-flaky-exhausted", policy))
    *retried, last = step.attempts
    assert len(retried) == 2
    for attempt in retried:
        said = str(attempt.result_content)
        assert "still failing" not in said and "try again later" not in said
    assert "still failing after 3 attempts" in str(last.result_content) and last.result_content == step.result_content
