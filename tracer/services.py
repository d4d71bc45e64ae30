"""Writes: launching experiments, creating runs, recording steps as they happen, finishing runs.

HackSoft style: keyword-only typed arguments, ``<entity>_<action>`` names. Reads live in
``selectors.py``. Every write that must not be half-done runs in one transaction; the recorder writes
each step in its own transaction, so a run's steps can be read while a worker is still writing them.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import traceback
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Concat
from django.utils import timezone

from agents.events import CRASHED, INTERRUPTED, TOOL_USE, RunEnd, RunStart, StepEvent
from agents.policies import PolicyError, policy_from_dict

from .models import Experiment, PolicyVariant, Run, Step, StopReview

logger = logging.getLogger(__name__)

MAX_REPEATS = 50
MAX_EXPERIMENT_RUNS = 2000
# Backends an experiment can use. ``replay`` needs a cassette per run: use ``run_agent --cassette``.
EXPERIMENT_BACKENDS = ("simulated", "claude")


def _scenario_names() -> list[str]:
    from agents import scenario_names

    return list(scenario_names())


def _model_backends() -> list[str]:
    from agents import MODEL_BACKENDS

    return list(MODEL_BACKENDS)


# --- validation ------------------------------------------------------------------------------


def _check_names(*, values: Any, known: list[str], what: str) -> tuple[list[str], list[str]]:
    """Return (clean values, errors) for a list of names that must each be one of ``known``."""
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        return [], [f"expected a list of {what} names, got {type(values).__name__}"]
    if not values:
        return [], [f"choose at least one {what}; expected one or more of: {', '.join(known)}"]
    errors = []
    clean: list[str] = []
    for value in values:
        if value not in known:
            errors.append(f"unknown {what} {value!r}; expected one of: {', '.join(known)}")
        elif value not in clean:
            clean.append(value)
    return clean, errors


def model_backend_errors(*, model_backend: Any, allowed: tuple[str, ...]) -> list[str]:
    """What is wrong with choosing ``model_backend`` here (empty when it can run)."""
    known = [b for b in _model_backends() if b in allowed] or list(allowed)
    if model_backend not in known:
        if model_backend == "replay" and "replay" in _model_backends():
            return [
                "replay needs a recorded cassette for each run; replay one run with "
                "`manage.py run_agent --model replay --cassette FILE`"
            ]
        return [f"unknown model backend {model_backend!r}; expected one of: {', '.join(known)}"]
    if model_backend == "claude" and not settings.ANTHROPIC_API_KEY:
        return [
            "the claude backend calls the Anthropic API: set ANTHROPIC_API_KEY in the environment of the "
            "web process and the workers, or choose simulated"
        ]
    return []


def _policy_variants(names: list[str]) -> dict[str, PolicyVariant]:
    return {v.name: v for v in PolicyVariant.objects.filter(name__in=names)}


# --- launching -------------------------------------------------------------------------------


def run_create(
    *,
    scenario: str,
    policy: PolicyVariant,
    model_backend: str = "simulated",
    experiment: Experiment | None = None,
) -> Run:
    """A queued run of ``scenario`` under ``policy``, with a snapshot of the policy's settings."""
    model_name = settings.ANTHROPIC_MODEL if model_backend == "claude" else ""
    return Run.objects.create(
        experiment=experiment,
        scenario=scenario,
        policy=policy,
        policy_name=policy.name,
        policy_settings=dict(policy.settings),
        model_backend=model_backend,
        model_name=model_name,
        status=Run.Status.QUEUED,
    )


def experiment_launch(
    *,
    scenarios: list[str],
    policies: list[str],
    model_backend: str = "simulated",
    repeats: int = 1,
    user=None,
    name: str = "",
) -> Experiment:
    """Create an experiment with one queued run per scenario × policy × repeat and enqueue them.

    Raises ``ValidationError`` whose ``message_dict`` names each invalid field and what is expected;
    then nothing is written. Tasks are sent only once the transaction commits.
    """
    from .tasks import run_execute_task

    errors: dict[str, list[str]] = {}
    clean_scenarios, scenario_errors = _check_names(values=scenarios, known=_scenario_names(), what="scenario")
    if scenario_errors:
        errors["scenarios"] = scenario_errors
    known_policies = list(PolicyVariant.objects.values_list("name", flat=True))
    clean_policies, policy_errors = _check_names(values=policies, known=known_policies, what="policy")
    if policy_errors:
        errors["policies"] = policy_errors
    backend_errors = model_backend_errors(model_backend=model_backend, allowed=EXPERIMENT_BACKENDS)
    if backend_errors:
        errors["model_backend"] = backend_errors
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_REPEATS:
        errors["repeats"] = [f"expected a whole number from 1 to {MAX_REPEATS}, got {repeats!r}"]
    if not isinstance(name, str) or len(name) > 200:
        errors["name"] = ["expected text of at most 200 characters"]
    if not errors:
        total = len(clean_scenarios) * len(clean_policies) * repeats
        if total > MAX_EXPERIMENT_RUNS:
            errors["repeats"] = [
                f"{len(clean_scenarios)} scenarios × {len(clean_policies)} policies × {repeats} repeats is "
                f"{total} runs; expected at most {MAX_EXPERIMENT_RUNS}: choose fewer"
            ]
    if errors:
        raise ValidationError(errors)

    variants = _policy_variants(clean_policies)
    with transaction.atomic():
        experiment = Experiment.objects.create(
            name=name.strip(),
            scenarios=clean_scenarios,
            policies=clean_policies,
            repeats=repeats,
            model_backend=model_backend,
            model_name=settings.ANTHROPIC_MODEL if model_backend == "claude" else "",
            total_runs=len(clean_scenarios) * len(clean_policies) * repeats,
            created_by=user if user is not None and getattr(user, "is_authenticated", False) else None,
        )
        runs = []
        for _ in range(repeats):
            for scenario in clean_scenarios:
                for policy_name in clean_policies:
                    runs.append(
                        run_create(
                            scenario=scenario,
                            policy=variants[policy_name],
                            model_backend=model_backend,
                            experiment=experiment,
                        )
                    )
        for run in runs:
            run_execute_task.delay_on_commit(run.pk)
    return experiment


def policy_settings_validate(*, data: dict[str, Any]) -> dict[str, Any]:
    """The settings of a policy variant built from ``data``; ``ValidationError`` per invalid field."""
    try:
        return policy_from_dict(data).settings()
    except PolicyError as exc:
        raise ValidationError({field: [message] for field, message in exc.errors.items()}) from None


# --- recording -------------------------------------------------------------------------------


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
    is_tool = step.kind == TOOL_USE
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


# --- executing -------------------------------------------------------------------------------


def run_claim(*, run_id: int, worker_name: str, worker_pid: int | None) -> bool:
    """Atomically move a queued run to running; False when another delivery already took it."""
    claimed = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
        status=Run.Status.RUNNING, started_at=timezone.now(), worker_name=worker_name[:200], worker_pid=worker_pid
    )
    return claimed == 1


def _crash(recorder: DbRecorder, message: str) -> None:
    if not recorder.finished:
        recorder.run_finished(RunEnd(stop_reason=CRASHED, error=message))


def run_execute(
    *,
    run_id: int,
    worker_name: str = "",
    cassette: str | None = None,
    record_to: str | None = None,
    observer=None,
) -> Run | None:
    """Claim run ``run_id`` and execute it with the agent core, recording every step.

    Returns None, doing nothing, when the run is not queued (a duplicate delivery, or a run that was
    already executed). A run that cannot start, or whose loop raises, ends ``crashed`` with the reason.
    ``worker_name`` is the Celery worker's name (``celery@host``); outside a worker, this host's name.
    The run is held by this process: its pid is stored with the name.
    """
    worker_name = worker_name or socket.gethostname()
    worker_pid = os.getpid()
    if not run_claim(run_id=run_id, worker_name=worker_name, worker_pid=worker_pid):
        logger.info("run %s is not queued; duplicate delivery ignored", run_id)
        return None
    run = Run.objects.get(pk=run_id)
    recorder = DbRecorder(run, worker_name=worker_name, worker_pid=worker_pid, observer=observer)
    if run.model_backend == "claude" and not settings.ANTHROPIC_API_KEY:
        _crash(
            recorder,
            "the claude backend needs ANTHROPIC_API_KEY in the worker's environment; "
            "set it and launch the run again, or use the simulated backend",
        )
        return run
    if run.model_backend == "replay" and not cassette:
        _crash(recorder, "the replay backend needs a cassette file (run_agent --cassette FILE)")
        return run
    try:
        from agents import run_scenario

        run_scenario(
            run.scenario,
            dict(run.policy_settings) or run.policy_name,
            model=run.model_backend,
            recorder=recorder,
            cassette=cassette,
            record_to=record_to,
            seed=run.pk,
        )
    except ValueError as exc:  # the agent core could not start it: unknown scenario, bad policy or cassette
        logger.warning("run %s could not start: %s", run_id, exc)
        _crash(recorder, f"the run could not start: {exc}")
    except Exception as exc:  # the loop reports its own crashes; this is anything it could not
        logger.exception("run %s failed outside the agent loop", run_id)
        _crash(recorder, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}")
    else:
        _crash(recorder, "the agent loop returned without reporting how the run ended")
    for child in Run.objects.filter(parent_id=run_id).exclude(status=Run.Status.FINISHED):
        run_finish(
            run=child,
            end=RunEnd(
                stop_reason=INTERRUPTED, error="the coordinating run ended before this sub-agent reported its end"
            ),
        )
    run.refresh_from_db()
    return run


def _process_alive(pid: int | None) -> bool:
    """Whether process ``pid`` still runs on this machine."""
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        pass
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """A killed process its parent has not reaped yet still answers signal 0, but runs nothing.

    Pool processes of a killed worker are handed to init, which may reap them late.
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _holder(run: Run) -> str:
    """How a message names the process that held a run: ``celery@host pid 123``."""
    if not run.worker_name:
        return "its worker"
    if run.worker_pid is None:
        return run.worker_name
    return f"{run.worker_name} pid {run.worker_pid}"


def run_interrupt_stale(
    *, worker_name: str | None = None, older_than: timedelta | None = None, skip_live_processes: bool = False
) -> int:
    """Finish runs left ``running`` by a worker that died, with stop reason ``interrupted``.

    ``worker_name``: runs claimed under exactly that worker name (a worker passes its own name when it
    starts; ``w@web`` is not ``w@web2``).
    ``older_than``: runs started longer ago than that. At least one must be given.
    ``skip_live_processes``: leave runs whose claiming process still runs on this machine (another
    worker started under the same name). Returns how many runs were interrupted.
    """
    if worker_name is None and older_than is None:
        raise ValueError("give worker_name or older_than: which running runs are stale")
    stale = Run.objects.filter(status=Run.Status.RUNNING)
    if worker_name is not None:
        stale = stale.filter(worker_name=worker_name)
    if older_than is not None:
        stale = stale.filter(started_at__lt=timezone.now() - older_than)
    count = 0
    for run in stale.only("pk", "experiment_id", "parent_id", "worker_name", "worker_pid"):
        if skip_live_processes and _process_alive(run.worker_pid):
            continue
        who = _holder(run)
        finished = run_finish(
            run=run,
            end=RunEnd(stop_reason=INTERRUPTED, error=f"{who} stopped before the run ended; the run was interrupted"),
        )
        count += int(finished)
    return count


# --- dashboard writes: policy variants and stop reviews ---------------------------------------


def policy_variant_create(*, name: str, settings: dict[str, Any], user=None) -> PolicyVariant:
    """A user's policy variant built from a preset (``settings["base"]``) and the settings that differ.

    Raises ``ValidationError`` whose ``message_dict`` names each invalid field (a taken name too);
    then nothing is written.
    """
    errors: dict[str, list[str]] = {}
    clean: dict[str, Any] = {}
    try:
        clean = policy_settings_validate(data={**settings, "name": name})
    except ValidationError as exc:
        errors = exc.message_dict
        if "name" in errors:
            errors["name"] = [f"use lowercase letters, digits, - and _, starting with a letter or digit; got {name!r}"]
    if PolicyVariant.objects.filter(name=name).exists():
        errors.setdefault("name", []).append(f"a policy named {name!r} already exists; choose another name")
    if errors:
        raise ValidationError(errors)
    return PolicyVariant.objects.create(
        name=clean["name"],
        description=clean["description"],
        settings=clean,
        is_preset=False,
        created_by=user if user is not None and getattr(user, "is_authenticated", False) else None,
    )


def stop_review_save(*, run: Run, verdict: str, note: str = "", user=None) -> StopReview:
    """Record (or change) a reviewer's verdict on a run that a guard stopped."""
    errors: dict[str, list[str]] = {}
    if verdict not in StopReview.Verdict.values:
        errors["verdict"] = [f"expected one of: {', '.join(StopReview.Verdict.values)}"]
    if run.stop_reason not in (Run.StopReason.CONSECUTIVE_ERRORS, Run.StopReason.MAX_STEPS):
        errors["run"] = [f"run {run.pk} was not stopped by a guard (stop reason {run.stop_reason or 'none'})"]
    if errors:
        raise ValidationError(errors)
    review, _ = StopReview.objects.update_or_create(
        run=run,
        defaults={
            "verdict": verdict,
            "note": note.strip(),
            "reviewer": user if user is not None and getattr(user, "is_authenticated", False) else None,
        },
    )
    return review
