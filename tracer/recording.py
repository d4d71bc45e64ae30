"""Recording: the one path that writes a run, from its start through each step to its end.

``run_start``, ``step_record`` and ``run_finish`` are the only writes of a run's progress, and
``DbRecorder`` is the agents ``Recorder`` that calls them as the loop reports. Workers record through
it today; importers (OTLP spans, transcripts) and a live step API will write through the same
functions, so counters, divergence, the matrix and the stop queue work the same whatever a run's
source. Each step and its counters are one transaction, so a run's steps can be read while it runs.

HackSoft style: keyword-only typed arguments, ``<entity>_<action>`` names. Reads live in
``selectors.py``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Concat
from django.utils import timezone

from agents.events import RunEnd, RunStart, StepEvent

from .models import Experiment, Run, Step


def _wasted_retries(step: StepEvent) -> int:
    """Retries made after a failure the tool said was not retryable, or after an empty result.

    A retry is worth making only when the previous attempt failed with ``retryable`` true; a retry
    after a non-retryable refusal, or after "nothing found" treated as an error, repeats a call that
    cannot come out differently.
    """
    wasted = 0
    for previous in step.attempts[:-1]:
        if previous.ok or previous.retryable is False:
            wasted += 1
    return wasted


def _search_text(step: StepEvent) -> str:
    parts = []
    if step.tool_name:
        parts.append(step.tool_name)
    if step.input is not None:
        parts.append(json.dumps(step.input, ensure_ascii=False, sort_keys=True, default=str))
    if step.text:
        parts.append(step.text)
    return " ".join(parts)


def _jsonable(value: Any) -> Any:
    """Tool content as stored: anything ``json`` cannot encode becomes its string form."""
    return json.loads(json.dumps(value, default=str))


def step_record(*, run: Run, step: StepEvent) -> Step:
    """Write one step and bump the run's counters, in one transaction.

    Counters move with ``F()`` expressions in the same transaction as the step row, so a reader
    sees either both or neither, and concurrent writers never lose an increment.
    """
    is_tool = step.kind == Step.Kind.TOOL_USE
    with transaction.atomic():
        row = Step.objects.create(
            run=run,
            index=step.index,
            kind=Step.Kind.TOOL_USE if is_tool else Step.Kind.FINAL_ANSWER,
            tool_name=step.tool_name or "",
            tool_use_id=step.tool_use_id or "",
            input=_jsonable(step.input),
            attempts=_jsonable([a.to_dict() for a in step.attempts]),
            result_content=_jsonable(step.result_content),
            is_error=step.is_error,
            category=step.category or "",
            retryable=step.retryable,
            retry_count=step.retry_count,
            latency_ms=step.latency_ms,
            input_tokens=step.input_tokens,
            output_tokens=step.output_tokens,
            text=step.text or "",
        )
        text = _search_text(step)
        Run.objects.filter(pk=run.pk).update(
            step_count=F("step_count") + 1,
            tool_call_count=F("tool_call_count") + (1 if is_tool else 0),
            error_count=F("error_count") + (1 if step.is_error else 0),
            retry_count=F("retry_count") + step.retry_count,
            wasted_retry_count=F("wasted_retry_count") + _wasted_retries(step),
            input_tokens=F("input_tokens") + step.input_tokens,
            output_tokens=F("output_tokens") + step.output_tokens,
            search_text=Concat(F("search_text"), Value(text + "\n")) if text else F("search_text"),
        )
    return row


def run_start(*, run: Run, start: RunStart, worker_name: str = "", worker_pid: int | None = None) -> None:
    """Mark a run running and store what the loop says about it (model name, task, policy snapshot)."""
    fields: dict[str, Any] = {
        "status": Run.Status.RUNNING,
        "scenario": start.scenario or run.scenario,
        "policy_name": start.policy_name or run.policy_name,
        "model_backend": start.model_backend or run.model_backend,
        "model_name": start.model_name or run.model_name,
        "task": start.task or "",
    }
    if start.policy_settings:
        fields["policy_settings"] = _jsonable(start.policy_settings)
    if worker_name:
        fields["worker_name"] = worker_name[:200]
        fields["worker_pid"] = worker_pid
    # A run claimed by a task already has started_at; a child run gets it now.
    Run.objects.filter(pk=run.pk, started_at__isnull=True).update(started_at=timezone.now())
    Run.objects.filter(pk=run.pk).exclude(status=Run.Status.FINISHED).update(**fields)
    for name, value in fields.items():
        setattr(run, name, value)


def run_finish(*, run: Run, end: RunEnd) -> bool:
    """Store how a run ended and count it in its experiment; False if it had already finished."""
    verdict = ""
    verdict_reason = ""
    if end.verdict is not None:
        verdict = Run.Verdict.PASS if end.verdict.passed else Run.Verdict.FAIL
        verdict_reason = end.verdict.reason or ""
    now = timezone.now()
    with transaction.atomic():
        updated = (
            Run.objects.filter(pk=run.pk)
            .exclude(status=Run.Status.FINISHED)
            .update(
                status=Run.Status.FINISHED,
                stop_reason=end.stop_reason,
                final_answer=end.final_answer or "",
                verdict=verdict,
                verdict_reason=verdict_reason,
                error=end.error or "",
                guard=(end.guard or "")[:200],
                transcript=_jsonable(end.transcript or []),
                finished_at=now,
            )
        )
        if updated and run.experiment_id and run.parent_id is None:
            Experiment.objects.filter(pk=run.experiment_id).update(finished_runs=F("finished_runs") + 1)
    if updated:
        run.status = Run.Status.FINISHED
        run.stop_reason = end.stop_reason
        run.verdict = verdict
        run.finished_at = now
    return bool(updated)


class RunTimeLimitExceeded(RuntimeError):
    """Raised into the agent loop after a step when the run has used up ``RLT_RUN_TIME_LIMIT_S``."""


class DbRecorder:
    """The agents ``Recorder`` that writes a run to the database as it happens.

    ``observer`` (optional) receives every event after it is stored, e.g. to print the trace.
    Sub-agents get child runs (``parent`` set, no experiment: an experiment counts top-level runs).
    """

    def __init__(
        self,
        run: Run,
        *,
        worker_name: str = "",
        worker_pid: int | None = None,
        observer=None,
        deadline: float | None = None,
    ) -> None:
        self.run = run
        self.worker_name = worker_name
        self.worker_pid = worker_pid
        self.observer = observer
        self.finished = False
        self.step_delay_s = settings.RLT_STEP_DELAY_S
        # monotonic time after which the run is stopped; sub-agents share their parent's
        self.deadline = deadline if deadline is not None else time.monotonic() + settings.RLT_RUN_TIME_LIMIT_S

    def run_started(self, start: RunStart) -> None:
        run_start(run=self.run, start=start, worker_name=self.worker_name, worker_pid=self.worker_pid)
        if self.observer is not None:
            self.observer.run_started(start)

    def step_recorded(self, step: StepEvent) -> None:
        step_record(run=self.run, step=step)
        if self.observer is not None:
            self.observer.step_recorded(step)
        if self.step_delay_s:
            time.sleep(self.step_delay_s)
        if time.monotonic() > self.deadline:
            raise RunTimeLimitExceeded(
                f"the run went on for more than {settings.RLT_RUN_TIME_LIMIT_S} s (RLT_RUN_TIME_LIMIT_S) "
                "and was stopped"
            )

    def run_finished(self, end: RunEnd) -> None:
        run_finish(run=self.run, end=end)
        self.finished = True
        if self.observer is not None:
            self.observer.run_finished(end)

    def child(self, *, label: str) -> DbRecorder:
        parent = self.run
        child_run = Run.objects.create(
            parent=parent,
            label=label[:200],
            experiment=None,
            scenario=parent.scenario,
            policy=parent.policy,
            policy_name=parent.policy_name,
            policy_settings=parent.policy_settings,
            model_backend=parent.model_backend,
            model_name=parent.model_name,
            status=Run.Status.QUEUED,
            worker_name=self.worker_name,
            worker_pid=self.worker_pid,
        )
        child_observer = self.observer.child(label=label) if self.observer is not None else None
        return DbRecorder(
            child_run,
            worker_name=self.worker_name,
            worker_pid=self.worker_pid,
            observer=child_observer,
            deadline=self.deadline,
        )
