"""The one place tests build attempts, steps and recorded runs.

Agent events first, as the loop reports them (``agents.events``): ``failed_attempt``, ``ok_attempt``,
``tool_step``, ``final_step``. Recorded rows are derived from those events the way the recorder
stores them (``step_fields``, through ``tracer.recording``'s own event-to-row mapping):
``StepFactory(event=…)`` saves one, ``steps_add`` many in one query, ``step_row`` builds an unsaved
one, and divergence tests take ``step_fields`` as the plain rows a page hands to ``run_divergence``.
Then factory-boy factories for runs, experiments and reviews, and the lessons' runs built from them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import factory
from django.utils import timezone

from agents.events import Attempt, RunEnd, RunStart, StepEvent
from agents.policies import PRESETS
from agents.vocabulary import StepKind
from tracer import recording
from tracer.models import Experiment, Run, Step, StopReview

TOO_OLD = "Refunds close after 30 days. This order is 239 days old."
UNSET: Any = object()

# --- agent events ---------------------------------------------------------------------------------


def start_for(run: Run) -> RunStart:
    """The loop's report that ``run`` started, under the simulated model."""
    return RunStart(
        scenario=run.scenario,
        policy_name=run.policy_name,
        policy_settings=run.policy_settings,
        model_backend="simulated",
        model_name="simulated-rules",
        task="Refund order 0871.",
    )


def failed_attempt(
    number: int = 1,
    *,
    category: str = "business",
    retryable: bool = False,
    message: str = TOO_OLD,
    backoff_s: float = 0.0,
    latency_ms: float = 4.0,
    result_content: Any = None,
) -> Attempt:
    """A try the tool refused or failed (by default: the refund is too old, business, not retryable);
    ``result_content``: what the policy made of it for the model."""
    return Attempt(
        number=number,
        ok=False,
        content=None,
        category=category,
        retryable=retryable,
        message=message,
        backoff_s=backoff_s,
        latency_ms=latency_ms,
        result_content=result_content,
    )


def ok_attempt(
    number: int = 1,
    content: Any = "ok",
    *,
    empty: bool = False,
    backoff_s: float = 0.0,
    latency_ms: float = 4.0,
    result_content: Any = None,
) -> Attempt:
    """A try that worked; ``empty`` when it found nothing."""
    return Attempt(
        number=number,
        ok=True,
        content=content,
        empty=empty,
        backoff_s=backoff_s,
        latency_ms=latency_ms,
        result_content=result_content,
    )


def tool_step(
    index: int,
    attempts: list[Attempt],
    *,
    tool: str = "process_refund",
    input: dict | None = None,
    result_content: Any = UNSET,
    text: str | None = None,
    tokens: tuple[int, int] = (10, 5),
) -> StepEvent:
    """One tool_use with its attempts, finished as the loop finishes it: error flags, category and
    retryable from the last attempt, retries counted, latency summed. ``result_content`` (what went
    back to the model) is the last content, or a bare "Error", unless given."""
    last = attempts[-1]
    if result_content is UNSET:
        result_content = last.content if last.ok else "Error"
    return StepEvent(
        index=index,
        kind=StepKind.TOOL_USE,
        tool_name=tool,
        tool_use_id=f"toolu_{index:02d}",
        input=input if input is not None else {"order_id": "0871"},
        attempts=attempts,
        result_content=result_content,
        is_error=not last.ok,
        category=None if last.ok else last.category,
        retryable=None if last.ok else last.retryable,
        retry_count=len(attempts) - 1,
        latency_ms=round(sum(a.latency_ms + a.backoff_s * 1000 for a in attempts), 3),
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        text=text,
    )


def final_step(index: int, text: str = "Done.", *, tokens: tuple[int, int] = (20, 8)) -> StepEvent:
    return StepEvent(
        index=index, kind=StepKind.FINAL_ANSWER, text=text, input_tokens=tokens[0], output_tokens=tokens[1]
    )


def lookup_failure(index: int, *, customer: str | None = None) -> StepEvent:
    """A lookup that failed with a transient 503 and was not retried: the filler of long runs."""
    return tool_step(
        index,
        [failed_attempt(1, category="transient", retryable=True, message="upstream returned 503")],
        tool="lookup_orders",
        input={"customer": customer or f"c{index}"},
    )


# --- recorded rows, derived from the events ------------------------------------------------------

STEP_FIELDS = [f.name for f in Step._meta.concrete_fields if f.name not in ("id", "run", "created_at")]


def step_row(event: StepEvent, *, run: Run | None = None) -> Step:
    """The unsaved ``Step`` the recorder writes for ``event``."""
    return recording._step_row(run=run, values=recording._step_values(event))


def step_fields(event: StepEvent) -> dict[str, Any]:
    """The stored fields of ``event``'s step row, as a plain dict (what divergence reads)."""
    row = step_row(event)
    return {name: getattr(row, name) for name in STEP_FIELDS}


def steps_add(run: Run, events: Iterable[StepEvent]) -> list[Step]:
    """Store ``events`` as ``run``'s steps in one query; the run's counters are left as they are."""
    return Step.objects.bulk_create([step_row(event, run=run) for event in events])


def steps_grow(run: Run, to: int) -> None:
    """Add failing lookups so ``run`` has ``to`` steps; a final answer stays the last step."""
    final = run.steps.filter(kind=Step.Kind.FINAL_ANSWER).first()
    if final is None:
        steps_add(run, [lookup_failure(i) for i in range(run.steps.count() + 1, to + 1)])
    else:
        run.steps.filter(pk=final.pk).update(index=to)
        steps_add(run, [lookup_failure(i) for i in range(final.index, to)])


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
    """A recorded step: ``event`` (by default a refused refund) stored as the recorder stores it; any
    other field given overrides what the event says."""

    class Meta:
        model = Step
        exclude = ("event",)

    run = factory.SubFactory(RunFactory)
    event = factory.Sequence(lambda n: tool_step(n + 1, [failed_attempt(1)]))

    @classmethod
    def _adjust_kwargs(cls, **kwargs):
        return {**step_fields(kwargs["event"]), **kwargs}


class StopReviewFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = StopReview

    run = factory.SubFactory(RunFactory, stop_reason=Run.StopReason.CONSECUTIVE_ERRORS)
    verdict = StopReview.Verdict.MODEL_STUCK


# --- the lessons' runs ----------------------------------------------------------------------------


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
            "failed_attempt_count": 3,
            "retry_count": 2,
            "wasted_retry_count": 2,
            "input_tokens": 400,
            "output_tokens": 90,
            **run_fields,
        }
    )
    steps_add(run, [tool_step(1, [failed_attempt(1), failed_attempt(2), failed_attempt(3)]), final_step(2, answer)])
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
            "failed_attempt_count": 1,
            "input_tokens": 300,
            "output_tokens": 80,
            **run_fields,
        }
    )
    refusal = {"isError": True, "error": {"errorCategory": "business", "isRetryable": False, "message": TOO_OLD}}
    steps_add(run, [tool_step(1, [failed_attempt(1)], result_content=refusal), final_step(2, answer)])
    return run


def run_with_steps(n: int, **run_fields) -> Run:
    """A run of ``n`` steps: failing lookups, then a final answer."""
    run = RunFactory(
        **{"step_count": n, "tool_call_count": n - 1, "error_count": n - 1, "failed_attempt_count": n - 1, **run_fields}
    )
    steps_add(run, [*(lookup_failure(i) for i in range(1, n)), final_step(n, "Gave up.")])
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
    steps_add(run, [_unknown_customer(i) for i in range(1, 4)])
    return run


def guard_stop_steps() -> list[StepEvent]:
    """The three identical failing calls of ``guard_stop``, as events to record."""
    return [_unknown_customer(i) for i in range(1, 4)]


def recorded_run(
    *,
    steps: list[StepEvent],
    end: RunEnd,
    model: str = "claude-haiku-4-5",
    backend: str = "claude",
    scenario: str = "refund-too-old",
    policy: str = "structured",
    experiment: Experiment | None = None,
    started_ago_s: float = 0.0,
) -> Run:
    """A run recorded as the worker records one (started, its steps, ended) and diagnosed as it ends,
    so every figure a page shows of it is the recorder's: duration, tokens, cost, findings."""
    from datetime import timedelta

    run = RunFactory(
        status=Run.Status.QUEUED, stop_reason="", verdict="", finished_at=None, experiment=experiment,
        started_at=timezone.now() - timedelta(seconds=started_ago_s),
    )  # fmt: skip
    start = RunStart(
        scenario=scenario,
        policy_name=policy,
        policy_settings=run.policy_settings,
        model_backend=backend,
        model_name=model,
        task="Refund.",
    )
    recording.run_start(run=run, start=start)
    for step in steps:
        recording.step_record(run=run, step=step)
    recording.run_finish(run=run, end=end)
    return Run.objects.get(pk=run.pk)


def _unknown_customer(i: int) -> StepEvent:
    message = f"unknown customer c-404 (try {i})"
    return tool_step(
        i,
        [failed_attempt(1, category="validation", message=message)],
        tool="lookup_orders",
        input={"customer": "c-404"},
        result_content={
            "isError": True,
            "error": {"errorCategory": "validation", "isRetryable": False, "message": message},
        },
    )


def max_steps_stop(**run_fields) -> Run:
    """A run the step limit stopped: two lookups that worked, then two that failed, then the limit."""
    run = RunFactory(
        **{
            "scenario": "lookup-loop",
            "stop_reason": Run.StopReason.MAX_STEPS,
            "guard": "stopped at the 4-step limit",
            "verdict": Run.Verdict.FAIL,
            "step_count": 4,
            "tool_call_count": 4,
            "error_count": 2,
            **run_fields,
        }
    )
    found = [
        tool_step(i, [ok_attempt(1, {"orders": []})], tool="lookup_orders", input={"customer": "c-7"}) for i in (1, 2)
    ]
    steps_add(run, [*found, lookup_failure(3, customer="c-7"), lookup_failure(4, customer="c-7")])
    return run
