"""The picture of a run: a compact waterfall of its steps, laid out for an inline SVG.

Each step is a row on one time axis: its model call (each attempt, with the wait before a retry), then
its tool attempts, each after the backoff the harness waited before it. Time is what the run measured
(latencies, waits and backoffs), not the wall clock, so a pace between steps or a busy worker does not
stretch it. A step that repeats the one before it exactly (same tool, same input, the same failure sent
back to the model) is folded into one row after the first, "7 more identical failing calls", so a stuck
run reads at a glance. A sub-agent a step ran (a coordinator's child run) is nested under that step:
a row for the sub-agent across its own measured time, from the start of the tool call that ran it,
then its steps' rows, indented, on the same axis; they take no time of their own from the parent's
clock, since the call's attempt already measured them.
``templates/tracer/includes/waterfall.html`` draws it; geometry is in SVG user units of a
``WIDTH``-wide view box, readable down to an 800 px window. On a phone the page shows the
same rows stacked instead (``narrow_svg``): each row's label on a line of its own above its bar, in a
``NARROW_WIDTH``-wide view box that a 390 px screen draws at about its own size.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from html import escape  # Django's, without its lazy-string wrapper: a third of drawing the rows
from typing import Any

from django.utils.safestring import SafeString, mark_safe

WIDTH = 760
LABEL_END = 196  # the step labels end here (right-aligned)
PLOT_X = 204
FIGURE_X = WIDTH - 4  # each row's duration, right-aligned
PLOT_W = WIDTH - PLOT_X - 64
TOP = 22  # below the axis labels
ROW_H = 22
BAR_H = 12
MIN_BAR = 1.5  # an attempt too short to see still shows as a tick
MAX_ROWS = 50  # rows drawn; a longer run says how many steps are left out
MAX_STEPS = 1000  # steps asked for; reading stops once the rows are full
LABEL_CHARS = 30
NARROW_WIDTH = 360  # the stacked picture: label above bar, the bar across the whole width
NARROW_X = 4
NARROW_W = NARROW_WIDTH - 2 * NARROW_X
NARROW_ROW_H = 30
SUB_ROWS = 12  # rows of one sub-agent's steps at most; its later steps are on its own page
SUB_STEPS_READ = 2 * SUB_ROWS  # the steps read of each sub-agent the picture nests
NEST_INDENT = 10  # how far a nested row's label sits in on the stacked picture


def seconds_text(value: float) -> str:
    """A duration as the picture writes it: ``3.2 ms``, ``140 ms``, ``1.50 s``, ``12.3 s``, ``2 min 05 s``."""
    if value < 0.01:
        return f"{value * 1000:.1f} ms"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 10:
        return f"{value:.2f} s"
    if value < 60:
        return f"{value:.1f} s"
    minutes, secs = divmod(round(value), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def duration_text(measured_ms: float | None) -> str:
    """A run's duration (``Run.measured_ms``) as every page writes it; "not recorded" when no step
    recorded a timing (a transcript without them), never a made-up "0.0 ms"."""
    if not measured_ms or measured_ms <= 0:
        return "not recorded"
    return seconds_text(measured_ms / 1000)


@dataclass
class Segment:
    """A stretch of a row: ``kind`` is ``model``, ``model-fail``, ``ok``, ``fail`` (something ran) or
    ``wait`` (a backoff or a model retry's wait, drawn as a gap with a line)."""

    kind: str
    start_s: float
    duration_s: float
    title: str
    x: float = 0.0
    width: float = 0.0

    @property
    def end_x(self) -> float:
        return round(self.x + self.width, 1)


@dataclass
class Row:
    """One step, or the identical failing steps folded after one (``folded``: how many)."""

    first: int
    last: int
    tool: str  # the tool's name, "final answer" or "model stopped"
    label: str  # what the row's left column says
    start_s: float
    segments: list[Segment] = field(default_factory=list)
    attempts: int = 0
    waited_s: float = 0.0
    failed: bool = False
    folded: int = 0
    folded_tokens: tuple[int, int] = (0, 0)  # the model tokens (in, out) the folded repeats spent
    y: int = 0
    agent: int = 0  # the sub-agent (run id) this row is of, or heads; 0: the run's own step
    head: str = ""  # a sub-agent's row: what it says in words instead of a step's

    @property
    def duration_s(self) -> float:
        return sum(s.duration_s for s in self.segments)

    @cached_property  # asked for by the summary and the figure, once the row is complete
    def duration_text(self) -> str:
        return seconds_text(self.duration_s)

    @property
    def steps_text(self) -> str:
        return f"step {self.first}" if self.first == self.last else f"steps {self.first}–{self.last}"

    @property
    def folded_text(self) -> str:
        return f"{self.folded} more identical failing call{'s' if self.folded != 1 else ''}"

    @property
    def kind(self) -> str:
        """``step``, ``sub-agent`` (a sub-agent's own row) or ``nested`` (one of a sub-agent's steps)."""
        if not self.agent:
            return "step"
        return "sub-agent" if self.head else "nested"

    @cached_property  # asked for three times a row, once the row is complete
    def summary(self) -> str:
        """The row in words: its accessible name and the text alternative's line."""
        if self.head:
            return f"{self.head}; {self.duration_text} in all, from {seconds_text(self.start_s)}"
        of = f"sub-agent #{self.agent} " if self.agent else ""
        if self.folded:
            head = f"{of}{self.steps_text}: {self.folded_text} to {self.tool}"
        else:
            head = f"{of}{self.steps_text} {self.tool}"
        parts = [head]
        if self.attempts:
            parts.append(
                f"{self.attempts} attempt{'s' if self.attempts != 1 else ''}, {'failed' if self.failed else 'ok'}"
            )
        waits = [s for s in self.segments if s.kind == "wait"]
        if waits:
            parts.append(
                f"{len(waits)} backoff gap{'s' if len(waits) != 1 else ''} ({seconds_text(self.waited_s)} waiting: "
                + ", ".join(seconds_text(w.duration_s) for w in waits[:6])
                + (", …" if len(waits) > 6 else "")
                + ")"
            )
        parts.append(f"{self.duration_text} in all, from {seconds_text(self.start_s)}")
        return "; ".join(parts)

    @cached_property  # the row's name and title in the picture, and its line in words
    def summary_html(self) -> str:
        return escape(self.summary)


@dataclass
class SubAgentSteps:
    """What the picture nests of one sub-agent: its run id, label, number of steps and its first steps
    (in index order, as ``waterfall_build`` reads a run's)."""

    pk: int
    label: str
    step_count: int
    steps: list[Any]


@dataclass
class Tick:
    x: float
    text: str


@dataclass
class Waterfall:
    rows: list[Row]
    total_s: float
    steps: int  # steps in the picture
    of_steps: int  # steps the run has
    ticks: list[Tick]
    width: int = WIDTH
    label_end: int = LABEL_END
    plot_x: int = PLOT_X
    plot_w: int = PLOT_W
    figure_x: int = FIGURE_X
    bar_h: int = BAR_H

    @property
    def hidden_steps(self) -> int:
        """The run's later steps, left out once ``MAX_ROWS`` rows were drawn."""
        return self.of_steps - self.steps

    @property
    def height(self) -> int:
        return TOP + ROW_H * len(self.rows) + 6

    @property
    def folded_steps(self) -> int:
        """The run's own repeats folded (not its sub-agents')."""
        return sum(r.folded for r in self.rows if not r.agent)

    @property
    def sub_agents(self) -> int:
        return sum(1 for r in self.rows if r.head)

    @property
    def waited_s(self) -> float:
        """The run's own waits: a sub-agent's are inside the step that ran it."""
        return sum(r.waited_s for r in self.rows if not r.agent)

    @property
    def folded_tokens(self) -> tuple[int, int]:
        """The model tokens (in, out) spent on the run's folded repeats: the calls that could only fail again."""
        own = [r for r in self.rows if not r.agent]
        return sum(r.folded_tokens[0] for r in own), sum(r.folded_tokens[1] for r in own)

    @property
    def svg(self) -> SafeString:
        """The picture as inline SVG: presentation attributes only (the CSP allows no style attribute;
        colours are app.css's classes). Every text in it goes through ``escape`` (the stdlib's, quotes
        included, as Django's); the rest are numbers and class names of this module. Drawn here rather
        than in a template, and without a ``format_html`` per value: a 50-row picture through either
        took most of a run page's time."""
        ticks = "".join(
            f'<line class="tick" x1="{t.x}" x2="{t.x}" y1="16" y2="{self.height}"/>'
            f'<text class="axis" x="{t.x}" y="12" text-anchor="middle">{escape(t.text)}</text>'
            for t in self.ticks
        )
        rows = "".join(self._row_svg(row) for row in self.rows)
        label = escape(f"Waterfall of the run: {self.summary}")
        return mark_safe(  # every text escaped above and in _row_svg
            f'<svg class="waterfall wide" viewBox="0 0 {self.width} {self.height}" role="group" aria-label="{label}">'
            f"{ticks}{rows}</svg>"
        )

    def _narrow_x(self, x: float) -> float:
        """A position on the wide picture's time axis, on the stacked picture's."""
        return round(NARROW_X + (x - self.plot_x) * NARROW_W / self.plot_w, 1)

    @property
    def narrow_height(self) -> int:
        return TOP + NARROW_ROW_H * len(self.rows) + 4

    @property
    def narrow_svg(self) -> SafeString:
        """The same picture with its rows stacked, for a phone (app.css shows one of the two): each row's
        label and duration on a line, its bar under them across the whole width. Escaped as ``svg``."""
        height = self.narrow_height
        ticks = "".join(
            f'<line class="tick" x1="{self._narrow_x(t.x)}" x2="{self._narrow_x(t.x)}" y1="16" y2="{height}"/>'
            f'<text class="axis" x="{self._narrow_x(t.x)}" y="12" text-anchor="{"start" if i == 0 else "middle"}">'
            f"{escape(t.text)}</text>"
            for i, t in enumerate(self.ticks)
            if i == 0 or self._narrow_x(t.x) < NARROW_WIDTH - 24  # the last mark's text would leave the frame
        )
        rows = "".join(self._narrow_row_svg(row, TOP + NARROW_ROW_H * i) for i, row in enumerate(self.rows))
        label = escape(f"Waterfall of the run: {self.summary}")
        return mark_safe(  # every text escaped above and in _narrow_row_svg
            f'<svg class="waterfall narrow" viewBox="0 0 {NARROW_WIDTH} {height}" role="group" aria-label="{label}">'
            f"{ticks}{rows}</svg>"
        )

    def _narrow_row_svg(self, row: Row, y: int) -> str:
        text_y, bar_y = y + 11, y + 15
        mid = bar_y + self.bar_h / 2

        def place(seg):
            x, end = self._narrow_x(seg.x), self._narrow_x(seg.x + seg.width)
            return x, end, max(round(end - x, 1), MIN_BAR)

        return self._row_group(
            row,
            f'<text class="label" x="{NARROW_X + (NEST_INDENT if row.agent else 0)}" y="{text_y}">'
            f"{escape(row.label)}</text>"
            f'<text class="figure" x="{NARROW_WIDTH - NARROW_X}" y="{text_y}" text-anchor="end">'
            f"{escape(row.duration_text)}</text>"
            f"{self._segments_svg(row, place, mid, bar_y)}",
        )

    def _row_svg(self, row: Row) -> str:
        mid, bar_y, text_y = row.y + 10, row.y + 4, row.y + 15
        return self._row_group(
            row,
            f'<text class="label" x="{self.label_end}" y="{text_y}" text-anchor="end">{escape(row.label)}</text>'
            f"{self._segments_svg(row, lambda seg: (seg.x, seg.end_x, seg.width), mid, bar_y)}"
            f'<text class="figure" x="{self.figure_x}" y="{text_y}" text-anchor="end">'
            f"{escape(row.duration_text)}</text>",
        )

    def _segments_svg(self, row: Row, place, mid: float, bar_y: float) -> str:
        """A row's bars and waits, each at the (x, end, width) ``place`` gives it."""
        parts = []
        for seg in row.segments:
            title = escape(seg.title)
            x, end, width = place(seg)
            if seg.kind == "wait":
                parts.append(
                    f'<line class="wait" x1="{x}" x2="{end}" y1="{mid}" y2="{mid}"><title>{title}</title></line>'
                )
            else:
                parts.append(
                    f'<rect class="seg {seg.kind}" x="{x}" y="{bar_y}" width="{width}" height="{self.bar_h}">'
                    f"<title>{title}</title></rect>"
                )
        return "".join(parts)

    @staticmethod
    def _row_group(row: Row, inner: str) -> str:
        """A row's group: its classes, its summary as label and title, then ``inner`` (escaped by the caller)."""
        classes = "row" + (" folded" if row.folded else "") + (" failed" if row.failed else "")
        of = ""
        if row.agent:
            classes += f" {row.kind}"
            of = f' data-run="{int(row.agent)}"'
        summary = row.summary_html
        return (
            f'<g class="{classes}" role="img" aria-label="{summary}" data-steps="{row.first}-{row.last}"{of}>'
            f"<title>{summary}</title>{inner}</g>"
        )

    @property
    def text_html(self) -> SafeString:
        """The picture in words: each row's ``summary`` as a list item, escaped."""
        return mark_safe("".join(f"<li>{row.summary_html}</li>" for row in self.rows))  # escaped

    @property
    def summary(self) -> str:
        steps = f"{self.steps} step{'s' if self.steps != 1 else ''}"
        if self.total_s <= 0:
            parts = [f"{steps}; their timings were not recorded"]
        else:
            parts = [f"{steps} in {seconds_text(self.total_s)}"]
        if self.waited_s:
            parts.append(f"{seconds_text(self.waited_s)} of it waiting between attempts")
        if self.folded_steps:
            parts.append(f"{self.folded_steps} identical failing call{'s' if self.folded_steps != 1 else ''} folded")
        if self.sub_agents:
            many = self.sub_agents != 1
            where = "the steps that ran them" if many else "the step that ran it"
            parts.append(f"{self.sub_agents} sub-agent{'s' if many else ''} nested under {where}")
        if self.hidden_steps:
            parts.append(f"the first {self.steps} of {self.of_steps} steps: {self.hidden_steps} later ones not drawn")
        return "; ".join(parts)


def _number(value: Any) -> float:
    """A recorded duration as a number of seconds or milliseconds: anything else (imported runs) is 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return 0.0
    return float(value)


def _value(attempt: Any, name: str) -> Any:
    return attempt.get(name) if isinstance(attempt, dict) else getattr(attempt, name, None)


def step_time_s(*, model_attempts: Any, attempts: Any) -> tuple[float, float]:
    """What a step measured, in seconds, and the part of it spent waiting: its model call's attempts
    (each after the wait before it) and its tool attempts (each after the harness's backoff). Attempts
    are the stored dicts or ``agents.events`` attempts. The run's duration is the sum over its steps
    (``Run.measured_ms``), the picture's axis the same sum, so the two always agree."""
    total = waited = 0.0
    for group, wait_name in ((model_attempts, "wait_s"), (attempts, "backoff_s")):
        for a in group if isinstance(group, list) else []:
            if not isinstance(a, dict) and not hasattr(a, "latency_ms"):
                continue
            wait = _number(_value(a, wait_name))
            total += wait + _number(_value(a, "latency_ms")) / 1000
            waited += wait
    return total, waited


def _attempt_segments(attempts: Any, *, model: bool) -> list[Segment]:
    """The segments of a model call's attempts (``model``) or a tool call's: each attempt after the wait
    before it (a model retry's wait, or the harness's backoff)."""
    segments: list[Segment] = []
    for a in attempts if isinstance(attempts, list) else []:
        if not isinstance(a, dict):
            continue
        number = a.get("number")
        wait = _number(a.get("wait_s" if model else "backoff_s"))
        if wait:
            before = f"model attempt {number}" if model else f"attempt {number}"
            segments.append(
                Segment("wait", 0, wait, f"{'' if model else 'backoff: '}waited {seconds_text(wait)} before {before}")
            )
        latency = _number(a.get("latency_ms")) / 1000
        if model:
            failed = bool(a.get("error"))
            kind, what = (
                ("model-fail" if failed else "model"),
                f"model call attempt {number}: {'failed' if failed else 'answered'} in",
            )
        else:
            ok = bool(a.get("ok"))
            kind, what = ("ok" if ok else "fail"), f"attempt {number}: {'ok' if ok else 'failed'} after"
        segments.append(Segment(kind, 0, latency, f"{what} {seconds_text(latency)}"))
    return segments


def _step_segments(step: Any) -> list[Segment]:
    return _attempt_segments(step.model_attempts, model=True) + _attempt_segments(step.attempts, model=False)


def repeat_identity(step: Any) -> str | None:
    """What makes two failing calls identical: tool, input and the failure the model was sent. None
    for a step that did not fail (only failing calls fold). The picture and the timeline fold by it."""
    if step.kind != "tool_use" or not step.is_error:
        return None
    return json.dumps([step.tool_name, step.input, step.category, step.result_content], sort_keys=True, default=str)


def _name(step: Any) -> str:
    if step.kind == "final_answer":
        return "final answer"
    if step.kind == "model_stop":
        return "model stopped"
    return step.tool_name or "tool call"


def _label(step: Any) -> str:
    text = f"{step.index} {_name(step)}"
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def _ticks(total_s: float) -> list[Tick]:
    """About five round marks along the axis (1, 2 or 5 × a power of ten)."""
    if total_s <= 0:
        return [Tick(PLOT_X, "0 s")]
    rough = total_s / 5
    power = 10 ** math.floor(math.log10(rough))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= rough)
    marks, at = [], 0.0
    while at <= total_s * 1.0001:
        marks.append(Tick(round(PLOT_X + PLOT_W * at / total_s, 1), "0 s" if at == 0 else seconds_text(at)))
        at = round(at + step, 12)
    return marks


def _label_nested(step: Any) -> str:
    text = f"↳ {step.index} {_name(step)}"
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


class _Layout:
    """The rows of a picture as they are laid: a run's steps on the clock, each sub-agent a step ran
    nested under its row, until ``MAX_ROWS`` rows are full."""

    def __init__(self, sub_agents: dict[int, list[SubAgentSteps]]) -> None:
        self.rows: list[Row] = []
        self.sub_agents = sub_agents
        self.drawn = 0  # the run's own steps drawn

    def full(self) -> bool:
        return len(self.rows) >= MAX_ROWS

    def lay(self, steps: Iterable[Any], *, clock: float, agent: int = 0, max_rows: int = MAX_ROWS) -> float:
        """Rows for ``steps`` from ``clock`` (at most ``max_rows`` of them); the clock after them."""
        last_identity: str | None = None
        mine = 0
        for step in steps:
            nests = not agent and step.index in self.sub_agents
            identity = None if nests else repeat_identity(step)
            folds = identity is not None and identity == last_identity
            if not (folds and self.rows[-1].folded) and (self.full() or mine >= max_rows):
                break  # this step needs a row of its own and there is none left
            segments = _step_segments(step)
            start = clock
            for segment in segments:
                segment.start_s = clock
                clock += segment.duration_s
            if not agent:
                self.drawn += 1
            attempts = sum(1 for s in segments if s.kind in ("ok", "fail"))
            waited = sum(s.duration_s for s in segments if s.kind == "wait")
            if folds:
                row = self.rows[-1]
                if not row.folded:  # the first repeat: a folded row after the step it repeats
                    row = Row(
                        first=step.index,
                        last=step.index,
                        tool=row.tool,
                        label="",
                        start_s=start,
                        failed=True,
                        agent=agent,
                    )
                    self.rows.append(row)
                    mine += 1
                row.last = step.index
                row.folded += 1
                row.folded_tokens = (
                    row.folded_tokens[0] + int(step.input_tokens or 0),
                    row.folded_tokens[1] + int(step.output_tokens or 0),
                )
                row.label = ("↳ " if agent else "") + row.folded_text
                row.segments += segments
                row.attempts += attempts
                row.waited_s += waited
                continue
            last_identity = identity
            self.rows.append(
                Row(
                    first=step.index,
                    last=step.index,
                    tool=_name(step),
                    label=_label_nested(step) if agent else _label(step),
                    start_s=start,
                    segments=segments,
                    attempts=attempts,
                    waited_s=waited,
                    failed=bool(step.is_error),
                    agent=agent,
                )
            )
            mine += 1
            if nests:
                self._nest(self.sub_agents[step.index], segments)
        return clock

    def _nest(self, children: list[SubAgentSteps], segments: list[Segment]) -> None:
        """Each sub-agent the step ran, from the start of the tool attempt that ran it (the next one
        after the sub-agent before it, when the step ran several)."""
        starts = [s.start_s for s in segments if s.kind in ("ok", "fail")]
        clock = starts[0] if starts else (segments[-1].start_s + segments[-1].duration_s if segments else 0.0)
        for i, child in enumerate(children):
            if self.full():
                return
            start = max(clock, starts[i]) if i < len(starts) else clock
            head = Row(first=0, last=0, tool="sub-agent", label="", start_s=start, agent=child.pk)
            self.rows.append(head)
            before = len(self.rows)
            end = self.lay(child.steps, clock=start, agent=child.pk, max_rows=SUB_ROWS)
            shown = self.rows[before:]
            drawn = shown[-1].last if shown else 0
            head.first, head.last = (1, drawn) if drawn else (0, 0)
            head.segments = [
                Segment("agent", start, end - start, f"sub-agent #{child.pk}: {seconds_text(end - start)}")
            ]
            name = child.label or "sub-agent"
            text, room = f"#{child.pk} {name}", LABEL_CHARS - 4  # its label is bold, so wider
            head.label = text if len(text) <= room else text[: room - 1] + "…"
            steps = f"{child.step_count} step{'s' if child.step_count != 1 else ''}"
            if drawn < child.step_count:
                steps += f", the first {drawn} drawn"
            head.head = f"sub-agent #{child.pk} {name}: {steps}"
            clock = end


def waterfall_build(
    *, steps: Iterable[Any], step_count: int, sub_agents: dict[int, list[SubAgentSteps]] | None = None
) -> Waterfall:
    """The waterfall of ``steps`` (Step rows in index order, with ``attempts`` and ``model_attempts``),
    read only until ``MAX_ROWS`` rows are full; ``step_count``: the run's number of steps, to say how
    many are left out; ``sub_agents``: the sub-agents each step ran (by the step's index), nested under it."""
    layout = _Layout(sub_agents or {})
    clock = layout.lay(steps, clock=0.0)
    rows = layout.rows
    # the axis is the run's measured time: a sub-agent's rows lie inside the call that ran it, which
    # measured the sub-agent's time (its waits too) as its own
    scale = PLOT_W / clock if clock > 0 else 0.0
    for i, row in enumerate(rows):
        row.y = TOP + ROW_H * i
        for segment in row.segments:
            segment.x = round(PLOT_X + segment.start_s * scale, 1)
            segment.width = round(max(segment.duration_s * scale, MIN_BAR if segment.kind != "wait" else 0), 1)
    drawn = layout.drawn
    return Waterfall(rows=rows, total_s=clock, steps=drawn, of_steps=max(step_count, drawn), ticks=_ticks(clock))
