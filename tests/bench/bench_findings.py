"""Benchmark (not a test): diagnosis at scale, ``findings --recompute``'s runs/s and the Tools and Findings
pages over ``--runs`` diagnosed runs.

For each database (SQLite, then PostgreSQL when it answers) it fills a fresh database with ``--runs``
runs and their steps (bench_pages' generator: every scenario under the presets, failures, retries,
guard stops and answers as the recorder leaves them, dated over 90 days), diagnoses every one with
``tracer.diagnosis.findings_recompute`` (timed: runs/s, and this process's CPU), then asks each page,
in-process with Django's test client (logged in, DEBUG off), ``--requests`` times after ``--warmup``
and prints its p50, p95, CPU per request and SQL queries: the Tools page, one tool, the Findings page,
one kind's second page, and both filtered to a policy and a month. The baseline, from the same run:
the runs list's latest 50 on the same database.

    .venv/bin/python tests/bench/bench_findings.py [--runs 100000] [--steps-per-run 4] [--backend both] [--keep DIR]

``--backend postgres`` uses RLT_BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/rlt_bench_findings),
a database it drops and creates afresh and drops at the end.

``--keep DIR``: the databases are kept (SQLite's under DIR, PostgreSQL's named as above, DIR holding a
note that it was built) and, when DIR already holds them, the pages are timed over them as they are,
with no build and no recompute: the same rows timed from two trees one after the other
(``cd ../main && .venv/bin/python ../wt/tests/bench/bench_findings.py --keep DIR``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

# The tree timed is the one it is run from (its code, this file's figures), this file's own by default.
BASE_DIR = Path.cwd() if (Path.cwd() / "tracer").is_dir() else Path(__file__).resolve().parents[2]
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))

from tests.bench.serving import backend_env, pg_answers, pg_drop  # noqa: E402

PG_URL = os.environ.get("RLT_BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/rlt_bench_findings")
SEED = 20240601
TARGET_MS = 100.0


def build(*, runs: int, steps_per_run: int, batch: int = 2000) -> None:
    """``runs`` runs with their steps, dated over the last 90 days, in batches of one transaction each."""
    from django.db import transaction
    from django.utils import timezone

    from agents.scenarios import scenario_names
    from tests.bench.bench_pages import Generator
    from tracer.models import Run, Step

    rng = random.Random(SEED)
    gen = Generator(rng=rng, steps_per_run=steps_per_run)
    scenarios = list(scenario_names())
    now, span = timezone.now(), timedelta(days=90)
    Run._meta.get_field("created_at").auto_now_add = False
    Step._meta.get_field("created_at").auto_now_add = False
    t0 = time.perf_counter()
    try:
        for first in range(0, runs, batch):
            made = []
            for k in range(first, min(first + batch, runs)):
                scenario, policy = ("", "") if rng.random() < 0.02 else (rng.choice(scenarios), rng.choice(gen.presets))
                made.append(
                    gen.run_with_steps(
                        number=k + 1,
                        scenario=scenario,
                        policy=policy,
                        created=now - span + span * (k / runs),
                        active=False,
                    )
                )
            with transaction.atomic():
                Run.objects.bulk_create([run for run, _ in made], batch_size=500)
                rows = []
                for run, steps in made:
                    for step in steps:
                        step.run_id = run.pk
                        rows.append(step)
                Step.objects.bulk_create(rows, batch_size=1000)
            done = min(first + batch, runs)
            print(f"\r  built {done:,}/{runs:,} runs ({time.perf_counter() - t0:.0f} s)", end="", file=sys.stderr)
    finally:
        Run._meta.get_field("created_at").auto_now_add = True
        Step._meta.get_field("created_at").auto_now_add = True
    print(file=sys.stderr)


def time_page(client, url: str, *, requests: int, warmup: int) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(warmup):
        response = client.get(url)
        if response.status_code != 200:
            raise SystemExit(f"{url}: HTTP {response.status_code}")
    times, cpu = [], []
    for _ in range(requests):
        t0, c0 = time.perf_counter(), time.process_time()
        client.get(url)
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    return {
        "p50": statistics.median(times),
        "p95": sorted(times)[max(0, round(0.95 * len(times)) - 1)],
        "cpu": statistics.median(cpu),
        "queries": len(ctx.captured_queries),
        "kb": len(response.content) / 1024,
    }


def logged_in_client():
    """Django set up on the database the environment names, migrated, its static files collected (DEBUG
    off serves hashed names), and a test client logged in (its user made once, kept with the database)."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0, interactive=False)
    call_command("collectstatic", verbosity=0, interactive=False)
    client = Client()
    client.force_login(get_user_model().objects.get_or_create(username="bench")[0])
    return client


def one_backend(args) -> dict:
    """In a child process whose environment names the database: build, diagnose, time."""
    client = logged_in_client()
    from django.db import connection

    from tracer.diagnosis import findings_recompute
    from tracer.models import Finding, FindingDay, PatternDay, Run, TemplateDay, ToolDay

    if args.reused:
        return {"database": connection.vendor, "runs": Run.objects.count(), "reused": True, **timed(client, args)}
    build(runs=args.runs, steps_per_run=args.steps_per_run)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    t0, c0 = time.perf_counter(), time.process_time()
    last = [0.0]

    def progress(done: int, total: int) -> None:
        if time.perf_counter() - last[0] > 2 or done == total:
            last[0] = time.perf_counter()
            rate = done / max(time.perf_counter() - t0, 1e-9)
            print(f"\r  diagnosed {done:,}/{total:,} runs, {rate:,.0f} runs/s", end="", file=sys.stderr)

    diagnosed = findings_recompute(progress=progress)
    recompute_s, recompute_cpu = time.perf_counter() - t0, time.process_time() - c0
    print(file=sys.stderr)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    return {
        "database": connection.vendor,
        "runs": args.runs,
        "diagnosed": diagnosed,
        "recompute_s": recompute_s,
        "recompute_cpu_s": recompute_cpu,
        "findings": Finding.objects.count(),
        "rollup_rows": sum(m.objects.count() for m in (ToolDay, FindingDay, TemplateDay, PatternDay)),
        **timed(client, args),
    }


def timed(client, args) -> dict:
    """Each page asked ``args.requests`` times: ``{"pages": {label: figures}}``."""
    from django.urls import reverse
    from django.utils import timezone

    from tracer.models import FindingDay, ToolDay

    month = (timezone.now() - timedelta(days=30)).date().isoformat()
    tool = ToolDay.objects.order_by("-calls").values_list("tool", flat=True).first()
    kind = FindingDay.objects.order_by("-findings").values_list("kind", flat=True).first()
    pages = {
        "runs list, latest 50 (baseline)": reverse("tracer:runs"),
        "Tools page": reverse("tracer:tools"),
        "Tools page, one tool": f"{reverse('tracer:tools')}?tool={tool}",
        "Tools page, a policy since a month": f"{reverse('tracer:tools')}?policy=starter&started_from={month}",
        "Findings page": reverse("tracer:findings"),
        "Findings page, a kind's page 2": f"{reverse('tracer:findings')}?kind={kind}&page=2",
        "Findings page, a policy since a month": f"{reverse('tracer:findings')}?policy=starter&started_from={month}",
    }
    return {
        "pages": {
            label: time_page(client, url, requests=args.requests, warmup=args.warmup) for label, url in pages.items()
        }
    }


def child(backend: str, args) -> dict:
    if args.keep:
        var = Path(args.keep) / backend
        built = var / "built"
        reused = built.exists()
        var.mkdir(parents=True, exist_ok=True)
        return _child(backend, args, str(var), reused=reused, done=built)
    with tempfile.TemporaryDirectory(prefix="rlt-bench-findings-") as tmp:
        return _child(backend, args, tmp, reused=False, done=None)


def _child(backend: str, args, var: str, *, reused: bool, done: Path | None) -> dict:
    if reused:
        env = dict(backend_env(var, "sqlite", PG_URL, served=True))
        if backend == "postgres":
            env["DATABASE_URL"] = PG_URL
    else:
        env = backend_env(var, backend, PG_URL, served=True)
    command = [sys.executable, __file__, "--child", backend, "--runs", str(args.runs)]
    command += ["--steps-per-run", str(args.steps_per_run), "--requests", str(args.requests)]
    command += ["--warmup", str(args.warmup)] + (["--reused"] if reused else [])
    out = subprocess.run(command, env=env, cwd=BASE_DIR, stdout=subprocess.PIPE, text=True)
    if backend == "postgres" and done is None:
        pg_drop(PG_URL)
    if out.returncode != 0:
        raise SystemExit(f"{backend} failed:\n{out.stdout[-3000:]}")
    if done is not None:
        done.write_text("built\n")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--steps-per-run", type=int, default=4)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--keep", metavar="DIR", help="keep the databases in DIR; time them as they are when there")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--reused", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = json.dumps(one_backend(args))
        print(result, file=sys.stderr)  # kept in the log should the parent not live to print the table
        print(result)
        return 0
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    if "postgres" in backends and not pg_answers(PG_URL):
        print(f"PostgreSQL at {PG_URL.rpartition('@')[2]} does not answer: skipped")
        backends.remove("postgres")
    print(f"  load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    results = [child(backend, args) for backend in backends]
    print("| page | database | p50 ms | p95 ms | CPU ms | queries | KB | × baseline |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        name = "SQLite" if r["database"] == "sqlite" else "PostgreSQL"
        base = r["pages"]["runs list, latest 50 (baseline)"]["p50"]
        for label, p in r["pages"].items():
            print(
                f"| {label} | {name} | {p['p50']:.1f} | {p['p95']:.1f} | {p['cpu']:.1f} | {p['queries']} "
                f"| {p['kb']:.0f} | {p['p50'] / base:.2f} |"
            )
    print(f"  tree: {Path.cwd()}; load average after: {os.getloadavg()[0]:.1f}")
    for r in results:
        name = "SQLite" if r["database"] == "sqlite" else "PostgreSQL"
        if r.get("reused"):
            print(f"{name}: {r['runs']:,} runs, the databases kept by an earlier round")
        else:
            print(
                f"{name}: {r['runs']:,} runs, {r['findings']:,} findings, {r['rollup_rows']:,} rollup rows; "
                f"findings --recompute diagnosed {r['diagnosed']:,} runs in {r['recompute_s']:.1f} s "
                f"({r['diagnosed'] / r['recompute_s']:,.0f} runs/s; this process's CPU {r['recompute_cpu_s']:.1f} s)"
            )
        for label in ("Tools page", "Findings page"):
            p50 = r["pages"][label]["p50"]
            met = "met" if p50 <= TARGET_MS else "MISSED"
            print(f"{name}, {label}: {p50:.1f} ms p50, target ≤ {TARGET_MS:.0f} ms: {met}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
