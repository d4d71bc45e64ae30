"""The lessons' last mistakes as built-in scenarios: internal details in a failure's text (001).

Each is run through the CLI and the loop with the simulated model; what is asserted is what a user
reads (the printed trace, the answer, the verdict, the findings) and what a stored step carries.
"""

from __future__ import annotations

import io

from agents.__main__ import main
from agents.diagnosis.lint import clean_error_text
from agents.diagnosis.rules import diagnose
from agents.run import run_scenario
from agents.tools.billing import BILLING_HOST, BILLING_KEY, debug_page


def cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue() + err.getvalue()


def kinds(result) -> list[str]:
    return [f.kind for f in diagnose(start=result.start, steps=result.steps, end=result.end)]


def test_cleaning_keeps_the_sentence_for_the_reader_and_names_what_it_took_out():
    cleaned, removed = clean_error_text(debug_page("INV-2207"))
    assert cleaned == (
        "Invoice INV-2207 could not be read: the billing database timed out; try again in a few minutes."
    )
    assert removed == ("a stack trace", "SQL", "a hostname or private address", "a file path", "a secret")
    assert clean_error_text("upstream returned 503") == ("upstream returned 503", ())
    one_line, what = clean_error_text("lookup failed: connection to db-1.internal:5432 refused")
    assert "db-1" not in one_line and "lookup failed" in one_line and what == ("a hostname or private address",)


def test_under_message_the_model_repeats_the_leak_and_the_judge_and_diagnosis_say_so():
    result = run_scenario("invoice-internal-error", "message")
    answer = result.end.final_answer
    assert BILLING_HOST in answer and "SELECT id, customer_id" in answer and "Traceback" in answer
    assert not result.end.verdict.passed
    assert "answer repeats no internal detail of the error ✗" in result.end.verdict.reason
    assert "internal-detail-leak" in kinds(result)


def test_under_structured_the_harness_cleans_the_text_names_what_it_removed_and_the_answer_passes():
    result = run_scenario("invoice-internal-error", "structured")
    (step,) = [s for s in result.steps if s.tool_name == "lookup_invoice"]
    sent = step.result_content["error"]["message"]
    assert BILLING_HOST not in sent and BILLING_KEY not in sent and "Traceback" not in sent
    assert "the billing database timed out" in sent
    assert [a.removed for a in step.attempts] == [
        ["a stack trace", "SQL", "a hostname or private address", "a file path", "a secret"]
    ] * 3
    assert BILLING_HOST in step.attempts[0].message  # the tool's own text is kept for the operator
    assert result.end.verdict.passed, result.end.verdict.reason
    assert BILLING_HOST not in result.end.final_answer
    assert "internal-detail-leak" not in kinds(result)


def test_under_starter_the_model_is_sent_only_error_so_nothing_leaks_but_it_is_vague():
    result = run_scenario("invoice-internal-error", "starter")
    assert kinds(result) == ["vague-error"]
    assert not result.end.verdict.passed
    assert "answer says the billing system failed ✗" in result.end.verdict.reason


def test_the_cli_prints_the_lessons_trace_with_what_was_removed_and_never_the_key():
    code, out = cli("run", "--scenario", "invoice-internal-error", "--policy", "structured")
    assert code == 0
    assert "removed from the error before the model read it: a stack trace, SQL, a hostname or private " in out
    assert "verdict: PASS" in out and "findings: none" in out
    for policy in ("starter", "message", "structured", "fragile"):
        code, out = cli("run", "--scenario", "invoice-internal-error", "--policy", policy)
        assert BILLING_KEY not in out, policy
    assert "api_key=[redacted: openai key]" in out  # fragile's crash names the tool's message, redacted


def test_a_variant_can_turn_cleaning_on_for_the_message_format():
    code, out = cli(
        "run",
        "--scenario",
        "invoice-internal-error",
        "--policy",
        '{"base": "message", "clean_error_text": true, "name": "message-clean"}',
    )
    assert code == 0 and "verdict: PASS" in out and BILLING_HOST not in out.split("final answer:")[1]


# --- retrying writes ---------------------------------------------------------------------------


def charges(policy: str):
    result = run_scenario("charge-timeout-after-charge", policy)
    return result, result.end.verdict


def test_starter_retries_the_charge_blindly_and_charges_twice_which_the_judge_and_diagnosis_say():
    result, verdict = charges("starter")
    (step,) = [s for s in result.steps if s.tool_name == "charge_card"]
    assert len(step.attempts) == 2 and "idempotency_key" not in step.input
    assert not verdict.passed and "card charged exactly once ✗ (charged 2 times)" in verdict.reason
    assert kinds(result) == ["unsafe-write-retry"]


def test_structured_retries_it_with_one_idempotency_key_and_charges_once():
    result, verdict = charges("structured")
    (step,) = [s for s in result.steps if s.tool_name == "charge_card"]
    assert step.input["idempotency_key"].startswith("rlt-") and len(step.attempts) == 2
    assert verdict.passed and "card charged exactly once ✓" in verdict.reason, verdict.reason
    assert kinds(result) == []


def test_never_retrying_a_write_charges_once_and_is_no_finding_but_the_answer_cannot_confirm_it():
    result, verdict = charges("message")
    (step,) = [s for s in result.steps if s.tool_name == "charge_card"]
    assert len(step.attempts) == 1
    assert "card charged exactly once ✓" in verdict.reason and "answer confirms the payment ✗" in verdict.reason
    assert kinds(result) == []


def test_the_model_sending_the_charge_again_gets_the_same_key_so_it_is_charged_once():
    result, verdict = charges("model-retries")
    keys = [s.input["idempotency_key"] for s in result.steps if s.tool_name == "charge_card"]
    assert len(keys) == 2 and len(set(keys)) == 1
    assert verdict.passed, verdict.reason


def test_a_tool_declares_its_effects_as_mcp_annotations_in_the_recorded_definitions_not_in_requests():
    result = run_scenario("charge-timeout-after-charge", "structured")
    (tool,) = result.start.tools
    assert tool["annotations"] == {"readOnlyHint": False, "idempotentHint": False}
    sent = result.end.transcript  # the conversation; the request's tools are the API's definitions
    assert all("annotations" not in str(m) for m in sent)


def test_the_cli_prints_the_charge_trace_and_the_blind_retry_under_a_variant():
    code, out = cli(
        "run",
        "--scenario",
        "charge-timeout-after-charge",
        "--policy",
        '{"base": "structured", "name": "blind-writes", "write_retries": "blind"}',
    )
    assert code == 0
    assert "step 1: charge_card({'order_id': '5521'}) -> ok" in out
    assert "attempt 2 after" in out and "verdict: FAIL: card charged exactly once ✗ (charged 2 times)" in out
    assert "[unsafe-write-retry]" in out


def test_over_mcp_the_server_lists_the_declared_annotations_and_the_harness_acts_on_them():
    policy = {"base": "structured", "name": "structured-mcp", "tool_transport": "mcp"}
    result = run_scenario("charge-timeout-after-charge", policy, mcp_server="memory")
    (tool,) = result.start.tools
    assert tool["annotations"] == {"readOnlyHint": False, "idempotentHint": False}
    assert result.steps[0].input["idempotency_key"].startswith("rlt-")
    assert result.end.verdict.passed, result.end.verdict.reason


# --- lesson 000's exercise 2 -----------------------------------------------------------------------


def test_a_bad_amount_named_precisely_is_repaired_and_bad_value_is_not():
    code, out = cli("run", "--scenario", "currency-bad-amount", "--policy", "structured")
    assert code == 0
    assert (
        "step 1: convert_currency({'amount': -100, 'from_currency': 'USD', 'to_currency': 'EUR'}) -> ERROR "
        "(is_error): Invalid input -> amount: Input should be greater than 0"
    ) in out
    assert "step 2: convert_currency({'amount': 100, 'from_currency': 'USD', 'to_currency': 'EUR'}) -> ok" in out
    assert "verdict: PASS" in out
    code, out = cli("run", "--scenario", "currency-bad-amount-vague", "--policy", "structured")
    assert code == 0
    assert "-> ERROR (is_error): bad value" in out and "step 2" not in out
    assert "Could you send me the corrected amount?" in out
    assert "verdict: FAIL: answered ✓; answer gives 92 EUR ✗" in out and "[vague-error]" in out


# --- the coordinator's report --------------------------------------------------------------------


def test_the_coordinators_report_says_what_was_tried_under_every_policy():
    tried = {}
    for policy in ("message", "structured", "model-retries"):
        answer = run_scenario("coordinator-partial", policy).end.final_answer
        tried[policy] = next(line for line in answer.splitlines() if line.startswith("tried:"))
    assert tried["structured"] == "tried:   retried once, locally"
    assert tried["model-retries"] == "tried:   tried twice: its model sent the call again once"
    assert all("not retried" not in line for line in tried.values()), tried
