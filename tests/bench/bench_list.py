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

import os
import random
import statistics
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))

from tests.bench import sizes  # noqa: E402

PG_URL = os.environ.get("RLT_BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/rlt_bench_list")
SEED = 20240601
TARGET_LIST_MS = 8.0
TARGET_SEARCH_MS = 20.0


def cases(*, size: int) -> list[tuple[str, str, dict]]:
    """(label, URL, headers) of each timed request."""
    from django.urls import reverse

    from tracer.models import Run

    runs = reverse("tracer:runs")
    one = Run.objects.filter(parent__isnull=True).exclude(scenario="").order_by("id")[size // 3 : size // 3 + 1].get()
    active = list(Run.objects.filter(status=Run.Status.RUNNING).values_list("pk", "step_count", "status"))
    versions = "&".join(f"v={pk}.{steps}.{status}" for pk, steps, status in active)
    stale = "&".join(f"v={pk}.{steps - (i == 0)}.{status}" for i, (pk, steps, status) in enumerate(active))
    newest = Run.objects.filter(parent__isnull=True).latest("id").pk
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
            "poll first page, none changed or new",
            f"{reverse('tracer:run-rows-live')}?{versions}&after={newest}",
            {"HX-Request": "true"},
        ),
        (
            "poll search, one new run",  # the newest run, as a page showing the one before it asks
            f"{reverse('tracer:run-rows-live')}?{versions}&q=laptop&after={newest - 1}",
            {"HX-Request": "true"},
        ),
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
    client = sizes.logged_in_client()
    rng = random.Random(SEED)
    gen = sizes.runs_only(rng=rng, steps_per_run=args.steps_per_run)
    return sizes.grow(
        args.sizes,
        gen=gen,
        rng=rng,
        running=True,
        measure=lambda size: {
            label: time_case(client, url, headers, requests=args.requests, warmup=args.warmup)
            for label, url, headers in cases(size=size)
        },
        at_largest=args.profile
        and (lambda: sizes.profile(client, cases(size=max(args.sizes)), args.profile, args.requests, interval=0.0002)),
    )


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


def footer(results: dict[str, dict], args) -> list[str]:
    return [
        f"\ntargets: list cases ≤ {TARGET_LIST_MS:.0f} ms, search cases ≤ {TARGET_SEARCH_MS:.0f} ms p50 at "
        f"{max(args.sizes):,} runs; growth = p50 at the largest size / p50 at the smallest"
    ]


def main() -> int:
    return sizes.main(
        __doc__,
        script=__file__,
        pg_url=PG_URL,
        requests=30,
        steps_help="mean steps per run (default 12)",
        one_backend=one_backend,
        table=table,
        footer=footer,
    )


if __name__ == "__main__":
    sys.exit(main())
