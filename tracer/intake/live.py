"""The live API's source: a run that arrives step by step (``POST /api/runs``, ``…/steps``,
``…/finish``; ``docs/api.md``).

- ``imported_run_open``: the run opened (status ``running``) through ``intake.record.runs_record``,
  like any run from outside; the same ``external_id`` opened again gives the open run.
- ``imported_steps_append``: steps appended in one transaction through ``recording.steps_record_many``,
  as a worker records its steps; a step re-sent with the same content is harmless, with other
  content a ``StepConflict``.
- ``imported_run_close``: its end through ``recording.run_finish``.

The bodies are ``intake.schema``'s models (``RunMeta``, ``StepIn``, ``RunEndIn``). A write to a run
that has ended is ``RunEnded``; nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import IntegrityError, transaction

from .. import recording
from ..models import Run, Step
from .errors import IngestError, RunEnded, StepConflict
from .record import owner_of, runs_record, source_check
from .schema import (
    RunDocument,
    RunEndIn,
    RunMeta,
    StepIn,
    document_arrival,
    run_end_of,
    step_dict,
    steps_check,
    steps_events,
    storable,
)


def _find(*, source: str, owner: Any, external_id: str) -> Run | None:
    if not external_id:
        return None
    return Run.objects.filter(source=source, owner=owner, external_id=external_id).first()


def imported_run_open(*, user: Any, source: str, run: RunMeta, source_detail: str = "") -> Run:
    """Start a run that arrives step by step (status ``running``). Opening the same ``external_id``
    again returns the open run; ``RunEnded`` if that run has already ended."""
    source_check(source)
    errors: list[dict[str, str]] = []
    storable(run.model_dump(mode="python", exclude_defaults=True), "run", errors)
    if errors:
        raise IngestError(errors)
    owner = owner_of(user)
    try:
        with transaction.atomic():
            existing = _find(source=source, owner=owner, external_id=run.external_id)
            if existing is not None:
                if not existing.is_active:
                    raise RunEnded.one(
                        "run.external_id",
                        f"run {existing.pk} with external_id {run.external_id!r} has already ended "
                        f"({existing.stop_reason or 'finished'}); send it as a new run with another id",
                    )
                return existing
            document = RunDocument(run=run.model_copy(update={"status": "running"}))
            arrival = document_arrival(document, source=source, owner=owner, source_detail=source_detail)
            (created,) = runs_record(arrivals=[arrival])
            return created
    except IntegrityError:
        if _find(source=source, owner=owner, external_id=run.external_id) is None:
            raise
        return imported_run_open(user=user, source=source, run=run, source_detail=source_detail)


def _ended(run_id: int, what: str) -> RunEnded:
    row = Run.objects.filter(pk=run_id).values("status", "stop_reason", "source").first()
    if row is None:
        return RunEnded.one("", f"run {run_id} does not exist; {what} refused")
    if row["source"] == Run.Source.AGENT:
        return RunEnded.one("", f"run {run_id} was executed here, not sent from outside; {what} refused")
    return RunEnded.one("", f"run {run_id} has already ended ({row['stop_reason'] or 'finished'}); {what} refused")


def _unmarked(step: dict) -> dict:
    """A stored step's document without its ``repeat_of``, which the recorder adds (a step sent again
    is the same step whether or not it says it)."""
    step.pop("repeat_of", None)
    return step


def imported_steps_append(*, run: Run, steps: Sequence[StepIn]) -> list[Step]:
    """Append steps to an open run from outside, in one transaction, and return them as recorded.

    Indexes continue the run's steps (an omitted index takes the next one). A step whose index is
    already recorded with the same content is returned as it is (a re-sent batch is harmless);
    with other content it is a ``StepConflict``. ``RunEnded`` once the run has ended.
    """
    if run.source == Run.Source.AGENT:
        raise _ended(run.pk, "steps")
    with transaction.atomic():
        state = Run.objects.select_for_update().filter(pk=run.pk).values("status", "step_count", "source").first()
        if state is None or state["status"] == Run.Status.FINISHED or state["source"] == Run.Source.AGENT:
            raise _ended(run.pk, "steps")
        recorded = state["step_count"]
        repeats = [s for s in steps if s.index is not None and s.index <= recorded]
        fresh = [s for s in steps if not (s.index is not None and s.index <= recorded)]
        errors = steps_check(fresh, first_index=recorded + 1)
        known = {row.index: row for row in run.steps.filter(index__in=[s.index for s in repeats])}
        kept: list[Step] = []
        for k, step in enumerate(steps):
            if step.index is None or step.index > recorded:
                continue
            row = known.get(step.index)
            if row is None or _unmarked(step_dict(row)) != step_dict(step.to_event(index=step.index)):
                raise StepConflict.one(
                    f"steps[{k}].index",
                    f"step {step.index} of run {run.pk} was already recorded with other content; "
                    f"the next new step is {recorded + 1}",
                )
            kept.append(row)
        if errors:
            # steps_check numbered the fresh steps from 0; name them by their place in the request.
            places = [k for k, s in enumerate(steps) if not (s.index is not None and s.index <= recorded)]
            for error in errors:
                where = int(error["path"].split("[", 1)[1].split("]", 1)[0])
                error["path"] = error["path"].replace(f"steps[{where}]", f"steps[{places[where]}]", 1)
            raise IngestError(errors)
        problems: list[dict[str, str]] = []
        for k, step in enumerate(steps):
            storable(step.model_dump(mode="python", exclude_defaults=True), f"steps[{k}]", problems)
        if problems:
            raise IngestError(problems)
        try:
            rows = recording.steps_record_many(run=run, steps=steps_events(fresh, first_index=recorded + 1))
        except recording.RunNotRunning as exc:
            raise RunEnded.one("", str(exc)) from None
    return sorted(kept + rows, key=lambda row: row.index)


def imported_run_close(*, run: Run, end: RunEndIn) -> Run:
    """End a run that arrived step by step, through ``recording.run_finish``. Closing it again with
    the same stop reason returns it unchanged; ``RunEnded`` if it ended otherwise."""
    if run.source == Run.Source.AGENT:
        raise _ended(run.pk, "its end")
    errors: list[dict[str, str]] = []
    if end.verdict_reason and end.verdict is None:
        errors.append({"path": "verdict_reason", "message": "a verdict_reason needs a verdict (pass or fail)"})
    storable(end.model_dump(mode="python", exclude_defaults=True), "", errors)
    if errors:
        raise IngestError(errors)
    last = run.steps.order_by("-index").first()
    answers = run.steps.filter(kind=Step.Kind.FINAL_ANSWER).order_by("-index").values_list("text", flat=True)[:1]
    run_end = run_end_of(end=end, answers=list(answers), last_kind=last.kind if last else None)
    if not recording.run_finish(run=run, end=run_end, finished_at=end.finished_at):
        run.refresh_from_db()
        if run.stop_reason == run_end.stop_reason and run.final_answer == (run_end.final_answer or ""):
            return run
        raise _ended(run.pk, "its end")
    run.refresh_from_db()
    return run
