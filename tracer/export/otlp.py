"""A recorded run as OTLP JSON with OpenTelemetry GenAI attributes, for Phoenix, Langfuse or ``/v1/traces``.

One trace per run: an ``invoke_agent`` root span with the run's labels (``rlt.scenario``,
``rlt.policy``, ``rlt.stop_reason``, ``rlt.verdict`` …); per step a ``chat`` span (the model turn
that asked for it: ``gen_ai.usage.*``, ``gen_ai.output.messages``) and one ``execute_tool`` span per
attempt (``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments`` /
``.result``, ``error.type`` and status ERROR when it failed); the final answer is a last ``chat``
span. A model call's HTTP attempts (retries, statuses, request-ids, waits) go on its chat span as
``rlt.model_attempts``, each failed one also as an OpenTelemetry ``exception`` event; the call that failed
for good and ended the run is a last ``chat`` span with status ERROR and GenAI's ``error.type``, and the
run's model retries are the root's ``rlt.model_retry_count``. Steps keep no wall-clock times, so spans are
laid end to end from the run's start with each attempt's own latency and backoff (a model call's span
lasts its attempts' waits and latencies). What GenAI has no name for travels as ``rlt.*`` attributes, so
this receiver reads back the same steps.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import datetime, timedelta
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from ..intake.otlp.conventions import EPOCH, EXTRA_ATTEMPT_FIELDS, MODEL_ATTEMPTS, MODEL_RETRY_COUNT
from ..intake.otlp.receiver import EXPORT_SCOPE
from ..intake.otlp.wire import STATUS_ERROR, STATUS_OK
from ..models import Run, Step

SCOPE = EXPORT_SCOPE
# GenAI's model calls are CLIENT spans (a call to a remote model); the agent and its tools INTERNAL
SPAN_KIND_INTERNAL = trace_pb2.Span.SpanKind.SPAN_KIND_INTERNAL
SPAN_KIND_CLIENT = trace_pb2.Span.SpanKind.SPAN_KIND_CLIENT
SERVICE = "repair-loop-tracer"
CHAT_NS = 1_000  # a model turn's span: steps keep no model latency


def unix_ns(moment: datetime) -> int:
    """``moment`` in nanoseconds since the epoch, in integers (``timestamp() * 1e9`` is a float: a
    microsecond off for a time of this decade)."""
    return (moment - EPOCH) // timedelta(microseconds=1) * 1000


def _hex(seed: str, digits: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:digits]


def trace_id_of(run: Run) -> str:
    """The run's trace id: the one it arrived with, else one derived from its id (stable across exports)."""
    external = (run.external_id or "").lower()
    if run.source == Run.Source.OTLP and len(external) == 32 and all(c in "0123456789abcdef" for c in external):
        return external
    return _hex(f"rlt-run:{run.pk}", 32)


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}


KEPT_EMPTY = frozenset({"gen_ai.tool.call.result"})  # a tool that answered "" said something


def _attributes(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """Attributes as OTLP JSON, without those that say nothing (None, or "" but a tool's result)."""
    return [{"key": k, "value": _value(v)} for k, v in attrs.items() if v is not None and (v != "" or k in KEPT_EMPTY)]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _result(value: Any) -> tuple[str, str]:
    """A tool result as an attribute: text as it is, anything else as JSON (``rlt.result.encoding``)."""
    if isinstance(value, str):
        return value, "text"
    return _dumps(value), "json"


class _Spans:
    def __init__(self, trace_id: str) -> None:
        self.trace_id = trace_id
        self.spans: list[dict[str, Any]] = []
        self.count = 0

    def add(
        self,
        *,
        name: str,
        parent: str,
        start: int,
        end: int,
        attrs: dict[str, Any],
        error: str | None = None,
        events: list[dict[str, Any]] | None = None,
        kind: int = SPAN_KIND_INTERNAL,
    ) -> str:
        self.count += 1
        # ids that sort in the order the spans were laid: a receiver ordering spans that start and end
        # at the same nanosecond by their id (as this one does) reads them back in this order
        span_id = _hex(self.trace_id, 8) + f"{self.count:08x}"
        status = {"code": STATUS_ERROR, "message": error} if error is not None else {"code": STATUS_OK}
        self.spans.append(
            {
                "traceId": self.trace_id,
                "spanId": span_id,
                "parentSpanId": parent,
                "name": name,
                "kind": kind,
                "startTimeUnixNano": str(start),
                "endTimeUnixNano": str(end),
                "attributes": _attributes(attrs),
                **({"events": events} if events else {}),
                "status": status,
            }
        )
        return span_id


def _model_call(attempts: list[dict[str, Any]], start: int) -> tuple[int, list[dict[str, Any]]]:
    """When a model call's span ends, laid from ``start`` through its attempts' waits and latencies (at
    least ``CHAT_NS``), and an OpenTelemetry ``exception`` event for each attempt that failed, at its end."""
    t = start
    events = []
    for attempt in attempts:
        t += round((attempt.get("wait_s") or 0) * 1e9)
        t += round((attempt.get("latency_ms") or 0) * 1e6)
        if attempt.get("error"):
            said = {
                "exception.type": attempt.get("error_type") or "model_api_error",
                "exception.message": attempt["error"],
            }
            events.append({"timeUnixNano": str(t), "name": "exception", "attributes": _attributes(said)})
    return max(t, start + CHAT_NS), events


def _chat_attrs(run: Run, step: Step, parts: list[dict[str, Any]], finish: str) -> dict[str, Any]:
    """A step's model turn. Its finish reason is the API's stop reason when the step kept one (a run
    from outside may not have): none is made up, so the step comes back without one too."""
    attempts = {MODEL_ATTEMPTS: _dumps(step.model_attempts)} if step.model_attempts else {}
    message = {"role": "assistant", "parts": parts, **({"finish_reason": finish} if finish else {})}
    return {
        **attempts,
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": run.model_name,
        "gen_ai.usage.input_tokens": step.input_tokens,
        "gen_ai.usage.output_tokens": step.output_tokens,
        "gen_ai.output.messages": _dumps([message]),
        "gen_ai.response.finish_reasons": [finish] if finish else None,
    }


def _steps_laid(
    run: Run, steps: list[Step], spans: _Spans, parent: str, t: int, children: dict[tuple[int, int], list[Run]]
) -> int:
    """Lay ``run``'s steps as spans under ``parent`` from ``t``: a ``chat`` span per step, an
    ``execute_tool`` span per attempt, and under a step that ran sub-agents their own ``invoke_agent``
    spans with their steps (``children``: the run tree's sub-agent runs by parent and step). Returns when
    the last span ends."""
    for step in steps:
        chat_end, chat_events = _model_call(step.model_attempts or [], t)
        final = step.kind != Step.Kind.TOOL_USE  # a final answer, or a model turn that ended the run unexecuted
        if step.kind == Step.Kind.MODEL_STOP:  # what the cut-off or refused reply held, a call it was writing too
            parts = ([{"type": "text", "content": step.text}] if step.text else []) + (
                [{"type": "tool_call", "id": step.tool_use_id, "name": step.tool_name, "arguments": step.input}]
                if step.tool_name
                else []
            )
        elif final:
            parts = [{"type": "text", "content": step.text}]
        else:
            parts = ([{"type": "text", "content": step.text}] if step.text else []) + [
                {"type": "tool_call", "id": step.tool_use_id, "name": step.tool_name, "arguments": step.input}
            ]
        spans.add(
            name=f"chat {run.model_name}".strip(),
            parent=parent,
            start=t,
            end=chat_end,
            attrs=_chat_attrs(run, step, parts, step.api_stop_reason),
            events=chat_events,
            kind=SPAN_KIND_CLIENT,
        )
        t = chat_end
        if final:
            continue
        call_id = step.tool_use_id or (f"rlt-step-{step.index}" if len(step.attempts or []) > 1 else "")
        attempts = step.attempts or [
            {
                "number": 1,
                "ok": not step.is_error,
                "content": step.result_content,
                "result_content": step.result_content,
                "category": step.category or None,
                "retryable": step.retryable,
                "message": None,
                "backoff_s": 0.0,
                "latency_ms": step.latency_ms,
                "empty": False,
            }
        ]
        for attempt in attempts:
            t += round((attempt.get("backoff_s") or 0) * 1e9)
            end = t + round((attempt.get("latency_ms") or 0) * 1e6)
            shown = attempt.get("result_content")
            if shown is None:
                shown = attempt.get("content")
            result, encoding = _result(shown)
            failed = not attempt.get("ok", True)
            attrs = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": step.tool_name,
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.call.arguments": _dumps(step.input),
                "gen_ai.tool.call.result": result,
                "rlt.result.encoding": encoding,
                "rlt.attempt.content": _dumps(attempt.get("content")),
                "rlt.attempt.empty": bool(attempt.get("empty")),
                **{
                    f"rlt.attempt.{name}": _dumps(attempt[name])
                    for name in EXTRA_ATTEMPT_FIELDS
                    if attempt.get(name) is not None
                },
            }
            if failed:
                attrs["error.type"] = attempt.get("category") or "tool_error"
                attrs["rlt.error.category"] = attempt.get("category")
                if attempt.get("retryable") is not None:
                    attrs["rlt.error.retryable"] = attempt["retryable"]
            tool_span = spans.add(
                name=f"execute_tool {step.tool_name}",
                parent=parent,
                start=t,
                end=end,
                attrs=attrs,
                error=(attempt.get("message") or "") if failed else None,
            )
            t = end
        for child in children.get((run.pk, step.index), []):  # a sub-agent it ran: a child span of the call
            _sub_agent_laid(
                child, spans, parent=tool_span, t=t - round((attempt.get("latency_ms") or 0) * 1e6), children=children
            )
    return t


def _sub_agents(run: Run) -> dict[tuple[int, int], list[Run]]:
    """The run's sub-agent runs, and theirs, by (parent run, parent step), with their steps read: one
    query per level of the tree and one for their steps."""
    found: dict[tuple[int, int], list[Run]] = {}
    level = [run.pk]
    runs: list[Run] = []
    while level:
        below = list(Run.objects.filter(parent_id__in=level).order_by("parent_step", "id"))
        for child in below:
            found.setdefault((child.parent_id, child.parent_step or 0), []).append(child)
        runs += below
        level = [child.pk for child in below]
    steps: dict[int, list[Step]] = {child.pk: [] for child in runs}
    for step in Step.objects.filter(run_id__in=list(steps)).order_by("run_id", "index"):
        steps[step.run_id].append(step)
    for child in runs:
        child.exported_steps = steps[child.pk]
    return found


def _sub_agent_laid(child: Run, spans: _Spans, *, parent: str, t: int, children: dict) -> None:
    """A sub-agent's run as an ``invoke_agent`` span under the tool call that ran it, its steps inside."""
    agent = spans.add(
        name=f"invoke_agent {child.label or 'sub-agent'}".strip(),
        parent=parent,
        start=t,
        end=t + CHAT_NS,
        attrs={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": child.label or "sub-agent",
            "gen_ai.request.model": child.model_name,
            "rlt.stop_reason": child.stop_reason,
        },
        error=(child.error or child.stop_reason)
        if child.stop_reason not in ("", Run.StopReason.FINAL_ANSWER)
        else None,
    )
    end = _steps_laid(child, child.exported_steps, spans, agent, t, children)
    for span in spans.spans:
        if span["spanId"] == agent:
            span["endTimeUnixNano"] = str(max(end, t + CHAT_NS))
            break


def run_otlp_export(*, run: Run) -> dict[str, Any]:
    """``run`` and its steps as an OTLP JSON ``ExportTraceServiceRequest``."""
    trace_id = trace_id_of(run)
    spans = _Spans(trace_id)
    start_ns = unix_ns(run.started_at or run.created_at)
    root_id = _hex(f"{trace_id}:root", 16)
    children = _sub_agents(run)
    steps = list(Step.objects.filter(run=run).order_by("index"))
    t = _steps_laid(run, steps, spans, root_id, start_ns, children)
    if run.failed_model_call:  # the call that failed for good and ended the run: GenAI's error.type
        last = run.failed_model_call[-1]
        call_end, call_events = _model_call(run.failed_model_call, t)
        spans.add(
            name=f"chat {run.model_name}".strip(),
            parent=root_id,
            start=t,
            end=call_end,
            attrs={
                MODEL_ATTEMPTS: _dumps(run.failed_model_call),
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "anthropic",
                "gen_ai.request.model": run.model_name,
                "error.type": last.get("error_type") or (str(last["status"]) if last.get("status") else "_OTHER"),
            },
            error=f"the model API {last.get('error') or 'failed'}",
            events=call_events,
            kind=SPAN_KIND_CLIENT,
        )
        t = call_end
    # the root ends when the run did (its steps' latencies, laid end to end, may run past a finish an
    # imported run was given); a run without one ends after its last span
    end_ns = unix_ns(run.finished_at) if run.finished_at else max(t, start_ns + CHAT_NS)
    root_attrs: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": run.policy_name or SERVICE,
        "gen_ai.request.model": run.model_name,
        "gen_ai.input.messages": _dumps([{"role": "user", "parts": [{"type": "text", "content": run.task}]}])
        if run.task
        else None,
        "rlt.scenario": run.scenario,
        "rlt.policy": run.policy_name,
        "rlt.stop_reason": run.stop_reason,
        "rlt.guard": run.guard,
        "rlt.verdict": run.verdict,
        "rlt.verdict.reason": run.verdict_reason,
        "rlt.source": run.source,
        "rlt.labels": _dumps(run.labels or {}),  # the run's own labels, as they are
        # GenAI has no name for a run's retried model calls; a coordinator's count includes its sub-agents'
        MODEL_RETRY_COUNT: run.model_retry_count or None,
    }
    if run.final_answer:
        answer = [{"type": "text", "content": run.final_answer}]
        root_attrs["gen_ai.output.messages"] = _dumps(
            [{"role": "assistant", "parts": answer, "finish_reason": "end_turn"}]
        )
    failed = run.status == Run.Status.FINISHED and run.stop_reason != Run.StopReason.FINAL_ANSWER
    root = {
        "traceId": trace_id,
        "spanId": root_id,
        "parentSpanId": "",
        "name": f"invoke_agent {run.scenario}".strip(),
        "kind": SPAN_KIND_INTERNAL,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(end_ns),
        "attributes": _attributes(root_attrs),
        "status": {"code": STATUS_ERROR, "message": run.error or run.stop_reason} if failed else {"code": STATUS_OK},
    }
    # An active run's root span is left out: it has not ended, and a receiver ends the run on its root.
    out_spans = ([root] if run.status == Run.Status.FINISHED else []) + spans.spans
    service = run.source_detail if run.source == Run.Source.OTLP and run.source_detail else SERVICE
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes({"service.name": service})},
                "scopeSpans": [{"scope": {"name": SCOPE, "version": "1"}, "spans": out_spans}],
            }
        ]
    }


def _ids_base64(node: Any) -> Any:
    """OTLP JSON's hex ids as protobuf's own JSON mapping spells bytes (base64), for ``ParseDict``."""
    if isinstance(node, dict):
        return {
            k: base64.b64encode(bytes.fromhex(v)).decode()
            if k in ("traceId", "spanId", "parentSpanId")
            else _ids_base64(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_ids_base64(v) for v in node]
    return node


def otlp_protobuf(request: dict[str, Any]) -> bytes:
    """An export (``run_otlp_export``) as an ``ExportTraceServiceRequest`` in protobuf, the encoding
    every OTLP/HTTP receiver takes (Phoenix answers 415 to JSON)."""
    message = trace_service_pb2.ExportTraceServiceRequest()
    json_format.ParseDict(_ids_base64(request), message)
    return message.SerializeToString()
