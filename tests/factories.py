"""factory-boy factories for recorded runs, shaped like what the recorder writes."""

from __future__ import annotations

import factory
from django.utils import timezone

from agents.policies import PRESETS
from tracer.models import Experiment, Run, Step, StopReview

TOO_OLD = "Refunds close after 30 days. This order is 239 days old."


def attempt(
    number: int = 1,
    *,
    ok: bool = False,
    content=None,
    category: str | None = "business",
    retryable: bool | None = False,
    message: str | None = TOO_OLD,
    backoff_s: float = 0.0,
    latency_ms: float = 4.0,
    empty: bool = False,
) -> dict:
    """One ``agents.events.Attempt.to_dict()``."""
    if ok:
        category, retryable, message = None, None, None
    return {
        "number": number,
        "ok": ok,
        "content": content,
        "category": category,
        "retryable": retryable,
        "message": message,
        "backoff_s": backoff_s,
        "latency_ms": latency_ms,
        "empty": empty,
    }


class ExperimentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Experiment

    scenarios = factory.LazyFunction(lambda: ["refund-too-old"])
    policies = factory.LazyFunction(lambda: ["starter", "structured"])


class RunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Run

    scenario = "refund-too-old"
    policy_name = "structured"
    policy_settings = factory.LazyAttribute(
        lambda o: PRESETS[o.policy_name].settings() if o.policy_name in PRESETS else {}
    )
    model_backend = "simulated"
    task = "Please refund order 0871, the laptop stand is wobbly."
    status = Run.Status.FINISHED
    stop_reason = Run.StopReason.FINAL_ANSWER
    verdict = Run.Verdict.PASS
    started_at = factory.LazyFunction(timezone.now)
    finished_at = factory.LazyFunction(timezone.now)


class StepFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Step

    run = factory.SubFactory(RunFactory)
    index = factory.Sequence(lambda n: n + 1)
    kind = Step.Kind.TOOL_USE
    tool_name = "process_refund"
    tool_use_id = factory.Sequence(lambda n: f"toolu_{n:04d}")
    input = factory.LazyFunction(lambda: {"order_id": "0871"})
    attempts = factory.LazyFunction(lambda: [attempt(1)])
    is_error = True
    category = "business"
    retryable = False
    input_tokens = 120
    output_tokens = 30


class StopReviewFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = StopReview

    run = factory.SubFactory(RunFactory, stop_reason=Run.StopReason.CONSECUTIVE_ERRORS)
    verdict = StopReview.Verdict.MODEL_STUCK


def refund_too_old_starter(**run_fields) -> Run:
    """Lesson 002 under the starter harness: three bare "Error"s, then a reply blaming a generic error."""
    answer = "I wasn't able to refund order 0871 because the system returned a generic error without saying why."
    run = RunFactory(
        **{
            "policy_name": "starter",
            "verdict": Run.Verdict.FAIL,
            "final_answer": answer,
            "step_count": 2,
            "tool_call_count": 1,
            "error_count": 1,
            "retry_count": 2,
            "wasted_retry_count": 2,
            "input_tokens": 400,
            "output_tokens": 90,
            **run_fields,
        }
    )
    StepFactory(run=run, index=1, attempts=[attempt(1), attempt(2), attempt(3)], retry_count=2, result_content="Error")
    StepFactory(
        run=run,
        index=2,
        kind=Step.Kind.FINAL_ANSWER,
        tool_name="",
        input=None,
        attempts=[],
        is_error=False,
        category="",
        retryable=None,
        text=answer,
    )
    return run


def refund_too_old_structured(**run_fields) -> Run:
    """Lesson 002 under the structured harness: one business refusal, then an explanation."""
    answer = (
        "I couldn't refund order 0871 because refunds close 30 days after purchase, and this order is 239 days old."
    )
    run = RunFactory(
        **{
            "policy_name": "structured",
            "final_answer": answer,
            "step_count": 2,
            "tool_call_count": 1,
            "error_count": 1,
            "input_tokens": 300,
            "output_tokens": 80,
            **run_fields,
        }
    )
    StepFactory(
        run=run,
        index=1,
        attempts=[attempt(1)],
        result_content={
            "isError": True,
            "error": {"errorCategory": "business", "isRetryable": False, "message": TOO_OLD},
        },
    )
    StepFactory(
        run=run,
        index=2,
        kind=Step.Kind.FINAL_ANSWER,
        tool_name="",
        input=None,
        attempts=[],
        is_error=False,
        category="",
        retryable=None,
        text=answer,
    )
    return run


def run_with_steps(n: int, **run_fields) -> Run:
    """A run of ``n`` steps: failing tool calls, then a final answer."""
    run = RunFactory(**{"step_count": n, "tool_call_count": n - 1, "error_count": n - 1, **run_fields})
    Step.objects.bulk_create(
        [
            Step(
                run=run,
                index=i,
                kind=Step.Kind.TOOL_USE,
                tool_name="lookup_orders",
                input={"customer": f"c{i}"},
                attempts=[attempt(1, category="transient", retryable=True, message="upstream returned 503")],
                is_error=True,
                category="transient",
                retryable=True,
                result_content="Error",
            )
            for i in range(1, n)
        ]
        + [Step(run=run, index=n, kind=Step.Kind.FINAL_ANSWER, text="Gave up.")]
    )
    return run


def guard_stop(**run_fields) -> Run:
    """A run the consecutive-error guard stopped after three identical failing calls."""
    run = RunFactory(
        **{
            "policy_name": "structured",
            "stop_reason": Run.StopReason.CONSECUTIVE_ERRORS,
            "guard": "3 tool errors in a row",
            "verdict": Run.Verdict.FAIL,
            "step_count": 3,
            "tool_call_count": 3,
            "error_count": 3,
            **run_fields,
        }
    )
    for i in range(1, 4):
        StepFactory(
            run=run,
            index=i,
            tool_name="lookup_orders",
            input={"customer": "c-404"},
            attempts=[attempt(1, category="validation", message=f"unknown customer c-404 (try {i})")],
            category="validation",
            result_content={
                "isError": True,
                "error": {
                    "errorCategory": "validation",
                    "isRetryable": False,
                    "message": f"unknown customer c-404 (try {i})",
                },
            },
        )
    return run
