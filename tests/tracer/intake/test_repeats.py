"""A model repeat reads the same from every source: the model sending the identical call again after it
failed is a step of its own, marked as a repeat of the earlier step (``Step.repeat_of``), counted as a
model repeat on the Tools page and, after a failure no retry fixes, as wasted; a harness retry stays an
attempt within its step. The same conversation goes in as a Messages transcript, as OpenInference
spans, as GenAI spans (OpenLLMetry with tool spans, the SDK's own chat spans carrying the messages),
through the step API and through the recorder the built-in runs use, and the stored steps, the run's
counters and the Tools page's rollup are compared (tests/tracer/intake/otlp/agents.py makes the spans
with the real instrumentation packages)."""

from __future__ import annotations

import json

import pytest

from agents.diagnosis.calls import step_repeats
from agents.events import Attempt, RunEnd, RunStart, StepEvent
from tests.tracer.intake.otlp import agents
from tests.tracer.intake.otlp.test_instrumentations import received, sender  # noqa: F401 (a fixture)
from tests.tracer.test_api import Api, may_add_runs
from tracer import recording
from tracer.intake.record import runs_record
from tracer.intake.transcripts import transcript_arrival
from tracer.models import Run, ToolDay
from tracer.tokens import token_create

pytestmark = pytest.mark.django_db

TOO_OLD = "Refunds close after 30 days. This order is 239 days old."

# The model sends the refund the tool refused (business, not retryable) again, identically: a wasted
# repeat, then the answer.
REFUSED_TWICE = agents.Script(
    task="Please refund order 0871.",
    turns=[
        agents.Turn([agents.use("toolu_a1", "process_refund", order_id="0871")], 120, 30),
        agents.Turn([agents.use("toolu_a2", "process_refund", order_id="0871")], 120, 30),
        agents.Turn([agents.text("I couldn't refund order 0871.")], 120, 30),
    ],
    results={
        "process_refund": [
            (False, agents.structured("business", TOO_OLD)),
            (False, agents.structured("business", TOO_OLD)),
        ]
    },
)


def stored(run: Run) -> list[tuple]:
    """What the database holds of each step, as every source must give it."""
    return [
        (
            s.index,
            s.kind,
            s.tool_name,
            s.is_error,
            s.category or None,
            len(s.attempts or []),
            s.retry_count,
            s.repeat_of,
            s.input_tokens,
            s.output_tokens,
        )
        for s in run.steps.order_by("index")
    ]


def counters(run: Run) -> tuple[int, ...]:
    run.refresh_from_db()
    return run.error_count, run.failed_attempt_count, run.retry_count, run.wasted_retry_count


def tool_day(run: Run, tool: str) -> tuple[int, int, int]:
    row = ToolDay.objects.get(tool=tool, source=run.source)
    return row.calls, row.repeats, row.wasted


def transcript_run(script: agents.Script) -> Run:
    conversation: list = []
    agents.agent_run(script, instrumentation="sdk", sdk_spans=False, conversation=conversation)
    (run,) = runs_record(arrivals=[transcript_arrival(transcript={"model": agents.MODEL, "messages": conversation})])
    return run


def steps_sent(script: agents.Script) -> list[dict]:
    """The steps a harness reporting through the step API sends for ``script``: each call the model
    made with the one try the harness gave it, then the answer."""
    answers = {name: list(results) for name, results in script.results.items()}
    steps = []
    for turn in script.turns:
        uses = [b for b in turn.content if b["type"] == "tool_use"]
        for k, block in enumerate(uses):
            ok, said = answers[block["name"]].pop(0)[:2]
            attempt = {"number": 1, "ok": ok, "content": said, "result_content": said, "is_error": not ok}
            if not ok:  # the harness knows its tool's structured error
                error = json.loads(said)
                attempt |= {"category": error["errorCategory"], "retryable": error["isRetryable"]}
            steps.append(
                {
                    "kind": "tool_use",
                    "tool_name": block["name"],
                    "tool_use_id": block["id"],
                    "input": block["input"],
                    "attempts": [attempt],
                    "input_tokens": turn.input_tokens if k == 0 else 0,
                    "output_tokens": turn.output_tokens if k == 0 else 0,
                }
            )
        if not uses:
            words = " ".join(b["text"] for b in turn.content if b["type"] == "text")
            steps.append(
                {
                    "kind": "final_answer",
                    "text": words,
                    "input_tokens": turn.input_tokens,
                    "output_tokens": turn.output_tokens,
                }
            )
    return steps


def api_run(django_user_model, script: agents.Script) -> Run:
    user = may_add_runs(django_user_model.objects.create_user(f"api-{id(script)}"))
    api = Api(token_create(user=user, name="harness")[1])
    opened = api.post("/runs", {"scenario": "repeats"})
    assert opened.status_code == 201, opened.content
    run_id = opened.json()["id"]
    sent = steps_sent(script)
    for step in sent:  # one request per step, as a harness reports them as they happen
        assert api.post(f"/runs/{run_id}/steps", {"steps": [step]}).status_code == 200
    assert api.post(f"/runs/{run_id}/finish", {}).status_code == 200
    document = api.get(f"/runs/{run_id}").json()
    assert [s.get("repeat_of") for s in document["steps"]] == [None, 1, None]  # the API says it too
    return Run.objects.get(pk=run_id)


def recorder_run(script: agents.Script) -> Run:
    """The steps written one by one by the recorder the built-in runs use (``DbRecorder``)."""
    run = Run.objects.create(status=Run.Status.QUEUED)
    recorder = recording.DbRecorder(run, step_delay_s=0)
    recorder.run_started(RunStart(scenario="", policy_name="", policy_settings={}, model_backend="simulated",
                                  model_name=agents.MODEL, task=script.task))  # fmt: skip
    for k, step in enumerate(steps_sent(script), start=1):
        attempts = [Attempt.from_dict(a) for a in step.get("attempts", [])]
        last = attempts[-1] if attempts else None
        recorder.step_recorded(
            StepEvent(
                index=k,
                kind=step["kind"],
                tool_name=step.get("tool_name"),
                tool_use_id=step.get("tool_use_id"),
                input=step.get("input"),
                attempts=attempts,
                result_content=attempts[-1].result_content if attempts else None,
                is_error=bool(last and not last.ok),
                category=last.category if last else None,
                retryable=last.retryable if last else None,
                input_tokens=step["input_tokens"],
                output_tokens=step["output_tokens"],
                text=step.get("text"),
            )
        )
    recorder.run_finished(RunEnd(stop_reason="final_answer", final_answer=script.turns[-1].content[0]["text"]))
    return run


@pytest.mark.parametrize(
    "script, wasted",
    [(agents.LOOKUP, 0), (REFUSED_TWICE, 1)],
    ids=["transient-then-worked", "refused-twice"],
)
def test_a_model_repeat_is_the_same_new_step_from_every_source(client, sender, django_user_model, script, wasted):  # noqa: F811
    tool = script.turns[0].content[-1]["name"]
    failed = 1 if wasted == 0 else 2
    # each step: index, kind, tool, is_error, category, attempts, retry_count, repeat_of, tokens
    category = "transient" if wasted == 0 else "business"
    want = [
        (1, "tool_use", tool, True, category, 1, 0, None, 120, 30),
        (2, "tool_use", tool, wasted == 1, None if wasted == 0 else category, 1, 0, 1, 120, 30),
        (3, "final_answer", "", False, None, 0, 0, None, 120, 30),
    ]
    runs = {
        "transcript": transcript_run(script),
        "openinference": received(client, sender, agents.agent_run(script, instrumentation="openinference")),
        "openllmetry+tools": received(
            client, sender, agents.agent_run(script, instrumentation="openllmetry", tool_spans=True)
        ),
        "sdk genai messages": received(client, sender, agents.agent_run(script, instrumentation="sdk", content=True)),
        "step api": api_run(django_user_model, script),
        "built-in recorder": recorder_run(script),
    }
    for source, run in runs.items():
        assert stored(run) == want, source
        # one failed step or two, as many failed attempts, no harness retry, the repeat wasted or not
        assert counters(run) == (failed, failed, 0, wasted), source
    for source in (Run.Source.IMPORT, Run.Source.OTLP, Run.Source.API, Run.Source.AGENT):
        rows = ToolDay.objects.filter(tool=tool, source=source)
        n = Run.objects.filter(source=source).count()
        # the Tools page's rollup: each run's two calls, one of them the model's repeat
        assert [(r.calls, r.repeats, r.wasted) for r in rows] == [(2 * n, n, wasted * n)], source


def test_a_harness_retry_stays_an_attempt_of_its_step_and_is_no_repeat(django_user_model):
    user = may_add_runs(django_user_model.objects.create_user("retrying-harness"))
    api = Api(token_create(user=user, name="harness")[1])
    run_id = api.post("/runs", {}).json()["id"]
    flaky = agents.structured("transient", "the orders service timed out (503)", True)
    step = {
        "kind": "tool_use",
        "tool_name": "lookup_orders",
        "input": {"customer": "c-7"},
        "attempts": [
            {"number": 1, "ok": False, "content": flaky, "category": "transient", "retryable": True},
            {"number": 2, "ok": True, "content": json.dumps({"orders": []})},
        ],
    }
    assert api.post(f"/runs/{run_id}/steps", {"steps": [step]}).status_code == 200
    run = Run.objects.get(pk=run_id)
    (row,) = run.steps.all()
    assert (len(row.attempts), row.retry_count, row.repeat_of, row.is_error) == (2, 1, None, False)
    # a retried 503 that then worked: one failed attempt, no failed step
    assert counters(run) == (0, 1, 1, 0)


def test_a_different_call_or_one_after_a_success_is_no_repeat():
    failed = StepEvent(index=1, kind="tool_use", tool_name="t", input={"a": 1}, is_error=True)
    worked = StepEvent(
        index=1, kind="tool_use", tool_name="t", input={"a": 1}, attempts=[Attempt(1, ok=True, content={"x": 1})]
    )
    same = StepEvent(index=2, kind="tool_use", tool_name="t", input={"a": 1})
    other = StepEvent(index=2, kind="tool_use", tool_name="t", input={"a": 2})
    assert step_repeats(failed, same) and not step_repeats(failed, other)
    assert not step_repeats(worked, same) and not step_repeats(None, same)
