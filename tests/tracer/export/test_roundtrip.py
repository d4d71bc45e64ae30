"""Property: over generated run documents, import then export gives back the same steps and fields,
and exporting what was imported from an export changes nothing (Hypothesis). Generated runs include
model calls that were retried (a step's model_attempts) and one that failed for good and ended the run
(failed_model_call), with or without the sender's model_retry_count."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from agents.diagnosis.calls import step_repeats
from agents.events import Attempt, model_retries
from agents.vocabulary import ErrorCategory, StopReason
from tracer.export import document as export_document
from tracer.intake import files
from tracer.intake.schema import StepIn

pytestmark = pytest.mark.django_db

# Text a trace may carry, kept clear of what the recorder's redaction rewrites (key-like runs of
# letters and digits after "sk-", "Bearer ", "password=", …): no "-", "=" or ":"; accents, emoji,
# markup and newlines stay in.
ALPHABET = "abcdefghijklmnopqrstuvwxyzABC0123456789 .,!?'\"<>&/_\né€😀"
KEYS = st.sampled_from(["order_id", "customer", "orders", "message", "amount", "items"])
text = st.text(alphabet=ALPHABET, max_size=24)
finite = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | finite | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)
ATTEMPT_FIELDS = {f.name for f in dataclasses.fields(Attempt)}
category = st.none() | st.sampled_from([c.value for c in ErrorCategory])
# st.datetimes takes naive bounds; the values are made aware in UTC.
moment = st.datetimes(
    min_value=datetime(2020, 1, 1),  # noqa: DTZ001
    max_value=datetime(2030, 1, 1),  # noqa: DTZ001
    timezones=st.just(UTC),
)


@st.composite
def attempts(draw) -> list[dict]:
    out = []
    for number in range(1, draw(st.integers(1, 3)) + 1):
        out.append(
            {
                "number": number,
                "ok": draw(st.booleans()),
                "content": draw(json_values),
                "category": draw(category),
                "retryable": draw(st.none() | st.booleans()),
                "message": draw(st.none() | text),
                "backoff_s": draw(finite),
                "latency_ms": draw(finite),
                "empty": draw(st.booleans()),
                "result_content": draw(json_values),
            }
        )
        # Fields a newer Attempt carries (agents/events.py): generated when this version has them.
        if "is_error" in ATTEMPT_FIELDS:
            out[-1]["is_error"] = draw(st.none() | st.booleans())
        if "transport" in ATTEMPT_FIELDS:
            out[-1]["transport"] = draw(st.none() | st.sampled_from(["in_process", "mcp"]))
        if "mcp_result" in ATTEMPT_FIELDS:
            out[-1]["mcp_result"] = draw(st.none() | st.dictionaries(KEYS, json_values, max_size=2))
        if "removed" in ATTEMPT_FIELDS:
            out[-1]["removed"] = draw(st.lists(st.sampled_from(["a stack trace", "SQL", "a hostname"]), max_size=2))
    return out


@st.composite
def model_attempts(draw, *, min_size: int = 1) -> list[dict]:
    """One model call's HTTP attempts, each with every field (as the export writes them)."""
    out = []
    for number in range(1, draw(st.integers(min_size, 3)) + 1):
        status = draw(st.none() | st.sampled_from([200, 429, 500, 529]))
        failed = status != 200
        out.append(
            {
                "number": number,
                "status": status,
                "request_id": draw(st.none() | st.text(alphabet="abcdef0123456789", min_size=1, max_size=12)),
                "error": draw(text) if failed else None,
                "error_type": draw(st.sampled_from(["overloaded_error", "rate_limit_error", "timeout"]))
                if failed
                else None,
                "retry_after_s": draw(st.none() | finite),
                "wait_s": draw(finite) if number > 1 else 0.0,
                "latency_ms": draw(finite),
                "continuation": draw(st.booleans()),
            }
        )
    return out


def step_extras(draw) -> dict:
    """The fields the export writes only when they are known: a step's model call, its API stop reason."""
    extras = {}
    if draw(st.booleans()):
        extras["model_attempts"] = draw(model_attempts())
    if draw(st.booleans()):
        extras["api_stop_reason"] = draw(st.sampled_from(["tool_use", "end_turn", "max_tokens"]))
    return extras


def final_answer_step(draw, *, index: int, answer: str, extras: dict) -> dict:
    """A final answer step: its text, its tokens (drawn), and ``extras`` (its model call, its API stop reason)."""
    return {
        "index": index,
        "kind": "final_answer",
        "tool_name": "",
        "tool_use_id": "",
        "input": None,
        "attempts": [],
        "result_content": None,
        "is_error": False,
        "category": None,
        "retryable": None,
        "retry_count": 0,
        "latency_ms": 0.0,
        "input_tokens": draw(st.integers(0, 10**6)),
        "output_tokens": draw(st.integers(0, 10**6)),
        "text": answer,
        **extras,
    }


@st.composite
def steps(draw) -> list[dict]:
    out = []
    for index in range(1, draw(st.integers(0, 4)) + 1):
        out.append(
            {
                "index": index,
                "kind": "tool_use",
                "tool_name": draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=20)),
                "tool_use_id": draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", max_size=24)),
                "input": draw(st.none() | st.dictionaries(KEYS, json_values, max_size=3)),
                "attempts": draw(attempts()),
                "result_content": draw(json_values),
                "is_error": draw(st.booleans()),
                "category": draw(category),
                "retryable": draw(st.none() | st.booleans()),
                "retry_count": draw(st.integers(0, 5)),
                "latency_ms": draw(finite),
                "input_tokens": draw(st.integers(0, 10**6)),
                "output_tokens": draw(st.integers(0, 10**6)),
                "text": draw(text),
                **step_extras(draw),
            }
        )
    if draw(st.booleans()):
        out.append(final_answer_step(draw, index=len(out) + 1, answer=draw(text), extras=step_extras(draw)))
    return out


@st.composite
def documents(draw) -> dict:
    started = draw(moment)
    verdict = draw(st.none() | st.sampled_from(["pass", "fail"]))
    run = {
        "external_id": draw(st.just("") | st.text(alphabet="abcdef0123456789", min_size=1, max_size=32)),
        "scenario": draw(st.just("") | st.from_regex(r"[a-j0-9][a-j0-9-]{0,19}", fullmatch=True)),
        "policy": draw(st.just("") | st.from_regex(r"[a-j0-9][a-j0-9_]{0,19}", fullmatch=True)),
        "policy_settings": draw(st.dictionaries(st.sampled_from(["error_format", "max_attempts"]), json_values)),
        "source": draw(st.text(alphabet="abcdefghij .", max_size=30)),
        "model": draw(text),
        "task": draw(text),
        "status": "finished",
        "stop_reason": draw(st.none() | st.sampled_from([s.value for s in StopReason])),
        "final_answer": draw(text),
        "verdict": verdict,
        "verdict_reason": draw(text) if verdict else "",
        "error": draw(text),
        "guard": draw(text),
        "started_at": started.isoformat(),
        "finished_at": (started + timedelta(seconds=draw(st.integers(0, 10**5)))).isoformat(),
        "labels": draw(st.dictionaries(KEYS, st.none() | st.booleans() | st.integers(-1000, 1000) | text, max_size=3)),
        "transcript": draw(st.none() | st.dictionaries(KEYS, json_values, min_size=1, max_size=2)),
    }
    if draw(st.booleans()):  # a model call that failed for good ended the run
        run["stop_reason"] = "crashed"
        run["failed_model_call"] = draw(model_attempts())
    if draw(st.booleans()):  # the sender's count (a coordinator's includes its sub-agents' retries)
        run["model_retry_count"] = draw(st.integers(0, 50))
    if draw(st.booleans()):
        run["api_stop_reason"] = draw(st.sampled_from(["end_turn", "tool_use", "max_tokens", "refusal"]))
    return {"format": "rlt.run/1", "run": run, "steps": draw(steps())}


def counted_model_retries(doc: dict) -> int:
    """The model retries a document's steps and failed call show."""
    calls = [s.get("model_attempts", []) for s in doc["steps"]] + [doc["run"].get("failed_model_call", [])]
    return sum(model_retries(attempts) for attempts in calls)


def as_json(value):
    return json.loads(json.dumps(value))


def repeats_of(steps: list[dict]) -> list[int | None]:
    """Each step's ``repeat_of`` by ``agents.diagnosis.calls.step_repeats`` (the Tools page's definition)."""
    events = [StepIn.model_validate(step).to_event(index=k + 1) for k, step in enumerate(steps)]
    marks, previous = [], None
    for event in events:
        repeats = event.kind == "tool_use" and step_repeats(previous, event)
        marks.append(previous.index if repeats else None)
        previous = event if event.kind == "tool_use" else previous
    return marks


def moments_equal(a: str | None, b: str | None) -> bool:
    parse = datetime.fromisoformat
    return (a is None and b is None) or parse(a.replace("Z", "+00:00")) == parse(b.replace("Z", "+00:00"))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(doc=documents())
def test_import_then_export_gives_the_same_steps_and_fields(doc):
    run = files.run_import(arrival=files.item_arrival(data=doc))
    run.refresh_from_db()
    exported = as_json(export_document.run_export(run=run))
    assert exported["format"] == "rlt.run/1"
    # the steps as sent, and each model repeat marked as the recorder derives it from them
    assert [{k: v for k, v in s.items() if k != "repeat_of"} for s in exported["steps"]] == as_json(doc["steps"])
    assert [s.get("repeat_of") for s in exported["steps"]] == repeats_of(doc["steps"])
    for name, value in as_json(doc["run"]).items():
        if name.endswith("_at"):
            assert moments_equal(exported["run"][name], value), name
        else:
            assert exported["run"][name] == value, name
    if "model_retry_count" not in doc["run"]:  # left out: counted from the steps and the failed call
        assert exported["run"]["model_retry_count"] == counted_model_retries(doc)
    assert run.model_retry_count == exported["run"]["model_retry_count"]
    # and an export imported again exports the same
    again = files.run_import(arrival=files.item_arrival(data=dict(exported, run=dict(exported["run"], external_id=""))))
    second = as_json(export_document.run_export(run=again))
    assert second["steps"] == exported["steps"]
    assert {k: v for k, v in second["run"].items() if k != "external_id"} == {
        k: v for k, v in exported["run"].items() if k != "external_id"
    }


millis = st.integers(0, 10**6).map(lambda n: n / 1000)  # to the microsecond, as spans keep time


@st.composite
def recorded_tool_step(draw, index: int) -> dict:
    """A tool call as the recorder writes it: failed attempts then, maybe, one that succeeded; the
    step's outcome is its last attempt's, its retries the attempts before it, its latency theirs."""
    failures = draw(st.integers(0, 3))
    succeeded = failures == 0 or draw(st.booleans())
    attempts = []
    for number in range(1, failures + succeeded + 1):
        ok = succeeded and number == failures + 1
        content = draw(json_values.filter(lambda v: v is not None)) if not ok else draw(json_values)
        attempts.append(
            {
                "number": number,
                "ok": ok,
                "content": content,
                "category": None if ok else draw(category),
                "retryable": None if ok else draw(st.none() | st.booleans()),
                "message": None if ok else draw(text.filter(bool)),
                "backoff_s": draw(millis) if number > 1 else 0.0,
                "latency_ms": draw(millis),
                "empty": draw(st.booleans()),
                "result_content": content,
            }
        )
    last = attempts[-1]
    model = {"model_attempts": draw(model_attempts())} if draw(st.booleans()) else {}
    return {
        "index": index,
        "kind": "tool_use",
        "tool_name": draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=20)),
        # unique in the run, as the API's are: spans sharing a call id are one call's attempts
        "tool_use_id": f"toolu_{index}_" + draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", max_size=16)),
        "input": draw(st.dictionaries(KEYS, json_values, max_size=3)),
        "attempts": attempts,
        "result_content": last["content"],
        "is_error": not last["ok"],
        "category": last["category"],
        "retryable": last["retryable"],
        "retry_count": len(attempts) - 1,
        "latency_ms": round(sum(a["latency_ms"] + a["backoff_s"] * 1000 for a in attempts), 3),
        "input_tokens": draw(st.integers(0, 10**6)),
        "output_tokens": draw(st.integers(0, 10**6)),
        "text": draw(text),
        **model,
        **({"api_stop_reason": "tool_use"} if draw(st.booleans()) else {}),
    }


@st.composite
def recorded_runs(draw) -> dict:
    """A run document as a recorded run reads: its steps' fields follow from their attempts; one that
    answered stopped with its last step's answer; one whose model call failed for good crashed there;
    otherwise a guard or the step limit stopped it, or it was interrupted, with its reason."""
    doc = draw(documents())
    steps = [draw(recorded_tool_step(index)) for index in range(1, draw(st.integers(0, 4)) + 1)]
    run = dict(doc["run"], external_id="", policy=doc["run"]["policy"] or "p", policy_settings={}, transcript=None)
    run.pop("api_stop_reason", None)
    if run.get("failed_model_call"):
        run.update(stop_reason="crashed", final_answer="", error=draw(text.filter(bool)))
    elif draw(st.booleans()):
        answer = draw(text.filter(bool))
        model = {"model_attempts": draw(model_attempts())} if draw(st.booleans()) else {}
        stop = {"api_stop_reason": "end_turn"} if draw(st.booleans()) else {}
        steps.append(final_answer_step(draw, index=len(steps) + 1, answer=answer, extras={**model, **stop}))
        run.update(stop_reason="final_answer", final_answer=answer, error="")
    else:
        stop = draw(st.sampled_from(["consecutive_errors", "max_steps", "interrupted"]))
        run.update(stop_reason=stop, final_answer="", error=draw(text) if stop == "interrupted" else "")
    doc = {"format": "rlt.run/1", "run": run, "steps": steps}
    if "model_retry_count" in run:  # a sender's count holds at least the retries its calls show
        run["model_retry_count"] = max(run["model_retry_count"], counted_model_retries(doc))
    return doc


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(doc=recorded_runs())
@pytest.mark.parametrize("encoding", ["json", "protobuf"])
def test_a_run_exported_as_otlp_and_received_back_gives_the_same_steps_and_fields(doc, client, encoding):
    """The same property through the OTLP export: a generated run, imported, exported as OTLP (GenAI
    conventions), in JSON and in protobuf, and sent to /v1/traces by another user, is the same run: its
    steps and every field. Three things a run document may hold that a trace says otherwise, as docs/otlp.md says
    ("The export"), are made as a recorded run has them: a policy (without one a trace's run takes its
    service's name), a finished run's stop reason (without one, a trace without a final answer
    crashed) and a final answer's text (an empty one is no step); and, as a recorded run has it, a
    run's final answer is its last answer step's, and a run that answered stopped there."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    from tracer.export.otlp import otlp_protobuf, run_otlp_export, trace_id_of
    from tracer.models import Run
    from tracer.tokens import token_create

    note(json.dumps(doc, ensure_ascii=False))
    run = files.run_import(arrival=files.item_arrival(data=doc))
    run.refresh_from_db()
    before = as_json(export_document.run_export(run=run))
    user, _ = get_user_model().objects.get_or_create(username="otlp-roundtrip")
    user.user_permissions.add(Permission.objects.get(codename="add_run", content_type__app_label="tracer"))
    _, secret = token_create(user=user, name="t")
    exported = run_otlp_export(run=run)
    body = json.dumps(exported).encode() if encoding == "json" else otlp_protobuf(exported)
    kind = "application/json" if encoding == "json" else "application/x-protobuf"
    response = client.post("/v1/traces", body, content_type=kind, HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 200 and response.content in (b"{}", b""), response.content
    back = Run.objects.get(source=Run.Source.OTLP, owner=user, external_id=trace_id_of(run))
    after = as_json(export_document.run_export(run=back))
    assert len(after["steps"]) == len(before["steps"])
    for was, now in zip(before["steps"], after["steps"], strict=True):
        changed = {key: (was.get(key), now.get(key)) for key in was.keys() | now.keys() if was.get(key) != now.get(key)}
        assert not changed, f"step {was['index']}: {changed}"
    different = {
        name: (before["run"].get(name), value)
        for name, value in after["run"].items()
        if name not in ("external_id", "source") and before["run"].get(name) != value
    }
    assert not different, different
