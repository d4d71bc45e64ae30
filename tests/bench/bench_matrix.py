"""Benchmark (not a test): what the policy matrix's totals, interval and re-run rule cost.

It fills a fresh database with ``--runs`` finished runs (scenarios × the four presets, in
``--experiments`` experiments and outside any, two model backends, some interrupted and re-run, some
with a reviewer's verdict override), then times, ``--repeats`` times each after a warm-up:

- the baseline: the matrix's aggregate as it was before issue 12 (one GROUP BY scenario and policy,
  no totals, no re-run rule, the judge's verdict only), run in the same session on the same rows;
- ``policy_matrix()`` over all runs, over one experiment, over one model backend;
- the Policies page itself through Django's test client.

It prints p50 / p95 in ms and each p50's ratio to the baseline's.

    .venv/bin/python tests/bench/bench_matrix.py [--runs 50000] [--repeats 30]
    .venv/bin/python tests/bench/bench_matrix.py --database-url postgres://postgres@127.0.0.1:5432/rlt_bench_matrix

By default the database is a new SQLite file in a temporary RLT_VAR_DIR; a PostgreSQL database named
by ``--database-url`` is created afresh and dropped at the end (the same refusals as bench_pages.py).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(BASE_DIR))

from tests.bench.bench_pages import PASS_RATE, percentile, served_in_process  # noqa: E402

BACKENDS = ("simulated", "simulated", "simulated", "claude")  # three in four runs simulated


def baseline(runs):
    """The matrix's aggregate before issue 12, as it was in the matrix's reads then."""
    from django.db.models import Avg, Count, Q, Sum

    from tracer.models import Run

    guard_stops = (Run.StopReason.CONSECUTIVE_ERRORS, Run.StopReason.MAX_STEPS)
    return list(
        runs.filter(status=Run.Status.FINISHED, parent__isnull=True)
        .exclude(scenario="")
        .order_by()
        .values("scenario", "policy_name")
        .annotate(
            runs=Count("id"),
            passes=Count("id", filter=Q(verdict=Run.Verdict.PASS)),
            mean_tool_calls=Avg("tool_call_count"),
            wasted_retries=Sum("wasted_retry_count"),
            guard_stops=Count("id", filter=Q(stop_reason__in=guard_stops)),
            crashes=Count("id", filter=Q(stop_reason=Run.StopReason.CRASHED)),
            imported=Count("id", filter=~Q(source=Run.Source.AGENT)),
        )
    )


def generate(args, rng: random.Random) -> dict:
    from django.db import transaction
    from django.utils import timezone

    from agents.scenarios import scenario_names
    from tracer.models import Experiment, Run, StopReview

    scenarios = scenario_names()
    policies = list(PASS_RATE)
    experiments = [
        Experiment.objects.create(name=f"bench {i}", scenarios=scenarios, policies=policies)
        for i in range(args.experiments)
    ]
    now = timezone.now()
    t0 = time.perf_counter()
    interrupted: list[Run] = []
    with transaction.atomic():
        rows = []
        for i in range(args.runs):
            policy = policies[i % len(policies)]
            stop = rng.choices(
                [Run.StopReason.FINAL_ANSWER, Run.StopReason.CONSECUTIVE_ERRORS, Run.StopReason.MAX_STEPS, "crashed"],
                weights=[85, 7, 5, 3],
            )[0]
            if rng.random() < args.interrupted:
                stop = Run.StopReason.INTERRUPTED
            verdict = "pass" if rng.random() < PASS_RATE[policy] else "fail"
            started = now - timedelta(seconds=rng.randint(60, 10**6))
            rows.append(
                Run(
                    scenario=scenarios[(i // len(policies)) % len(scenarios)],
                    policy_name=policy,
                    model_backend=rng.choice(BACKENDS),
                    experiment=experiments[i % len(experiments)] if i % 10 else None,
                    status=Run.Status.FINISHED,
                    stop_reason=stop,
                    verdict="" if stop == Run.StopReason.INTERRUPTED else verdict,
                    tool_call_count=rng.randint(1, 8),
                    retry_count=rng.randint(0, 4),
                    wasted_retry_count=rng.randint(0, 2),
                    input_tokens=rng.randint(200, 4000),
                    output_tokens=rng.randint(50, 800),
                    started_at=started,
                    finished_at=started + timedelta(seconds=rng.uniform(0.2, 30)),
                )
            )
        created = Run.objects.bulk_create(rows, batch_size=2000)
        interrupted = [r for r in created if r.stop_reason == Run.StopReason.INTERRUPTED]
        Run.objects.bulk_create(
            [
                Run(
                    scenario=r.scenario,
                    policy_name=r.policy_name,
                    model_backend=r.model_backend,
                    experiment_id=r.experiment_id,
                    status=Run.Status.FINISHED,
                    stop_reason=Run.StopReason.FINAL_ANSWER,
                    verdict="pass",
                    rerun_of=r,
                )
                for r in interrupted
            ],
            batch_size=2000,
        )
        reviewed = rng.sample(created, k=int(len(created) * args.reviewed))
        StopReview.objects.bulk_create(
            [StopReview(run=r, verdict_override=rng.choice(["pass", "fail"])) for r in reviewed], batch_size=2000
        )
    return {
        "runs": Run.objects.count(),
        "reruns": len(interrupted),
        "reviews": len(reviewed),
        "experiment": experiments[0],
        "seconds": time.perf_counter() - t0,
    }


def timed(fn, *, repeats: int) -> dict:
    fn()
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return {"p50": percentile(times, 50), "p95": percentile(times, 95)}


def bench(args, where: str) -> int:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.urls import reverse

    from tracer.models import Run
    from tracer.reads import matrix

    call_command("migrate", verbosity=0, interactive=False)
    call_command("collectstatic", verbosity=0, interactive=False)  # DEBUG off serves hashed names from a manifest
    print(f"database: {where}")
    data = generate(args, random.Random(args.seed))
    print(
        f"generated {data['runs']:,} runs ({data['reruns']:,} re-runs of interrupted ones, {data['reviews']:,} "
        f"overrides) in {data['seconds']:.1f} s"
    )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    user = get_user_model().objects.create_user("bench", password=None)
    client = Client()
    client.force_login(user)
    exp = data["experiment"]

    def page(url):
        return lambda: client.get(url).content

    cases = [
        ("baseline: the aggregate before issue 12", lambda: baseline(Run.objects.all())),
        ("policy_matrix(), all runs", lambda: matrix.policy_matrix()),
        ("policy_matrix(), one experiment", lambda: matrix.policy_matrix(experiment_ids=[exp.pk])),
        ("policy_matrix(), model backend claude", lambda: matrix.policy_matrix(model_backend="claude")),
        ("/policies/ page, all runs", page(reverse("tracer:policies"))),
        ("/policies/ page, one experiment", page(f"{reverse('tracer:policies')}?experiment={exp.pk}")),
        (f"/experiments/{exp.pk}/ page", page(reverse("tracer:experiment", args=[exp.pk]))),
    ]
    print(f"\n{data['runs']:,} runs, {connection.vendor}; {args.repeats} timed calls each after 2 warm-ups")
    print(f"{'what':<42} {'p50 ms':>8} {'p95 ms':>8} {'× baseline':>11}")
    base = None
    for label, fn in cases:
        r = timed(fn, repeats=args.repeats)
        base = base or r["p50"]
        print(f"{label:<42} {r['p50']:8.1f} {r['p95']:8.1f} {r['p50'] / base:11.2f}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50000, help="runs to generate (default 50000)")
    parser.add_argument("--experiments", type=int, default=40, help="experiments they belong to (default 40)")
    parser.add_argument("--interrupted", type=float, default=0.02, help="share interrupted and re-run (0.02)")
    parser.add_argument("--reviewed", type=float, default=0.05, help="share with a verdict override (0.05)")
    parser.add_argument("--repeats", type=int, default=30, help="timed calls per case (default 30)")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--database-url", help="postgres://user@host:port/name: a scratch PostgreSQL database")
    args = parser.parse_args()
    for name in ("runs", "experiments", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}: expected a whole number of 1 or more")
    return served_in_process(args.database_url, "rlt-bench-matrix-", lambda where: bench(args, where))


if __name__ == "__main__":
    sys.exit(main())
