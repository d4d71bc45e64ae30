"""The one place where a run from outside becomes a ``Run``: ``runs_record``.

Every source maps what it was sent to the same typed values, an ``Arrival``: where the run came
from (``source``, ``owner``, ``external_id``, ``source_detail``), what is known from its start
(``agents.events.RunStart``, labels, ``started_at``), its steps (``agents.events.StepEvent``) and,
once it has ended, its end (``agents.events.RunEnd``, ``finished_at``). Run documents and JSON Lines
files (``intake.schema``, ``intake.files``), Messages transcripts (``intake.transcripts``), OTLP
traces (``intake.otlp.conventions``) and the live API's opening (``intake.live``) all call
``runs_record`` with them; it writes through ``tracer.recording`` (``runs_record_many`` for new
runs, ``imported_run_rewrite`` for a run sent before), so counters, redaction and the search text
are the same for every source, and the same as for a run executed here. A live API run's later steps
and its end go through ``recording.steps_record_many`` and ``recording.run_finish`` as a worker's do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from agents.events import RunEnd, RunStart, StepEvent

from .. import recording
from ..models import Run

SOURCES = (Run.Source.IMPORT, Run.Source.OTLP, Run.Source.API)


@dataclass(slots=True)
class Arrival:
    """A run from outside as every source maps it: the typed values ``runs_record`` writes.

    ``start.model_backend`` is ``imported`` whatever the source (the run was not executed here);
    ``end`` is None while the run is still open. ``model_retry_count``: the sender's own count (a
    coordinator's include its sub-agents'), in place of the one counted from the steps; None: counted.
    ``run_id``: the run this source sent before under the same ``external_id``, written again (it
    keeps its id); None: a new run.
    """

    source: str
    start: RunStart
    steps: list[StepEvent] = field(default_factory=list)
    end: RunEnd | None = None
    owner: Any = None
    external_id: str = ""
    source_detail: str = ""
    labels: dict[str, Any] = field(default_factory=dict)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    model_retry_count: int | None = None
    run_id: int | None = None
    is_error_carried: bool = True  # False: the source cannot say a tool_result's is_error


def run_start_of(
    *, scenario: str = "", policy: str = "", model: str = "", task: str = "", policy_settings: dict | None = None
) -> RunStart:
    """The ``RunStart`` of a run from outside: what its sender said, model backend ``imported``."""
    return RunStart(
        scenario=scenario,
        policy_name=policy,
        policy_settings=policy_settings or {},
        model_backend=Run.ModelBackend.IMPORTED,
        model_name=model,
        task=task,
    )


def source_check(source: str) -> str:
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)} for a run from outside; got {source!r}")
    return source


def owner_of(user: Any) -> Any:
    """The user who owns the runs a request sends: None for an anonymous one."""
    return user if user is not None and getattr(user, "is_authenticated", False) else None


def _record(arrival: Arrival) -> recording.RunRecord:
    run = Run(
        source=source_check(arrival.source),
        source_detail=arrival.source_detail[:200],
        external_id=arrival.external_id,
        owner=owner_of(arrival.owner),
        labels=arrival.labels,
        model_backend=Run.ModelBackend.IMPORTED,
        started_at=arrival.started_at or timezone.now(),
        status=Run.Status.QUEUED,
    )
    return recording.RunRecord(
        run=run,
        start=arrival.start,
        steps=arrival.steps,
        end=arrival.end,
        finished_at=arrival.finished_at,
        model_retry_count=arrival.model_retry_count,
        is_error_carried=arrival.is_error_carried,
    )


def runs_record(*, arrivals: Sequence[Arrival]) -> list[Run]:
    """Write each arrival as its run, in the caller's transaction (or one of its own), and return
    the runs in order: new ones together (``recording.runs_record_many``: two multi-row INSERTs
    whatever their number; a taken external id fails them all, ``IntegrityError``), one sent before
    (``arrival.run_id``) written again keeping its id (``recording.imported_run_rewrite``: its steps
    stored as the arrival has them stay, the rest are written; ``RunNotRunning`` for a run executed
    here). A rewritten run comes back as the values written, with its id; its counters and
    redaction are the recorder's, as for a new one."""
    records = [_record(arrival) for arrival in arrivals]
    fresh = [record for record, arrival in zip(records, arrivals, strict=True) if arrival.run_id is None]
    if fresh:
        recording.runs_record_many(records=fresh)
    for record, arrival in zip(records, arrivals, strict=True):
        if arrival.run_id is not None:
            recording.imported_run_rewrite(run_id=arrival.run_id, record=record)
            record.run.pk = arrival.run_id
            record.run._state.adding = False
    return [record.run for record in records]
