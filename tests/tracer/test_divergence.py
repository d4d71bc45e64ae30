"""Divergence on plain data: the lessons' runs, gaps, and the outcome that caused each split."""

from types import SimpleNamespace

from agents.events import StepEvent
from tests.factories import TOO_OLD, failed_attempt, final_step, ok_attempt, step_fields, tool_step
from tracer.divergence import attempt_outcome, run_differences, run_divergence

STARTER = {"error_format": "bare", "retry_on": "all", "empty_is_error": True}
STRUCTURED = {"error_format": "structured", "retry_on": "transient", "empty_is_error": False}


def rows(*steps: StepEvent) -> list[dict]:
    """Steps as stored rows' fields: what the compare page hands to ``run_divergence``."""
    return [step_fields(step) for step in steps]


def refund_starter():
    return rows(
        tool_step(1, [failed_attempt(1), failed_attempt(2), failed_attempt(3)]),
        final_step(2, "I wasn't able to refund order 0871 because the system returned a generic error."),
    )


def refund_structured():
    return rows(
        tool_step(1, [failed_attempt(1)]),
        final_step(2, "I couldn't refund order 0871 because refunds close 30 days after purchase; it is 239 days old."),
    )


def test_refund_too_old_splits_where_starter_retried_and_structured_answered():
    result = run_divergence(refund_starter(), refund_structured(), left_policy=STARTER, right_policy=STRUCTURED)

    assert result.split.row == 0
    assert result.split.what == "retry"
    assert result.split.attempt == 2
    assert "Run A retried process_refund (3 attempts)" in result.split.summary
    assert result.split.summary.endswith(
        "run B stopped after 1 attempt and sent the result back to the model, which then gave its final answer."
    )
    split_row = result.rows[0]
    assert split_row.is_split
    assert [a.is_split for a in split_row.attempts] == [False, True, False]
    # the starter's retries sit opposite gaps
    assert [a.right is None for a in split_row.attempts] == [False, True, True]


def test_refund_too_old_cause_is_bare_error_against_business_not_retryable():
    result = run_divergence(refund_starter(), refund_structured(), left_policy=STARTER, right_policy=STRUCTURED)

    assert result.cause.row == 0
    assert result.cause.attempt == 1
    assert result.cause.tool_name == "process_refund"
    assert result.cause.left == 'bare "Error"'
    assert result.cause.right == "business · not retryable"
    assert result.rows[0].attempts[0].is_cause


def test_final_answers_are_aligned_opposite_each_other():
    result = run_divergence(refund_starter(), refund_structured(), left_policy=STARTER, right_policy=STRUCTURED)

    assert len(result.rows) == 2
    assert result.rows[1].left["kind"] == result.rows[1].right["kind"] == "final_answer"
    assert not result.rows[1].is_split


def test_identical_runs_do_not_split():
    result = run_divergence(refund_structured(), refund_structured(), left_policy=STRUCTURED, right_policy=STRUCTURED)

    assert result.split is None
    assert result.cause is None
    assert not any(r.is_split or r.is_cause for r in result.rows)


def test_only_a_different_final_answer_splits_at_the_answer():
    a = refund_structured()
    b = refund_structured()
    [b[1]] = rows(final_step(2, "Sorry, no refund."))

    result = run_divergence(a, b, left_policy=STRUCTURED, right_policy=STRUCTURED)

    assert result.split.row == 1
    assert result.split.what == "final answer"
    assert result.cause is None  # the tool outcomes were the same: the model chose differently


def test_a_repaired_input_splits_at_the_input_with_the_earlier_error_as_cause():
    # lesson 000: GBP rejected; a run told only "Error" repeats the call, a run told why repairs it
    rejected = failed_attempt(1, category="validation", message="from_currency: Input should be 'JPY', 'USD' or 'EUR'")
    gbp = {"amount": 100, "from_currency": "GBP", "to_currency": "EUR"}
    usd = {"amount": 100, "from_currency": "USD", "to_currency": "EUR"}
    message_policy = {"error_format": "message"}
    repaired = rows(
        tool_step(1, [rejected], tool="convert_currency", input=gbp),
        tool_step(2, [ok_attempt(1, "100.0 USD = 92.0 EUR")], tool="convert_currency", input=usd),
        final_step(3, "100 USD is 92.0 EUR."),
    )
    repeated = rows(
        tool_step(1, [rejected], tool="convert_currency", input=gbp),
        tool_step(2, [rejected], tool="convert_currency", input=gbp),
        final_step(3, "Sorry, the conversion failed."),
    )

    result = run_divergence(repaired, repeated, left_policy=message_policy, right_policy=STARTER)

    assert result.split.row == 1
    assert result.split.what in {"extra step", "input"}
    assert result.cause.row == 0
    assert result.cause.left.startswith("error: from_currency")
    assert result.cause.right == 'bare "Error"'


def test_a_step_only_one_run_took_is_a_gap():
    def lookup(index: int) -> StepEvent:
        return tool_step(index, [ok_attempt(1, [])], tool="lookup_orders", input={"customer": "c1"})

    a = rows(lookup(1), final_step(2, "You have no orders."))
    b = rows(lookup(1), lookup(2), final_step(3, "You have no orders."))

    result = run_divergence(a, b, left_policy=STRUCTURED, right_policy=STRUCTURED)

    assert [r.is_gap for r in result.rows] == [False, True, False]
    assert result.rows[1].left is None
    assert result.split.row == 1
    assert result.split.what == "extra step"
    assert result.split.summary == "Run B called lookup_orders; run A has no such step."


def test_a_different_tool_splits_at_that_step():
    a = rows(
        tool_step(1, [ok_attempt(1, ["0871"])], tool="lookup_orders", input={"customer": "c1"}), final_step(2, "done")
    )
    b = rows(tool_step(1, [failed_attempt(1)]), final_step(2, "done"))

    result = run_divergence(a, b)

    assert result.split.row == 0
    assert result.split.what == "tool"
    assert result.split.summary == "Run A called lookup_orders; run B called process_refund."


def test_one_run_answering_where_the_other_calls_a_tool():
    down = failed_attempt(1, category="transient", retryable=True, message="upstream returned 503")
    a = rows(
        tool_step(1, [down], tool="lookup_orders", input={"customer": "c1"}),
        final_step(2, "The lookup is down."),
    )
    b = rows(
        tool_step(1, [ok_attempt(1, ["0871"])], tool="lookup_orders", input={"customer": "c1"}),
        tool_step(2, [ok_attempt(1, "refunded")]),
        final_step(3, "Refunded."),
    )

    result = run_divergence(a, b, left_policy=STRUCTURED, right_policy=STRUCTURED)

    assert result.split.row == 1
    assert result.cause.row == 0
    assert result.cause.left == "transient · retryable"
    assert result.cause.right == "ok"


def test_the_cause_is_the_nearest_differing_outcome_not_the_first():
    def t(index: int, attempt, x: int) -> StepEvent:
        return tool_step(index, [attempt], tool="t", input={"x": x})

    timeout = failed_attempt(1, category="transient", retryable=True, message="timeout")
    a = rows(t(1, timeout, 1), t(2, ok_attempt(1, "v1"), 2), t(3, ok_attempt(1, "v"), 3))
    b = rows(t(1, ok_attempt(1, "ok"), 1), t(2, ok_attempt(1, "v2"), 2), t(3, ok_attempt(1, "v"), 4))

    result = run_divergence(a, b)

    assert result.split.row == 2
    assert result.cause.row == 1


def test_bare_errors_compare_equal_whatever_the_tool_said():
    closed = failed_attempt(1, category="business", message="closed")
    timeout = failed_attempt(1, category="transient", retryable=True, message="timeout")
    a = rows(tool_step(1, [closed], tool="t", input={"x": 1}), final_step(2, "a"))
    b = rows(tool_step(1, [timeout], tool="t", input={"x": 1}), final_step(2, "b"))

    result = run_divergence(a, b, left_policy=STARTER, right_policy=STARTER)

    assert result.split.what == "final answer"
    assert result.cause is None


def test_attempt_outcome_labels_per_error_format():
    refusal = failed_attempt(1).to_dict()
    assert attempt_outcome(refusal, error_format="bare").label == 'bare "Error"'
    assert attempt_outcome(refusal, error_format="message").label == f"error: {TOO_OLD}"
    assert attempt_outcome(refusal, error_format="structured").label == "business · not retryable"
    assert attempt_outcome(refusal, error_format="raise").label == "raised"
    assert attempt_outcome(failed_attempt(1, category="transient", retryable=True).to_dict()).label == (
        "transient · retryable"
    )
    assert attempt_outcome(ok_attempt(1, "x").to_dict()).label == "ok"


def test_an_empty_result_is_an_error_only_when_the_policy_says_so():
    empty = ok_attempt(1, [], empty=True).to_dict()
    assert attempt_outcome(empty, error_format="structured").label == "empty result"
    assert attempt_outcome(empty, error_format="bare", empty_is_error=True).label == 'bare "Error"'
    assert attempt_outcome(empty, error_format="bare", empty_is_error=True).ok is False


def test_run_differences_name_every_summary_measure():
    def run(**kw):
        base = dict(
            tool_call_count=1,
            error_count=1,
            retry_count=0,
            wasted_retry_count=0,
            total_tokens=100,
            stop_reason="final_answer",
            verdict="pass",
            final_answer="x",
        )
        return SimpleNamespace(**{**base, **kw})

    diffs = run_differences(run(retry_count=2, wasted_retry_count=2, verdict="fail"), run())

    assert [d.label for d in diffs] == [
        "tool calls",
        "errors",
        "retries",
        "retries spent on non-retryable errors",
        "tokens",
        "stop reason",
        "verdict",
        "final answer",
    ]
    assert [d.label for d in diffs if d.differs] == ["retries", "retries spent on non-retryable errors", "verdict"]
