"""Whole runs sent at once: run documents, Messages transcripts, JSON arrays and JSON Lines files,
from the upload page, ``manage.py import_traces`` and ``POST /api/imports`` (``docs/formats.md``).

- ``item_arrival(data=…)``: one decoded JSON item, a run document (``intake.schema``) or a
  transcript (``intake.transcripts``), as the typed values ``intake.record.runs_record`` writes.
- ``run_import_outcome(arrival=…)`` / ``run_import``: one run, in one transaction; an
  ``external_id`` sent before (same source and owner) updates or dedupes instead of adding a run.
- ``runs_import_many(arrivals=…)``: a batch, new runs written a few hundred at a time.
- ``file_items`` / ``file_import``: a file split into items, imported, with a report per item.

Each item is all or nothing: a bad one raises (or reports) ``IngestError`` with the path of each
problem, and nothing of it is written.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from django.db import IntegrityError, transaction
from pydantic import ValidationError

from .. import recording
from ..json_input import json_parse
from ..models import Run
from .errors import IngestError, pydantic_errors
from .record import Arrival, owner_of, runs_record, source_check
from .schema import RunMeta, document_arrival, document_validate, step_dict
from .transcripts import transcript_arrival

BATCH_RUNS = 200  # new runs written per transaction by runs_import_many


def item_arrival(
    *,
    data: Any,
    source: str = Run.Source.IMPORT,
    user: Any = None,
    source_detail: str = "",
    scenario: str = "",
    policy: str = "",
) -> Arrival:
    """A run document or a Messages transcript (decoded JSON) as a run from outside. A JSON object
    with ``"format"`` is a run document; one with ``"messages"`` is a transcript. ``scenario`` and
    ``policy`` label the run (blank: as the item says)."""
    owner = owner_of(user)
    if isinstance(data, Mapping) and "format" not in data and "messages" in data:
        return transcript_arrival(
            transcript=data,
            source=source,
            owner=owner,
            source_detail=source_detail,
            scenario=scenario,
            policy=policy,
        )
    if not isinstance(data, Mapping) or not ({"format", "run", "steps"} & set(data)):
        raise IngestError.one(
            "",
            'expected a run document (a JSON object with "format": "rlt.run/1") or a Messages transcript '
            '(a JSON object with "messages")',
        )
    arrival = document_arrival(document_validate(data), source=source, owner=owner, source_detail=source_detail)
    return labelled(arrival, scenario=scenario, policy=policy)


def labels_check(*, scenario: str = "", policy: str = "") -> None:
    """The scenario key and policy label an importer gives every run: ``IngestError`` when too long."""
    try:
        RunMeta(scenario=scenario, policy=policy)
    except ValidationError as exc:
        raise IngestError(pydantic_errors(exc, "run")) from None


def labelled(arrival: Arrival, *, scenario: str = "", policy: str = "") -> Arrival:
    """``arrival`` with the scenario key and policy label an importer gave (blank: as it says)."""
    changes = {k: v for k, v in (("scenario", scenario), ("policy_name", policy)) if v}
    if changes:
        arrival.start = dataclasses.replace(arrival.start, **changes)
    return arrival


def _find(*, source: str, owner: Any, external_id: str, lock: bool = False) -> Run | None:
    if not external_id:
        return None
    runs = Run.objects.filter(source=source, owner=owner, external_id=external_id)
    if lock:
        runs = runs.select_for_update()
    return runs.first()


@dataclass(frozen=True)
class ImportOutcome:
    """What ``run_import_outcome`` did: ``created`` a run; left an identical one ``unchanged``;
    ``completed`` a run that was open (its new steps appended, then ended); ``replaced`` the steps
    and fields of a run sent before with the same ``external_id``."""

    run: Run
    action: Literal["created", "unchanged", "completed", "replaced"]


# What is compared of a run sent before: the fields known from its start, and once it has ended, how.
_START_FIELDS = ("source_detail", "labels", "scenario", "policy_name", "policy_settings", "model_name", "task")
_END_FIELDS = (
    "stop_reason",
    "api_stop_reason",
    "guard",
    "verdict",
    "verdict_reason",
    "final_answer",
    "error",
    "transcript",
    "failed_model_call",
)


def _meta_matches(run: Run, arrival: Arrival) -> bool:
    """Whether ``arrival`` says of the run what ``run`` holds: the fields known from its start, and
    for a run that has ended, how it ended (as the recorder would write them, redacted alike)."""
    probe = dataclasses.replace(arrival, steps=[], run_id=None)
    record = recording.RunRecord(
        run=Run(source=run.source, labels=arrival.labels, source_detail=arrival.source_detail[:200]),
        start=probe.start,
        end=probe.end,
        finished_at=probe.finished_at,
        model_retry_count=probe.model_retry_count,
    )
    recording._record_prepare(record)
    written = record.run
    names = _START_FIELDS + (_END_FIELDS if not run.is_active else ())
    if any(getattr(written, name) != getattr(run, name) for name in names):
        return False
    if arrival.model_retry_count is not None and arrival.model_retry_count != run.model_retry_count:
        return False
    if arrival.started_at is not None and arrival.started_at != run.started_at:
        return False
    return arrival.finished_at is None or run.is_active or arrival.finished_at == run.finished_at


def run_import_outcome(*, arrival: Arrival) -> ImportOutcome:
    """``run_import``, saying what it did (``ImportOutcome.action``)."""
    source_check(arrival.source)
    try:
        return _import_once(arrival)
    except IntegrityError:
        # Another request created the same external_id meanwhile: that run stands; compare against it.
        if _find(source=arrival.source, owner=arrival.owner, external_id=arrival.external_id) is None:
            raise
        return _import_once(arrival)


def _import_once(arrival: Arrival) -> ImportOutcome:
    finished = arrival.end is not None
    with transaction.atomic():
        existing = _find(source=arrival.source, owner=arrival.owner, external_id=arrival.external_id, lock=True)
        if existing is None:
            (run,) = runs_record(arrivals=[arrival])
            return ImportOutcome(run=run, action="created")
        run = existing
        stored = [step_dict(s) for s in run.steps.order_by("index")]
        wanted = [step_dict(e) for e in arrival.steps]
        same_meta = _meta_matches(run, arrival)
        if stored == wanted and same_meta and run.is_active != finished:
            return ImportOutcome(run=run, action="unchanged")
        completes = run.is_active and wanted[: len(stored)] == stored  # an open run, its steps extended
        again = dataclasses.replace(arrival, run_id=run.pk)
        if same_meta and arrival.started_at is None:
            again.started_at = run.started_at  # completed: it keeps the start it had
        runs_record(arrivals=[again])
        run.refresh_from_db()  # as stored: the recorder's counters, its redaction
    return ImportOutcome(run=run, action="completed" if same_meta and completes else "replaced")


def run_import(*, arrival: Arrival) -> Run:
    """Record one run from outside in one transaction, as ``intake.record.runs_record`` writes it.

    With an ``external_id`` already imported from the same source by the same owner: an identical
    item changes nothing, a longer one completes a run still open, anything else replaces the
    earlier steps and fields (the run keeps its id)."""
    return run_import_outcome(arrival=arrival).run


def runs_import_many(
    *, arrivals: Sequence[Arrival], progress: Callable[[int], None] | None = None
) -> list[ImportOutcome | IngestError]:
    """``run_import`` for many runs (a JSON Lines batch), fast: one result per item, in order, an
    ``ImportOutcome`` or the ``IngestError`` that refused it.

    New runs are written ``BATCH_RUNS`` at a time through ``intake.record.runs_record`` (one
    transaction, two multi-row ``INSERT``s); an item whose ``external_id`` was sent before, or
    repeats one earlier in the batch, goes through ``run_import_outcome`` on its own (dedupe or
    replace), and so does every item of a group that could not be written together (an id taken
    meanwhile by another request). ``progress(n)`` is called with the number of items done so far.
    """
    results: list[ImportOutcome | IngestError | None] = [None] * len(arrivals)
    taken: set[tuple[str, Any, str]] = set()
    by_owner: dict[tuple[str, Any], list[str]] = {}
    for arrival in arrivals:
        source_check(arrival.source)
        if arrival.external_id:
            by_owner.setdefault((arrival.source, arrival.owner), []).append(arrival.external_id)
    for (source, owner), ids in by_owner.items():
        for start in range(0, len(ids), 500):
            found = Run.objects.filter(source=source, owner=owner, external_id__in=ids[start : start + 500])
            taken |= {(source, owner, external_id) for external_id in found.values_list("external_id", flat=True)}
    fresh: list[int] = []
    alone: list[int] = []
    for k, arrival in enumerate(arrivals):
        key = (arrival.source, arrival.owner, arrival.external_id)
        (alone if arrival.external_id and key in taken else fresh).append(k)
        if arrival.external_id:
            taken.add(key)
    done = 0
    for start in range(0, len(fresh), BATCH_RUNS):
        group = fresh[start : start + BATCH_RUNS]
        try:
            with transaction.atomic():
                runs = runs_record(arrivals=[arrivals[k] for k in group])
        except IntegrityError:
            alone.extend(group)
            continue
        for k, run in zip(group, runs, strict=True):
            results[k] = ImportOutcome(run=run, action="created")
        done += len(group)
        if progress is not None:
            progress(done)
    for k in sorted(alone):
        try:
            results[k] = run_import_outcome(arrival=arrivals[k])
        except IngestError as exc:
            results[k] = exc
        done += 1
        if progress is not None:
            progress(done)
    return [result for result in results if result is not None]  # every place is filled above


@dataclass
class ItemReport:
    """One item of a file: where it was (``"line 3"``, ``"[2]"``, ``""`` for the whole file), and
    the run it became or the errors that refused it."""

    where: str
    run_id: int | None = None
    action: str = ""  # an ImportOutcome action when imported
    steps: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


@dataclass
class FileReport:
    name: str
    items: list[ItemReport] = field(default_factory=list)

    @property
    def imported(self) -> int:
        return sum(1 for item in self.items if item.ok)

    @property
    def refused(self) -> int:
        return sum(1 for item in self.items if not item.ok)


def _decode_error(exc: json.JSONDecodeError) -> str:
    return f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"


def file_items(*, name: str, data: bytes) -> tuple[list[tuple[str, Any]], list[ItemReport]]:
    """Split a file into (where, decoded JSON) items: a ``.jsonl`` / ``.ndjson`` file or several JSON
    values one per line → one item per non-blank line; a JSON array → one per element; a JSON object
    → one item. Items that cannot be decoded come back as refused reports."""
    if not data.strip():
        return [], [ItemReport(where="", errors=[{"path": "", "message": "the file is empty"}])]
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return [], [ItemReport(where="", errors=[{"path": "", "message": f"not UTF-8 text (byte {exc.start})"}])]
    lines_mode = name.lower().endswith((".jsonl", ".ndjson"))
    if not lines_mode:
        try:
            whole = json_parse(text)
        except json.JSONDecodeError as exc:
            if exc.msg != "Extra data":
                return [], [ItemReport(where="", errors=[{"path": "", "message": _decode_error(exc)}])]
            lines_mode = True  # several JSON values, one per line: JSON Lines whatever the name
        except ValueError as exc:  # too deep, NaN or Infinity
            return [], [ItemReport(where="", errors=[{"path": "", "message": f"not read: {exc}"}])]
        else:
            if isinstance(whole, list):
                return [(f"[{k}]", item) for k, item in enumerate(whole)], []
            return [("", whole)], []
    items: list[tuple[str, Any]] = []
    refused: list[ItemReport] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            items.append((where, json_parse(line)))
        except json.JSONDecodeError as exc:
            refused.append(
                ItemReport(
                    where=where, errors=[{"path": "", "message": f"malformed JSON: {exc.msg} (column {exc.colno})"}]
                )
            )
        except ValueError as exc:  # too deep, NaN or Infinity
            refused.append(ItemReport(where=where, errors=[{"path": "", "message": f"not read: {exc}"}]))
    if not items and not refused:
        refused.append(ItemReport(where="", errors=[{"path": "", "message": "the file is empty"}]))
    return items, refused


def file_import(
    *,
    name: str,
    data: bytes,
    user: Any = None,
    source: str = Run.Source.IMPORT,
    scenario: str = "",
    policy: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> FileReport:
    """Import every document or transcript in a file, each all or nothing (``runs_import_many``), and
    report each: the run it became, or why it was refused (paths named). ``scenario`` / ``policy``
    label every run (blank: as each item says). ``progress(done, total)`` is called as items are
    written."""
    report = FileReport(name=name)
    items, refused = file_items(name=name, data=data)
    total = len(items) + len(refused)
    report.items.extend(refused)
    try:
        labels_check(scenario=scenario, policy=policy)
        label_errors: list[dict[str, str]] = []
    except IngestError as exc:
        label_errors = exc.errors
    limit = Run._meta.get_field("source_detail").max_length
    if len(name) > limit:  # the name is where its runs came from: kept whole or not at all
        label_errors = [
            *label_errors,
            {"path": "", "message": f"the file's name is at most {limit} characters; got {len(name)}: rename it"},
        ]
    parsed: list[tuple[ItemReport, Arrival]] = []
    for where, value in items:
        item = ItemReport(where=where)
        report.items.append(item)
        if label_errors:
            item.errors = label_errors
            continue
        try:
            arrival = item_arrival(
                data=value, source=source, user=user, source_detail=name, scenario=scenario, policy=policy
            )
        except IngestError as exc:
            item.errors = exc.errors
        else:
            parsed.append((item, arrival))
    already = total - len(parsed)

    def advanced(n: int) -> None:
        if progress is not None:
            progress(already + n, total)

    results = runs_import_many(arrivals=[arrival for _, arrival in parsed], progress=advanced)
    for (item, arrival), result in zip(parsed, results, strict=True):
        if isinstance(result, IngestError):
            item.errors = result.errors
        else:
            item.run_id, item.action, item.steps = result.run.pk, result.action, len(arrival.steps)
    if progress is not None and not parsed:
        progress(total, total)
    report.items.sort(key=_item_order)
    return report


def _item_order(item: ItemReport) -> tuple[int, int]:
    digits = "".join(ch for ch in item.where if ch.isdigit())
    return (0 if not item.where else 1, int(digits) if digits else 0)
