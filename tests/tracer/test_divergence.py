"""Divergence on plain data: the lessons' runs, gaps, and the outcome that caused each split."""

from types import SimpleNamespace

from agents.events import StepEvent
from agents.policies import PRESETS, policy_from_dict
from agents.run import run_scenario
from tests.factories import TOO_OLD, failed_attempt, final_step, lookup_failure, ok_attempt, step_fields, tool_step
from tracer.divergence import attempt_outcome, run_differences, run_divergence, settings_compare, settings_snapshot

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
            failed_attempt_count=0,
            total_tokens=100,
            stop_reason="final_answer",
            verdict="pass",
            final_answer="x",
        )
        return SimpleNamespace(**{**base, **kw})

    # a retried 503 that then worked: a failed attempt, no failed step
    diffs = run_differences(run(retry_count=2, wasted_retry_count=2, failed_attempt_count=1, verdict="fail"), run())

    assert [d.label for d in diffs] == [
        "tool calls",
        "failed steps",
        "failed attempts",
        "retries",
        "retries spent on non-retryable errors",
        "tokens",
        "stop reason",
        "verdict",
        "final answer",
    ]
    assert [d.label for d in diffs if d.differs] == [
        "failed attempts",
        "retries",
        "retries spent on non-retryable errors",
        "verdict",
    ]


# --- the settings behind a split: real simulated runs of the lessons' scenarios -------------------


def simulated(scenario: str, policy: str | dict) -> dict:
    """One simulated run, in this process, as the compare page reads it: steps, settings, stop reason."""
    result = run_scenario(scenario, policy_from_dict(policy) if isinstance(policy, dict) else policy)
    return {
        "steps": rows(*result.steps),
        "policy": settings_snapshot(result.start.policy_settings, complete=True),
        "stop": str(result.end.stop_reason),
    }


def compare(a: dict, b: dict, **kw):
    return run_divergence(
        a["steps"],
        b["steps"],
        left_policy=a["policy"],
        right_policy=b["policy"],
        left_stop=a["stop"],
        right_stop=b["stop"],
        **kw,
    )


def variant(name: str, **settings) -> dict:
    return {"base": "structured", "name": name, **settings}


def reason_texts(result) -> list[str]:
    return [r.text for r in result.reasons]


def test_a_guard_that_stopped_one_run_is_named_against_a_run_with_no_guard():
    guarded = simulated("stuck-model", "structured")
    unguarded = simulated("stuck-model", variant("unguarded", consecutive_error_limit=0))

    result = compare(unguarded, guarded)

    assert result.split.what == "extra step" and result.split.row == 3
    assert result.cause is None
    assert reason_texts(result) == [
        "Run B's consecutive-error guard stopped the run after 3 errors in a row; run A has no guard."
    ]
    assert result.settings == {"consecutive_error_limit"}
    assert result.note == ""


def test_a_lower_guard_is_named_against_a_higher_one():
    result = compare(
        simulated("stuck-model", "structured"), simulated("stuck-model", variant("patient", consecutive_error_limit=5))
    )
    assert reason_texts(result) == [
        "Run A's consecutive-error guard stopped the run after 3 errors in a row; "
        "run B's guard allows 5 errors in a row."
    ]


def test_three_attempts_against_five_names_max_attempts():
    three = simulated("lookup-flaky-exhausted", "structured")
    five = simulated("lookup-flaky-exhausted", variant("five", max_attempts=5))

    result = compare(three, five)

    assert result.split.what == "retry" and result.split.attempt == 4
    assert result.cause is None  # every attempt both made came back the same
    assert reason_texts(result) == [
        "Run A gave up after 3 attempts (its max_attempts is 3); run B's max_attempts is 5."
    ]


def test_retrying_every_failure_against_only_retryable_ones_names_the_retry_rule():
    result = compare(
        simulated("refund-too-old", variant("retry-all", retry_on="all")), simulated("refund-too-old", "structured")
    )
    assert result.split.what == "retry"
    assert result.cause is None  # the same error format: the first attempts read alike
    assert reason_texts(result) == [
        "Run A retries every failure (retry_on all); run B retries only failures marked retryable "
        "(retry_on transient), and this one was business · not retryable."
    ]


def test_a_policy_that_retries_nothing_in_code_names_the_retry_rule():
    result = compare(
        simulated("lookup-flaky", variant("no-retries", retry_on="none")), simulated("lookup-flaky", "structured")
    )
    assert reason_texts(result) == [
        "Run A retries nothing in code (retry_on none); run B retries only failures marked retryable "
        "(retry_on transient)."
    ]


def test_the_nested_flag_bug_names_retry_flag_path():
    result = compare(
        simulated("lookup-flaky", variant("nested", retry_flag_path="isRetryable")),
        simulated("lookup-flaky", "structured"),
    )
    assert reason_texts(result) == [
        "Run A reads isRetryable at isRetryable (retry_flag_path), where the structured error never puts it, so "
        "it did not retry a retryable failure; run B reads it at error.isRetryable."
    ]


def test_a_swallowed_failure_names_swallow_errors_once():
    swallowed = simulated("lookup-timeout-swallowed", variant("swallows", swallow_errors=True))
    result = compare(swallowed, simulated("lookup-timeout-swallowed", "structured"))

    assert result.split.what == "retry"
    assert result.cause is not None and result.cause.left == "swallowed: sent as no results"
    assert reason_texts(result) == [
        "Run A swallows failures (swallow_errors): the failure went to the model as an empty result with no "
        "error, so nothing was retried; run B reports it as an error."
    ]


def test_an_empty_result_retried_as_an_error_names_empty_is_error():
    result = compare(simulated("lookup-empty", "starter"), simulated("lookup-empty", "structured"))
    assert result.split.what == "retry"
    assert reason_texts(result)[0] == (
        "Run A counts an empty result as an error (empty_is_error) and retried it; run B passes it on as a result."
    )


def test_an_empty_result_read_differently_is_the_cause_and_names_empty_is_error():
    result = compare(
        simulated("lookup-empty", variant("empty-errs", empty_is_error=True)), simulated("lookup-empty", "structured")
    )
    assert result.split.what == "final answer"
    assert (result.cause.left, result.cause.right) == ("empty · not retryable", "empty result")
    assert reason_texts(result) == [
        "Run A counts an empty result as an error (empty_is_error); run B passes it on as a result."
    ]


def test_an_outcome_read_differently_names_the_error_formats():
    result = compare(simulated("refund-too-old", "message"), simulated("refund-too-old", "structured"))
    assert result.split.what == "final answer"
    assert result.cause.right == "business · not retryable"
    assert reason_texts(result) == [
        "Run A's error_format is message: the model reads the error's message; run B's is structured: its "
        "category, whether it is retryable and its message."
    ]


def test_bare_against_structured_names_both_the_retry_rule_and_the_error_format():
    result = run_divergence(
        refund_starter(),
        refund_structured(),
        left_policy=settings_snapshot(PRESETS["starter"].settings(), complete=True),
        right_policy=settings_snapshot(PRESETS["structured"].settings(), complete=True),
        left_stop="final_answer",
        right_stop="final_answer",
    )
    assert result.settings == {"retry_on", "error_format"}
    assert reason_texts(result)[1].startswith('Run A\'s error_format is bare: the model reads only "Error"')


def test_a_fatal_stop_names_stop_on_fatal():
    stops = simulated("fatal-credentials", "structured")
    goes_on = simulated("fatal-credentials", variant("goes-on", stop_on_fatal=False))

    result = compare(stops, goes_on)

    assert result.split.summary == "Run B gave its final answer; run A has no such step."
    assert reason_texts(result) == [
        "Run A stops the run on a fatal error (stop_on_fatal); run B does not, so it sent the error to the model "
        "and went on."
    ]


def test_a_retry_split_against_a_fatal_stop_says_no_result_went_to_the_model():
    result = compare(simulated("fatal-credentials", "starter"), simulated("fatal-credentials", "structured"))
    assert result.split.what == "retry"
    assert result.split.summary.endswith(
        "run B stopped after 1 attempt and ended there (a fatal error): no result went to the model."
    )
    assert reason_texts(result)[0] == (
        "Run B stops the run on a fatal error (stop_on_fatal); run A does not, so it went on trying."
    )


def test_a_raising_policy_names_the_raise_error_format():
    result = compare(simulated("refund-too-old", "fragile"), simulated("refund-too-old", "message"))
    assert result.split.summary == "Run B gave its final answer; run A has no such step."
    assert reason_texts(result) == [
        "Run A's error_format is raise: the failure ended the run; run B reports a failure to the model as the "
        "error's message."
    ]


def test_a_lower_step_limit_names_max_steps():
    result = compare(
        simulated("stuck-model", variant("short", consecutive_error_limit=0, max_steps=5)),
        simulated("stuck-model", variant("long", consecutive_error_limit=0)),
    )
    assert reason_texts(result) == ["Run A stopped at its 5-step limit (max_steps); run B's max_steps is 10."]


def test_a_prompt_that_asks_the_model_to_retry_names_ask_model_to_retry():
    result = compare(
        simulated("lookup-flaky", "model-retries"),
        simulated("lookup-flaky", variant("no-retries", retry_on="none", max_attempts=1)),
    )
    assert result.split.what == "extra step" and result.cause is None
    assert reason_texts(result) == [
        "Run A's system prompt asks the model to retry a retryable failure once (ask_model_to_retry), and the "
        "model called lookup again; run B's does not."
    ]


def test_unknown_settings_are_said_to_be_unknown_not_guessed():
    imported = simulated("stuck-model", "structured")
    imported["policy"] = settings_snapshot({}, complete=False)  # imported with only a policy name
    result = compare(simulated("stuck-model", variant("unguarded", consecutive_error_limit=0)), imported)

    assert result.reasons == []
    assert result.note.startswith("No earlier tool outcome differed. The policy settings of run B are not known")


def test_a_partial_imported_snapshot_knows_only_what_it_says():
    snapshot = settings_snapshot({"error_format": "bare"}, complete=False)
    rows_ = {
        r.name: r
        for r in settings_compare(snapshot, settings_snapshot(PRESETS["structured"].settings(), complete=True))
    }
    assert (rows_["error_format"].left, rows_["error_format"].right, rows_["error_format"].differs) == (
        "bare",
        "structured",
        True,
    )
    assert (rows_["max_attempts"].left, rows_["max_attempts"].differs) == ("unknown", False)


def test_an_old_snapshot_of_a_run_executed_here_has_the_defaults_of_settings_added_since():
    old = {k: v for k, v in PRESETS["structured"].settings().items() if k not in ("swallow_errors", "retry_flag_path")}
    assert settings_snapshot(old, complete=True)["retry_flag_path"] == "error.isRetryable"


def test_the_settings_table_marks_only_the_settings_that_differ():
    table = settings_compare(
        settings_snapshot(PRESETS["structured"].settings(), complete=True),
        settings_snapshot(policy_from_dict(variant("unguarded", consecutive_error_limit=0)).settings(), complete=True),
    )
    assert [r.name for r in table if r.differs] == ["consecutive_error_limit"]
    guard = next(r for r in table if r.name == "consecutive_error_limit")
    assert (guard.left, guard.right) == ("3", "off (no guard)")
    assert "name" not in {r.name for r in table} and "max_attempts" in {r.name for r in table}


def test_same_settings_and_same_results_say_the_model_chose_differently():
    a = refund_structured()
    b = refund_structured()
    [b[1]] = rows(final_step(2, "Sorry, no refund."))
    same = settings_snapshot(PRESETS["structured"].settings(), complete=True)
    result = run_divergence(a, b, left_policy=same, right_policy=same)
    assert result.note == (
        "No earlier tool outcome differed and both policies have the same settings: the model chose differently "
        "from the same results."
    )


def test_runs_of_different_scenarios_are_not_given_a_split():
    result = compare(simulated("refund-too-old", "starter"), simulated("lookup-empty", "structured"), comparable=False)
    assert result.split is None and result.cause is None and result.reasons == [] and result.note == ""
    assert not result.comparable
    assert len(result.rows) >= 2  # still side by side, for reading


def test_a_ten_step_run_against_a_three_step_one_folds_its_repeats():
    result = compare(
        simulated("stuck-model", variant("unguarded", consecutive_error_limit=0)),
        simulated("stuck-model", "structured"),
    )
    shown = [(len(s.rows), s.label) for s in result.stretches]
    assert shown == [
        (1, ""),
        (2, "2 more identical failing calls of free_slots in both runs"),
        (1, ""),  # the split is never folded
        (6, "6 more identical failing calls of free_slots in run A; run B has no such steps"),
    ]
    assert sum(len(s.rows) for s in result.stretches) == len(result.rows) == 10


def test_a_long_stretch_the_same_in_both_runs_keeps_its_ends():
    steps = rows(*[lookup_failure(i) for i in range(1, 8)], final_step(8, "a"))
    other = rows(*[lookup_failure(i) for i in range(1, 8)], final_step(8, "b"))
    result = run_divergence(steps, other)
    assert [(len(s.rows), s.label) for s in result.stretches] == [
        (1, ""),
        (5, "5 more steps the same in both runs"),
        (1, ""),
        (1, ""),
    ]


def test_outcomes_alike_but_for_the_message_name_each_message():
    a = rows(tool_step(1, [failed_attempt(1, category="validation", message="bad date")], tool="t"), final_step(2, "a"))
    b = rows(tool_step(1, [failed_attempt(1, category="validation", message="no room")], tool="t"), final_step(2, "b"))
    result = run_divergence(a, b, left_policy=STRUCTURED, right_policy=STRUCTURED)
    assert (result.cause.left, result.cause.right) == (
        "validation · not retryable (bad date)",
        "validation · not retryable (no room)",
    )


def test_rows_after_a_runs_last_step_say_that_run_had_ended():
    result = compare(
        simulated("stuck-model", variant("unguarded", consecutive_error_limit=0)),
        simulated("stuck-model", "structured"),
    )
    assert [r.right_ended for r in result.rows] == [False] * 3 + [True] * 7
    assert not any(r.left_ended for r in result.rows)


def test_a_turn_the_api_cut_off_splits_against_the_call_the_other_run_made():
    cut = StepEvent(
        index=2,
        kind="model_stop",
        tool_name="process_refund",
        input={"order_id": "08"},
        text="Let me",
        api_stop_reason="max_tokens",
    )
    a = rows(tool_step(1, [failed_attempt(1)]), cut)
    b = rows(tool_step(1, [failed_attempt(1)]), tool_step(2, [ok_attempt(1, "refunded")], input={"order_id": "0871"}))

    result = run_divergence(a, b, left_policy=STRUCTURED, right_policy=STRUCTURED, left_stop="max_tokens")

    assert result.split.row == 1 and result.split.what == "model stop"
    assert result.split.summary == (
        "Run A stopped with nothing executed (the API's stop_reason max_tokens); run B called process_refund."
    )
    assert [a.left for a in result.rows[1].attempts] == [None]  # nothing of the cut-off turn ran


def full(policy: str, **changes) -> dict:
    return settings_snapshot({**PRESETS[policy].settings(), **changes}, complete=True)


def test_an_outcome_the_policies_report_alike_is_put_down_to_the_tool():
    down = failed_attempt(1, category="transient", retryable=True, message="upstream returned 503")
    a = rows(tool_step(1, [down], tool="lookup", input={"key": "k"}), final_step(2, "down"))
    b = rows(tool_step(1, [ok_attempt(1, 42)], tool="lookup", input={"key": "k"}), final_step(2, "42"))

    result = run_divergence(a, b, left_policy=full("structured"), right_policy=full("structured", max_attempts=1))

    assert result.cause.left == "transient · retryable"
    assert reason_texts(result) == [
        "Both policies report this outcome the same way: the tool itself answered differently."
    ]
    assert result.settings == set()


def test_settings_that_differ_but_decide_nothing_are_named_as_such():
    a, b = refund_structured(), refund_structured()
    [b[1]] = rows(final_step(2, "Sorry, no refund."))

    timing = run_divergence(a, b, left_policy=full("structured"), right_policy=full("structured", backoff_base_s=1))
    steps = run_divergence(a, b, left_policy=full("structured"), right_policy=full("structured", max_steps=20))

    assert timing.note == (
        "No earlier tool outcome differed and both policies have the same settings apart from backoff_base_s, "
        "which change no step: the model chose differently from the same results."
    )
    assert steps.note == (
        "No earlier tool outcome differed, and none of the settings that differ (max_steps) decides this step: "
        "the model chose differently from the same results."
    )


def test_a_value_no_policy_could_hold_is_unknown_and_never_compared():
    odd = settings_snapshot(
        {"max_steps": "ten", "consecutive_error_limit": [3], "error_format": "bare"}, complete=False
    )
    assert odd == {"error_format": "bare"}
    assert settings_snapshot(["not", "a", "mapping"], complete=True) == {}
    guarded = simulated("stuck-model", "structured")
    unknowable = settings_snapshot({"max_steps": "ten", "consecutive_error_limit": [3]}, complete=False)
    imported = {**simulated("stuck-model", variant("unguarded", consecutive_error_limit=0)), "policy": unknowable}
    result = compare(imported, guarded)
    assert result.reasons == [] and "policy settings of run A are not known" in result.note
