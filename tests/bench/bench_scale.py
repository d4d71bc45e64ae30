"""Benchmark (not a test): how the list, run and compare pages' cost grows with the runs and the steps.

One command builds the data and prints one table (issue 13): for each database (SQLite, then
PostgreSQL when it answers) it bulk-inserts runs up to 1,000, 10,000 and 100,000 (growing the same
database), plus a starter and a structured run of the same scenario at 50, 500 and 5,000 steps each.
At each size it asks, in-process with Django's test client (logged in, DEBUG off, ``Accept-Encoding:
gzip`` as a browser sends it), each case ``--requests`` times after ``--warmup`` and takes the p50:
the runs list's latest 50, the run page at each step count, the next 50 steps a gap loads, and the
compare of the two runs at each step count. Each figure's ratio is to the baseline measured in the
same run: the run page of the 50-step run at the smallest size. ``growth`` is a case's p50 at the
largest size over its p50 at the smallest: nothing should grow with the number of runs.

    .venv/bin/python tests/bench/bench_scale.py [--sizes 1000,10000,100000] [--backend sqlite|postgres|both]
        [--requests 20] [--write-docs] [--profile CASE]

``--backend postgres`` uses RLT_BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/rlt_bench_scale),
a database it drops and creates afresh and drops at the end. ``--profile CASE`` prints a pyinstrument
profile of that case's requests at the largest size (e.g. ``--profile "compare, 500 steps"``).
``--write-docs`` puts the table into docs/performance.md's "Growth" section.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))

from tests.bench.serving import pg_answers, pg_drop, pg_recreate  # noqa: E402

PG_URL = os.environ.get("RLT_BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/rlt_bench_scale")
DOCS = BASE_DIR / "docs" / "performance.md"
START, END = "<!-- bench_scale:start -->", "<!-- bench_scale:end -->"
SEED = 20240601
STEP_COUNTS = (50, 500, 5000)
BASELINE = "run page, 50 steps"
# Issue 13's targets, p50 ms.
TARGETS = {"run page, 50 steps": 15.0, "run page, 500 steps": 25.0, "run page, 5000 steps": 25.0}
TARGETS["compare, 500 steps"] = 50.0
SECONDS_PER_CASE = 8.0  # a case slower than this many seconds over --requests is asked fewer times (3 at least)


def runs_build(*, gen, rng: random.Random, start: int, stop: int, total: int, batch: int = 2000) -> None:
    """Runs ``start``…``stop - 1`` of ``total`` (counters and search text as recorded, 2% imported),
    dated over the last 90 days in order, in batches of ``batch``. Their steps are not written: no
    page timed here reads the steps of these runs, only their rows."""
    from django.db import transaction
    from django.utils import timezone

    from agents.scenarios import scenario_names
    from tracer.models import Run

    scenarios, presets = list(scenario_names()), gen.presets
    now, span = timezone.now(), timedelta(days=90)
    Run._meta.get_field("created_at").auto_now_add = False
    try:
        for first in range(start, stop, batch):
            runs = []
            for k in range(first, min(first + batch, stop)):
                scenario, policy = ("", "") if rng.random() < 0.02 else (rng.choice(scenarios), rng.choice(presets))
                created = now - span + span * (k / total)
                run, _rows = gen.run_with_steps(
                    number=k + 1, scenario=scenario, policy=policy, created=created, active=False
                )
                runs.append(run)
            with transaction.atomic():
                Run.objects.bulk_create(runs, batch_size=500)
    finally:
        Run._meta.get_field("created_at").auto_now_add = True


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
    for n, (a, _b) in long_runs.items():
        out.append((f"run page, {n} steps", reverse("tracer:run", args=[a]), {}))
    n = max(long_runs)
    gap = {"HX-Request": "true", "HX-Target": "step-gap-51"}
    out.append((f"next 50 steps of {n} (gap)", f"{reverse('tracer:run-steps', args=[long_runs[n][0]])}?after=50", gap))
    for n, (a, b) in long_runs.items():
        out.append((f"compare, {n} steps", f"{reverse('tracer:compare')}?a={a}&b={b}", {}))
    return out


def time_case(client, url: str, headers: dict, *, requests: int, warmup: int) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    headers = {"Accept-Encoding": "gzip", **headers}
    t0 = time.perf_counter()
    for _ in range(max(warmup, 1)):
        response = client.get(url, headers=headers)
        if response.status_code != 200:
            raise SystemExit(f"{url}: HTTP {response.status_code}")
    each_s = (time.perf_counter() - t0) / max(warmup, 1)
    times = []
    for _ in range(max(3, min(requests, int(SECONDS_PER_CASE / each_s)))):  # a slow case: fewer requests
        t0 = time.perf_counter()
        client.get(url, headers=headers)
        times.append((time.perf_counter() - t0) * 1000)
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, headers=headers)
    queries = len(ctx.captured_queries)  # before the next request, which clears the query log
    plain = client.get(url, headers={k: v for k, v in headers.items() if k != "Accept-Encoding"})
    return {
        "p50": statistics.median(times),
        "p95": sorted(times)[max(0, round(0.95 * len(times)) - 1)],
        "queries": queries,
        "kb": len(plain.content) / 1024,
        "gz_kb": len(response.content) / 1024,
        "gzip": response.get("Content-Encoding") == "gzip",
    }


def one_backend(args) -> dict:
    """In a child process whose environment names the database: build, time, return the figures."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from tests.bench.bench_pages import Generator

    class RunsOnly(Generator):
        """bench_pages' runs, counters and search text, without making the step rows no page reads."""

        @staticmethod
        def row(step, *, created, tool_use_id=""):
            return None

    call_command("migrate", verbosity=0, interactive=False)
    call_command("collectstatic", verbosity=0, interactive=False)  # DEBUG off serves hashed names
    user = get_user_model().objects.create_user("bench", password=None)
    client = Client()
    client.force_login(user)
    rng = random.Random(SEED)
    long_runs = long_runs_build(gen=Generator(rng=rng, steps_per_run=args.steps_per_run))
    gen = RunsOnly(rng=rng, steps_per_run=args.steps_per_run)
    total, built = max(args.sizes), 0
    out = {"database": connection.vendor, "sizes": {}}
    for size in args.sizes:
        t0 = time.perf_counter()
        runs_build(gen=gen, rng=rng, start=built, stop=size, total=total)
        built = size
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE")  # what autovacuum does soon after a bulk insert
        print(f"  {connection.vendor}: {size:,} runs ready in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        out["sizes"][size] = {
            label: time_case(client, url, headers, requests=args.requests, warmup=args.warmup)
            for label, url, headers in cases(long_runs)
        }
        if args.profile and size == total:
            profile(client, long_runs, args.profile, args.requests)
    return out


def profile(client, long_runs: dict, label: str, requests: int) -> None:
    from pyinstrument import Profiler

    found = [(url, headers) for name, url, headers in cases(long_runs) if name == label]
    if not found:
        raise SystemExit(f"--profile: no case named {label!r}; one of {[c[0] for c in cases(long_runs)]}")
    url, headers = found[0]
    profiler = Profiler(interval=0.0005)
    with profiler:
        for _ in range(requests):
            client.get(url, headers={"Accept-Encoding": "gzip", **headers})
    print(profiler.output_text(unicode=True, color=False, show_all=False), file=sys.stderr)


def child(backend: str, args) -> dict:
    with tempfile.TemporaryDirectory(prefix="rlt-bench-scale-") as tmp:
        env = dict(os.environ, RLT_VAR_DIR=tmp, DJANGO_SETTINGS_MODULE="config.settings", DJANGO_DEBUG="0")
        env.update(DJANGO_SECRET_KEY=secrets.token_urlsafe(50), DJANGO_ALLOWED_HOSTS="testserver")
        env.pop("RLT_TEST_DB_FILE", None)
        if backend == "postgres":
            pg_recreate(PG_URL)
            env["DATABASE_URL"] = PG_URL
        else:
            env.pop("DATABASE_URL", None)
        argv = [sys.executable, __file__, "--child", backend, "--sizes", ",".join(map(str, args.sizes))]
        argv += ["--requests", str(args.requests), "--warmup", str(args.warmup)]
        argv += ["--steps-per-run", str(args.steps_per_run)]
        if args.profile:
            argv += ["--profile", args.profile]
        try:
            out = subprocess.run(argv, env=env, cwd=BASE_DIR, stdout=subprocess.PIPE, text=True)
        finally:
            if backend == "postgres":
                pg_drop(PG_URL)
        if out.returncode != 0:
            raise SystemExit(f"{backend} failed:\n{out.stdout[-3000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])


def table(results: dict[str, dict]) -> list[str]:
    """One Markdown table: a row per case and database, its p50 at each size, its ratio to the baseline
    at the largest size, its growth from the smallest size to the largest, queries and KB sent."""
    sizes = sorted(int(s) for s in next(iter(results.values()))["sizes"])
    head = ["case", "database", *(f"{s:,} runs ms" for s in sizes), "p95 ms", "× baseline", "growth"]
    head += ["queries", "KB (gzip)"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    labels = list(next(iter(results.values()))["sizes"][str(sizes[0])])
    for label in labels:
        for backend in results.values():
            by_size = {int(s): v[label] for s, v in backend["sizes"].items()}
            base = backend["sizes"][str(sizes[0])][BASELINE]["p50"]
            big, small = by_size[sizes[-1]], by_size[sizes[0]]
            name = "SQLite" if backend["database"] == "sqlite" else "PostgreSQL"
            row = [label, name, *(f"{by_size[s]['p50']:.1f}" for s in sizes), f"{big['p95']:.1f}"]
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
            p50 = big[label]["p50"]
            out.append(
                f"{name}, {label}: {p50:.1f} ms p50, target ≤ {target:.0f} ms: {'met' if p50 <= target else 'MISSED'}"
            )
    return out


def write_docs(lines: list[str], command: str) -> None:
    """Replace docs/performance.md's bench_scale block with this run's table."""
    text = DOCS.read_text() if DOCS.exists() else "# Performance\n"
    start, end = text.find(START), text.find(END)
    if start == -1 or end == -1:
        raise SystemExit(f"{DOCS}: no {START} … {END} block to replace")
    block = "\n".join(
        [
            START,
            f"Measured {time.strftime('%Y-%m-%d')} with `{command}`, load average "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores:",
            "",
            *lines,
            END,
        ]
    )
    DOCS.write_text(text[:start] + block + text[end + len(END) :])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--sizes", default="1000,10000,100000", help="run counts, comma-separated")
    parser.add_argument("--requests", type=int, default=20, help="timed requests per case (default 20)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps-per-run", type=int, default=12, help="mean steps of the listed runs (default 12)")
    parser.add_argument("--profile", help="print a pyinstrument profile of this case at the largest size")
    parser.add_argument("--write-docs", action="store_true", help="put the table into docs/performance.md")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        args.sizes = sorted({int(s) for s in args.sizes.split(",")})
    except ValueError:
        parser.error("--sizes: expected whole numbers separated by commas, e.g. 1000,10000")
    if min(args.sizes) < 100 or args.requests < 1 or args.warmup < 0 or args.steps_per_run < 1:
        parser.error("--sizes of 100 or more, --requests and --steps-per-run of 1 or more, --warmup of 0 or more")
    if args.child:
        print(json.dumps(one_backend(args)))
        return 0
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    if "postgres" in backends and not pg_answers(PG_URL):
        print(f"PostgreSQL at {PG_URL.rpartition('@')[2]} does not answer: skipped")
        backends.remove("postgres")
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    results = {b: child(b, args) for b in backends}
    lines = table(results)
    print("\n".join(lines))
    print(f"\nbaseline: {BASELINE} at {min(args.sizes):,} runs, same database, same run")
    print("\n".join(targets_met(results)))
    if args.write_docs:
        command = "tests/bench/bench_scale.py " + " ".join(a for a in sys.argv[1:] if not re.match(r"--write-docs", a))
        write_docs(lines, command.strip())
        print(f"wrote the table into {DOCS.relative_to(BASE_DIR)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
