"""Benchmark (not a test): how the list, run and compare pages' cost grows with the runs and the steps.

One command builds the data and prints one table (issue 13): for each database (SQLite, then
PostgreSQL when it answers) it bulk-inserts runs up to 1,000, 10,000 and 100,000 (growing the same
database), plus a starter and a structured run of the same scenario at 40, 50, 500 and 5,000 steps
each. At each size it asks, in-process with Django's test client (logged in, DEBUG off,
``Accept-Encoding: gzip`` as a browser sends it), each case ``--requests`` times after ``--warmup`` and
takes the p50: the runs list's latest 50, the run page at 40, 50, 500 and 5,000 steps, the next 50
steps a gap loads, and the compare of the two runs at 50, 500 and 5,000 steps; and the median CPU time
of this process per request (Django's, and SQLite's, which runs in the process; PostgreSQL's server
work is not in it). Each figure's ratio is to the baseline measured in the same run: the run page of
the 50-step run at the smallest size. ``growth`` is a case's p50 at the largest size over its p50 at
the smallest: nothing should grow with the number of runs.

    .venv/bin/python tests/bench/bench_scale.py [--sizes 1000,10000,100000] [--backend sqlite|postgres|both]
        [--requests 20] [--write-docs] [--profile CASE]

``--backend postgres`` uses RLT_BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/rlt_bench_scale),
a database it drops and creates afresh and drops at the end. ``--profile CASE`` prints a pyinstrument
profile of that case's requests at the largest size (e.g. ``--profile "compare, 500 steps"``).
``--write-docs`` puts the table into docs/performance.md's "Growth" section.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))

from tests.bench import sizes  # noqa: E402

PG_URL = os.environ.get("RLT_BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/rlt_bench_scale")
SEED = 20240601
RUN_PAGE_STEPS = (40, 50, 500, 5000)  # the run page of a run of each length
COMPARE_STEPS = (50, 500, 5000)  # compare of the two runs of each length
STEP_COUNTS = tuple(sorted({*RUN_PAGE_STEPS, *COMPARE_STEPS}))
BASELINE = "run page, 50 steps"
# Issue 13's targets, p50 ms.
TARGETS = {"run page, 40 steps": 15.0, "run page, 500 steps": 25.0, "run page, 5000 steps": 25.0}
TARGETS["compare, 500 steps"] = 50.0
GZIP = {"Accept-Encoding": "gzip"}  # as a browser sends it
SECONDS_PER_CASE = 8.0  # a case slower than this many seconds over --requests is asked fewer times (3 at least)


def long_runs_build(*, gen) -> dict[int, tuple[int, int]]:
    """For each of ``STEP_COUNTS``: a finished starter run and a structured run of one scenario with
    that many steps, written with their steps; returns (starter id, structured id) by step count."""
    from django.db import transaction
    from django.utils import timezone

    from tracer.models import Run, Step

    out = {}
    Run._meta.get_field("created_at").auto_now_add = False
    Step._meta.get_field("created_at").auto_now_add = False
    try:
        for n in STEP_COUNTS:
            pair = []
            for policy in ("starter", "structured"):
                run, rows = gen.run_with_steps(
                    number=10_000_000 + n + len(pair),
                    scenario="lookup-flaky-exhausted",
                    policy=policy,
                    created=timezone.now() - timedelta(days=91),
                    active=False,
                    steps=n,
                )
                with transaction.atomic():
                    run.save()
                    for row in rows:
                        row.run = run
                    Step.objects.bulk_create(rows, batch_size=1000)
                pair.append(run.pk)
            out[n] = tuple(pair)
    finally:
        Run._meta.get_field("created_at").auto_now_add = True
        Step._meta.get_field("created_at").auto_now_add = True
    return out


def cases(long_runs: dict[int, tuple[int, int]]) -> list[tuple[str, str, dict]]:
    """(label, URL, headers) of each timed request."""
    from django.urls import reverse

    out = [("list, latest 50", reverse("tracer:runs"), {})]
    for n in RUN_PAGE_STEPS:
        out.append((f"run page, {n} steps", reverse("tracer:run", args=[long_runs[n][0]]), {}))
    n = max(long_runs)
    gap = {"HX-Request": "true", "HX-Target": "step-gap-51"}
    out.append((f"next 50 steps of {n} (gap)", f"{reverse('tracer:run-steps', args=[long_runs[n][0]])}?after=50", gap))
    for n in COMPARE_STEPS:
        a, b = long_runs[n]
        out.append((f"compare, {n} steps", f"{reverse('tracer:compare')}?a={a}&b={b}", {}))
    return out


def time_case(client, url: str, headers: dict, *, requests: int, warmup: int) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    headers = {**GZIP, **headers}
    t0 = time.perf_counter()
    for _ in range(max(warmup, 1)):
        response = client.get(url, headers=headers)
        if response.status_code != 200:
            raise SystemExit(f"{url}: HTTP {response.status_code}")
    each_s = (time.perf_counter() - t0) / max(warmup, 1)
    times, cpu = [], []
    for _ in range(max(3, min(requests, int(SECONDS_PER_CASE / each_s)))):  # a slow case: fewer requests
        t0, c0 = time.perf_counter(), time.process_time()
        client.get(url, headers=headers)
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, headers=headers)
    queries = len(ctx.captured_queries)  # before the next request, which clears the query log
    plain = client.get(url, headers={k: v for k, v in headers.items() if k != "Accept-Encoding"})
    return {
        "p50": statistics.median(times),
        "cpu": statistics.median(cpu),  # this process's CPU: the app's, and SQLite's (PostgreSQL's server is apart)
        "p95": sorted(times)[max(0, round(0.95 * len(times)) - 1)],
        "queries": queries,
        "kb": len(plain.content) / 1024,
        "gz_kb": len(response.content) / 1024,
        "gzip": response.get("Content-Encoding") == "gzip",
    }


def one_backend(args) -> dict:
    """In a child process whose environment names the database: build, time, return the figures."""
    client = sizes.logged_in_client()
    from tests.bench.bench_pages import Generator

    rng = random.Random(SEED)
    long_runs = long_runs_build(gen=Generator(rng=rng, steps_per_run=args.steps_per_run))
    gen = sizes.runs_only(rng=rng, steps_per_run=args.steps_per_run)
    return sizes.grow(
        args.sizes,
        gen=gen,
        rng=rng,
        running=False,
        measure=lambda size: {
            label: time_case(client, url, headers, requests=args.requests, warmup=args.warmup)
            for label, url, headers in cases(long_runs)
        },
        at_largest=args.profile
        and (
            lambda: sizes.profile(client, cases(long_runs), args.profile, args.requests, interval=0.0005, headers=GZIP)
        ),
    )


def table(results: dict[str, dict]) -> list[str]:
    """One Markdown table: a row per case and database, its p50 at each size, p95 and CPU per request at
    the largest size, its ratio to the baseline there, its growth from the smallest size to the
    largest, queries and KB sent."""
    sizes = sorted(int(s) for s in next(iter(results.values()))["sizes"])
    head = ["case", "database", *(f"{s:,} runs ms" for s in sizes), "p95 ms", "CPU ms", "× baseline", "growth"]
    head += ["queries", "KB (gzip)"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    labels = list(next(iter(results.values()))["sizes"][str(sizes[0])])
    for label in labels:
        for backend in results.values():
            by_size = {int(s): v[label] for s, v in backend["sizes"].items()}
            base = backend["sizes"][str(sizes[0])][BASELINE]["p50"]
            big, small = by_size[sizes[-1]], by_size[sizes[0]]
            name = "SQLite" if backend["database"] == "sqlite" else "PostgreSQL"
            row = [label, name, *(f"{by_size[s]['p50']:.1f}" for s in sizes), f"{big['p95']:.1f}", f"{big['cpu']:.1f}"]
            row += [f"{big['p50'] / base:.2f}", f"{big['p50'] / max(small['p50'], 1e-3):.2f}"]
            gz = f"{big['kb']:.0f} ({big['gz_kb']:.0f})" if big["gzip"] else f"{big['kb']:.0f} (not compressed)"
            row += [str(big["queries"]), gz]
            lines.append("| " + " | ".join(row) + " |")
    return lines


def targets_met(results: dict[str, dict]) -> list[str]:
    out = []
    for backend in results.values():
        name = "SQLite" if backend["database"] == "sqlite" else "PostgreSQL"
        big = backend["sizes"][str(max(int(s) for s in backend["sizes"]))]
        for label, target in TARGETS.items():
            p50, cpu = big[label]["p50"], big[label]["cpu"]
            out.append(
                f"{name}, {label}: {p50:.1f} ms p50 ({cpu:.1f} ms of CPU), target ≤ {target:.0f} ms: "
                f"{'met' if p50 <= target else 'MISSED'}"
            )
    return out


def footer(results: dict[str, dict], args) -> list[str]:
    return [f"\nbaseline: {BASELINE} at {min(args.sizes):,} runs, same database, same run", *targets_met(results)]


def main() -> int:
    return sizes.main(
        __doc__,
        script=__file__,
        pg_url=PG_URL,
        requests=20,
        steps_help="mean steps of the listed runs (default 12)",
        one_backend=one_backend,
        table=table,
        footer=footer,
    )


if __name__ == "__main__":
    sys.exit(main())
