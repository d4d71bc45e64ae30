"""Benchmark (not a test): what diagnosing the shared 500-run workload costs against receiving it, in-process.

The workload (../shared/bench, as bench_otlp.py builds it: 8,302 spans in 17 OTLP payloads) is
posted to /v1/traces with Django's test client into a fresh SQLite database with each run's
findings off (``RLT_DIAGNOSE`` off), then ``tracer.diagnosis.runs_diagnose`` diagnoses the 500 runs
in batches of 30 (about what one request's runs are). It prints both CPU times (this process's: the
database runs in it) and their ratio, the findings written, and a digest of every finding and rollup
row (dates left out), equal between two trees that diagnose alike. ``--profile`` prints cProfile's
top functions of the diagnosis, by CPU time.

    .venv/bin/python tests/bench/bench_diagnosis.py [--profile]

Run it from two trees one after the other (``cd ../main && ../wt/.venv/bin/python
../wt/tests/bench/bench_diagnosis.py``) to compare a change before and after under the same load.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import hashlib
import os
import pstats
import secrets
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true")
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
    sender = get_user_model().objects.create_user(username="bench-sender")
    sender.user_permissions.add(Permission.objects.get(codename="add_run", content_type__app_label="tracer"))
    _, secret = token_create(user=sender, name="bench")
    otel_spans, workload = shared_bench("otel_spans"), shared_bench("workload")
    runs = list(workload.generate(RUNS, SEED))
    shift = otel_spans.rebase_shift_ms(runs, int(time.time() * 1000))
    resource = Resource({"service.name": "peers-bench"})
    spans = [s for run in runs for s in otel_spans.run_to_spans(run, resource, shift)]
    payloads = [encode_spans(spans[k : k + BATCH]).SerializeToString() for k in range(0, len(spans), BATCH)]
    client = Client()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}

    def post(payload: bytes) -> None:
        response = client.post("/v1/traces", payload, content_type="application/x-protobuf", **headers)
        assert response.status_code == 200, response.content

    warm = otel_spans.run_to_spans(dict(runs[0], trace_id="f" * 32), resource, shift)
    post(encode_spans(warm).SerializeToString())  # imports and first queries, not counted
    Run.objects.filter(external_id="f" * 32).delete()

    settings.RLT_DIAGNOSE = False
    t = time.process_time()
    for payload in payloads:
        post(payload)
    receive = time.process_time() - t

    ids = list(Run.objects.order_by("id").values_list("id", flat=True))
    profile = cProfile.Profile(time.process_time) if args.profile else None
    t = time.process_time()
    if profile:
        profile.enable()
    for start in range(0, len(ids), 30):
        diagnosis.runs_diagnose(run_ids=ids[start : start + 30])
    if profile:
        profile.disable()
    diagnose = time.process_time() - t

    def kept(row) -> str:
        return repr(tuple(v for v in row if not isinstance(v, datetime.date | datetime.datetime)))

    dump = [
        sorted(kept(r) for r in model.objects.values_list(*[f.attname for f in model._meta.concrete_fields][1:]))
        for model in (Finding, ToolDay, FindingDay, TemplateDay, PatternDay, MessageTemplate)
    ]
    dump.append(sorted(Run.objects.values_list("external_id", "finding_kinds", "rule_set", "rolled_up")))
    digest = hashlib.sha1(repr(dump).encode()).hexdigest()[:12]
    print(
        f"{Path.cwd()}: receiving {len(ids)} runs {receive:.2f} s CPU, diagnosing them {diagnose:.2f} s CPU "
        f"({100 * diagnose / receive:.0f} % of receiving); {Finding.objects.count()} findings, digest {digest}; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    if profile:
        pstats.Stats(profile).sort_stats("tottime").print_stats(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
