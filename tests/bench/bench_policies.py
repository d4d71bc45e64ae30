"""Benchmark (not a test): the Policies page over runs from outside that name thousands of scenarios.

Runs from OTLP name their own scenario and policy keys (a service's span names): ``--runs`` finished
runs over ``--scenarios`` distinct scenarios and two policies are inserted into a fresh SQLite
database, then ``/policies/`` is asked ``--requests`` times in-process (logged in, DEBUG off, after
two warm-ups) and its size, p50 wall time and median CPU time of this process are printed.

    .venv/bin/python tests/bench/bench_policies.py [--runs 5000] [--scenarios 2500] [--requests 7]

Run it from two trees (``cd ../main && ../wt/.venv/bin/python ../wt/tests/bench/bench_policies.py``)
to compare a change before and after under the same load.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--scenarios", type=int, default=2500)
    parser.add_argument("--requests", type=int, default=7)
    args = parser.parse_args()
    tree = Path.cwd()
    sys.path.insert(0, str(tree))
    os.environ.update(
        RLT_VAR_DIR=tempfile.mkdtemp(prefix="rlt-bench-policies-"),
        DJANGO_SETTINGS_MODULE="config.settings",
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="testserver",
    )
    os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from tracer.models import Run

    call_command("migrate", verbosity=0)
    call_command("collectstatic", interactive=False, verbosity=0)
    Run.objects.bulk_create(
        [
            Run(
                scenario=f"otlp-scenario-{k % args.scenarios:05d}",
                policy_name=("service-a", "service-b")[k % 2],
                status=Run.Status.FINISHED,
                source=Run.Source.OTLP,
                verdict="",
            )
            for k in range(args.runs)
        ],
        batch_size=500,
    )
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("bench", "bench@example.com", "bench"))
    sizes, cpu, wall = [], [], []
    for _ in range(args.requests + 2):
        t, w = time.process_time(), time.perf_counter()
        response = client.get("/policies/")
        cpu.append(time.process_time() - t)
        wall.append(time.perf_counter() - w)
        assert response.status_code == 200, response.status_code
        sizes.append(len(response.content))
    print(
        f"{tree}: /policies/ over {args.runs:,} runs, {args.scenarios:,} scenarios: {sizes[-1]:,} bytes, "
        f"p50 {1000 * statistics.median(wall[2:]):.1f} ms, CPU {1000 * statistics.median(cpu[2:]):.1f} ms; "
        f"load {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
