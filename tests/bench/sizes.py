"""What the size benchmarks (bench_list, bench_scale) share: their command line, one child process per
database that grows the runs (bulk inserted, without step rows) from one size to the next and times
the benchmark's cases at each, the table's way into its block of docs/performance.md, and a case's
profile.

A benchmark keeps its own cases, timing, table and closing lines, and hands them to ``main``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from tests.bench.serving import BASE_DIR, backend_env, pg_answers, pg_drop

DOCS = BASE_DIR / "docs" / "performance.md"


def parse_args(doc: str, *, requests: int, steps_help: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--sizes", default="1000,10000,100000", help="run counts, comma-separated")
    parser.add_argument("--requests", type=int, default=requests, help=f"timed requests per case (default {requests})")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps-per-run", type=int, default=12, help=steps_help)
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
    return args


def logged_in_client():
    """In the child process: Django set up on the database its environment names, migrated, its
    static files collected (DEBUG off serves hashed names), and a test client logged in."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0, interactive=False)
    call_command("collectstatic", verbosity=0, interactive=False)
    client = Client()
    client.force_login(get_user_model().objects.create_user("bench", password=None))
    return client


def runs_only(*, rng: random.Random, steps_per_run: int):
    """bench_pages' generator of runs, counters and search text, without making the step rows."""
    from tests.bench.bench_pages import Generator

    class RunsOnly(Generator):
        @staticmethod
        def row(step, *, created, tool_use_id=""):
            return None

    return RunsOnly(rng=rng, steps_per_run=steps_per_run)


def runs_build(*, gen, rng: random.Random, start: int, stop: int, total: int, running: bool, batch: int = 2000) -> None:
    """Runs ``start``…``stop - 1`` of ``total`` (counters and search text as recorded, 2% arrived from
    outside), dated over the last 90 days in order, in batches of ``batch`` (one transaction each).
    With ``running``, a few of the newest are still running (those of the last size have finished
    since). Their steps are not written: the list never reads them."""
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
                active = running and k >= stop - 5 and k % 2 == 0  # a few running runs among the newest
                created = now - span + span * (k / total)
                run, _rows = gen.run_with_steps(
                    number=k + 1, scenario=scenario, policy=policy, created=created, active=active
                )
                runs.append(run)
            with transaction.atomic():
                if running:
                    Run.objects.filter(status=Run.Status.RUNNING).update(status=Run.Status.FINISHED)
                Run.objects.bulk_create(runs, batch_size=500)
    finally:
        Run._meta.get_field("created_at").auto_now_add = True


def grow(
    sizes: list[int], *, gen, rng: random.Random, running: bool, measure: Callable[[int], dict], at_largest=None
) -> dict:
    """Grow one database through ``sizes``: ``runs_build`` adds the runs up to each size (see there for
    ``running``), then ``measure(size)`` gives that size's figures; ``at_largest()`` runs after the
    largest size's."""
    from django.db import connection

    total, built = max(sizes), 0
    out = {"database": connection.vendor, "sizes": {}}
    for size in sizes:
        t0 = time.perf_counter()
        runs_build(gen=gen, rng=rng, start=built, stop=size, total=total, running=running)
        built = size
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE")  # what autovacuum does soon after a bulk insert
        print(f"  {connection.vendor}: {size:,} runs ready in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        out["sizes"][size] = measure(size)
        if at_largest and size == total:
            at_largest()
    return out


def profile(client, cases: list[tuple[str, str, dict]], label: str, requests: int, *, interval: float, headers=None):
    """Print a pyinstrument profile of ``requests`` requests of the case named ``label``."""
    from pyinstrument import Profiler

    found = [(url, h) for name, url, h in cases if name == label]
    if not found:
        raise SystemExit(f"--profile: no case named {label!r}; one of {[c[0] for c in cases]}")
    url, case_headers = found[0]
    profiler = Profiler(interval=interval)
    with profiler:
        for _ in range(requests):
            client.get(url, headers={**(headers or {}), **case_headers})
    print(profiler.output_text(unicode=True, color=False, show_all=False), file=sys.stderr)


def child(script: Path, backend: str, args: argparse.Namespace, pg_url: str) -> dict:
    """Run ``script --child backend`` (DEBUG off) on a fresh database and return the figures it prints."""
    with tempfile.TemporaryDirectory(prefix=f"rlt-{script.stem.replace('_', '-')}-") as tmp:
        env = backend_env(tmp, backend, pg_url, served=True)
        argv = [sys.executable, str(script), "--child", backend, "--sizes", ",".join(map(str, args.sizes))]
        argv += ["--requests", str(args.requests), "--warmup", str(args.warmup)]
        argv += ["--steps-per-run", str(args.steps_per_run)]
        if args.profile:
            argv += ["--profile", args.profile]
        try:
            out = subprocess.run(argv, env=env, cwd=BASE_DIR, stdout=subprocess.PIPE, text=True)
        finally:
            if backend == "postgres":
                pg_drop(pg_url)
        if out.returncode != 0:
            raise SystemExit(f"{backend} failed:\n{out.stdout[-3000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])


def write_docs(name: str, lines: list[str], command: str, docs: Path = DOCS) -> None:
    """Replace the block between ``<!-- name:start -->`` and ``<!-- name:end -->`` in ``docs`` with this
    run's table and the command that made it."""
    start_mark, end_mark = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = docs.read_text() if docs.exists() else "# Performance\n"
    start, end = text.find(start_mark), text.find(end_mark)
    if start == -1 or end == -1:
        raise SystemExit(f"{docs}: no {start_mark} … {end_mark} block to replace")
    block = "\n".join(
        [
            start_mark,
            f"Measured {time.strftime('%Y-%m-%d')} with `{command}`, load average "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores:",
            "",
            *lines,
            end_mark,
        ]
    )
    docs.write_text(text[:start] + block + text[end + len(end_mark) :])


def main(
    doc: str,
    *,
    script: str,
    pg_url: str,
    requests: int,
    steps_help: str,
    one_backend: Callable[[argparse.Namespace], dict],
    table: Callable[[dict], list[str]],
    footer: Callable[[dict, argparse.Namespace], list[str]],
) -> int:
    """A size benchmark's command: in the parent, one child per database, the table and ``footer``'s
    lines, and with ``--write-docs`` the table into the script's block of docs/performance.md; in the
    child (``--child``), ``one_backend``'s figures as JSON."""
    script = Path(script).resolve()
    args = parse_args(doc, requests=requests, steps_help=steps_help)
    if args.child:
        print(json.dumps(one_backend(args)))
        return 0
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    if "postgres" in backends and not pg_answers(pg_url):
        print(f"PostgreSQL at {pg_url.rpartition('@')[2]} does not answer: skipped")
        backends.remove("postgres")
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    results = {b: child(script, b, args, pg_url) for b in backends}
    lines = table(results)
    print("\n".join(lines))
    print("\n".join(footer(results, args)))
    if args.write_docs:
        argv = " ".join(a for a in sys.argv[1:] if not re.match(r"--write-docs", a))
        write_docs(script.stem, lines, f"tests/bench/{script.name} {argv}".strip())
        print(f"wrote the table into {DOCS.relative_to(BASE_DIR)}")
    return 0
