"""Structured errors (lesson 002) and the validate-then-run wrapper (lesson 000)."""

import pytest
from pydantic import BaseModel, Field

from agents.errors import ToolFailure, fail, is_empty, kind_of, should_retry
from agents.runner import run_tool
from agents.tools.currency import ConvertCurrencyInput, convert_currency

GBP_TO_USD = {"amount": 100, "from_currency": "GBP", "to_currency": "USD"}


def test_fail_carries_category_retry_flag_and_message():
    assert fail("business", "Refunds close after 30 days. This order is 239 days old.") == {
        "isError": True,
        "error": {
            "errorCategory": "business",
            "isRetryable": False,
            "message": "Refunds close after 30 days. This order is 239 days old.",
        },
    }


def test_only_a_transient_failure_says_a_retry_can_help():
    flags = {c: fail(c, "m")["error"]["isRetryable"] for c in ("transient", "validation", "permission", "business")}
    assert flags == {"transient": True, "validation": False, "permission": False, "business": False}


def test_an_empty_result_is_an_empty_list_with_no_error():
    result = fail("empty", "No orders found for Dana Whitfield.")
    assert result == {"orders": [], "message": "No orders found for Dana Whitfield."}
    assert "isError" not in result and is_empty(result)


def test_should_retry_reads_the_flag_inside_the_error_not_the_whole_result():
    result = fail("transient", "lookup for order 1042 timed out")
    assert should_retry(result["error"]) is True
    assert should_retry(result) is False  # lesson 002's nested-flag harness bug: the flag is one level down


def test_lesson_001s_four_kinds_map_onto_the_categories():
    assert [kind_of(c) for c in ("validation", "transient", "permission", "business", "fatal")] == [
        "model-fixable",
        "transient",
        "permanent-but-survivable",
        "permanent-but-survivable",
        "fatal",
    ]


def test_a_tool_failure_with_an_unknown_category_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match="expected one of validation, transient"):
        ToolFailure("oops", "m")


def test_run_tool_names_the_field_and_the_allowed_values_when_validation_fails():
    outcome = run_tool(ConvertCurrencyInput, convert_currency, GBP_TO_USD)
    assert outcome.as_lesson_dict() == {
        "ok": False,
        "content": "Invalid input -> from_currency: Input should be 'JPY', 'USD' or 'EUR'",
    }
    assert (outcome.category, outcome.retryable) == ("validation", False)


def test_run_tool_converts_100_usd_to_92_eur():
    usd_to_eur = {"amount": 100, "from_currency": "USD", "to_currency": "EUR"}
    outcome = run_tool(ConvertCurrencyInput, convert_currency, usd_to_eur)
    assert outcome.as_lesson_dict() == {"ok": True, "content": "100.0 USD = 92.0 EUR"}


def test_run_tool_joins_every_invalid_field_and_handles_input_that_is_not_a_mapping():
    outcome = run_tool(ConvertCurrencyInput, convert_currency, {"amount": -1, "from_currency": "USD"})
    assert outcome.message == ("Invalid input -> amount: Input should be greater than 0; to_currency: Field required")
    assert run_tool(ConvertCurrencyInput, convert_currency, "100 USD").message.startswith("Invalid input -> input:")


class KeyInput(BaseModel):
    key: str = Field(min_length=1)


def test_run_tool_never_raises_and_keeps_the_category_a_tool_reports():
    def refuse(key):
        raise ToolFailure("permission", "not yours")

    outcome = run_tool(KeyInput, refuse, {"key": "k"})
    assert (outcome.ok, outcome.category, outcome.retryable) == (False, "permission", False)
    assert outcome.content == "not yours"


def test_an_unexpected_runtime_error_becomes_a_tool_error_message_with_a_category():
    def divide(key):
        return 1 / 0

    def slow(key):
        raise TimeoutError("upstream took too long")

    broken = run_tool(KeyInput, divide, {"key": "k"})
    assert broken.content == "Tool error -> division by zero" and broken.category == "business"
    timed_out = run_tool(KeyInput, slow, {"key": "k"})
    assert (timed_out.category, timed_out.retryable) == ("transient", True)
