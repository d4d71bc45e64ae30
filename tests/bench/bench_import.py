"""Benchmark (not a test): importing the shared 500-run workload as run documents (tracer/intake/files.py).

The workload (../shared/bench/workload.py: 500 runs, 7,802 workload steps) becomes one run document
per run (``rlt.run/1``): each tool call is a step, a call repeated after an error (attempt n > 1) is
another attempt of that step, a model call's tokens go to the step it asked for, and a run that
answered ends with its final answer. It prints, over a fresh database:

  1. validating every document (``files.item_arrival``), no database;
  2. ``file_import`` of the whole batch as one JSON Lines file: each line its own transaction, through
     ``recording`` (run_start, steps_record_many, run_finish), as the upload page and import_traces do;
  3. the same rows inserted straight with ``bulk_create`` in one transaction, as a floor.

    .venv/bin/python tests/bench/bench_import.py [--backend sqlite|postgres|both] [--rounds 3]

``--backend postgres`` uses RLT_BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/rlt_ingest),
a database it drops and creates again each round.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))

from tests.bench.serving import pg_answers, pg_recreate  # noqa: E402

BENCH_DIR = BASE_DIR.parent / "shared" / "bench"
PG_URL = os.environ.get("RLT_BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/rlt_ingest")
RUNS = 500
SEED = 20240601


def workload() -> list[dict]:
    spec = importlib.util.spec_from_file_location("shared_bench_workload", BENCH_DIR / "workload.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = subprocess.run(
        [sys.executable, str(BENCH_DIR / "workload.py"), "--runs", str(RUNS), "--seed", str(SEED)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def as_document(run: dict) -> dict:
    """One workload run as a run document."""
    steps: list[dict] = []
    tokens = [0, 0]
    for step in run["steps"]:
        if step["kind"] == "model_call":
            tokens[0] += step["tokens_in"]
            tokens[1] += step["tokens_out"]
            continue
        failed = step["is_error"]
        category = step["error_category"] if step["error_category"] != "none" else None
        attempt = {
            "number": step["attempt"],
            "ok": not failed,
            "content": step["output"],
            "category": category,
            "retryable": category in ("transient", "validation") if failed else None,
            "message": step["error"],
            "latency_ms": float(step["latency_ms"]),
        }
        last = steps[-1] if steps else None
        if step["attempt"] > 1 and last and last["tool_name"] == step["tool_name"]:
            attempt["number"] = len(last["attempts"]) + 1
            last["attempts"].append(attempt)
            continue
        attempt["number"] = 1
        steps.append(
            {
                "kind": "tool_use",
                "tool_name": step["tool_name"],
                "input": step["input"],
                "attempts": [attempt],
                "input_tokens": tokens[0],
                "output_tokens": tokens[1],
            }
        )
        tokens = [0, 0]
    if run["stop_reason"] == "final_answer":
        steps.append({"kind": "final_answer", "text": run["final_answer"] or "", "input_tokens": tokens[0],
                      "output_tokens": tokens[1]})  # fmt: skip
    return {
        "format": "rlt.run/1",
        "run": {
            "external_id": run["trace_id"],
            "scenario": run["scenario"],
            "policy": run["policy"],
            "task": run["task"],
            "stop_reason": run["stop_reason"],
            "started_at": run["started_at"],
            "labels": {"pair": run["pair_id"]},
        },
        "steps": steps,
    }


def setup(backend: str, tmp: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ["RLT_VAR_DIR"] = tmp
    if backend == "postgres":
        os.environ["DATABASE_URL"] = PG_URL
    else:
        os.environ.pop("DATABASE_URL", None)


def one_round(backend: str, lines: bytes, n_steps: int) -> dict[str, float]:
    """In a child process (a fresh Django per database): prints the timings as JSON."""
    code = f"""
import json, sys, time
sys.path.insert(0, {str(BASE_DIR)!r})
import django
django.setup()
from django.core.management import call_command
from django.db import connection, transaction
call_command("migrate", verbosity=0, interactive=False)
from tracer.intake import files
from tracer.models import Run, Step
data = sys.stdin.buffer.read()
started = time.perf_counter()
docs = [files.item_arrival(data=json.loads(line)) for line in data.splitlines()]
validate_s = time.perf_counter() - started
started = time.perf_counter()
report = files.file_import(name="workload.jsonl", data=data)
import_s = time.perf_counter() - started
assert report.refused == 0, [i.errors for i in report.items if not i.ok][:3]
stored = Step.objects.count()
Step.objects.all().delete(); Run.objects.all().delete()
started = time.perf_counter()
with transaction.atomic():
    runs = Run.objects.bulk_create([Run(source="import", scenario=d.run.scenario, status="finished") for d in docs])
    Step.objects.bulk_create([Step(run=r, index=k + 1, kind=s.kind.value, tool_name=s.tool_name, input=s.input,
                              attempts=[a.model_dump(mode="json") for a in s.attempts])
                              for r, d in zip(runs, docs) for k, s in enumerate(d.steps)])
floor_s = time.perf_counter() - started
print(json.dumps({{"validate_s": validate_s, "import_s": import_s, "floor_s": floor_s, "steps": stored}}))
"""
    with tempfile.TemporaryDirectory(prefix="rlt-bench-import-") as tmp:
        setup(backend, tmp)
        if backend == "postgres":
            pg_recreate(PG_URL)
        done = subprocess.run([sys.executable, "-c", code], input=lines, capture_output=True, check=False)
        if done.returncode:
            raise SystemExit(done.stderr.decode()[-3000:])
        return json.loads(done.stdout.decode().strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs = workload()
    documents = [as_document(run) for run in runs]
    workload_steps = sum(len(run["steps"]) for run in runs)
    steps = sum(len(d["steps"]) for d in documents)
    lines = "\n".join(json.dumps(d) for d in documents).encode()
    print(
        f"{len(documents)} runs, {workload_steps} workload steps -> {steps} recorded steps "
        f"(retries become attempts), {len(lines) / 1e6:.1f} MB of JSON Lines"
    )
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    for backend in backends:
        if backend == "postgres" and not pg_answers(PG_URL):
            print(f"postgres: {PG_URL} does not answer; skipped")
            continue
        for n in range(1, args.rounds + 1):
            t = one_round(backend, lines, steps)
            print(
                f"{backend:8} round {n}: validate {t['validate_s']:.2f} s; "
                f"import {t['import_s']:.2f} s = {len(documents) / t['import_s']:.0f} runs/s, "
                f"{t['steps'] / t['import_s']:.0f} steps/s ({workload_steps / t['import_s']:.0f} workload steps/s); "
                f"bulk_create floor {t['floor_s']:.2f} s"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
