"""Diagnosis on the lessons' own runs: each finding named where the lesson's mistake is, and nowhere else.

The runs are the built-in scenarios under the presets, with the simulated model (no network, no
database). The corpus from other sources (transcripts, spans, the step API) is in tests/tracer.
"""

from __future__ import annotations

import io

import pytest

from agents.__main__ import main
from agents.diagnosis import effects, lint
from agents.diagnosis.kinds import KEYS, RULE_SET, kind_get
from agents.diagnosis.rules import diagnose
from agents.events import Attempt, RunEnd, RunStart, StepEvent
from agents.run import run_scenario
from agents.scenarios import registry

LESSON_SCENARIOS = [name for name, pack in registry().pack_of.items() if pack.name == "lessons"]


def kinds_of(result) -> list[str]:
    """The kinds found in a run and its sub-agents' runs."""
    found = [f.kind for f in diagnose(start=result.start, steps=result.steps, end=result.end)]
    for child in result.children:
        found += kinds_of(child)
    return found


def findings_of(scenario: str, policy: str):
    result = run_scenario(scenario, policy)
    return diagnose(start=result.start, steps=result.steps, end=result.end)


# --- the demo experiment: starter against structured ------------------------------------------------

STARTER_REFUSALS = [
    "currency-unsupported",
    "room-date-format",
    "room-book-permission",
    "refund-too-old",
    "refund-bad-id",
    "refund-other-customer",
    "lookup-order-ambiguous",
    "lookup-access-denied",
    "customer-search-first",
]


@pytest.mark.parametrize("scenario", STARTER_REFUSALS)
def test_starter_runs_that_retry_a_refusal_get_retried_refusal_and_vague_error(scenario):
    kinds = kinds_of(run_scenario(scenario, "starter"))
    assert "retried-refusal" in kinds and "vague-error" in kinds


@pytest.mark.parametrize("scenario", [s for s in LESSON_SCENARIOS if s != "currency-bad-amount-vague"])
def test_structured_runs_of_the_same_scenarios_get_neither(scenario):
    kinds = kinds_of(run_scenario(scenario, "structured"))
    assert "retried-refusal" not in kinds and "vague-error" not in kinds


def test_a_tool_that_says_only_bad_value_is_a_vague_error_under_every_format():
    for policy in ("message", "structured"):
        assert kinds_of(run_scenario("currency-bad-amount-vague", policy)) == ["vague-error"], policy


def test_a_retried_refusal_says_who_retried_it_what_the_model_saw_and_the_setting_that_stops_it():
    (retried,) = [f for f in findings_of("refund-too-old", "starter") if f.kind == "retried-refusal"]
    assert retried.tool == "process_refund" and retried.steps == [1]
    assert "the harness retried it 2 times" in retried.message and "business, not retryable" in retried.message
    assert retried.evidence == "sent to the model: 'Error'"
    assert retried.setting == {"retry_on": "transient"} and "this run's policy has all" in retried.fix
    assert retried.wasted_calls == 2 and retried.wasted_tokens == 0
    assert "retries a permission error ten times" in retried.lesson


def test_a_vague_error_over_a_message_the_tool_wrote_points_to_the_structured_format_and_rewrites_from_it():
    (vague,) = [f for f in findings_of("refund-too-old", "starter") if f.kind == "vague-error"]
    assert vague.setting == {"error_format": "structured"}
    assert "Refunds close after 30 days. This order is 239 days old" in vague.rewrite
    scored = lint.lint(vague.rewrite)
    assert scored.what and scored.why and scored.instead and scored.no_internals


def test_a_model_that_keeps_repeating_a_bad_call_without_a_guard_gets_no_error_guard_and_its_cost():
    findings = findings_of("stuck-model", "message")
    (guard,) = [f for f in findings if f.kind == "no-error-guard"]
    assert guard.steps == list(range(1, 11)) and guard.setting == {"consecutive_error_limit": 3}
    assert guard.wasted_calls == 7 and guard.wasted_tokens > 0 and guard.cost is not None
    assert "10 failed calls in a row" in guard.message


def test_a_guard_that_stopped_the_stuck_model_at_three_is_the_lessons_remedy_not_a_finding():
    assert kinds_of(run_scenario("stuck-model", "structured")) == []


def test_an_empty_result_sent_as_an_error_and_retried_is_empty_as_error_not_a_vague_error():
    findings = findings_of("lookup-empty", "starter")
    assert [f.kind for f in findings] == ["empty-as-error"]
    (empty,) = findings
    assert empty.setting == {"empty_is_error": False} and empty.wasted_calls == 2
    assert "No orders found for Dana Whitfield" in empty.evidence


def test_a_fatal_error_retried_and_sent_to_the_model_is_fatal_continued():
    (fatal,) = [f for f in findings_of("fatal-credentials", "starter") if f.kind == "fatal-continued"]
    assert fatal.setting == {"stop_on_fatal": True} and "retried it 2 times" in fatal.message
    assert kinds_of(run_scenario("fatal-credentials", "structured")) == []


def test_the_model_retrying_a_transient_error_itself_is_transient_to_model():
    (left,) = [f for f in findings_of("lookup-flaky", "model-retries") if f.kind == "transient-to-model"]
    assert left.setting["retry_on"] == "transient" and left.setting["ask_model_to_retry"] is False
    assert left.wasted_tokens > 0
    assert kinds_of(run_scenario("lookup-flaky", "structured")) == []


def test_a_write_retried_after_a_timeout_with_no_idempotency_key_is_unsafe_and_says_how_effects_were_read():
    (unsafe,) = [f for f in findings_of("refund-flaky-payment", "starter") if f.kind == "unsafe-write-retry"]
    assert unsafe.tool == "process_refund" and "timed out" in unsafe.message
    assert "changes something (tool name and description)" in unsafe.basis


def test_a_not_found_message_over_a_permission_refusal_is_misleading():
    (misleading,) = findings_of("refund-not-found-permission", "structured")
    assert misleading.kind == "misleading-error" and "permission" in misleading.message
    assert "not found" in misleading.message


def test_a_tool_failure_raised_through_the_loop_is_crash_on_tool_error():
    (crash,) = findings_of("currency-unsupported", "fragile")
    assert crash.kind == "crash-on-tool-error" and crash.setting == {"error_format": "structured"}


def test_a_transient_failure_the_nested_flag_bug_never_retried_names_retry_flag_path():
    result = run_scenario("lookup-flaky", {"base": "structured", "retry_flag_path": "isRetryable"})
    (missed,) = [f for f in diagnose(start=result.start, steps=result.steps, end=result.end)]
    assert missed.kind == "transient-not-retried" and missed.setting == {"retry_flag_path": "error.isRetryable"}


@pytest.mark.parametrize("scenario", ["currency-unsupported", "room-date-format", "lookup-empty", "refund-too-old"])
def test_clean_runs_a_good_repair_a_refusal_explained_once_a_true_empty_result_get_no_findings(scenario):
    assert kinds_of(run_scenario(scenario, "structured")) == []


# --- a step the model sent again, as a transcript's importer makes it ----------------------------


def _start(tools=None):
    return RunStart("", "", {}, "imported", "claude-haiku-4-5", "task", tools=tools or [])


def test_attempts_the_transcript_shows_the_model_sending_are_the_models_repeats_and_cost_its_tokens():
    error = {"isError": True, "error": {"errorCategory": "business", "isRetryable": False, "message": "Refunds close"}}
    step = StepEvent(
        index=1,
        kind="tool_use",
        tool_name="process_refund",
        tool_use_id="t1",
        input={"order_id": "0871"},
        attempts=[
            Attempt(number=n, ok=False, content=error, category="business", retryable=False, result_content=error)
            for n in (1, 2)
        ],
        result_content=error,
        is_error=True,
        input_tokens=200,
        output_tokens=40,
    )
    use = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "process_refund", "input": {"order_id": "0871"}}],
    }
    again = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t2", "name": "process_refund", "input": {"order_id": "0871"}}],
    }
    end = RunEnd("final_answer", transcript={"messages": [use, {"role": "user", "content": []}, again]})
    (retried,) = [f for f in diagnose(start=_start(), steps=[step], end=end) if f.kind == "retried-refusal"]
    assert "the model sent it again once" in retried.message
    assert retried.wasted_tokens == 120 and retried.cost is not None


# --- lint, effects, the kinds table -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "vague"),
    [
        ("Error", True),
        ("ValueError", True),
        ("ValueError: ", True),
        ("invalid input", True),
        ("bad value", True),
        ("Tool error -> ", True),
        ("invalid date", False),  # lesson 001's "Better": it names what
        ("date '28/09/2026' is not in YYYY-MM-DD format; resend as '2026-09-28'", False),
        ("Invalid input -> from_currency: Input should be 'JPY', 'USD' or 'EUR'", False),
        ("Refunds close after 30 days. This order is 239 days old.", False),
    ],
)
def test_lint_calls_vague_what_the_lessons_call_vague(text, vague):
    schema = {"properties": {"date": {}, "from_currency": {}, "amount": {}}}
    assert lint.lint(text, schema=schema).vague is vague


def test_lint_scores_the_lessons_good_message_on_all_four_parts():
    good = lint.lint(
        "date '28/09/2026' is not in YYYY-MM-DD format; resend as '2026-09-28'", schema={"properties": {"date": {}}}
    )
    assert (good.what, good.why, good.instead, good.no_internals) == (True, True, True, True)


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ('Traceback (most recent call last):\n  File "/srv/app/refunds.py", line 88, in refund', "a stack trace"),
        ('psycopg2.errors.SyntaxError: syntax error at or near "WHERE"', "SQL"),
        ("SELECT * FROM orders WHERE id = 12 failed", "SQL"),
        ("could not reach db-primary.internal:5432", "a hostname or private address"),
        ("connect to 10.0.3.7 refused", "a hostname or private address"),
        ("open /var/lib/lumen/ledger.db failed", "a file path"),
        ("auth with [redacted: anthropic key] failed", "a secret"),
    ],
)
def test_leaks_name_what_internal_detail_a_message_holds(text, what):
    assert what in [w for w, _ in lint.leaks(text)]


@pytest.mark.parametrize(
    "text", ["Refunds close after 30 days. This order is 239 days old.", "free at 10:00 and 13:00"]
)
def test_a_plain_message_leaks_nothing(text):
    assert lint.leaks(text) == ()


def test_templates_mask_ids_numbers_and_quoted_values_so_one_message_about_many_orders_is_one_row():
    a = lint.template("Refunds close after 30 days. This order is 239 days old.")
    b = lint.template("Refunds close after 30 days. This order is 41 days old.")
    assert a == b == "Refunds close after <n> days. This order is <n> days old."
    assert lint.template("date '02/10/2026' is bad") == lint.template("date 'next Friday' is bad")


def test_a_rewrite_of_a_bare_error_names_the_field_that_breaks_the_schema_and_what_it_expects():
    schema = {"properties": {"from_currency": {"enum": ["JPY", "USD", "EUR"]}, "amount": {"type": "number"}}}
    suggested = lint.rewrite(
        tool="convert_currency",
        call_input={"amount": 100, "from_currency": "GBP"},
        schema=schema,
        category=None,
        sent="Error",
    )
    assert suggested.message.startswith("from_currency 'GBP' is not supported; expected one of 'JPY', 'USD', 'EUR'")
    assert suggested.category == "validation" and suggested.structured["error"]["isRetryable"] is False


@pytest.mark.parametrize(
    ("tool", "changes", "basis"),
    [
        ({"name": "charge", "annotations": {"readOnlyHint": True}}, False, effects.MCP),
        ({"name": "lookup", "annotations": {"readOnlyHint": False, "idempotentHint": True}}, True, effects.MCP),
        ({"name": "x", "read_only": True}, False, effects.PACK),
        ({"name": "process_refund", "description": "Refund an order in full."}, True, effects.NAME),
        ({"name": "lookup_orders", "description": "List the customer's orders."}, False, effects.NAME),
        (
            {"name": "free_slots", "description": "List free one-hour meeting-room slots on a date."},
            False,
            effects.NAME,
        ),
        ({"name": "run_subagent", "description": "Start a sub-agent for one job."}, None, ""),
    ],
)
def test_what_a_tool_changes_is_read_from_annotations_then_pack_flags_then_its_name(tool, changes, basis):
    found = effects.effects_of(tool)
    assert (found.changes, found.basis) == (changes, basis)


def test_every_kind_has_a_lesson_and_an_unknown_kind_names_the_valid_ones():
    assert RULE_SET and len(KEYS) == len(set(KEYS)) >= 8
    assert all(kind_get(k).lesson[:3] in ("000", "001", "002") for k in KEYS)
    with pytest.raises(ValueError, match="retried-refusal"):
        kind_get("error-rate-is-high")


def test_python_m_agents_run_prints_the_findings_after_the_verdict():
    out = io.StringIO()
    assert main(["run", "--scenario", "refund-too-old", "--policy", "starter"], out=out) == 0
    text = out.getvalue()
    assert text.index("verdict: FAIL") < text.index("findings: 2") < text.index("[retried-refusal]")
    assert "fix: `retry_on: transient`" in text
