"""Divergence on plain data: the lessons' runs, gaps, and the outcome that caused each split."""

from types import SimpleNamespace

from tracer.divergence import attempt_outcome, run_differences, run_divergence

STARTER = {"error_format": "bare", "retry_on": "all", "empty_is_error": True}
STRUCTURED = {"error_format": "structured", "retry_on": "transient", "empty_is_error": False}
TOO_OLD = "Refunds close after 30 days. This order is 239 days old."


def failure(number, category="business", retryable=False, message=TOO_OLD):
    return {
        "number": number,
        "ok": False,
        "content": None,
        "category": category,
        "retryable": retryable,
        "message": message,
        "backoff_s": 0.0,
        "latency_ms": 3.0,
        "empty": False,
    }


def success(number, content, empty=False):
    return {
        "number": number,
        "ok": True,
        "content": content,
        "category": None,
        "retryable": None,
        "message": None,
        "backoff_s": 0.0,
        "latency_ms": 2.0,
        "empty": empty,
    }


def tool(index, name, attempts, **input):
    return {"index": index, "kind": "tool_use", "tool_name": name, "input": input, "attempts": attempts, "text": ""}


def final(index, text):
    return {"index": index, "kind": "final_answer", "tool_name": "", "input": None, "attempts": [], "text": text}


def refund_starter():
    return [
        tool(1, "process_refund", [failure(1), failure(2), failure(3)], order_id="0871"),
        final(2, "I wasn't able to refund order 0871 because the system returned a generic error."),
    ]


def refund_structured():
    return [
        tool(1, "process_refund", [failure(1)], order_id="0871"),
        final(2, "I couldn't refund order 0871 because refunds close 30 days after purchase; it is 239 days old."),
    ]


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
    b[1] = final(2, "Sorry, no refund.")

    result = run_divergence(a, b, left_policy=STRUCTURED, right_policy=STRUCTURED)

    assert result.split.row == 1
    assert result.split.what == "final answer"
    assert result.cause is None  # the tool outcomes were the same: the model chose differently


def test_a_repaired_input_splits_at_the_input_with_the_earlier_error_as_cause():
    # lesson 000: GBP rejected; a run told only "Error" repeats the call, a run told why repairs it
    rejected = failure(1, "validation", False, "from_currency: Input should be 'JPY', 'USD' or 'EUR'")
    message_policy = {"error_format": "message"}
    repaired = [
        tool(1, "convert_currency", [rejected], amount=100, from_currency="GBP", to_currency="EUR"),
        tool(
            2,
            "convert_currency",
            [success(1, "100.0 USD = 92.0 EUR")],
            amount=100,
            from_currency="USD",
            to_currency="EUR",
        ),
        final(3, "100 USD is 92.0 EUR."),
    ]
    repeated = [
        tool(1, "convert_currency", [rejected], amount=100, from_currency="GBP", to_currency="EUR"),
        tool(2, "convert_currency", [rejected], amount=100, from_currency="GBP", to_currency="EUR"),
        final(3, "Sorry, the conversion failed."),
    ]

    result = run_divergence(repaired, repeated, left_policy=message_policy, right_policy=STARTER)

    assert result.split.row == 1
    assert result.split.what in {"extra step", "input"}
    assert result.cause.row == 0
    assert result.cause.left.startswith("error: from_currency")
    assert result.cause.right == 'bare "Error"'


def test_a_step_only_one_run_took_is_a_gap():
    a = [tool(1, "lookup_orders", [success(1, [])], customer="c1"), final(2, "You have no orders.")]
    b = [
        tool(1, "lookup_orders", [success(1, [])], customer="c1"),
        tool(2, "lookup_orders", [success(1, [])], customer="c1"),
        final(3, "You have no orders."),
    ]

    result = run_divergence(a, b, left_policy=STRUCTURED, right_policy=STRUCTURED)

    assert [r.is_gap for r in result.rows] == [False, True, False]
    assert result.rows[1].left is None
    assert result.split.row == 1
    assert result.split.what == "extra step"
    assert result.split.summary == "Run B called lookup_orders; run A has no such step."


def test_a_different_tool_splits_at_that_step():
    a = [tool(1, "lookup_orders", [success(1, ["0871"])], customer="c1"), final(2, "done")]
    b = [tool(1, "process_refund", [failure(1)], order_id="0871"), final(2, "done")]

    result = run_divergence(a, b)

    assert result.split.row == 0
    assert result.split.what == "tool"
    assert result.split.summary == "Run A called lookup_orders; run B called process_refund."


def test_one_run_answering_where_the_other_calls_a_tool():
    a = [
        tool(1, "lookup_orders", [failure(1, "transient", True, "upstream returned 503")], customer="c1"),
        final(2, "The lookup is down."),
    ]
    b = [
        tool(1, "lookup_orders", [success(1, ["0871"])], customer="c1"),
        tool(2, "process_refund", [success(1, "refunded")], order_id="0871"),
        final(3, "Refunded."),
    ]

    result = run_divergence(a, b, left_policy=STRUCTURED, right_policy=STRUCTURED)

    assert result.split.row == 1
    assert result.cause.row == 0
    assert result.cause.left == "transient · retryable"
    assert result.cause.right == "ok"


def test_the_cause_is_the_nearest_differing_outcome_not_the_first():
    first_a, first_b = failure(1, "transient", True, "timeout"), success(1, "ok")
    a = [tool(1, "t", [first_a], x=1), tool(2, "t", [success(1, "v1")], x=2), tool(3, "t", [success(1, "v")], x=3)]
    b = [tool(1, "t", [first_b], x=1), tool(2, "t", [success(1, "v2")], x=2), tool(3, "t", [success(1, "v")], x=4)]

    result = run_divergence(a, b)

    assert result.split.row == 2
    assert result.cause.row == 1


def test_bare_errors_compare_equal_whatever_the_tool_said():
    a = [tool(1, "t", [failure(1, "business", False, "closed")], x=1), final(2, "a")]
    b = [tool(1, "t", [failure(1, "transient", True, "timeout")], x=1), final(2, "b")]

    result = run_divergence(a, b, left_policy=STARTER, right_policy=STARTER)

    assert result.split.what == "final answer"
    assert result.cause is None


def test_attempt_outcome_labels_per_error_format():
    refusal = failure(1)
    assert attempt_outcome(refusal, error_format="bare").label == 'bare "Error"'
    assert attempt_outcome(refusal, error_format="message").label == f"error: {TOO_OLD}"
    assert attempt_outcome(refusal, error_format="structured").label == "business · not retryable"
    assert attempt_outcome(refusal, error_format="raise").label == "raised"
    assert attempt_outcome(failure(1, "transient", True)).label == "transient · retryable"
    assert attempt_outcome(success(1, "x")).label == "ok"


def test_an_empty_result_is_an_error_only_when_the_policy_says_so():
    empty = success(1, [], empty=True)
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
