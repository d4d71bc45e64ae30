"""Shared by the experiment commands: launching, waiting with a progress bar, and the summary table
(``import_traces`` draws the same bar)."""

from __future__ import annotations

import sys
import time
from collections import Counter, defaultdict

from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse
from django.utils import timezone

from tracer.experiments import experiment_launch
from tracer.models import Experiment, Run

OPTION_OF_FIELD = {
    "scenarios": "--scenario",
    "policies": "--policy",
    "model_backend": "--model",
    "step_delay_s": "--pace",
}


def validation_message(exc: ValidationError) -> str:
    """One line per message, each naming the command-line option it is about (if it is about one)."""
    if hasattr(exc, "error_dict"):
        return "\n".join(
            message
            if field == NON_FIELD_ERRORS
            else f"{OPTION_OF_FIELD.get(field, '--' + field.replace('_', '-'))}: {message}"
            for field, messages in exc.message_dict.items()
            for message in messages
        )
    return "\n".join(exc.messages)


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def launch(*, stdout, wait: bool, timeout: float, **launch_args) -> Experiment:
    """Launch an experiment, say what was queued and, with ``wait``, show progress and the summary table."""
    try:
        experiment = experiment_launch(**launch_args)
    except ValidationError as exc:
        raise CommandError("cannot launch the experiment:\n" + validation_message(exc)) from None
    stdout.write(
        f"experiment {experiment.pk}: {experiment.total_runs} runs queued for the workers "
        f"({_count(len(experiment.scenarios), 'scenario')} × {_count(len(experiment.policies), 'policy', 'policies')} "
        f"× {_count(experiment.repeats, 'repeat')}): "
        f"{reverse('tracer:experiment', args=[experiment.pk])}"
    )
    if wait:
        wait_for(experiment, timeout=timeout, stdout=stdout)
        stdout.write(summary_table(experiment))
    return experiment


class LaunchCommand(BaseCommand):
    """A command that launches an experiment: ``--wait`` and ``--timeout``, and ``launch`` with them."""

    def add_arguments(self, parser):
        parser.add_argument("--wait", action="store_true", help="wait with a progress bar, then print a summary table")
        parser.add_argument("--timeout", type=float, default=900, help="seconds --wait waits (default 900)")

    def launch(self, opts: dict, **launch_args) -> Experiment:
        return launch(stdout=self.stdout, wait=opts["wait"], timeout=opts["timeout"], **launch_args)


def progress_bar(done: int, total: int, width: int = 30, what: str = "runs finished") -> str:
    filled = int(width * done / total) if total else width
    return f"[{'#' * filled}{'-' * (width - filled)}] {done}/{total} {what}"


def wait_for(experiment: Experiment, *, timeout: float, stdout, idle_hint_after: float = 20.0) -> Experiment:
    """Redraw a progress bar until every run of ``experiment`` has finished, or fail after ``timeout``."""
    started = time.monotonic()
    tty = (hasattr(stdout, "isatty") and stdout.isatty()) or sys.stdout.isatty()
    last_line = ""
    hinted = False
    while True:
        experiment.refresh_from_db(fields=["finished_runs", "total_runs"])
        line = progress_bar(experiment.finished_runs, experiment.total_runs)
        if tty:
            stdout.write("\r" + line, ending="")
            stdout.flush()
        elif line != last_line:
            stdout.write(line)
        last_line = line
        if experiment.is_done:
            if tty:
                stdout.write("")
            return experiment
        elapsed = time.monotonic() - started
        if not hinted and elapsed > idle_hint_after and not experiment.runs.exclude(status=Run.Status.QUEUED).exists():
            stdout.write("\nno worker has picked up a run yet; is one running? (celery -A config worker)")
            hinted = True
        if elapsed > timeout:
            raise CommandError(
                f"experiment {experiment.pk}: {experiment.finished_runs} of {experiment.total_runs} runs finished "
                f"after {timeout:.0f}s; {unfinished(experiment)}"
            )
        time.sleep(0.25)


def unfinished(experiment: Experiment, *, shown: int = 3) -> str:
    """What the runs still unfinished are doing: running on a worker that is busy with them (each ends
    by ``RLT_RUN_TIME_LIMIT_S``), or queued, which needs a worker only when none is running them."""
    running = list(
        experiment.runs.filter(status=Run.Status.RUNNING, parent__isnull=True)
        .order_by("started_at", "pk")
        .values_list("pk", "worker_name", "started_at", "step_count")
    )
    queued = experiment.runs.filter(status=Run.Status.QUEUED, parent__isnull=True).count()
    now = timezone.now()
    parts = []
    if running:
        each = [
            f"run {pk} on {worker or 'a worker'} for {(now - started).total_seconds():.0f}s with "
            f"{_count(steps, 'step')}"
            for pk, worker, started, steps in running[:shown]
        ]
        more = f" and {len(running) - shown} more" if len(running) > shown else ""
        parts.append(
            f"{_count(len(running), 'run')} still running ({'; '.join(each)}{more}): a worker is busy with "
            f"them, waiting on the model or a tool; each ends by its time limit "
            f"({settings.RLT_RUN_TIME_LIMIT_S}s, RLT_RUN_TIME_LIMIT_S)"
        )
    if queued:
        parts.append(
            f"{_count(queued, 'run')} queued, waiting for a free worker"
            if running
            else f"{_count(queued, 'run')} queued and none running: start a worker (celery -A config worker)"
        )
    return "; ".join(parts) or "the rest ended meanwhile"


def summary_rows(experiment: Experiment) -> list[dict]:
    """One row per scenario × policy: runs, passes, mean tool calls, retries, wasted retries, stop reasons.

    A run that was interrupted and re-run is counted through its re-run only.
    """
    groups: dict[tuple[str, str], list[Run]] = defaultdict(list)
    runs = list(
        experiment.runs.filter(parent__isnull=True).only(
            "scenario",
            "policy_name",
            "verdict",
            "tool_call_count",
            "retry_count",
            "wasted_retry_count",
            "stop_reason",
            "rerun_of_id",
        )
    )
    replaced = {run.rerun_of_id for run in runs if run.rerun_of_id}
    for run in runs:
        if run.pk not in replaced:
            groups[(run.scenario, run.policy_name)].append(run)
    rows = []
    for scenario in experiment.scenarios:
        for policy in experiment.policies:
            group = groups.get((scenario, policy), [])
            if not group:
                continue
            reasons = Counter(r.stop_reason or "?" for r in group)
            rows.append(
                {
                    "scenario": scenario,
                    "policy": policy,
                    "runs": len(group),
                    "pass": sum(r.verdict == Run.Verdict.PASS for r in group),
                    "tool_calls": sum(r.tool_call_count for r in group) / len(group),
                    "retries": sum(r.retry_count for r in group),
                    "wasted": sum(r.wasted_retry_count for r in group),
                    "stops": ", ".join(f"{k}×{v}" if v > 1 else k for k, v in sorted(reasons.items())),
                }
            )
    return rows


def summary_table(experiment: Experiment) -> str:
    rows = summary_rows(experiment)
    headers = ["scenario", "policy", "runs", "pass", "tool calls", "retries", "wasted", "stop reasons"]
    cells = [
        [
            r["scenario"],
            r["policy"],
            str(r["runs"]),
            str(r["pass"]),
            f"{r['tool_calls']:.1f}",
            str(r["retries"]),
            str(r["wasted"]),
            r["stops"],
        ]
        for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(headers)]
    numeric = {2, 3, 4, 5, 6}

    def fmt(row: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=False))
        ).rstrip()

    lines = [fmt(headers), fmt(["-" * w for w in widths])]
    lines += [fmt(c) for c in cells]
    return "\n".join(lines)
