"""Benchmark (not a test): the runs list and its search at 1,000, 10,000 and 100,000 runs, SQLite and PostgreSQL.

For each database it builds the runs with bulk inserts (runs only: the list and the search read the
run rows, whose ``search_text`` holds each step's tool, input, error messages and text, built by the
recorder's own function; a few runs are still running, 2% are imported), growing the same database
from one size to the next. At each size it asks each case ``--requests`` times in-process with
Django's test client (logged in, DEBUG off, after ``--warmup`` requests) and takes the p50 server
time, the SQL queries and the bytes sent. The baseline, from the same run: the case's main SQL
query (the page of runs) executed bare on the same connection, p50 over the same number of times.
Then it prints one table (cases × sizes × databases), the ratio to the baseline at the largest size,
and how much each case grew from the smallest to the largest size, and with ``--write-docs`` puts
the table into docs/performance.md's "Runs list and search" section.

    .venv/bin/python tests/bench/bench_list.py [--sizes 1000,10000,100000] [--backend sqlite|postgres|both]
        [--requests 30] [--write-docs] [--profile CASE]

``--backend postgres`` uses RLT_BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/rlt_bench_list),
a database it drops and creates afresh (and drops at the end); ``both`` (the default) runs SQLite,
then PostgreSQL when it answers. ``--profile CASE`` prints a pyinstrument profile of that case's
requests at the largest size.
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

PG_URL = os.environ.get("RLT_BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/rlt_bench_list")
DOCS = BASE_DIR / "docs" / "performance.md"
SECTION = "## Runs list and search"
SEED = 20240601
TARGET_LIST_MS = 8.0
TARGET_SEARCH_MS = 20.0


def runs_build(*, gen, rng: random.Random, start: int, stop: int, total: int, batch: int = 2000) -> None:
    """Runs ``start``…``stop - 1`` of ``total``, dated over the last 90 days in order, in batches of
    ``batch`` (one transaction each). Their steps are not written: the list never reads them."""
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
                if rng.random() < 0.02:
                    scenario, policy = "", ""  # arrived from outside
                else:
                    scenario, policy = rng.choice(scenarios), rng.choice(presets)
                active = k >= stop - 5 and k % 2 == 0  # a few running runs among the newest
                created = now - span + span * (k / total)
                run, _rows = gen.run_with_steps(
                    number=k + 1, scenario=scenario, policy=policy, created=created, active=active
                )
                runs.append(run)
            with transaction.atomic():
                # the runs that were running at the last size have finished since
                Run.objects.filter(status=Run.Status.RUNNING).update(status=Run.Status.FINISHED)
                Run.objects.bulk_create(runs, batch_size=500)
    finally:
        Run._meta.get_field("created_at").auto_now_add = True


def cases(*, size: int) -> list[tuple[str, str, dict]]:
    """(label, URL, headers) of each timed request."""
    from django.urls import reverse

    from tracer.models import Run

    runs = reverse("tracer:runs")
    one = Run.objects.filter(parent__isnull=True).exclude(scenario="").order_by("id")[size // 3 : size // 3 + 1].get()
    active = list(Run.objects.filter(status=Run.Status.RUNNING).values_list("pk", "step_count", "status"))
    versions = "&".join(f"v={pk}.{steps}.{status}" for pk, steps, status in active)
    stale = "&".join(f"v={pk}.{steps - (i == 0)}.{status}" for i, (pk, steps, status) in enumerate(active))
    return [
        ("list, latest 50", runs, {}),
        ("list, scenario + policy", f"{runs}?scenario=refund-too-old&policy=structured", {}),
        ("list, stop reason", f"{runs}?stop_reason=consecutive_errors", {}),
        ("list, sorted by errors", f"{runs}?sort=-errors", {}),
        ("list, page 20", f"{runs}?page=20", {}),
        ("search 'laptop' (most runs)", f"{runs}?q=laptop", {}),
        ("search error 'not supported'", f"{runs}?q=not+supported", {}),
        ("search scenario 'flaky-exh'", f"{runs}?q=flaky-exh", {}),
        ("search one run's request id", f"{runs}?q=req-{one.pk}-1%22", {}),
        ("search + scenario filter", f"{runs}?q=charger&scenario=refund-too-old", {}),
        ("poll active rows, none changed", f"{reverse('tracer:run-rows-live')}?{versions}", {"HX-Request": "true"}),
        ("poll active rows, one changed", f"{reverse('tracer:run-rows-live')}?{stale}", {"HX-Request": "true"}),
        (
            "old poll: whole rows fragment",
            runs,
            {"HX-Request": "true", "HX-Target": "run-rows"},
        ),
    ]


def baseline_sql(captured: list[dict]) -> str:
    """The page's main query: the one that reads the page of runs (``LIMIT``)."""
    pages = [q["sql"] for q in captured if "LIMIT" in q["sql"] and '"tracer_run"' in q["sql"]]
    return pages[-1] if pages else captured[-1]["sql"]


def time_case(client, url: str, headers: dict, *, requests: int, warmup: int) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(warmup):
        response = client.get(url, headers=headers)
        if response.status_code not in (200, 204):
            raise SystemExit(f"{url}: HTTP {response.status_code}")
    times, cpu = [], []
    for _ in range(requests):
        t0, c0 = time.perf_counter(), time.process_time()
        client.get(url, headers=headers)
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, headers=headers)
    sql = baseline_sql(ctx.captured_queries)
    bare = []
    with connection.cursor() as cursor:
        for _ in range(requests):
            t0 = time.perf_counter()
            cursor.execute(sql)
            cursor.fetchall()
            bare.append((time.perf_counter() - t0) * 1000)
    return {
        "p50": statistics.median(times),
        "cpu_p50": statistics.median(cpu),
        "sql_p50": statistics.median(bare),
        "queries": len(ctx.captured_queries),
        "kb": len(response.content) / 1024,
        "sql": sql,
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
        """bench_pages' runs, counters and search text, without making their step rows."""

        @staticmethod
        def row(step, *, created, tool_use_id=""):
            return None

    call_command("migrate", verbosity=0, interactive=False)
    call_command("collectstatic", verbosity=0, interactive=False)  # DEBUG off serves hashed names
    user = get_user_model().objects.create_user("bench", password=None)
    client = Client()
    client.force_login(user)
    rng = random.Random(SEED)
    gen = RunsOnly(rng=rng, steps_per_run=args.steps_per_run)
    total = max(args.sizes)
    built = 0
    out = {"database": connection.vendor, "sizes": {}}
    for size in args.sizes:
        t0 = time.perf_counter()
        runs_build(gen=gen, rng=rng, start=built, stop=size, total=total)
        built = size
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE")  # what autovacuum does soon after a bulk insert
        print(f"  {connection.vendor}: {size:,} runs ready in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        results = {}
        for label, url, headers in cases(size=size):
            results[label] = time_case(client, url, headers, requests=args.requests, warmup=args.warmup)
        out["sizes"][size] = results
        if args.profile and size == total:
            profile(client, args.profile, args.requests)
    return out


def profile(client, label: str, requests: int) -> None:
    from pyinstrument import Profiler

    [(url, headers)] = [(u, h) for name, u, h in cases(size=1) if name == label] or [(None, None)]
    if url is None:
        raise SystemExit(f"--profile: no case named {label!r}")
    profiler = Profiler(interval=0.0002)
    with profiler:
        for _ in range(requests):
            client.get(url, headers=headers)
    print(profiler.output_text(unicode=True, color=False, show_all=False), file=sys.stderr)


def child(backend: str, args) -> dict:
    with tempfile.TemporaryDirectory(prefix="rlt-bench-list-") as tmp:
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


def size_name(runs: int) -> str:
    return f"{runs // 1000}k" if runs % 1000 == 0 else str(runs)


def table(results: dict[str, dict]) -> list[str]:
    """One Markdown table, a row per database and case: p50 server time at each size, at the largest
    size the process's CPU time and the bare SQL of its main query, the ratio to that baseline, how
    much the case grew from the smallest size to the largest, its queries and bytes."""
    first = next(iter(results.values()))
    sizes = sorted(int(s) for s in first["sizes"])
    big_name = size_name(sizes[-1])
    head = ["database", "case", *(f"{size_name(s)} ms" for s in sizes)]
    head += [f"{big_name} CPU ms", f"{big_name} bare SQL ms", "× bare SQL", "growth", "queries", "KB"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for result in results.values():
        name = "SQLite" if result["database"] == "sqlite" else "PostgreSQL"
        by_size = {int(s): cases for s, cases in result["sizes"].items()}
        for label in by_size[sizes[0]]:
            big, small = by_size[sizes[-1]][label], by_size[sizes[0]][label]
            row = [name, label, *(f"{by_size[s][label]['p50']:.1f}" for s in sizes)]
            row += [
                f"{big['cpu_p50']:.1f}",
                f"{big['sql_p50']:.2f}",
                f"{big['p50'] / max(big['sql_p50'], 1e-3):.0f}",
                f"{big['p50'] / max(small['p50'], 1e-3):.2f}",
                str(big["queries"]),
                f"{big['kb']:.1f}",
            ]
            lines.append("| " + " | ".join(row) + " |")
    return lines


def write_docs(lines: list[str], command: str) -> None:
    """Replace docs/performance.md's "Runs list and search" table (and its command) with this run's."""
    text = DOCS.read_text() if DOCS.exists() else "# Performance\n"
    start = text.find("<!-- bench_list:start -->")
    end = text.find("<!-- bench_list:end -->")
    block = "\n".join(
        [
            "<!-- bench_list:start -->",
            f"Measured {time.strftime('%Y-%m-%d')} with `{command}`, load average "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores:",
            "",
            *lines,
            "<!-- bench_list:end -->",
        ]
    )
    if start == -1 or end == -1:
        raise SystemExit(f"{DOCS}: no <!-- bench_list:start --> … <!-- bench_list:end --> block to replace")
    DOCS.write_text(text[:start] + block + text[end + len("<!-- bench_list:end -->") :])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--sizes", default="1000,10000,100000", help="run counts, comma-separated")
    parser.add_argument("--requests", type=int, default=30, help="timed requests per case (default 30)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps-per-run", type=int, default=12, help="mean steps per run (default 12)")
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
    print(
        f"\ntargets: list cases ≤ {TARGET_LIST_MS:.0f} ms, search cases ≤ {TARGET_SEARCH_MS:.0f} ms p50 at "
        f"{max(args.sizes):,} runs; growth = p50 at the largest size / p50 at the smallest"
    )
    if args.write_docs:
        command = "tests/bench/bench_list.py " + " ".join(a for a in sys.argv[1:] if not re.match(r"--write-docs", a))
        write_docs(lines, command.strip())
        print(f"wrote the table into {DOCS.relative_to(BASE_DIR)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
