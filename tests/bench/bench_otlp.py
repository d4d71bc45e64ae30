"""Benchmark (not a test): the shared 500-run workload sent to /v1/traces, until every run is queryable.

The workload (../shared/bench/workload.py: 500 runs, 7,802 workload steps) becomes 8,302 spans with
the shared ../shared/bench/otel_spans.py (OpenInference attributes), which the real
``opentelemetry-exporter-otlp-proto-http`` exporter sends in 17 export calls of 512 spans, as the
peers got them (Phoenix: 80.9 s, MLflow: 7.5 s until all spans were queryable). The app is served as
in production: gunicorn with config/gunicorn.py, DEBUG off, on a free loopback port, over a fresh
database. The clock starts with the first export call and stops when every run is finished with
all its steps, asked as the pages ask (the runs list's query filtered to finished OTLP runs, its step
counts, and the step rows the run pages read), polled every 20 ms: a request answered before its
runs are written (tracer/intake/otlp/views.py, ANSWER_FIRST_SPANS) is counted until they are. It prints
too the CPU seconds gunicorn's processes spent meanwhile, the server's own work, less at the mercy
of the machine's load than the time, and their peak resident memory together (sampled every 50 ms).
gunicorn runs one process (``WEB_CONCURRENCY=1`` unless set), as ``./rlt up`` serves.

Two baselines from the same run:

- **the floor**: what the machine needs at the least to take the workload in, measured in the same
  process: the 17 payloads decoded by protobuf's C code (``ExportTraceServiceRequest.ParseFromString``)
  plus one ``sqlite3`` ``executemany`` of a row per span (ids, name, times, attributes as JSON text)
  and a row per workload step (tool, input, output, error, category, latency, tokens) into a fresh
  WAL database in one transaction, rows built beforehand. The receiver's time over it is printed as
  "× floor";
- the same rows the receiver wrote (runs, steps, traces, span batches) inserted straight with
  ``bulk_create`` in one transaction, in the benchmark's database.

    .venv/bin/python tests/bench/bench_otlp.py [--backend sqlite|postgres|both] [--rounds 1] [--diagnosis on|off|both]
    .venv/bin/python tests/bench/bench_otlp.py --scale [--backend postgres|sqlite|both] [--rounds 1]

``--scale`` measures scaling out instead: the workload split by run between 1, 2 and 4 exporter
processes that send at once, to 1 and 2 gunicorn processes, on PostgreSQL unless ``--backend`` says
otherwise; it prints spans/s for each, gunicorn's CPU, and the runs, traces and steps stored against
the workload's (nothing lost, nothing doubled), and exits 1 if any differ.

``--diagnosis both`` runs each round twice, with each run's findings written when it ends (the default)
and without (``RLT_DIAGNOSE=0``), one after the other, and prints what the findings cost: the medians'
difference over the figure without them, for the time until every run is queryable and for gunicorn's CPU.

``--backend postgres`` uses RLT_BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/rlt_otlp),
a database it drops and creates again each round; ``both`` (the default) runs SQLite, then
PostgreSQL when it answers.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))

from tests.bench.serving import backend_env, gunicorn_serving, pg_answers  # noqa: E402

BENCH_DIR = BASE_DIR.parent / "shared" / "bench"
PG_URL = os.environ.get("RLT_BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/rlt_otlp")
RUNS = 500
SEED = 20240601
BATCH = 512


def shared_bench(name: str):
    """A module of the shared benchmark (../shared/bench), which is no package."""
    spec = importlib.util.spec_from_file_location(f"shared_bench_{name}", BENCH_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def workload_spans(shift: int | None = None, *, part: int = 0, parts: int = 1) -> tuple[list[dict], list, int]:
    """The workload's runs (every ``parts``-th from ``part``: one exporter's share), their spans and
    the time shift that makes the last run end a second ago (given, so that exporters agree)."""
    from opentelemetry.sdk.resources import Resource

    otel_spans, workload = shared_bench("otel_spans"), shared_bench("workload")
    runs = list(workload.generate(RUNS, SEED))
    if shift is None:
        shift = otel_spans.rebase_shift_ms(runs, int(time.time() * 1000))
    resource = Resource({"service.name": "peers-bench"})
    runs = runs[part::parts]
    return runs, [s for run in runs for s in otel_spans.run_to_spans(run, resource, shift)], shift


def steps_expected(runs: list[dict]) -> int:
    """The steps the workload's ``runs`` become: a step per tool call, and the final answer."""
    return sum(
        sum(1 for s in r["steps"] if s["kind"] == "tool_call") + (r["stop_reason"] == "final_answer") for r in runs
    )


def sender_create() -> tuple:
    """Migrate the child's database and make the user whose API token the exporters send with."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from django.core.management import call_command

    from tracer.tokens import token_create

    call_command("migrate", verbosity=0)
    sender = get_user_model().objects.create_user(username="bench-sender")
    sender.user_permissions.add(Permission.objects.get(codename="add_run", content_type__app_label="tracer"))
    _, secret = token_create(user=sender, name="bench")
    return sender, secret


def queryable_wait(mine, want_runs: int, want_steps: int, started: float) -> None:
    """Until ``mine`` (the runs list's query) holds ``want_runs`` finished runs with ``want_steps``
    steps, counted as the list counts them and as the run pages read them; polled every 20 ms."""
    from django.db.models import Sum

    from tracer.models import Step

    while True:
        done = mine.aggregate(n=Sum("step_count"))["n"] or 0
        listed_all = mine.count() == want_runs and done == want_steps
        if listed_all and Step.objects.filter(run__in=mine.values("pk")).count() == want_steps:
            return
        if time.perf_counter() - started > 600:
            raise SystemExit(f"not queryable after 600 s: {mine.count()} runs, {done} steps")
        time.sleep(0.02)


def one_round(backend: str) -> dict:
    """Run in a child process whose environment names the database (settings read it at import)."""
    sys.path.insert(0, str(BASE_DIR))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import SpanExportResult

    from tracer.models import OtlpSpanBatch, OtlpTrace, Run, Step
    from tracer.reads import runs_list

    otel_spans = shared_bench("otel_spans")
    User = get_user_model()
    sender, secret = sender_create()
    runs, spans, shift = workload_spans()
    resource = Resource({"service.name": "peers-bench"})
    batches = [spans[k : k + BATCH] for k in range(0, len(spans), BATCH)]
    want_steps = steps_expected(runs)

    # what the exporter's own protobuf encoding costs the client, measured apart (it is inside the
    # figure: the peers' clients paid it too)
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    t = time.perf_counter()
    payloads = [encode_spans(batch).SerializeToString() for batch in batches]
    client_encode = time.perf_counter() - t
    floor = floor_measure(payloads, spans, runs)

    with gunicorn_serving() as port:
        exporter = OTLPSpanExporter(
            endpoint=f"http://127.0.0.1:{port}/v1/traces", headers={"Authorization": f"Bearer {secret}"}, timeout=60
        )
        # one warm-up request (imports, first connection) with a trace that is not part of the workload
        warm = otel_spans.run_to_spans(dict(runs[0], trace_id="f" * 32), resource, shift)
        assert exporter.export(warm) == SpanExportResult.SUCCESS
        Run.objects.filter(external_id="f" * 32).delete()
        OtlpTrace.objects.filter(trace_id="f" * 32).delete()

        # queryable as the pages ask: the runs list's query (runs_list.run_list, filtered to finished
        # OTLP runs) with its step counts, and the steps the run pages read
        listed = runs_list.run_list(filters={"source": Run.Source.OTLP, "status": Run.Status.FINISHED})
        mine = listed.filter(owner=sender)
        calls = []
        server = _server_cpu()
        started = time.perf_counter()
        with PeakMemory() as memory:
            for batch in batches:
                t = time.perf_counter()
                result = exporter.export(batch)
                calls.append(time.perf_counter() - t)
                if result != SpanExportResult.SUCCESS:
                    raise SystemExit(f"export failed: {result}")
            exported = time.perf_counter() - started
            queryable_wait(mine, RUNS, want_steps, started)
        queryable = time.perf_counter() - started
        server_cpu = _server_cpu() - server
        exporter.shutdown()

    # The baseline: the same rows, inserted straight in one transaction (for another owner).
    other = User.objects.create_user(username="bench-baseline")
    run_rows = list(Run.objects.filter(owner=sender).values())
    step_rows = list(Step.objects.filter(run__owner=sender).values())
    trace_rows = list(OtlpTrace.objects.filter(owner=sender).values())
    span_rows = list(OtlpSpanBatch.objects.filter(trace__owner=sender).values())
    t = time.perf_counter()
    with transaction.atomic():
        new_runs = Run.objects.bulk_create(
            [Run(**dict(r, id=None, owner_id=other.pk, external_id="b" + r["external_id"][1:])) for r in run_rows]
        )
        run_map = {old["id"]: new.pk for old, new in zip(run_rows, new_runs, strict=True)}
        Step.objects.bulk_create([Step(**dict(s, id=None, run_id=run_map[s["run_id"]])) for s in step_rows])
        new_traces = OtlpTrace.objects.bulk_create(
            [OtlpTrace(**dict(r, id=None, owner_id=other.pk, run_id=run_map[r["run_id"]])) for r in trace_rows]
        )
        trace_map = {old["id"]: new.pk for old, new in zip(trace_rows, new_traces, strict=True)}
        OtlpSpanBatch.objects.bulk_create(
            [OtlpSpanBatch(**dict(s, id=None, trace_id=trace_map[s["trace_id"]])) for s in span_rows]
        )
    baseline = time.perf_counter() - t
    calls.sort()
    return {
        "backend": backend,
        "database": connection.vendor,
        "spans": len(spans),
        "calls": len(batches),
        "runs": RUNS,
        "steps": want_steps,
        "exported_s": round(exported, 3),
        "client_encode_s": round(client_encode, 3),
        "queryable_s": round(queryable, 3),
        "server_cpu_s": round(server_cpu, 3),
        "server_peak_mb": round(memory.peak / 2**20),
        "call_p50_ms": round(1000 * calls[len(calls) // 2], 1),
        "call_max_ms": round(1000 * calls[-1], 1),
        "baseline_s": round(baseline, 3),
        "ratio": round(queryable / baseline, 1),
        "floor_decode_s": round(floor["decode_s"], 3),
        "floor_insert_s": round(floor["insert_s"], 3),
        "floor_s": round(floor["decode_s"] + floor["insert_s"], 3),
        "floor_ratio": round(queryable / (floor["decode_s"] + floor["insert_s"]), 1),
        "rows": len(run_rows) + len(step_rows) + len(trace_rows) + len(span_rows),
        "diagnosed": Run.objects.filter(owner=sender).exclude(rule_set="").count(),
    }


def scale_round(backend: str, exporters: int) -> dict:
    """The scale-out round (``--scale``), in a child process whose environment names the database and
    gunicorn's processes (WEB_CONCURRENCY): the workload split by run between ``exporters`` exporter
    processes, each sending its share's spans in calls of 512, all started at once; timed until every
    run is queryable. Then what was stored is counted against the workload: runs, steps and spans,
    none lost and none written twice."""
    sys.path.insert(0, str(BASE_DIR))
    import django

    django.setup()
    from tracer.models import OtlpTrace, Run, Step
    from tracer.reads import runs_list

    sender, secret = sender_create()
    runs, spans, shift = workload_spans()
    want_steps = steps_expected(runs)
    with gunicorn_serving() as port:
        senders = [
            subprocess.Popen(
                [sys.executable, __file__, "--exporter", json.dumps([port, secret, k, exporters, shift])],
                cwd=BASE_DIR,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for k in range(exporters)
        ]
        for proc in senders:  # each has built its spans and encoded nothing yet
            if proc.stdout.readline().strip() != "ready":
                raise SystemExit("an exporter did not start")
        listed = runs_list.run_list(filters={"source": Run.Source.OTLP, "status": Run.Status.FINISHED})
        mine = listed.filter(owner=sender)
        server, database = _server_cpu(), _postgres_cpu()
        started = time.perf_counter()
        with PeakMemory() as memory:
            for proc in senders:
                proc.stdin.write("go\n")
                proc.stdin.flush()
            said = [json.loads(proc.communicate()[0].strip().splitlines()[-1]) for proc in senders]
            exported = time.perf_counter() - started
            if any(r["failed"] for r in said):
                raise SystemExit(f"export calls failed: {said}")
            queryable_wait(mine, RUNS, want_steps, started)
        queryable = time.perf_counter() - started
        server_cpu, database_cpu = _server_cpu() - server, _postgres_cpu() - database
    stored_runs = Run.objects.filter(owner=sender).count()
    stored_steps = Step.objects.filter(run__owner=sender).count()
    return {
        "backend": backend,
        "processes": int(os.environ["WEB_CONCURRENCY"]),
        "exporters": exporters,
        "spans": len(spans),
        "calls": sum(r["calls"] for r in said),
        "exported_s": round(exported, 3),
        "queryable_s": round(queryable, 3),
        "spans_per_s": round(len(spans) / queryable),
        "server_cpu_s": round(server_cpu, 3),
        "postgres_cpu_s": round(database_cpu, 3) if backend == "postgres" else None,
        "server_peak_mb": round(memory.peak / 2**20),
        "runs": RUNS,
        "stored_runs": stored_runs,
        "traces": OtlpTrace.objects.filter(owner=sender).count(),
        "steps": want_steps,
        "stored_steps": stored_steps,
        "load": round(os.getloadavg()[0], 1),
    }


def exporter_main(spec: str) -> int:
    """One exporter process of the scale-out round: its share of the workload's spans, sent when the
    round says go (a line on stdin); prints its calls and how many failed, as JSON."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    port, secret, part, parts, shift = json.loads(spec)
    _, spans, _ = workload_spans(shift, part=part, parts=parts)
    batches = [spans[k : k + BATCH] for k in range(0, len(spans), BATCH)]
    exporter = OTLPSpanExporter(
        endpoint=f"http://127.0.0.1:{port}/v1/traces", headers={"Authorization": f"Bearer {secret}"}, timeout=120
    )
    print("ready", flush=True)
    sys.stdin.readline()
    failed = sum(exporter.export(batch) != SpanExportResult.SUCCESS for batch in batches)
    exporter.shutdown()
    print(json.dumps({"calls": len(batches), "failed": failed}))
    return 0


def floor_measure(payloads: list[bytes], spans: list, runs: list[dict]) -> dict[str, float]:
    """The floor (module docstring): decoding ``payloads`` and inserting a row per span and per
    workload step with one ``sqlite3`` ``executemany`` each, in one transaction; best of three."""
    import sqlite3

    import orjson
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    span_rows = [
        (
            f"{s.context.trace_id:032x}",
            f"{s.context.span_id:016x}",
            f"{s.parent.span_id:016x}" if s.parent else None,
            s.name,
            s.start_time,
            s.end_time,
            orjson.dumps(dict(s.attributes or {})).decode(),
        )
        for s in spans
    ]
    step_rows = [
        (
            r["run_id"],
            st["index"],
            st["kind"],
            st.get("tool_name"),
            orjson.dumps(st.get("input")).decode(),
            orjson.dumps(st["output"] if st.get("output") is not None else st.get("error")).decode(),
            bool(st.get("is_error")),
            st.get("error_category"),
            float(st.get("latency_ms") or 0),
            int(st.get("tokens_in") or 0),
            int(st.get("tokens_out") or 0),
        )
        for r in runs
        for st in r["steps"]
    ]
    decode = insert = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for payload in payloads:
            ExportTraceServiceRequest().ParseFromString(payload)
        decode = min(decode, time.perf_counter() - t)
        with tempfile.TemporaryDirectory(prefix="rlt-bench-floor-") as tmp:
            db = sqlite3.connect(Path(tmp) / "floor.sqlite3", isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE span (trace TEXT, span TEXT, parent TEXT, name TEXT, start INTEGER, end INTEGER, "
                "attrs TEXT)"
            )
            db.execute(
                "CREATE TABLE step (run TEXT, idx INTEGER, kind TEXT, tool TEXT, input TEXT, output TEXT, "
                "is_error INTEGER, category TEXT, latency REAL, tokens_in INTEGER, tokens_out INTEGER)"
            )
            t = time.perf_counter()
            db.execute("BEGIN IMMEDIATE")
            db.executemany("INSERT INTO span VALUES (?, ?, ?, ?, ?, ?, ?)", span_rows)
            db.executemany("INSERT INTO step VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", step_rows)
            db.execute("COMMIT")
            insert = min(insert, time.perf_counter() - t)
            db.close()
    return {"decode_s": decode, "insert_s": insert, "span_rows": len(span_rows), "step_rows": len(step_rows)}


class PeakMemory:
    """The largest resident memory of the app's gunicorn processes together (this process's children),
    sampled every 50 ms on a thread from the block's start to its end: what serving the round took."""

    def __enter__(self):
        import threading

        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        import psutil

        while True:
            total = 0
            for proc in psutil.Process().children(recursive=True):
                try:
                    if "gunicorn" in " ".join(proc.cmdline()):
                        total += proc.memory_info().rss
                except psutil.NoSuchProcess:
                    continue
            self.peak = max(self.peak, total)
            if self._stop.wait(0.05):
                return


def _server_cpu() -> float:
    """CPU seconds the app's gunicorn processes (this process's children) have used so far: the
    server's own work, which the machine's load inflates less than wall time."""
    import psutil

    total = 0.0
    for proc in psutil.Process().children(recursive=True):
        try:
            if "gunicorn" in " ".join(proc.cmdline()):
                times = proc.cpu_times()
                total += times.user + times.system
        except psutil.NoSuchProcess:
            continue
    return total


def _postgres_cpu() -> float:
    """CPU seconds the machine's PostgreSQL server processes have used so far (all of its sessions:
    on a machine doing other work too, an upper bound of this round's)."""
    import psutil

    total = 0.0
    for proc in psutil.process_iter(["name"]):
        try:
            if proc.info["name"] in ("postgres", "postmaster"):
                times = proc.cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


def child(backend: str, *, diagnose: bool = True, processes: int | None = None, exporters: int = 0) -> dict:
    """One round in a child process over a fresh database; with ``exporters``, the scale-out round
    with that many exporters to ``processes`` gunicorn processes."""
    with tempfile.TemporaryDirectory(prefix="rlt-bench-otlp-") as tmp:
        env = backend_env(tmp, backend, PG_URL)
        if processes:
            env["WEB_CONCURRENCY"] = str(processes)
        env.setdefault("WEB_CONCURRENCY", "1")  # what ./rlt up serves
        env["RLT_DIAGNOSE"] = "1" if diagnose else "0"
        round_args = ["--child", backend] + (["--scale-exporters", str(exporters)] if exporters else [])
        out = subprocess.run(
            [sys.executable, __file__, *round_args], env=env, cwd=BASE_DIR, capture_output=True, text=True
        )
        if out.returncode != 0:
            raise SystemExit(f"{backend} round failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--diagnosis", choices=["on", "off", "both"], default="on")
    parser.add_argument(
        "--scale",
        action="store_true",
        help="scale out: 1, 2 and 4 exporter processes to 1 and 2 gunicorn processes (PostgreSQL by default)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--scale-exporters", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--exporter", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.exporter:
        return exporter_main(args.exporter)
    if args.child:
        result = scale_round(args.child, args.scale_exporters) if args.scale_exporters else one_round(args.child)
        print(json.dumps(result))
        return 0
    if args.scale and args.backend == "both" and "--backend" not in sys.argv:
        args.backend = "postgres"
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    if "postgres" in backends and not pg_answers(PG_URL):
        print(f"PostgreSQL at {PG_URL.rpartition('@')[2]} does not answer: skipped")
        backends.remove("postgres")
    if args.scale:
        return scale_main(backends, args.rounds)
    print(
        f"{RUNS} runs (seed {SEED}) as OTLP spans in export calls of {BATCH} spans to gunicorn "
        "(config/gunicorn.py, DEBUG off); all runs queryable = every run finished with all its steps"
    )
    print(f"  load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    modes = {"on": [True], "off": [False], "both": [True, False]}[args.diagnosis]
    for backend in backends:
        seen: dict[bool, list[dict]] = {True: [], False: []}
        for n in range(args.rounds):
            for diagnose in modes if n % 2 == 0 else modes[::-1]:  # interleaved, each first in turn
                said = "" if args.diagnosis != "both" else (" findings on" if diagnose else " findings off")
                print(f"  {backend} round {n + 1}/{args.rounds}{said} …", flush=True)
                r = child(backend, diagnose=diagnose)
                seen[diagnose].append(r)
                _report(r)
        if seen[True] and seen[False]:
            _findings_cost(backend, seen)
    return 0


def scale_main(backends: list[str], rounds: int) -> int:
    """``--scale``: each backend's table of spans/s by exporters and gunicorn processes, each cell the
    median of ``rounds`` rounds; exits 1 when a round stored other runs or steps than the workload's."""
    print(
        f"{RUNS} runs (seed {SEED}) as OTLP spans, split by run between 1, 2 and 4 exporter processes "
        "sending at once, to 1 and 2 gunicorn processes (config/gunicorn.py, DEBUG off); spans/s until "
        "every run is queryable"
    )
    print(f"  load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    wrong = 0
    for backend in backends:
        cells: dict[tuple[int, int], list[dict]] = {}
        for n in range(rounds):
            for processes in (1, 2):
                for exporters in (1, 2, 4):
                    r = child(backend, processes=processes, exporters=exporters)
                    cells.setdefault((processes, exporters), []).append(r)
                    exact = r["stored_runs"] == r["runs"] == r["traces"] and r["stored_steps"] == r["steps"]
                    wrong += not exact
                    print(
                        f"  {backend} round {n + 1}/{rounds}: {processes} process(es), {exporters} exporter(s): "
                        f"{r['spans']} spans in {r['calls']} calls queryable after {r['queryable_s']:.2f} s = "
                        f"{r['spans_per_s']} spans/s (gunicorn's CPU {r['server_cpu_s']:.2f} s"
                        + (f", PostgreSQL's {r['postgres_cpu_s']:.2f} s" if r["postgres_cpu_s"] is not None else "")
                        + f", gunicorn's peak memory {r['server_peak_mb']} MB, load "
                        f"{r['load']}); stored {r['stored_runs']} runs, {r['traces']} traces, "
                        f"{r['stored_steps']} of {r['steps']} steps{'' if exact else ' — NOT THE WORKLOAD'}",
                        flush=True,
                    )
        print(f"\n  {backend}: spans/s until every run is queryable (median of {rounds}; CPU of gunicorn + PostgreSQL)")
        print("  | gunicorn processes | 1 exporter | 2 exporters | 4 exporters |")
        print("  | --- | --- | --- | --- |")
        for processes in (1, 2):
            row = []
            for exporters in (1, 2, 4):
                seen = cells[(processes, exporters)]
                rate = _median([r["spans_per_s"] for r in seen])
                cpu = f"{_median([r['server_cpu_s'] for r in seen]):.2f} s"
                if seen[0]["postgres_cpu_s"] is not None:
                    cpu += f" + {_median([r['postgres_cpu_s'] for r in seen]):.2f} s"
                row.append(f"{rate:,.0f} ({cpu})")
            print(f"  | {processes} | " + " | ".join(row) + " |")
    return 1 if wrong else 0


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _findings_cost(backend: str, seen: dict[bool, list[dict]]) -> None:
    for key, what in (("queryable_s", "all runs queryable"), ("server_cpu_s", "gunicorn's CPU")):
        on, off = _median([r[key] for r in seen[True]]), _median([r[key] for r in seen[False]])
        each = ", ".join(f"{a[key]:.2f}/{b[key]:.2f}" for a, b in zip(seen[True], seen[False], strict=False))
        print(
            f"  {backend:10} findings' cost, {what}: median {on:.2f} s with them, {off:.2f} s without "
            f"(+{on - off:.2f} s, {100 * (on - off) / off:+.1f} %); rounds with/without {each}",
            flush=True,
        )


def _report(r: dict) -> None:
    """One round's figures, as the benchmark prints them."""
    print(
        f"  {r['database']:10} {r['spans']} spans in {r['calls']} calls: exported in {r['exported_s']:.2f} s "
        f"(per call p50 {r['call_p50_ms']:.0f} ms, max {r['call_max_ms']:.0f} ms); all {r['runs']} runs "
        f"({r['steps']} steps) queryable after {r['queryable_s']:.2f} s (of which the exporter's own "
        f"encoding, timed apart: {r['client_encode_s']:.2f} s; gunicorn's CPU {r['server_cpu_s']:.2f} s, its "
        f"peak resident memory {r['server_peak_mb']} MB)\n"
        f"  {'':10} baseline: the same {r['rows']} rows inserted straight in one transaction "
        f"{r['baseline_s']:.2f} s; receiver / baseline = {r['ratio']:.1f}×\n"
        f"  {'':10} floor: decoding the payloads {r['floor_decode_s']:.3f} s + one sqlite3 executemany "
        f"of the span and step rows {r['floor_insert_s']:.3f} s = {r['floor_s']:.2f} s; "
        f"queryable / floor = {r['floor_ratio']:.1f}×; runs diagnosed when queryable: {r['diagnosed']}",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
