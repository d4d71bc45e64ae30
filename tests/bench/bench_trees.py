"""Benchmark (not a test): the same pages timed with two trees of the code on one kept database, interleaved,
so a change is printed before and after under the same load.

``bench_pages.py --runs 100000 --keep`` leaves a database (an SQLite folder, or a PostgreSQL database
with ``--database-url``); make a copy of it for each tree (the tree after a change may migrate it:
``cp -r``, or ``CREATE DATABASE copy TEMPLATE kept``), and give each tree its copy. For ``--rounds``
rounds this runs, one tree then the other, a child process of each tree's code (``--child``), which
migrates its copy, logs in, asks each page ``--requests`` times after two warm-up requests, and
reports p50 wall time, the median CPU time of the process (Django, and SQLite, which runs in it; not
PostgreSQL's server), queries and bytes. It prints each page's medians over the rounds, before and
after, with the ratio, and the load average of each round.

    .venv/bin/python tests/bench/bench_trees.py --before ../main --before-db /tmp/kept-a \\
        --after . --after-db /tmp/kept-b [--rounds 2] [--requests 7]
    .venv/bin/python tests/bench/bench_trees.py --before ../main \\
        --before-db postgres://postgres@127.0.0.1:5432/kept_a --after . \\
        --after-db postgres://postgres@127.0.0.1:5432/kept_b

The pages are bench_pages' (its dataset: a 15-step run, the 500-step run, refund-too-old under starter
and structured, "bench experiment"; the stop queue also as a member of the reviewer group, who gets a
review form on each card), the Tools and Findings pages too; ``--profile PAGE`` prints a
pyinstrument profile of one page in each child.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PAGES = (
    "runs list, latest 50",
    "run page, 15 steps",
    "run page, 500 steps",
    "compare starter / structured",
    "policies matrix",
    "stops queue",
    "stops queue, all",
    "stops queue, a reviewer",
    "experiment page",
    "tools page",
    "findings page",
)


def child(args) -> int:
    """In a tree's own code: time the pages on its database and print the figures as JSON."""
    tree = Path(args.child).resolve()
    sys.path.insert(0, str(tree))
    os.chdir(tree)
    if args.db.startswith("postgres"):
        os.environ["DATABASE_URL"] = args.db
        os.environ["RLT_VAR_DIR"] = tempfile.mkdtemp(prefix="rlt-bench-trees-")
    else:
        os.environ.pop("DATABASE_URL", None)
        os.environ["RLT_VAR_DIR"] = args.db
    os.environ.update(DJANGO_DEBUG="0", DJANGO_ALLOWED_HOSTS="testserver", DJANGO_SETTINGS_MODULE="config.settings")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-trees-" + "x" * 50)
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from tracer.access import REVIEWER_GROUP
    from tracer.models import Experiment, Run

    t0 = time.perf_counter()
    call_command("migrate", verbosity=0, interactive=False)
    migrated = time.perf_counter() - t0
    call_command("collectstatic", verbosity=0, interactive=False)
    user, _ = get_user_model().objects.get_or_create(username="bench")
    client = Client()
    client.force_login(user)
    # The stop queue as a reviewer sees it: each card with its review form.
    rita, _ = get_user_model().objects.get_or_create(username="bench-reviewer")
    rita.groups.add(Group.objects.get(name=REVIEWER_GROUP))
    reviewer = Client()
    reviewer.force_login(rita)
    finished = Run.objects.filter(status=Run.Status.FINISHED, parent__isnull=True).exclude(scenario="")
    run = finished.filter(step_count=15, stop_reason=Run.StopReason.FINAL_ANSWER).order_by("-id").first()
    long = Run.objects.filter(step_count=500).order_by("-id").first()
    a = finished.filter(scenario="refund-too-old", policy_name="starter").order_by("-id").first()
    b = finished.filter(scenario="refund-too-old", policy_name="structured").order_by("-id").first()
    experiment = Experiment.objects.get(name="bench experiment")
    urls = dict(
        zip(
            PAGES,
            (
                reverse("tracer:runs"),
                reverse("tracer:run", args=[run.pk]),
                reverse("tracer:run", args=[long.pk]),
                f"{reverse('tracer:compare')}?a={a.pk}&b={b.pk}",
                reverse("tracer:policies"),
                reverse("tracer:stops"),
                reverse("tracer:stops") + "?state=all",
                reverse("tracer:stops"),
                reverse("tracer:experiment", args=[experiment.pk]),
                reverse("tracer:tools"),
                reverse("tracer:findings"),
            ),
            strict=True,
        )
    )
    out = {"migrate_s": migrated, "pages": {}}
    for label, url in urls.items():
        asker = reviewer if label == "stops queue, a reviewer" else client
        for _ in range(2):
            if asker.get(url).status_code != 200:
                raise SystemExit(f"{url}: not 200")
        wall, cpu = [], []
        for _ in range(args.requests):
            t, c = time.perf_counter(), time.process_time()
            asker.get(url)
            wall.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
        with CaptureQueriesContext(connection) as ctx:
            response = asker.get(url)
        out["pages"][label] = {
            "p50": statistics.median(wall),
            "cpu": statistics.median(cpu),
            "queries": len(ctx.captured_queries),
            "kb": len(response.content) / 1024,
        }
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=0.0005)
        with profiler:
            for _ in range(args.requests):
                client.get(urls[args.profile])
        print(profiler.output_text(unicode=True, color=False, show_all=False), file=sys.stderr)
    print(json.dumps(out))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="the tree before the change (a worktree)")
    parser.add_argument("--after", help="the tree after it")
    parser.add_argument("--before-db", help="the before tree's copy of the kept database")
    parser.add_argument("--after-db", help="the after tree's copy")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=7)
    parser.add_argument("--profile", choices=PAGES, help="print a profile of this page in each child")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    if not all((args.before, args.after, args.before_db, args.after_db)):
        parser.error("--before, --after, --before-db and --after-db are all needed")
    if os.path.realpath(args.before_db) == os.path.realpath(args.after_db):
        parser.error("give each tree its own copy of the database: the tree after a change may migrate it")
    figures: dict[str, list[dict]] = {"before": [], "after": []}
    loads = []
    for _ in range(args.rounds):
        loads.append(os.getloadavg()[0])
        for side, tree, db in (("before", args.before, args.before_db), ("after", args.after, args.after_db)):
            argv = [sys.executable, __file__, "--child", tree, "--db", db, "--requests", str(args.requests)]
            if args.profile:
                argv += ["--profile", args.profile]
            done = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=True)
            figures[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"{args.rounds} rounds, {args.requests} requests a page; load average {', '.join(f'{x:.1f}' for x in loads)}")
    head = "before p50 ms / CPU ms", "after p50 ms / CPU ms", "CPU after / before", "queries", "KB"
    print(f"| page | {' | '.join(head)} |")
    print("| --- |" + " --- |" * len(head))
    for page in PAGES:
        med = {
            side: {k: statistics.median(r["pages"][page][k] for r in rounds) for k in ("p50", "cpu")}
            for side, rounds in figures.items()
        }
        after = figures["after"][-1]["pages"][page]
        queries = f"{figures['before'][-1]['pages'][page]['queries']} → {after['queries']}"
        ratio = med["after"]["cpu"] / med["before"]["cpu"]
        print(
            f"| {page} | {med['before']['p50']:.1f} / {med['before']['cpu']:.1f} | "
            f"{med['after']['p50']:.1f} / {med['after']['cpu']:.1f} | {ratio:.2f} | {queries} | {after['kb']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
