"""Benchmark (not a test): what recording through workers costs.

For the same runs (every scenario under starter and structured, ``--repeats`` times) it prints steps
per second
  1. in-process, without recording (the loop with a recorder that only counts),
  2. in-process, recording every step to the database (the tracer's recorder, no broker),
  3. through Celery workers with recording (launch an experiment, wait until every run has ended),
and the ratio of 3 to 1.

    .venv/bin/python tests/bench/bench_recording.py [--repeats 4] [--workers 1] [--concurrency 2]

Without DATABASE_URL it uses a fresh SQLite database and broker folder in a temporary directory;
with DATABASE_URL / CELERY_BROKER_URL set it records into that database (experiment "benchmark").
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(BASE_DIR))


class CountingRecorder:
    """Counts steps, including sub-agents', and stores nothing."""

    def __init__(self, totals: dict | None = None) -> None:
        self.totals = totals if totals is not None else {"steps": 0}

    def run_started(self, start) -> None:
        pass

    def step_recorded(self, step) -> None:
        self.totals["steps"] += 1

    def run_finished(self, end) -> None:
        pass

    def child(self, *, label: str) -> CountingRecorder:
        return CountingRecorder(self.totals)


def bar(done: int, total: int, label: str) -> None:
    width = 30
    filled = int(width * done / total) if total else width
    print(f"\r  {label} [{'#' * filled}{'-' * (width - filled)}] {done}/{total}", end="", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=4, help="repeats of every scenario × {starter, structured}")
    parser.add_argument("--workers", type=int, default=1, help="worker processes")
    parser.add_argument("--concurrency", type=int, default=2, help="pool processes per worker")
    args = parser.parse_args()
    if args.repeats < 1 or args.workers < 1 or args.concurrency < 1:
        parser.error("--repeats, --workers and --concurrency: expected whole numbers of 1 or more")

    tmp = None
    if not os.environ.get("DATABASE_URL"):
        tmp = tempfile.TemporaryDirectory(prefix="rlt-bench-")
        os.environ["RLT_VAR_DIR"] = tmp.name
    os.environ["RLT_QUEUE"] = f"rlt-bench-{os.getpid()}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from agents.policies import PRESETS
    from agents.run import run_scenario
    from agents.scenarios import scenario_names
    from tracer.execution import run_claim
    from tracer.experiments import experiment_launch, run_create
    from tracer.models import PolicyVariant, Run
    from tracer.recording import DbRecorder

    call_command("migrate", verbosity=0, interactive=False)
    scenarios = list(scenario_names())
    policies = ["starter", "structured"]
    jobs = [(s, p) for _ in range(args.repeats) for s in scenarios for p in policies]
    n = len(jobs)
    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    broker = settings.CELERY_BROKER_URL.split(":", 1)[0]
    print(
        f"{n} runs ({len(scenarios)} scenarios × {len(policies)} policies × {args.repeats}); "
        f"database {db}, broker {broker}"
    )

    # 1. in-process, no recording
    totals = {"steps": 0}
    started = time.perf_counter()
    for i, (scenario, policy) in enumerate(jobs, 1):
        run_scenario(scenario, PRESETS[policy].settings(), recorder=CountingRecorder(totals), seed=i)
        bar(i, n, "in-process, not recorded ")
    plain_s = time.perf_counter() - started
    plain_steps = totals["steps"]
    print()

    # 2. in-process, recorded to the database
    variants = {v.name: v for v in PolicyVariant.objects.filter(name__in=policies)}
    started = time.perf_counter()
    recorded_ids = []
    for i, (scenario, policy) in enumerate(jobs, 1):
        run = run_create(scenario=scenario, policy=variants[policy])
        run_claim(run_id=run.pk, worker_name="bench", worker_pid=os.getpid())
        recorder = DbRecorder(run, worker_name="bench", worker_pid=os.getpid())
        run_scenario(scenario, run.policy_settings, recorder=recorder, seed=i)
        recorded_ids.append(run.pk)
        bar(i, n, "in-process, recorded     ")
    inproc_s = time.perf_counter() - started
    inproc_steps = Run.objects.filter(pk__in=recorded_ids).values_list("step_count", flat=True)
    inproc_steps = sum(inproc_steps) + sum(
        Run.objects.filter(parent_id__in=recorded_ids).values_list("step_count", flat=True)
    )
    print()

    # 3. through workers, recorded (the test suite's worker processes, logs in test-artifacts/)
    from tests.conftest import WorkerProcess

    workers = [WorkerProcess(concurrency=args.concurrency, name=f"bench{w}-{os.getpid()}") for w in range(args.workers)]
    try:
        for worker in workers:
            worker.wait_ready()
        started = time.perf_counter()
        experiment = experiment_launch(scenarios=scenarios, policies=policies, repeats=args.repeats, name="benchmark")
        shown = -1
        while True:
            experiment.refresh_from_db(fields=["finished_runs"])
            if experiment.finished_runs != shown:
                shown = experiment.finished_runs
                bar(shown, n, "workers, recorded        ")
            if experiment.is_done:
                break
            time.sleep(0.02)
        worker_s = time.perf_counter() - started
        print()
    except AssertionError as exc:  # a worker that did not start, with the end of its log
        print(exc)
        return 1
    finally:
        for worker in workers:
            worker.stop()
    top = Run.objects.filter(experiment=experiment)
    worker_steps = sum(top.values_list("step_count", flat=True)) + sum(
        Run.objects.filter(parent__experiment=experiment).values_list("step_count", flat=True)
    )

    rows = [
        ("in-process, not recorded", plain_steps, plain_s),
        ("in-process, recorded to the database", inproc_steps, inproc_s),
        (f"{args.workers} worker(s) × {args.concurrency}, recorded", worker_steps, worker_s),
    ]
    print()
    print(f"{'':40} {'steps':>7} {'seconds':>9} {'steps/s':>9}")
    for label, steps, seconds in rows:
        print(f"{label:40} {steps:7d} {seconds:9.2f} {steps / seconds:9.1f}")
    ratio = (worker_steps / worker_s) / (plain_steps / plain_s)
    print(f"\nworkers with recording / in-process without recording: {ratio:.3f} ({1 / ratio:.1f}× slower)")
    if plain_steps != inproc_steps or plain_steps != worker_steps:
        print(
            f"note: step totals differ ({plain_steps}, {inproc_steps}, {worker_steps}): "
            "runs with jitter or seeds may take different paths"
        )
    if tmp:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
