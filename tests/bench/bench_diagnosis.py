"""Benchmark (not a test): what diagnosing the shared 500-run workload costs against receiving it, in-process.

The workload (../shared/bench, as bench_otlp.py builds it: 8,302 spans in 17 OTLP payloads) is
posted to /v1/traces with Django's test client into a fresh SQLite database, ``--rounds`` times with
each run's findings written as it ends and as many times with them off (``RLT_DIAGNOSE`` off),
interleaved, the database emptied before each. It prints, as this process's CPU (the database runs
in it), the medians of receiving without diagnosis and with it, and the CPU spent inside
``tracer.diagnosis.runs_diagnose`` while receiving (the findings' cost) with its ratio to receiving
without them. Then the same 500 runs are diagnosed again as ``findings --recompute`` does, reading
each back from the database (batches of 30, about one request's runs; timed too). For both it prints
a digest of every finding and rollup row (dates left out), equal between two trees that diagnose
alike (the two differ from each other: at ingest a trace split over two requests is diagnosed once
and then again, which leaves rollup rows at zero, and a template's example is the first run of its
request that sent it). ``--profile`` prints cProfile's top functions of the
diagnosis while receiving, by CPU time (``--sort cumulative`` to sort otherwise).

    .venv/bin/python tests/bench/bench_diagnosis.py [--rounds 3] [--profile [--sort cumulative]]

The tree measured is the one it is run from (``cd ../main && .venv/bin/python
../wt/tests/bench/bench_diagnosis.py`` measures main with this file) to compare a change before and
after under the same load.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import hashlib
import os
import pstats
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--sort", default="tottime", help="the profile's order: tottime, cumulative, …")
    args = parser.parse_args()
    sys.path.insert(0, str(Path.cwd()))
    sys.path.insert(1, str(BENCH.parents[1]))
    os.environ.update(
        RLT_VAR_DIR=tempfile.mkdtemp(prefix="rlt-bench-diagnosis-"),
        DJANGO_SETTINGS_MODULE="config.settings",
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="testserver",
    )
    os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from django.core.management import call_command
    from django.test import Client
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource

    from tests.bench.bench_otlp import BATCH, RUNS, SEED, shared_bench
    from tracer import diagnosis
    from tracer.models import Finding, FindingDay, MessageTemplate, PatternDay, Run, TemplateDay, ToolDay
    from tracer.tokens import token_create

    call_command("migrate", verbosity=0)
    otel_spans, workload = shared_bench("otel_spans"), shared_bench("workload")
    runs = list(workload.generate(RUNS, SEED))
    shift = otel_spans.rebase_shift_ms(runs, int(time.time() * 1000))
    resource = Resource({"service.name": "peers-bench"})
    spans = [s for run in runs for s in otel_spans.run_to_spans(run, resource, shift)]
    payloads = [encode_spans(spans[k : k + BATCH]).SerializeToString() for k in range(0, len(spans), BATCH)]
    warm = encode_spans(otel_spans.run_to_spans(dict(runs[0], trace_id="f" * 32), resource, shift))
    client = Client()

    # the CPU spent diagnosing, wherever the recorder calls it
    spent = [0.0]
    profiles = [cProfile.Profile(time.process_time) if args.profile else None]
    diagnose = diagnosis.runs_diagnose

    def timed_diagnose(**kwargs):
        t = time.process_time()
        if profiles[0]:
            profiles[0].enable()
        try:
            return diagnose(**kwargs)
        finally:
            if profiles[0]:
                profiles[0].disable()
            spent[0] += time.process_time() - t

    diagnosis.runs_diagnose = timed_diagnose

    def fresh_database() -> dict[str, str]:
        call_command("flush", verbosity=0, interactive=False)
        sender = get_user_model().objects.create_user(username="bench-sender")
        sender.user_permissions.add(Permission.objects.get(codename="add_run", content_type__app_label="tracer"))
        _, secret = token_create(user=sender, name="bench")
        return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}

    def post(payload: bytes, headers: dict[str, str]) -> None:
        response = client.post("/v1/traces", payload, content_type="application/x-protobuf", **headers)
        assert response.status_code == 200, response.content

    def receive(*, diagnose: bool) -> tuple[float, float]:
        headers = fresh_database()
        settings.RLT_DIAGNOSE = diagnose
        post(warm.SerializeToString(), headers)  # imports and first queries, not counted
        Run.objects.filter(external_id="f" * 32).delete()
        rollups_empty()
        spent[0] = 0.0
        t = time.process_time()
        for payload in payloads:
            post(payload, headers)
        return time.process_time() - t, spent[0]

    def rollups_empty() -> None:
        for model in (Finding, ToolDay, FindingDay, TemplateDay, PatternDay, MessageTemplate):
            model.objects.all().delete()

    def digest() -> str:
        def kept(row) -> str:
            return repr(tuple(v for v in row if not isinstance(v, datetime.date | datetime.datetime)))

        dump = [
            sorted(kept(r) for r in model.objects.values_list(*[f.attname for f in model._meta.concrete_fields][1:]))
            for model in (Finding, ToolDay, FindingDay, TemplateDay, PatternDay, MessageTemplate)
        ]
        dump.append(sorted(Run.objects.values_list("external_id", "finding_kinds", "rule_set", "rolled_up")))
        return hashlib.sha1(repr(dump).encode()).hexdigest()[:12]

    off, on, diagnosing = [], [], []
    for _ in range(args.rounds):
        off.append(receive(diagnose=False)[0])
        cpu, inside = receive(diagnose=True)
        on.append(cpu)
        diagnosing.append(inside)
    at_ingest = digest()
    findings = Finding.objects.count()

    # the same runs read back and diagnosed again, as a recompute does
    profile, profiles[0] = profiles[0], None
    diagnosis.rollups_clear()
    ids = list(Run.objects.order_by("id").values_list("id", flat=True))
    t = time.process_time()
    for start in range(0, len(ids), 30):
        diagnose(run_ids=ids[start : start + 30], fresh=True)
    read_back = time.process_time() - t
    again = digest()

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} s ({', '.join(f'{v:.2f}' for v in values)})"

    base = statistics.median(off)
    print(f"{Path.cwd()}, {len(ids)} runs, {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
    print(f"  receiving without findings: {ms(off)} CPU")
    print(f"  receiving with findings:    {ms(on)} CPU")
    print(
        f"  of which diagnosis:         {ms(diagnosing)} CPU, "
        f"{100 * statistics.median(diagnosing) / base:.1f} % of receiving without findings (aim ≤ 10 %)"
    )
    print(f"  diagnosing them read back:  {read_back:.2f} s CPU ({100 * read_back / base:.1f} %)")
    print(f"  {findings} findings; digest at ingest {at_ingest}, read back {again}")
    if profile:
        pstats.Stats(profile).sort_stats(args.sort).print_stats(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
