"""Recorded runs as run documents (``rlt.run/1``, ``docs/formats.md``): what a run page's
"Download JSON", a compare pair's and an experiment's downloads and ``GET /api/runs/{id}`` write.
Export then import gives the same steps and fields (``tests/tracer/export/test_roundtrip.py``).

- ``run_export(run=…)``: one run and its steps as a document (two queries at most).
- ``runs_export(runs=…)``: documents for many runs, reading steps ``EXPORT_BATCH`` runs at a time.
- ``document_dumps(document)``: one document as one line of JSON (JSON Lines are these).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from ..intake.schema import FORMAT, step_dict
from ..models import Run, Step

EXPORT_BATCH = 200  # runs per query when exporting many


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def run_meta_out(run: Run) -> dict[str, Any]:
    transcript = run.transcript if run.transcript not in (None, [], {}) else None
    return {
        "external_id": run.external_id,
        "scenario": run.scenario,
        "policy": run.policy_name,
        "policy_settings": run.policy_settings or {},
        "source": run.source_detail if run.source != Run.Source.AGENT else run.source,
        "model": run.model_name,
        "task": run.task,
        "status": "finished" if run.status == Run.Status.FINISHED else "running",
        "stop_reason": run.stop_reason or None,
        "final_answer": run.final_answer if run.status == Run.Status.FINISHED else None,
        "verdict": run.verdict or None,
        "verdict_reason": run.verdict_reason,
        "error": run.error,
        "guard": run.guard,
        **({"api_stop_reason": run.api_stop_reason} if run.api_stop_reason else {}),
        **({"failed_model_call": run.failed_model_call} if run.failed_model_call else {}),
        "model_retry_count": run.model_retry_count,
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "labels": run.labels or {},
        "transcript": transcript,
    }


def _document_out(run: Run, steps: Iterable[Step]) -> dict[str, Any]:
    return {"format": FORMAT, "run": run_meta_out(run), "steps": [step_dict(s) for s in steps]}


def run_export(*, run: Run) -> dict[str, Any]:
    """A run and its steps as a run document (``rlt.run/1``), ready for ``json.dumps``. Two queries
    at most: the run given, its steps."""
    return _document_out(run, run.steps.order_by("index"))


def runs_export(*, runs: Iterable[Run]) -> Iterator[dict[str, Any]]:
    """Documents for many runs (an experiment, a compare pair), in the order given, reading steps
    for ``EXPORT_BATCH`` runs per query, so memory stays bounded for a large experiment."""
    batch: list[Run] = []

    def flush() -> Iterator[dict[str, Any]]:
        by_run: dict[int, list[Step]] = {run.pk: [] for run in batch}
        for step in Step.objects.filter(run_id__in=list(by_run)).order_by("run_id", "index"):
            by_run[step.run_id].append(step)
        for run in batch:
            yield _document_out(run, by_run[run.pk])

    for run in runs:
        batch.append(run)
        if len(batch) >= EXPORT_BATCH:
            yield from flush()
            batch = []
    if batch:
        yield from flush()


def document_dumps(document: Mapping[str, Any]) -> str:
    """One document as one line of JSON (a JSON Lines batch is these, one per line)."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), default=str)
