"""Benchmark (not a test): the shared workload's "one trace" and "list latest 50" over HTTP, as the peers
were measured (../shared/bench/README.md).

It imports the shared 500-run workload (``bench_import``'s run documents) into a fresh SQLite
database (with ``--runs N``, then bench_list's runs up to N runs in all, older than the workload's),
serves it with gunicorn as ``./rlt up`` does (``serving.gunicorn_serving``: DEBUG off,
``WEB_CONCURRENCY`` processes, default 2), logs in through the login form, and on one keep-alive
connection asks (gzip accepted) the pages of 50 of the workload's runs sampled evenly, 5 warm-ups then
``--rounds`` rounds, and the runs list 5 + ``--rounds`` × 50 times. It prints p50 and p95 of each,
gunicorn's CPU time per request (its processes' user and system time over the requests of a figure,
psutil), the resident memory of gunicorn's processes and the load average. The baseline, same run:
the favicon, a static file whitenoise serves without Django's views.

``--before DIR`` serves DIR's checkout (the code before a change) as well, on the same database: each
request is asked of both servers, one right after the other (which first alternates), so both meet
the same load, and each figure is printed for both with the ratio.

    .venv/bin/python tests/bench/bench_shared.py
    WEB_CONCURRENCY=1 .venv/bin/python tests/bench/bench_shared.py     # as ./rlt up serves
    WEB_CONCURRENCY=1 .venv/bin/python tests/bench/bench_shared.py --runs 100000 --before ../before
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import random
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
SEED = 20261202


def p50_p95(times: list[float]) -> tuple[float, float]:
    return statistics.median(times), sorted(times)[max(0, round(0.95 * len(times)) - 1)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500, help="runs in the database (the workload's 500 and more)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, help="a checkout of the code before, served beside this one")
    args = parser.parse_args()
    if args.runs < 500 or args.rounds < 1:
        parser.error("--runs of 500 or more, --rounds of 1 or more")
    if args.before and not (args.before / "config" / "gunicorn.py").exists():
        parser.error(f"--before: {args.before} is no checkout of this project (no config/gunicorn.py)")
    tmp = tempfile.mkdtemp(prefix="rlt-bench-shared-")
    try:
        return measure(tmp, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class Server:
    """One gunicorn serving the database, and a kept-alive connection logged in to it."""

    def __init__(self, port: int) -> None:
        self.port = port
        conn = self.conn = http.client.HTTPConnection("127.0.0.1", port)
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
        self.headers = {"Cookie": "; ".join(cookies), "Accept-Encoding": "gzip"}

    def processes(self):
        import psutil

        for proc in psutil.process_iter(["cmdline"]):
            if "gunicorn" in " ".join(proc.info["cmdline"] or []) and f"127.0.0.1:{self.port}" in " ".join(
                proc.info["cmdline"] or []
            ):
                yield proc
                yield from proc.children(recursive=True)

    def cpu_s(self) -> float:
        return sum(t.user + t.system for t in (p.cpu_times() for p in set(self.processes())))

    def rss(self) -> int:
        return sum(p.memory_info().rss for p in set(self.processes()))

    def get_ms(self, url: str) -> float:
        t = time.perf_counter()
        try:
            self.conn.request("GET", url, headers=self.headers)
            answer = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionError):  # closed after its keep-alive: again
            self.conn.close()
            t = time.perf_counter()
            self.conn.request("GET", url, headers=self.headers)
            answer = self.conn.getresponse()
        answer.read()
        if answer.status != 200:
            raise SystemExit(f"{url}: HTTP {answer.status}")
        return (time.perf_counter() - t) * 1000


def timed(servers: list[Server], urls: list[str], *, warmup: int = 5, rounds: int = 3) -> list[tuple]:
    """Each of ``urls`` asked of every server in turn (the first alternating), after ``warmup``
    requests; per server p50, p95 and its CPU ms per timed request."""
    for url in urls[:warmup]:
        for server in servers:
            server.get_ms(url)
    times: list[list[float]] = [[] for _ in servers]
    cpu = [server.cpu_s() for server in servers]
    asked = urls * rounds
    for i, url in enumerate(asked):
        order = range(len(servers)) if i % 2 == 0 else reversed(range(len(servers)))
        for k in order:
            times[k].append(servers[k].get_ms(url))
    cpu = [(server.cpu_s() - before) * 1000 / len(asked) for server, before in zip(servers, cpu, strict=True)]
    return [(*p50_p95(t), c) for t, c in zip(times, cpu, strict=True)]


def measure(tmp: str, args) -> int:
    os.environ.update(RLT_VAR_DIR=tmp, DJANGO_SETTINGS_MODULE="config.settings", DJANGO_DEBUG="0")
    os.environ.update(DJANGO_SECRET_KEY=secrets.token_urlsafe(50), DJANGO_ALLOWED_HOSTS="127.0.0.1")
    os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.templatetags.static import static

    from tests.bench import bench_import, sizes
    from tests.bench.serving import gunicorn_serving
    from tracer.intake import files
    from tracer.models import Run

    call_command("migrate", verbosity=0)
    call_command("collectstatic", verbosity=0, interactive=False)
    if args.runs > 500:
        t0 = time.perf_counter()
        rng = random.Random(SEED)
        gen = sizes.runs_only(rng=rng, steps_per_run=12)
        sizes.runs_build(gen=gen, rng=rng, start=0, stop=args.runs - 500, total=args.runs, running=False)
        print(f"{args.runs - 500:,} of bench_list's runs in {time.perf_counter() - t0:.1f} s")
    documents = [bench_import.as_document(run) for run in bench_import.workload()]
    before = Run.objects.order_by("-id").values_list("id", flat=True).first() or 0
    t0 = time.perf_counter()
    files.file_import(name="workload.jsonl", data="\n".join(json.dumps(d) for d in documents).encode())
    print(f"imported {len(documents)} runs in {time.perf_counter() - t0:.1f} s (SQLite, in-process)")
    get_user_model().objects.create_superuser("bench", password=PASSWORD)
    ids = list(Run.objects.filter(id__gt=before).order_by("id").values_list("id", flat=True))  # the workload's
    sample = ids[:: max(1, len(ids) // 50)][:50]
    favicon = static("favicon.svg")
    trees = [("now", BASE_DIR)] + ([("before", args.before.resolve())] if args.before else [])
    with contextlib.ExitStack() as stack:
        servers = [Server(stack.enter_context(gunicorn_serving(tree=tree))) for _, tree in trees]
        one = timed(servers, [f"/runs/{pk}/" for pk in sample], rounds=args.rounds)
        listed = timed(servers, ["/"] * 50, rounds=args.rounds)
        base = timed(servers, [favicon] * 50, rounds=args.rounds)
        rss = [server.rss() for server in servers]
    processes = os.environ.get("WEB_CONCURRENCY", "2")
    print(
        f"gunicorn, {processes} process(es) each, SQLite, {Run.objects.count():,} runs, "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    for k, (name, tree) in enumerate(trees):
        print(f"\n{name}: {tree}")
        print(f"{'figure':<34} {'p50 ms':>8} {'p95 ms':>8} {'CPU ms':>8} {'× baseline':>11}")
        for label, figures in (("one trace (its page), 50 runs", one), ("list latest 50 (the runs page)", listed)):
            p50, p95, cpu = figures[k]
            print(f"{label:<34} {p50:8.1f} {p95:8.1f} {cpu:8.1f} {p50 / base[k][0]:11.1f}")
        print(f"{'baseline: a static file':<34} {base[k][0]:8.1f} {base[k][1]:8.1f} {base[k][2]:8.1f}")
        print(f"resident memory of gunicorn's processes: {rss[k] / 2**20:.0f} MB")
    if len(trees) == 2:
        print("\nnow ÷ before (p50, CPU):")
        for label, figures in (("one trace", one), ("list latest 50", listed)):
            (now_p50, _, now_cpu), (before_p50, _, before_cpu) = figures
            print(f"  {label}: {now_p50 / before_p50:.2f}, {now_cpu / before_cpu:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
