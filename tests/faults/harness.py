"""What every fault test checks once the fault is over, read from the database rows (never log lines).

A snapshot is every run and experiment in one database, read with plain SQL through any DB-API
cursor: this session's test database (Django's connection) or a database a test owns (a PostgreSQL
cluster it restarts, read with psycopg while workers write to it). Each fault test's database holds
only that test's rows (transactional tests are flushed in between), so "every run" is the test's runs.

``wait_for`` polls a snapshot until a condition holds, with a deadline; when it runs out it fails with
the state of every run and the end of each worker's log. ``recovery_problems`` lists every way the
rows break the promises the recovery design makes (see docs/reliability.md).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agents.events import ListRecorder
from agents.run import run_scenario

FINISHED = "finished"
INTERRUPTED = "interrupted"


def _timestamp(value: Any) -> datetime | None:
    """A timestamp column as an aware datetime (SQLite's raw cursor gives text, psycopg datetimes)."""
    if value is None or isinstance(value, datetime):
        return value if value is None or value.tzinfo else value.replace(tzinfo=UTC)
    parsed = datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


@dataclass
class RunRow:
    id: int
    experiment_id: int | None
    parent_id: int | None
    rerun_of_id: int | None
    status: str
    stop_reason: str
    verdict: str
    scenario: str
    policy_name: str
    policy_settings: dict
    step_count: int
    tool_call_count: int
    error_count: int
    retry_count: int
    worker_name: str
    worker_pid: int | None
    started_at: datetime | None
    finished_at: datetime | None
    error: str
    extra: dict[str, Any] = field(default_factory=dict)  # lease_expires_at, send_count, … when the schema has them
    # from the run's step rows
    steps: int = 0
    first_index: int | None = None
    last_index: int | None = None
    tool_steps: int = 0
    error_steps: int = 0
    step_retries: int = 0
    last_step_at: datetime | None = None

    @property
    def ended(self) -> bool:
        return self.status == FINISHED

    def line(self) -> str:
        extra = " ".join(f"{k}={v}" for k, v in self.extra.items())
        links = "".join(
            f" {name}={value}"
            for name, value in (
                ("experiment", self.experiment_id),
                ("parent", self.parent_id),
                ("rerun_of", self.rerun_of_id),
            )
            if value
        )
        error = self.error.strip().splitlines()[0][:90] if self.error.strip() else ""
        return (
            f"run {self.id}{links}: {self.scenario}/{self.policy_name} {self.status}"
            f"{' ' + self.stop_reason if self.stop_reason else ''} steps={self.step_count} (rows {self.steps}) "
            f"worker={self.worker_name or '-'} pid={self.worker_pid or '-'} {extra}"
            f"{' error: ' + error if error else ''}"
        )


@dataclass
class Snapshot:
    experiments: dict[int, dict[str, int]]
    runs: list[RunRow]
    read_at: float = field(default_factory=time.monotonic)

    def top_level(self, experiment_id: int | None = None) -> list[RunRow]:
        return [
            r for r in self.runs if r.parent_id is None and (experiment_id is None or r.experiment_id == experiment_id)
        ]

    def count(self, condition: Callable[[RunRow], bool]) -> int:
        return sum(1 for r in self.runs if condition(r))

    def describe(self) -> str:
        lines = [
            f"experiment {pk}: finished_runs={e['finished_runs']} total_runs={e['total_runs']}"
            for pk, e in sorted(self.experiments.items())
        ]
        lines += [r.line() for r in sorted(self.runs, key=lambda r: r.id)]
        return "\n".join(lines) or "(no experiment and no run in the database)"


RUN_COLUMNS = {
    "id",
    "experiment_id",
    "parent_id",
    "rerun_of_id",
    "status",
    "stop_reason",
    "verdict",
    "scenario",
    "policy_name",
    "policy_settings",
    "step_count",
    "tool_call_count",
    "error_count",
    "retry_count",
    "worker_name",
    "worker_pid",
    "started_at",
    "finished_at",
    "error",
}
# Recovery fields shown in failure messages when the schema has them.
EXTRA_COLUMNS = ("lease_expires_at", "send_count", "enqueued_at")


def read_snapshot(cursor) -> Snapshot:
    """Every experiment and run, with what their step rows say, through a DB-API ``cursor`` (``%s`` style)."""
    cursor.execute("SELECT id, total_runs, finished_runs FROM tracer_experiment")
    experiments = {row[0]: {"total_runs": row[1], "finished_runs": row[2]} for row in cursor.fetchall()}
    cursor.execute("SELECT * FROM tracer_run")
    names = [d[0] for d in cursor.description]
    runs: dict[int, RunRow] = {}
    for values in cursor.fetchall():
        row = dict(zip(names, values, strict=True))
        settings = row.get("policy_settings") or {}
        run = RunRow(
            **{name: row.get(name) for name in RUN_COLUMNS if name not in {"policy_settings"}},
            policy_settings=json.loads(settings) if isinstance(settings, str) else settings,
            extra={name: row[name] for name in EXTRA_COLUMNS if name in row},
        )
        run.started_at, run.finished_at = _timestamp(run.started_at), _timestamp(run.finished_at)
        run.error = run.error or ""
        runs[run.id] = run
    cursor.execute(
        'SELECT run_id, COUNT(*), MIN("index"), MAX("index"), '
        "SUM(CASE WHEN kind = 'tool_use' THEN 1 ELSE 0 END), SUM(CASE WHEN is_error THEN 1 ELSE 0 END), "
        "SUM(retry_count), MAX(created_at) FROM tracer_step GROUP BY run_id"
    )
    for run_id, count, first, last, tools, errors, retries, last_at in cursor.fetchall():
        run = runs[run_id]
        run.steps, run.first_index, run.last_index = count, first, last
        run.tool_steps, run.error_steps, run.step_retries = int(tools), int(errors), int(retries)
        run.last_step_at = _timestamp(last_at)
    return Snapshot(experiments=experiments, runs=list(runs.values()))


def session_snapshot() -> Snapshot:
    """A snapshot of this pytest session's test database."""
    from django.db import connection

    with connection.cursor() as cursor:
        return read_snapshot(cursor)


def every_run_ended(snapshot: Snapshot) -> bool:
    """At least one run, every run (re-runs and sub-agents too) finished, and every experiment done."""
    return (
        bool(snapshot.runs)
        and all(r.ended for r in snapshot.runs)
        and all(e["finished_runs"] >= e["total_runs"] for e in snapshot.experiments.values())
    )


def wait_for(
    read: Callable[[], Snapshot],
    condition: Callable[[Snapshot], Any],
    *,
    timeout: float,
    what: str,
    workers: Iterable = (),
    tolerate: tuple[type[BaseException], ...] = (),
) -> Snapshot:
    """Read snapshots until ``condition`` holds; after ``timeout`` s fail with every run's state.

    ``tolerate``: errors of reading that mean "not yet" (the database is being restarted).
    """
    deadline = time.monotonic() + timeout
    last: Snapshot | None = None
    last_error: BaseException | None = None
    while True:
        try:
            last = read()
            if condition(last):
                return last
        except tolerate as exc:
            last_error = exc
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    state = last.describe() if last is not None else "(never read the database)"
    error = f"\nlast error reading the database: {last_error!r}" if last_error else ""
    logs = "".join(f"\n--- end of worker {w.name}'s log ---\n{w.log()[-2500:]}" for w in workers)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}. Every run:\n{state}{error}{logs}")


def expected_end(run: RunRow) -> ListRecorder:
    """How ``run`` ends when nothing fails: the agent core is deterministic for a run's seed (its id)."""
    expected = ListRecorder()
    run_scenario(run.scenario, run.policy_settings or run.policy_name, recorder=expected, seed=run.id)
    return expected


@dataclass
class Recovery:
    """Figures of one fault test, for docs/reliability.md."""

    runs: int  # top-level runs of the experiment as launched
    interrupted: int
    reruns: int
    other_ends: int  # finished with the agent's own stop reason
    children: int
    resent: int  # runs whose task was sent more than once (send_count > 1)

    def __str__(self) -> str:
        return (
            f"{self.runs} runs launched, {self.interrupted} interrupted with {self.reruns} re-runs, "
            f"{self.other_ends} runs ended by the agent, {self.children} sub-agent runs, "
            f"{self.resent} runs sent more than once"
        )


def recovery_problems(
    snapshot: Snapshot,
    *,
    experiment_id: int | None = None,
    reruns_for_interrupted: bool = True,
    allow_interrupted: bool = True,
) -> list[str]:
    """Every broken promise in ``snapshot``; empty when the database recovered completely.

    - every run ended (sub-agent runs and re-runs too); the experiment's ``finished_runs`` equals the
      number of its top-level runs that ended, and it is done;
    - no step lost or written twice: each run's step indexes are exactly 1..n, and its counters equal
      what its step rows add up to; no step row is newer than the run's ``finished_at``;
    - an interrupted top-level run has exactly one re-run (``rerun_of``), none if it is a re-run itself
      (one automatic re-run per launched run), and a re-run points at an interrupted run;
      ``allow_interrupted=False``: no run may be interrupted at all;
    - a top-level run that was not interrupted ended as the agent core ends it for its seed: the same
      stop reason, verdict and number of steps (a fault must not turn into a different outcome).
    """
    problems: list[str] = []
    runs = {r.id: r for r in snapshot.runs}
    for run in snapshot.runs:
        if not run.ended:
            problems.append(f"run {run.id} did not end: {run.status}")
        if run.steps != run.step_count:
            problems.append(f"run {run.id}: step_count {run.step_count} but {run.steps} step rows")
        if run.steps and (run.first_index != 1 or run.last_index != run.steps):
            problems.append(
                f"run {run.id}: step indexes {run.first_index}..{run.last_index} for {run.steps} steps "
                "(a step was lost or skipped)"
            )
        if (run.tool_call_count, run.error_count, run.retry_count) != (
            run.tool_steps,
            run.error_steps,
            run.step_retries,
        ):
            problems.append(
                f"run {run.id}: counters tool_calls/errors/retries {run.tool_call_count}/{run.error_count}/"
                f"{run.retry_count} but its steps say {run.tool_steps}/{run.error_steps}/{run.step_retries}"
            )
        if run.ended and run.finished_at is None:
            problems.append(f"run {run.id} is finished without finished_at")
        if run.last_step_at and run.finished_at and run.last_step_at > run.finished_at:
            problems.append(
                f"run {run.id}: a step was written {(run.last_step_at - run.finished_at).total_seconds():.2f} s "
                "after the run had ended"
            )
    for experiment_pk, experiment in snapshot.experiments.items():
        if experiment_id is not None and experiment_pk != experiment_id:
            continue
        ended = sum(1 for r in snapshot.top_level(experiment_pk) if r.ended)
        if experiment["finished_runs"] != ended:
            problems.append(
                f"experiment {experiment_pk}: finished_runs is {experiment['finished_runs']} but "
                f"{ended} of its runs ended"
            )
        if experiment["finished_runs"] < experiment["total_runs"]:
            problems.append(
                f"experiment {experiment_pk}: {experiment['finished_runs']} of {experiment['total_runs']} runs finished"
            )
    reruns_of: dict[int, list[int]] = {}
    for run in snapshot.runs:
        if run.rerun_of_id is not None:
            reruns_of.setdefault(run.rerun_of_id, []).append(run.id)
            original = runs.get(run.rerun_of_id)
            if original is None or original.stop_reason != INTERRUPTED:
                problems.append(
                    f"run {run.id} is a re-run of run {run.rerun_of_id}, which "
                    f"{'does not exist' if original is None else 'ended ' + (original.stop_reason or original.status)}"
                )
    for run in snapshot.runs:
        if run.parent_id is not None or run.stop_reason != INTERRUPTED:
            continue
        if not allow_interrupted:
            problems.append(f"run {run.id} was interrupted: {run.error.strip()[:200]}")
        # One automatic re-run per launched run: an interrupted re-run is not re-run again.
        wanted = 0 if run.rerun_of_id is not None else 1
        linked = reruns_of.get(run.id, [])
        if reruns_for_interrupted and len(linked) != wanted:
            problems.append(f"interrupted run {run.id} has {len(linked)} re-runs linked to it (expected {wanted})")
    for run in snapshot.runs:
        if run.parent_id is not None or not run.ended or run.stop_reason == INTERRUPTED:
            continue
        expected = expected_end(run)
        want = (
            expected.end.stop_reason,
            "" if expected.end.verdict is None else "pass" if expected.end.verdict.passed else "fail",
            len(expected.steps),
        )
        got = (run.stop_reason, run.verdict, run.step_count)
        if got != want:
            problems.append(
                f"run {run.id} ({run.scenario} under {run.policy_name}) ended stop_reason/verdict/steps {got}, "
                f"but this run ends {want} when nothing fails: {run.error.strip()[:200]}"
            )
    return problems


def assert_recovered(snapshot: Snapshot, **options: Any) -> Recovery:
    """Fail with every broken promise and every run's state; return the figures otherwise."""
    problems = recovery_problems(snapshot, **options)
    if problems:
        raise AssertionError("after the fault:\n- " + "\n- ".join(problems) + "\nEvery run:\n" + snapshot.describe())
    top = [r for r in snapshot.runs if r.parent_id is None]
    reruns = [r for r in top if r.rerun_of_id is not None]
    return Recovery(
        runs=len(top) - len(reruns),
        interrupted=sum(1 for r in top if r.stop_reason == INTERRUPTED),
        reruns=len(reruns),
        other_ends=sum(1 for r in top if r.stop_reason != INTERRUPTED),
        children=sum(1 for r in snapshot.runs if r.parent_id is not None),
        resent=sum(1 for r in top if (r.extra.get("send_count") or 0) > 1),
    )
