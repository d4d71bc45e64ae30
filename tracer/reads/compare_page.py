"""Reads of the compare page: two runs aligned over every step, their split, the settings behind it, and the lines
its first screen and gaps show."""

from __future__ import annotations

import gc
import json
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.db.models import (
    Case,
    F,
    Q,
    TextField,
    Value,
    When,
)
from django.db.models.functions import Cast
from django.shortcuts import get_object_or_404

from .. import compare_lines
from ..divergence import (
    Difference,
    Divergence,
    SettingRow,
    run_differences,
    run_divergence,
    settings_compare,
    settings_snapshot,
)
from ..models import Run, Step


@dataclass
class Comparison:
    a: Run
    b: Run
    divergence: Divergence
    differences: list[Difference]
    settings: list[SettingRow]  # the two policies' settings side by side
    settings_known: tuple[bool, bool]  # run A's, run B's: False when a run carries only its policy's name
    lines: list[compare_lines.Line] = field(default_factory=list)  # the aligned steps the page shows

    @property
    def same_scenario(self) -> bool:
        return self.a.scenario == self.b.scenario

    @property
    def unknown_settings(self) -> list[tuple[str, Run]]:
        """("A" or "B", the run) for each run whose policy settings are not known."""
        return [
            (side, run)
            for side, run, known in zip("AB", (self.a, self.b), self.settings_known, strict=True)
            if not known
        ]


# What divergence reads of every step of both runs: no model calls (only the shown rows' are read),
# no assistant text beside a tool call (the page never shows it), and the JSON columns as their text,
# decoded by orjson. Reading every column as dicts took half of a 500-step compare's steps query.
_COMPARE_STEP_COLUMNS = ("run_id", "index", "kind", "tool_name", "api_stop_reason", "input_text", "attempts_text")
_BIG_INTEGER = re.compile(r"[0-9]{20}")  # beyond 64 bits, where orjson gives a float


def _json(text: str | None, *, exact: bool = False) -> Any:
    """A JSON column's text decoded; ``exact``: an integer beyond 64 bits stays one (an input, which
    the page shows). In a tool's result orjson's float stands for it, close enough to compare on."""
    if text is None:
        return None
    if exact and _BIG_INTEGER.search(text):
        return json.loads(text)
    return orjson.loads(text)


class _JSONArray(Sequence):
    """A JSON array column's text, decoded when first read: divergence reads the attempts of the rows it
    checks (up to the split), folds (alike in both runs, or repeating the row before) or shows, which
    after the split of two runs that went different ways is often none of the others."""

    __slots__ = ("_items", "_text")

    def __init__(self, text: str | None) -> None:
        self._text, self._items = text, None

    def _decoded(self) -> list:
        if self._items is None:
            self._items = _json(self._text) or []
        return self._items

    def __len__(self) -> int:
        return len(self._decoded())

    def __getitem__(self, index):
        return self._decoded()[index]

    def __iter__(self):
        return iter(self._decoded())


def _compare_steps(*, a_id: int, b_id: int) -> dict[int, list[dict]]:
    """Both runs' steps as divergence reads them, in order, by run id. One query."""
    rows = (
        Step.objects.filter(run_id__in=[a_id, b_id])
        .order_by("run_id", "index")
        .annotate(
            input_text=Cast("input", TextField()),
            attempts_text=Cast("attempts", TextField()),
            shown_text=Case(When(kind=Step.Kind.TOOL_USE, then=Value("")), default=F("text"), output_field=TextField()),
        )
        .values_list(*_COMPARE_STEP_COLUMNS, "shown_text")
    )
    steps: dict[int, list[dict]] = {a_id: [], b_id: []}
    for run_id, index, kind, tool_name, api_stop_reason, input_text, attempts_text, text in rows:
        steps[run_id].append(
            {
                "index": index,
                "kind": kind,
                "tool_name": tool_name,
                "api_stop_reason": api_stop_reason,
                "input": _json(input_text, exact=True),
                "attempts": _JSONArray(attempts_text),
                "text": text,
            }
        )
    return steps


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a compare reads and aligns every step of both
    runs: it runs after every 700 containers made, and the tens of thousands a 5,000-step pair makes
    (none in a cycle) had it sweep the whole process over and over, a third of that pair's time. Left as
    it was found, so overlapping requests on other threads never leave it off."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _comparison(*, a_id: int, b_id: int) -> Comparison:
    both = Run.objects.defer("transcript", "search_text").filter(pk__in=[a_id, b_id])
    both = both.select_related("review__reviewer").prefetch_related("review__tags")  # overrides, beside the judge
    runs = {r.pk: r for r in both}
    a = runs.get(a_id) or get_object_or_404(Run, pk=a_id)
    b = runs.get(b_id) or get_object_or_404(Run, pk=b_id)
    left, right = (settings_snapshot(r.policy_settings, complete=not r.is_imported) for r in (a, b))
    with _collector_paused():
        steps = _compare_steps(a_id=a_id, b_id=b_id)
        divergence = run_divergence(
            steps[a_id],
            steps[b_id],
            left_policy=left,
            right_policy=right,
            left_stop=a.stop_reason,
            right_stop=b.stop_reason,
            comparable=a.scenario == b.scenario,
        )
    return Comparison(
        a=a,
        b=b,
        divergence=divergence,
        differences=run_differences(a, b),
        settings=settings_compare(left, right),
        settings_known=(bool(left), bool(right)),
    )


def _model_calls_fill(cmp: Comparison) -> None:
    """Each shown step's model call (``model_attempts``), read for those steps only. One query."""
    wanted: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for row in compare_lines.rows_shown(cmp.lines):
        for run, step in ((cmp.a, row.left), (cmp.b, row.right)):
            if step is not None:
                wanted[run.pk, step["index"]].append(step)
    if not wanted:
        return
    which = Q()
    for run in (cmp.a, cmp.b):
        indexes = [index for run_id, index in wanted if run_id == run.pk]
        if indexes:
            which |= Q(run_id=run.pk, index__in=indexes)
    for run_id, index, model_attempts in Step.objects.filter(which).values_list("run_id", "index", "model_attempts"):
        for step in wanted[run_id, index]:
            step["model_attempts"] = model_attempts


def run_compare(*, a_id: int, b_id: int, at: int = 0) -> Comparison:
    """Two runs aligned, their split, its cause and the settings behind it, over all their steps; of the
    aligned steps the first screen's lines (``compare_lines.first_screen``; ``at``: an aligned row a link
    names). Five queries, whatever the number of steps."""
    cmp = _comparison(a_id=a_id, b_id=b_id)
    cmp.lines = compare_lines.first_screen(cmp.divergence, at=at)
    _model_calls_fill(cmp)
    return cmp


def run_compare_rows(
    *, a_id: int, b_id: int, after: int, before: int | None = None, at: int = 0, plain: bool = False
) -> Comparison:
    """The comparison with the lines a gap loads (``compare_lines.gap_fill``). The same queries as
    ``run_compare``: the alignment, and so each row's place, needs every step of both runs."""
    cmp = _comparison(a_id=a_id, b_id=b_id)
    cmp.lines = compare_lines.gap_fill(cmp.divergence, after=after, before=before, at=at, plain=plain)
    _model_calls_fill(cmp)
    return cmp
