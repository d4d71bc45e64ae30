"""Benchmark (not a test): the pages over HTTP under the web server ``config/gunicorn.py`` sets up
(gunicorn's asyncio worker reading requests, Django in ``config/asgi.py``'s threads) against the one
it had before (gunicorn's thread workers over ``config.wsgi``: ``serving.GTHREAD``), interleaved.

It builds one database (``--runs`` runs, as bench_list builds them, and one run of 200 steps), starts
both servers on it, one process each as ``./rlt up`` runs them, logs in to each over HTTP, then for
``--rounds`` rounds asks each page ``--requests`` times of each server over one kept-alive connection
(a person's browser), request by request in alternating order, so both meet the same load, and,
once per round, the runs list from 8 clients at once, the servers' order alternating.
It prints each page's p50 and p95 per server with the ratio, and the 8 clients' requests per second.

    .venv/bin/python tests/bench/bench_serving.py [--backend sqlite|postgres] [--runs 10000] [--rounds 5]
        [--requests 40] [--load SECONDS]

``--load SECONDS`` measures instead the current server alone under load: 8 clients, each asking the
pages of the dashboard in turn (list, search, a run, compare, the matrix, the stop queue, a live
poll) for that long, and prints requests per second, each page's p50 and p95, and the errors (any
answer of 500 or more, or no answer).

``--backend postgres`` uses RLT_BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/rlt_bench_serving),
dropped and created afresh, and dropped at the end.
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlencode

BASE_DIR = Path(__file__).resolve().parents[2]
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))

from tests.bench import serving, sizes  # noqa: E402

PG_URL = os.environ.get("RLT_BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/rlt_bench_serving")
PASSWORD = "bench-serving-password"
CLIENTS = 8


class Browser:
    """One kept-alive connection with a logged-in session."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.cookies: dict[str, str] = {}
        self.get("/login/")
        body = urlencode({"username": "bench", "password": PASSWORD, "csrfmiddlewaretoken": self.cookies["csrftoken"]})
        status = self.request("POST", "/login/", body, {"Content-Type": "application/x-www-form-urlencoded"})
        assert status == 302 and "sessionid" in self.cookies, f"login failed: {status}"

    def request(self, method: str, path: str, body: str | None = None, headers: dict | None = None) -> int:
        headers = dict(headers or {}, Host="127.0.0.1")
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        try:
            self.conn.request(method, path, body=body, headers=headers)
            response = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionError):  # the server closed it after its keep-alive
            self.conn.close()
            self.conn.request(method, path, body=body, headers=headers)
            response = self.conn.getresponse()
        response.read()
        for value in response.headers.get_all("Set-Cookie") or []:
            for name, morsel in SimpleCookie(value).items():
                self.cookies[name] = morsel.value
        return response.status

    def get(self, path: str, headers: dict | None = None) -> int:
        return self.request("GET", path, headers=headers)


def cases() -> list[tuple[str, str, dict]]:
    from django.templatetags.static import static

    from tracer.models import Run

    long_run = Run.objects.order_by("-step_count").first()
    some = Run.objects.filter(parent__isnull=True).order_by("id")[100]
    return [
        ("runs list, latest 50", "/", {}),
        ("runs list, search 'laptop'", "/?q=laptop", {}),
        ("runs list rows (htmx)", "/", {"HX-Request": "true", "HX-Target": "run-rows"}),
        ("a run's page", f"/runs/{some.pk}/", {}),
        (f"a run of {long_run.step_count} steps", f"/runs/{long_run.pk}/", {}),
        ("stop queue", "/stops/", {}),
        ("static css", static("css/app.css"), {}),
    ]


def timed(browser: Browser, path: str, headers: dict, n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        status = browser.get(path, headers)
        out.append(time.perf_counter() - started)
        assert status == 200, f"{path}: {status}"
    return out


def concurrent_rate(port: int, seconds: float = 4.0) -> float:
    """Requests per second of the runs list from ``CLIENTS`` browsers at once."""
    browsers = [Browser(port) for _ in range(CLIENTS)]
    done = [0] * CLIENTS
    stop = time.perf_counter() + seconds

    def loop(k: int) -> None:
        while time.perf_counter() < stop:
            browsers[k].get("/")
            done[k] += 1

    threads = [threading.Thread(target=loop, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--load", type=float, default=0.0)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="rlt-bench-serving-")
    env = serving.backend_env(tmp, args.backend, PG_URL)
    env.pop("DJANGO_ALLOWED_HOSTS", None)
    os.environ.clear()
    os.environ.update(env)
    sizes.logged_in_client()  # Django set up, migrated, static files collected
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from tests.bench.bench_pages import Generator
    from tracer.models import Run, Step

    rng = random.Random(20240601)
    gen = sizes.runs_only(rng=rng, steps_per_run=8)
    sizes.runs_build(gen=gen, rng=rng, start=0, stop=args.runs, total=args.runs, running=False)
    long_run, rows = Generator(rng=rng, steps_per_run=200).run_with_steps(
        number=args.runs + 1,
        scenario="refund-too-old",
        policy="starter",
        created=timezone.now(),
        active=False,
        steps=200,
    )
    long_run.save()
    for row in rows:
        row.run = long_run
    Step.objects.bulk_create(rows)
    assert Run.objects.count() == args.runs + 1
    get_user_model().objects.filter(username="bench").update(is_superuser=True, is_staff=True)
    user = get_user_model().objects.get(username="bench")
    user.set_password(PASSWORD)
    user.save()
    the_cases = cases()
    if args.load:
        return load(args, the_cases)
    servers = {"before (gthread)": serving.GTHREAD, "now (asyncio + threads)": ()}
    times: dict[str, dict[str, list[float]]] = {name: {c[0]: [] for c in the_cases} for name in servers}
    rates: dict[str, list[float]] = {name: [] for name in servers}
    with ExitStack() as stack:
        ports = {name: stack.enter_context(serving.gunicorn_serving(*options)) for name, options in servers.items()}
        browsers = {name: Browser(port) for name, port in ports.items()}
        for name in servers:  # warm: every page once
            for _, path, headers in the_cases:
                timed(browsers[name], path, headers, 3)
        for round_ in range(args.rounds):
            for label, path, headers in the_cases:
                for i in range(args.requests):  # request by request, the order alternating: the same load for both
                    for name in list(servers)[:: 1 if (i + round_) % 2 == 0 else -1]:
                        times[name][label] += timed(browsers[name], path, headers, 1)
            for name in list(servers)[:: 1 if round_ % 2 == 0 else -1]:
                rates[name].append(concurrent_rate(ports[name]))
            print(f"  round {round_ + 1} of {args.rounds} done", file=sys.stderr)
    before, now = servers
    print(
        f"\n{args.backend}, {args.runs:,} runs, {args.rounds} rounds × {args.requests} requests per page per server, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(f"| page | {before} p50 / p95 ms | {now} p50 / p95 ms | p50 ratio |")
    print("| --- | --- | --- | --- |")
    for label, _, _ in the_cases:
        a, b = times[before][label], times[now][label]

        def fig(values: list[float]) -> str:
            ordered = sorted(values)
            return f"{statistics.median(ordered) * 1000:.1f} / {ordered[int(len(ordered) * 0.95)] * 1000:.1f}"

        print(f"| {label} | {fig(a)} | {fig(b)} | {statistics.median(b) / statistics.median(a):.2f} |")
    rate = {name: statistics.median(r) for name, r in rates.items()}
    print(
        f"| runs list, {CLIENTS} clients at once (req/s, median of rounds) | {rate[before]:.0f} | {rate[now]:.0f} | "
        f"{rate[now] / rate[before]:.2f} |"
    )
    if args.backend == "postgres":
        serving.pg_drop(PG_URL)
    return 0


def load(args, the_cases: list[tuple[str, str, dict]]) -> int:
    from tracer.models import Run

    a, b = Run.objects.filter(parent__isnull=True).order_by("id").values_list("pk", flat=True)[10:12]
    pages = [c for c in the_cases if not c[1].startswith("/static")] + [
        ("compare two runs", f"/compare/?a={a}&b={b}", {}),
        ("matrix (/policies/)", "/policies/", {}),
        ("live poll of the list", "/runs/live/", {"HX-Request": "true"}),
    ]
    took: dict[str, list[float]] = {label: [] for label, _, _ in pages}
    errors: list[str] = []
    with serving.gunicorn_serving() as port:
        browsers = [Browser(port) for _ in range(CLIENTS)]
        stop = time.perf_counter() + args.load

        def client(k: int) -> None:
            i = k
            while time.perf_counter() < stop:
                label, path, headers = pages[i % len(pages)]
                i += 1
                started = time.perf_counter()
                try:
                    status = browsers[k].get(path, headers)
                except OSError as exc:
                    status = f"no answer ({exc})"
                took[label].append(time.perf_counter() - started)
                if not isinstance(status, int) or status >= 500:
                    errors.append(f"{label}: {status}")

        threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    count = sum(len(v) for v in took.values())
    every = sorted(t for v in took.values() for t in v)
    print(
        f"\n{args.backend}, {Run.objects.count():,} runs, {CLIENTS} clients for {args.load:.0f} s, one web process "
        f"(./rlt up's), load {os.getloadavg()[0]:.1f}: {count} requests, {count / args.load:.1f} req/s, "
        f"p50 {statistics.median(every) * 1000:.0f} ms, p95 {every[int(len(every) * 0.95)] * 1000:.0f} ms, "
        f"{len(errors)} errors {errors[:5]}"
    )
    print("| page | requests | p50 ms | p95 ms |")
    print("| --- | --- | --- | --- |")
    for label, values in took.items():
        ordered = sorted(values)
        if ordered:
            print(
                f"| {label} | {len(ordered)} | {statistics.median(ordered) * 1000:.0f} | "
                f"{ordered[int(len(ordered) * 0.95)] * 1000:.0f} |"
            )
    if args.backend == "postgres":
        serving.pg_drop(PG_URL)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
