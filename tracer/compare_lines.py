"""The compare page's aligned steps, windowed as a run's timeline is: which lines it shows first, and
what each gap loads. Plain data in, plain data out (no database): the rows and stretches of a
``divergence.Divergence``.

A *line* is one stretch of ``divergence.stretches``: an aligned row, or a fold of rows ("6 more
identical failing calls…") closed on its summary. The first screen shows the first ``HEAD`` lines,
the split with ``AROUND`` lines before and after it, and the cause with ``CAUSE_AROUND`` (a link to
``?at=N`` adds the ``WINDOW`` lines that hold aligned row N); a comparison of ``WINDOW`` lines or
fewer is shown whole. The lines between are gaps, each a control that loads its next ``WINDOW``
lines. A fold of more than ``FOLD_INLINE`` rows loads its rows when it is opened, ``WINDOW`` at a time
and unfolded, so a 5,000-step pair's first screen is about the size of a 50-step pair's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from .divergence import Divergence, StepRow, Stretch

WINDOW = 50  # lines a gap loads at a time, and a comparison this short is shown whole
HEAD = 10  # the first lines, always shown
AROUND = 10  # lines shown before and after the split (and the row a link names)
CAUSE_AROUND = 2  # lines shown before and after the cause, when it is far from the split
FOLD_INLINE = 10  # a fold of more rows than this loads them when opened


@dataclass
class RowGap:
    """Aligned rows the page does not show yet: those after row ``after`` and before row ``before``
    (1-based). ``plain``: rows of one fold, loaded as they are rather than folded again."""

    after: int
    before: int
    next_last: int  # the last row its control loads
    differ: int = 0  # how many of its rows differ between the runs
    plain: bool = False

    @property
    def first(self) -> int:
        return self.after + 1

    @property
    def last(self) -> int:
        return self.before - 1

    @property
    def hidden(self) -> int:
        return self.before - self.after - 1

    @property
    def says(self) -> str:
        """Whether its rows are the same in both runs."""
        if not self.differ:
            return "the same in both runs"
        if self.differ == self.hidden:
            return "it differs between the runs" if self.hidden == 1 else "all differ between the runs"
        return f"{self.differ} of them differ between the runs"


@dataclass
class Line:
    """One line of the aligned steps: a ``row``, a ``gap``, or a fold (its ``label``, and ``inner``: its
    rows, or the gaps that load them; ``open`` when the row a link names is among them)."""

    row: StepRow | None = None
    gap: RowGap | None = None
    label: str = ""
    inner: list[Line] = field(default_factory=list)
    open: bool = False


def _first(stretch: Stretch) -> int:
    return stretch.rows[0].number


def _last(stretch: Stretch) -> int:
    return stretch.rows[-1].number


def _holding(stretches: Sequence[Stretch], number: int) -> int:
    """The index of the stretch that holds aligned row ``number`` (the nearest one when none does)."""
    for i, stretch in enumerate(stretches):
        if _last(stretch) >= number:
            return i
    return len(stretches) - 1


def _gap(stretches: Sequence[Stretch]) -> RowGap:
    """The gap in place of ``stretches`` (consecutive, one or more): its control loads ``WINDOW`` lines."""
    rows = (row for stretch in stretches for row in stretch.rows)
    return RowGap(
        after=_first(stretches[0]) - 1,
        before=_last(stretches[-1]) + 1,
        next_last=_last(stretches[:WINDOW][-1]),
        differ=sum(not row.same for row in rows),
    )


def _plain_window(rows: Sequence[StepRow], *, after: int, before: int, at: int = 0) -> list[Line]:
    """Rows ``after`` < number < ``before`` (of one fold) as lines: the ``WINDOW`` from the one holding
    ``at`` (counted from the first, as the timeline counts), and plain gaps for those before and after."""
    inside = [row for row in rows if after < row.number < before]
    if not inside:
        return []
    start = (at - inside[0].number) // WINDOW * WINDOW if at > inside[0].number else 0
    start = min(start, (len(inside) - 1) // WINDOW * WINDOW)
    shown = inside[start : start + WINDOW]
    lines = [Line(row=row) for row in shown]
    if start:
        lines.insert(
            0, Line(gap=RowGap(after=after, before=shown[0].number, next_last=inside[WINDOW - 1].number, plain=True))
        )
    if start + WINDOW < len(inside):
        rest = inside[start + WINDOW :]
        next_last = rest[:WINDOW][-1].number
        lines.append(Line(gap=RowGap(after=shown[-1].number, before=before, next_last=next_last, plain=True)))
    return lines


def _fold(stretch: Stretch, *, at: int = 0) -> Line:
    """A fold's line: its rows inline when they are few, the window that holds ``at`` open when it holds
    it, else a gap that loads them when the fold is opened."""
    after, before = _first(stretch) - 1, _last(stretch) + 1
    if len(stretch.rows) <= FOLD_INLINE:
        return Line(label=stretch.label, inner=[Line(row=row) for row in stretch.rows], open=after < at < before)
    if after < at < before:
        return Line(
            label=stretch.label, inner=_plain_window(stretch.rows, after=after, before=before, at=at), open=True
        )
    gap = RowGap(after=after, before=before, next_last=min(after + WINDOW, before - 1), plain=True)
    return Line(label=stretch.label, inner=[Line(gap=gap)])


def _lines(stretches: Sequence[Stretch], shown: set[int], *, at: int = 0) -> list[Line]:
    """``stretches`` as lines: those whose index is in ``shown``, and a gap for each run of the others."""
    lines: list[Line] = []
    hidden: list[Stretch] = []
    for i, stretch in enumerate(stretches):
        if i not in shown:
            hidden.append(stretch)
            continue
        if hidden:
            lines.append(Line(gap=_gap(hidden)))
            hidden = []
        lines.append(_fold(stretch, at=at) if stretch.label else Line(row=stretch.rows[0]))
    if hidden:
        lines.append(Line(gap=_gap(hidden)))
    return lines


def _around(index: int, before: int, after: int, count: int) -> range:
    return range(max(0, index - before), min(count, index + after + 1))


def first_screen(divergence: Divergence, *, at: int = 0) -> list[Line]:
    """What the page shows first: the head, the split and the cause with the lines around them, and for
    ``at`` (an aligned row a link names) the ``WINDOW`` lines that hold it; the rest is gaps."""
    stretches = divergence.stretches
    count = len(stretches)
    if count <= WINDOW:
        return _lines(stretches, set(range(count)), at=at)
    shown = set(range(min(HEAD, count)))
    if divergence.split is not None:
        shown.update(_around(_holding(stretches, divergence.split.row + 1), AROUND, AROUND, count))
    if divergence.cause is not None:
        shown.update(_around(_holding(stretches, divergence.cause.row + 1), CAUSE_AROUND, CAUSE_AROUND, count))
    if at > 0:
        start = _holding(stretches, at) // WINDOW * WINDOW
        shown.update(range(start, min(count, start + WINDOW)))
    return _lines(stretches, shown, at=at)


def gap_fill(divergence: Divergence, *, after: int, before: int | None, at: int = 0, plain: bool = False) -> list[Line]:
    """What a gap loads in its place: of the rows after ``after`` and before ``before`` (None: to the
    end), the ``WINDOW`` lines from the one holding ``at`` (0: the first), and gaps for the others.
    ``plain``: rows of a fold, unfolded."""
    before = len(divergence.rows) + 1 if before is None else min(before, len(divergence.rows) + 1)
    if plain:
        return _plain_window(divergence.rows, after=after, before=before, at=at)
    inside = [i for i, s in enumerate(divergence.stretches) if after < _first(s) and _last(s) < before]
    if not inside:
        return []
    start = 0
    if at > 0:
        start = (_holding(divergence.stretches, at) - inside[0]) // WINDOW * WINDOW
        start = max(0, min(start, (len(inside) - 1) // WINDOW * WINDOW))
    window = set(inside[start : start + WINDOW])
    stretches = [divergence.stretches[i] for i in inside]
    return _lines(stretches, {k for k, i in enumerate(inside) if i in window}, at=at)


def rows_shown(lines: Sequence[Line]) -> Iterator[StepRow]:
    """Every row the lines show, folds' inline rows included."""
    for line in lines:
        if line.row is not None:
            yield line.row
        yield from rows_shown(line.inner)
