"""Benchmark (not a test): the shared 500-run workload posted to the API as JSON Lines, over real HTTP.

The workload (../shared/bench/workload.py: 500 runs, 7,802 workload steps) becomes one run document
per run with ``tests/bench/bench_import.py``'s mapping (``as_document``): each tool call is a step,
a call repeated after an error (attempt n > 1) is another attempt of that step, a model call's
tokens go to the step it asked for, and a run that answered ends with its final answer step. The
documents are posted in batches of ``--batch`` runs as ``application/x-ndjson`` to ``POST
/api/imports`` with an API token, by one keep-alive client, to gunicorn (config/gunicorn.py, DEBUG
off) on a free loopback port over a fresh database; one warm-up request first. The clock runs from
the first batch's request to the last batch's answer (every run recorded, each line its own
transaction through ``tracer.intake`` and the recorder).

The baseline, in the same database: the same rows the API wrote (runs and steps) inserted straight
with ``bulk_create`` in one transaction. It prints steps per second both ways (workload steps, and
step rows written) and the ratio of the API's rate to the baseline's (the goal is ≥ 0.25).

    .venv/bin/python tests/bench/bench_api.py [--backend sqlite|postgres|both] [--rounds 1] [--batch 50]

``--backend postgres`` uses RLT_BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/rlt_api), a
database it drops and creates again each round; ``both`` (the default) runs SQLite, then PostgreSQL
when it answers.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(BASE_DIR))

from tests.bench.bench_import import RUNS, SEED, as_document, workload  # noqa: E402
from tests.bench.serving import backend_env, gunicorn_serving, pg_answers  # noqa: E402

PG_URL = os.environ.get("RLT_BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/rlt_api")


def one_round(backend: str, batch_size: int) -> dict:
    """In a child process whose environment names the database (settings read it at import)."""
    import django

    django.setup()
    import httpx2
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from django.core.management import call_command
    from django.db import connection, transaction

    from tracer.models import Run, Step
    from tracer.tokens import token_create

    call_command("migrate", verbosity=0, interactive=False)
    sender = get_user_model().objects.create_user(username="bench-sender")
    sender.user_permissions.add(Permission.objects.get(codename="add_run", content_type__app_label="tracer"))
    _, secret = token_create(user=sender, name="bench")

    runs = workload()
    workload_steps = sum(len(run["steps"]) for run in runs)
    lines = [json.dumps(as_document(run), separators=(",", ":")) for run in runs]
    batches = ["\n".join(lines[k : k + batch_size]).encode() for k in range(0, len(lines), batch_size)]

    with gunicorn_serving() as port:
        client = httpx2.Client(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/x-ndjson"},
            timeout=300,
        )
        # warm-up (imports, first connection), with a run that is not part of the workload
        warm = as_document(dict(runs[0], trace_id="f" * 32))
        response = client.post("/api/imports", content=json.dumps(warm).encode())
        assert response.status_code == 200 and not response.json()["refused"], response.text[:2000]
        Run.objects.filter(external_id="f" * 32).delete()

        calls = []
        started = time.perf_counter()
        for body in batches:
            t = time.perf_counter()
            response = client.post("/api/imports", content=body)
            calls.append(time.perf_counter() - t)
            report = response.json()
            if response.status_code != 200 or report["refused"]:
                raise SystemExit(f"batch refused ({response.status_code}): {json.dumps(report)[:2000]}")
        api_s = time.perf_counter() - started
        client.close()

    mine = Run.objects.filter(owner=sender)
    assert mine.count() == RUNS, mine.count()
    run_rows = list(mine.values())
    step_rows = list(Step.objects.filter(run__owner=sender).values())

    # The baseline: the same rows, inserted straight in one transaction (for another owner).
    other = get_user_model().objects.create_user(username="bench-baseline")
    started = time.perf_counter()
    with transaction.atomic():
        new_runs = Run.objects.bulk_create([Run(**dict(r, id=None, owner_id=other.pk)) for r in run_rows])
        run_map = {old["id"]: new.pk for old, new in zip(run_rows, new_runs, strict=True)}
        Step.objects.bulk_create([Step(**dict(s, id=None, run_id=run_map[s["run_id"]])) for s in step_rows])
    baseline_s = time.perf_counter() - started
    calls.sort()
    return {
        "database": connection.vendor,
        "runs": RUNS,
        "workload_steps": workload_steps,
        "step_rows": len(step_rows),
        "requests": len(batches),
        "bytes": sum(len(b) for b in batches),
        "api_s": round(api_s, 3),
        "call_p50_ms": round(1000 * calls[len(calls) // 2], 1),
        "call_max_ms": round(1000 * calls[-1], 1),
        "baseline_s": round(baseline_s, 3),
        "api_steps_per_s": round(workload_steps / api_s),
        "baseline_steps_per_s": round(workload_steps / baseline_s),
        "ratio": round(baseline_s / api_s, 3),
    }


def child(backend: str, batch_size: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="rlt-bench-api-") as tmp:
        env = backend_env(tmp, backend, PG_URL)
        out = subprocess.run(
            [sys.executable, __file__, "--child", backend, "--batch", str(batch_size)],
            env=env,
            cwd=BASE_DIR,
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            raise SystemExit(f"{backend} round failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--batch", type=int, default=50, help="runs per request (default 50)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rounds < 1 or args.batch < 1:
        parser.error("--rounds and --batch: expected whole numbers of 1 or more")
    if args.child:
        print(json.dumps(one_round(args.child, args.batch)))
        return 0
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    if "postgres" in backends and not pg_answers(PG_URL):
        print(f"PostgreSQL at {PG_URL.rpartition('@')[2]} does not answer: skipped")
        backends.remove("postgres")
    print(
        f"{RUNS} runs (seed {SEED}) as run documents, JSON Lines in batches of {args.batch} runs, "
        "POST /api/imports to gunicorn (config/gunicorn.py, DEBUG off) over HTTP on a free loopback port"
    )
    print(f"  load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for backend in backends:
        for n in range(args.rounds):
            print(f"  {backend} round {n + 1}/{args.rounds} …", flush=True)
            r = child(backend, args.batch)
            print(
                f"  {r['database']:10} {r['requests']} requests, {r['bytes'] / 1e6:.1f} MB: "
                f"{r['workload_steps']} workload steps ({r['step_rows']} step rows) in {r['api_s']:.2f} s = "
                f"{r['api_steps_per_s']} steps/s (request p50 {r['call_p50_ms']} ms, max {r['call_max_ms']} ms); "
                f"straight bulk_create in one transaction {r['baseline_s']:.2f} s = {r['baseline_steps_per_s']} "
                f"steps/s; ratio {r['ratio']:.2f} (goal ≥ 0.25)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
