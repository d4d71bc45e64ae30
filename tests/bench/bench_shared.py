"""Benchmark (not a test): the shared workload's "one trace" and "list latest 50" over HTTP, as the peers
were measured (../shared/bench/README.md).

It imports the shared 500-run workload (``bench_import``'s run documents) into a fresh SQLite
database, serves it with gunicorn as ``./rlt up`` does (``serving.gunicorn_serving``: DEBUG off,
``WEB_CONCURRENCY`` processes, default 2), logs in through the login form, and on one keep-alive
connection asks (gzip accepted) the pages of 50 runs sampled evenly, 5 warm-ups then 3 rounds, and the
runs list 5 + 3 × 50 times. It prints p50 and p95 of each, the resident memory of gunicorn's
processes (psutil) and the load average. The baseline, same run: the favicon, a static file whitenoise
serves without Django's views.

    .venv/bin/python tests/bench/bench_shared.py
    WEB_CONCURRENCY=1 .venv/bin/python tests/bench/bench_shared.py     # as ./rlt up serves
"""

from __future__ import annotations

import http.client
import json
import os
import re
import secrets
import shutil
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))

PASSWORD = "a-long-bench-password"


def p50_p95(times: list[float]) -> tuple[float, float]:
    return statistics.median(times), sorted(times)[max(0, round(0.95 * len(times)) - 1)]


def main() -> int:
    tmp = tempfile.mkdtemp(prefix="rlt-bench-shared-")
    try:
        return measure(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def measure(tmp: str) -> int:
    os.environ.update(RLT_VAR_DIR=tmp, DJANGO_SETTINGS_MODULE="config.settings", DJANGO_DEBUG="0")
    os.environ.update(DJANGO_SECRET_KEY=secrets.token_urlsafe(50), DJANGO_ALLOWED_HOSTS="127.0.0.1")
    os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    import psutil
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.templatetags.static import static

    from tests.bench import bench_import
    from tests.bench.serving import gunicorn_serving
    from tracer.intake import files
    from tracer.models import Run

    call_command("migrate", verbosity=0)
    call_command("collectstatic", verbosity=0, interactive=False)
    documents = [bench_import.as_document(run) for run in bench_import.workload()]
    t0 = time.perf_counter()
    files.file_import(name="workload.jsonl", data="\n".join(json.dumps(d) for d in documents).encode())
    print(f"imported {len(documents)} runs in {time.perf_counter() - t0:.1f} s (SQLite, in-process)")
    get_user_model().objects.create_superuser("bench", password=PASSWORD)
    ids = list(Run.objects.order_by("id").values_list("id", flat=True))
    sample = ids[:: max(1, len(ids) // 50)][:50]
    favicon = static("favicon.svg")
    with gunicorn_serving() as port:
        conn = http.client.HTTPConnection("127.0.0.1", port)
        conn.request("GET", "/login/")
        answer = conn.getresponse()
        csrf = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', answer.read()).group(1).decode()
        cookies = [answer.getheader("Set-Cookie").split(";")[0]]
        form = urllib.parse.urlencode({"username": "bench", "password": PASSWORD, "csrfmiddlewaretoken": csrf})
        headers = {"Cookie": cookies[0], "Content-Type": "application/x-www-form-urlencoded"}
        conn.request("POST", "/login/", body=form, headers={**headers, "Referer": f"http://127.0.0.1:{port}/login/"})
        answer = conn.getresponse()
        answer.read()
        cookies += [value.split(";")[0] for name, value in answer.getheaders() if name.lower() == "set-cookie"]
        headers = {"Cookie": "; ".join(cookies), "Accept-Encoding": "gzip"}

        def timed(urls: list[str], *, warmup: int = 5, rounds: int = 3) -> tuple[float, float]:
            times = []
            for i, url in enumerate(urls[:warmup] + urls * rounds):
                t = time.perf_counter()
                conn.request("GET", url, headers=headers)
                answer = conn.getresponse()
                answer.read()
                if answer.status != 200:
                    raise SystemExit(f"{url}: HTTP {answer.status}")
                if i >= warmup:
                    times.append((time.perf_counter() - t) * 1000)
            return p50_p95(times)

        one = timed([f"/runs/{pk}/" for pk in sample])
        listed = timed(["/"] * 50)
        base = timed([favicon] * 50)
        rss = 0
        for proc in psutil.process_iter(["cmdline"]):
            line = " ".join(proc.info["cmdline"] or [])
            if "gunicorn" in line and f"127.0.0.1:{port}" in line:
                rss += proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))
    processes = os.environ.get("WEB_CONCURRENCY", "2")
    print(f"gunicorn, {processes} process(es), SQLite, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'figure':<34} {'p50 ms':>8} {'p95 ms':>8} {'× baseline':>11}")
    for label, (p50, p95) in (("one trace (its page), 50 runs", one), ("list latest 50 (the runs page)", listed)):
        print(f"{label:<34} {p50:8.1f} {p95:8.1f} {p50 / base[0]:11.1f}")
    print(f"{'baseline: a static file':<34} {base[0]:8.1f} {base[1]:8.1f}")
    print(f"resident memory of gunicorn's processes: {rss / 2**20:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
