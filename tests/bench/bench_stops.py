"""Benchmark (not a test): the stop queue with many guard stops, most of them identical to others.

Each card of the queue counts the unreviewed stops identical to it (same scenario, policy, stop reason,
failing tool and error: ``tracer/signatures.py``), through the signature key each stop keeps
(``Run.stop_signature``, set here as diagnosis sets it when a run ends). This fills a fresh database
with ``--stops`` guard stops (12 kinds, 4 failing errors each, 40 % reviewed, with tags) and as many
plain runs, then times the queue's pages and prints p50 / p95 and queries per request, with the ratio
to the runs list's first page timed in the same run (the baseline), and the time of the identical
count alone.

    .venv/bin/python tests/bench/bench_stops.py [--stops 5000] [--requests 20]
    .venv/bin/python tests/bench/bench_stops.py --database-url postgres://postgres@127.0.0.1:5432/rlt_bench_stops
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(BASE_DIR))

from tests.bench.bench_pages import served_in_process, time_page  # noqa: E402

SCENARIOS = ("lookup-stuck", "refund-too-old", "booking-approval")
POLICIES = ("starter", "structured")


def generate(n_stops: int, rng: random.Random) -> None:
    from django.db import transaction

    from agents.policies import PRESETS
    from tests.factories import failed_attempt, step_row, tool_step
    from tracer.models import ReviewTag, Run, StopReview
    from tracer.signatures import SIGNATURE_STEP_FIELDS, stop_key

    kinds = [(s, p, r) for s in SCENARIOS for p in POLICIES for r in Run.GUARD_STOPS]
    with transaction.atomic():
        runs = []
        for i in range(n_stops * 2):
            scenario, policy, reason = kinds[i % len(kinds)]
            stop = i < n_stops
            runs.append(
                Run(
                    scenario=scenario,
                    policy_name=policy,
                    policy_settings=PRESETS[policy].settings(),
                    status=Run.Status.FINISHED,
                    stop_reason=reason if stop else Run.StopReason.FINAL_ANSWER,
                    guard="3 tool errors in a row" if stop else "",
                    verdict=Run.Verdict.FAIL if stop else rng.choice(Run.Verdict.values),
                    step_count=3,
                    tool_call_count=3,
                    error_count=3 if stop else 0,
                )
            )
        stop_steps = []
        for run in runs[:n_stops]:
            message = f"unknown customer c-{rng.randrange(4)}"
            rows = [
                step_row(
                    tool_step(i, [failed_attempt(1, category="validation", message=message)], tool="lookup_orders")
                )
                for i in (1, 2, 3)
            ]
            last = tuple(getattr(rows[-1], f) for f in SIGNATURE_STEP_FIELDS)
            run.stop_signature = stop_key(
                run.scenario, run.policy_name, run.stop_reason, last
            )  # as diagnosis writes it
            stop_steps.append(rows)
        Run.objects.bulk_create(runs, batch_size=1000)
        steps = []
        for run, rows in zip(runs, stop_steps, strict=False):
            for row in rows:
                row.run = run
                steps.append(row)
        from tracer.models import Step

        Step.objects.bulk_create(steps, batch_size=2000)
        reviewed = [r for r in runs[:n_stops] if rng.random() < 0.4]
        reviews = StopReview.objects.bulk_create(
            [StopReview(run=r, verdict=rng.choice(StopReview.Verdict.values)) for r in reviewed], batch_size=1000
        )
        ReviewTag.objects.bulk_create([ReviewTag(review=r, name=f"tag{r.pk % 7}") for r in reviews], batch_size=1000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stops", type=int, default=5000, help="guard stops to generate (default 5000)")
    parser.add_argument("--requests", type=int, default=20, help="timed requests per page (default 20)")
    parser.add_argument("--database-url", help="postgres://user@host:port/name: a scratch PostgreSQL database")
    args = parser.parse_args()
    return served_in_process(args.database_url, "rlt-bench-stops-", lambda where: bench(args, where))


def bench(args, where: str) -> int:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.urls import reverse

    from tracer.reads import stops_page

    call_command("migrate", verbosity=0, interactive=False)
    call_command("collectstatic", verbosity=0, interactive=False)  # pages link hashed static names
    t0 = time.perf_counter()
    generate(args.stops, random.Random(7))
    print(f"{where}: {args.stops:,} guard stops and {args.stops:,} other runs in {time.perf_counter() - t0:.1f} s")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("bench", password=None))
    stops = reverse("tracer:stops")
    pages = [
        ("runs list, latest 50 (baseline)", reverse("tracer:runs")),
        ("stop queue, unreviewed", stops),
        ("stop queue, all", f"{stops}?state=all"),
        ("stop queue, policy starter, max steps", f"{stops}?policy=starter&stop_reason=max_steps"),
        ("runs list, reviewed with tag", f"{reverse('tracer:runs')}?reviewed=yes&tag=tag3"),
    ]
    results = [(label, time_page(client, url, requests=args.requests, warmup=2)) for label, url in pages]
    base = results[0][1]["p50"]
    print(f"{'page':<40} {'p50 ms':>8} {'p95 ms':>8} {'queries':>8} {'x base':>7}")
    for label, r in results:
        print(f"{label:<40} {r['p50']:8.1f} {r['p95']:8.1f} {r['queries']:8d} {r['p50'] / base:7.2f}")

    page = list(stops_page.stop_queue()[:20])
    kinds = [(r.scenario, r.policy_name, r.stop_reason) for r in page]
    keys = [r.stop_signature for r in page]
    times = []
    for _ in range(args.requests):
        t0 = time.perf_counter()
        counts = stops_page.unreviewed_identical(keys=keys, kinds=kinds)
        times.append((time.perf_counter() - t0) * 1000)
    print(
        f"identical count alone, a page of 20 unreviewed stops: {statistics.median(times):.1f} ms p50 "
        f"({sum(counts.values()):,} unreviewed stops identical to the page's counted)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
