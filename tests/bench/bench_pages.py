"""Benchmark (not a test): how fast the dashboard's pages answer over a large recorded history.

It fills a fresh database with ``--runs`` runs of about ``--steps-per-run`` steps each (every
scenario under the four presets, mostly finished, a few running, stop reasons and verdicts mixed,
counters consistent with the steps, a few imported runs, an experiment, a tenth judged by the model
judge too and a tenth of those disagreeing with the rules, reviewed guard stops and disagreements,
one run of 500 steps), then logs in with Django's test client and requests each page ``--requests``
times after ``--warmup`` requests, and prints p50 / p95 latency and the SQL queries per request.
Under the table it prints EXPLAIN for the main (slowest) query of the slowest page, and of every
page slower than ``--slow-ms``, and whether that query uses an index.

    .venv/bin/python tests/bench/bench_pages.py [--runs 20000] [--steps-per-run 15] [--requests 50]
    .venv/bin/python tests/bench/bench_pages.py --runs 100000 \
        --database-url postgres://postgres@127.0.0.1:5432/rlt_bench

By default the database is a new SQLite file in a temporary RLT_VAR_DIR (the repository's ``var/``
is never touched). With ``--database-url`` (PostgreSQL) the named database is dropped and created
afresh, and dropped again at the end unless ``--keep`` (which also keeps the SQLite folder); the
names ``rlt``, ``postgres``, templates and anything starting with ``test`` are refused.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(BASE_DIR))

PROTECTED_DATABASES = {"rlt", "postgres", "template0", "template1"}
TOO_OLD = "Refunds close after 30 days. This order is 239 days old."
# Figures from ../shared/bench/README.md (measured on a 500-run workload, over OTLP, not this one).
PEERS = [
    ("list latest 50 traces", "Arize Phoenix 20.26 (SQLite)", 16, 18),
    ("list latest 50 traces", "MLflow 3.17 tracing (SQLite)", 20, 22),
    ("one trace's page", "Arize Phoenix 20.26 (SQLite)", 135, 179),
    ("one trace's page", "MLflow 3.17 tracing (SQLite)", 51, 97),
]

# What each scenario's tool calls look like: tool, input, failure category, retryable, message.
CALLS = {
    "currency-unsupported": (
        "convert_currency",
        {"amount": 100, "from_currency": "GBP", "to_currency": "USD"},
        "validation",
        False,
        "from_currency: 'GBP' is not supported; expected one of JPY, USD, EUR",
    ),
    "room-date-format": (
        "free_slots",
        {"date": "02/10/2026"},
        "validation",
        False,
        "date: expected YYYY-MM-DD, for example 2026-10-02",
    ),
    "room-book-permission": (
        "book_slot",
        {"date": "2026-10-02", "hour": 10},
        "permission",
        False,
        "Booking the meeting room needs a manager's approval; ask a manager to book it",
    ),
    "lookup-flaky": ("lookup", {"key": "answer"}, "transient", True, "upstream returned 503"),
    "lookup-flaky-exhausted": ("lookup", {"key": "answer"}, "transient", True, "upstream returned 503"),
    "refund-too-old": ("process_refund", {"order_id": "0871"}, "business", False, TOO_OLD),
    "refund-bad-id": (
        "process_refund",
        {"order_id": "0781"},
        "validation",
        False,
        "order_id: no order 0781 on this account; check the order number",
    ),
    "refund-other-customer": (
        "process_refund",
        {"order_id": "0912"},
        "permission",
        False,
        "Order 0912 isn't on your account",
    ),
    "refund-flaky-payment": (
        "process_refund",
        {"order_id": "0934"},
        "transient",
        True,
        "payment service timed out; the refund may have been applied",
    ),
    "lookup-empty": ("lookup_orders", {"customer": "c-118"}, "validation", False, "customer: unknown id"),
    "fatal-credentials": ("process_refund", {"order_id": "0934"}, "fatal", False, "payment credentials revoked"),
    "stuck-model": (
        "free_slots",
        {"date": "next Friday"},
        "validation",
        False,
        "date: expected YYYY-MM-DD, for example 2026-10-02",
    ),
    "coordinator-partial": ("run_subagent", {"task": "lookup order 1050"}, "transient", True, "lookup timed out"),
}
GENERIC_CALL = ("lookup_orders", {"customer": "c-200"}, "validation", False, "customer: unknown id")
WORDS = ("laptop", "stand", "charger", "keyboard", "hub", "monitor", "cable", "mouse", "dock", "headset")
PASS_RATE = {"structured": 0.85, "message": 0.7, "starter": 0.4, "fragile": 0.3}
# Runs judged by the model judge (Claude) too, and how often it disagrees with the rules: those are
# in the review queue beside the guard stops.
MODEL_JUDGED = 0.1
MODEL_DISAGREES = 0.1


def bar(done: int, total: int, label: str, started: float) -> None:
    width = 30
    filled = int(width * done / total) if total else width
    rate = done / max(time.perf_counter() - started, 1e-9)
    print(f"\r  {label} [{'#' * filled}{'-' * (width - filled)}] {done}/{total} ({rate:,.0f}/s)", end="", flush=True)


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def prepare_database(url: str | None, tmp: str) -> tuple[str, str | None]:
    """Point the settings at the benchmark's database; returns (description, PostgreSQL name to drop)."""
    os.environ["RLT_VAR_DIR"] = tmp  # SQLite file and broker folders live here, never in the repo's var/
    os.environ["RLT_QUEUE"] = f"rlt-bench-{os.getpid()}"
    if not url:
        os.environ.pop("DATABASE_URL", None)
        return f"SQLite, new file in {tmp}", None
    import dj_database_url

    cfg = dj_database_url.parse(url)
    if cfg["ENGINE"] != "django.db.backends.postgresql":
        raise SystemExit("--database-url: expected a postgres://user@host:port/name URL (SQLite is the default)")
    name = cfg["NAME"]
    if not name or name in PROTECTED_DATABASES or name.startswith("test"):
        raise SystemExit(f"--database-url: refusing database {name!r}; name a scratch database such as rlt_bench")
    with maintenance_connection(cfg) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = url
    return f"PostgreSQL, database {name} (created afresh)", name


def maintenance_connection(cfg: dict):
    """An autocommit connection to the server's ``postgres`` database, as the URL's user."""
    import psycopg

    params = {
        "dbname": "postgres",
        "user": cfg.get("USER"),
        "password": cfg.get("PASSWORD"),
        "host": cfg.get("HOST"),
        "port": cfg.get("PORT"),
    }
    return psycopg.connect(**{k: v for k, v in params.items() if v}, autocommit=True)


def drop_database(url: str, name: str) -> None:
    import dj_database_url

    with maintenance_connection(dj_database_url.parse(url)) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


def served_in_process(url: str | None, prefix: str, bench: Callable[[str], int], *, keep: bool = False) -> int:
    """``bench(description of the database)`` in this process on a fresh database (``url``, else SQLite
    in a new folder named ``prefix``…), the app set up as served; then the database dropped and the
    folder removed, unless ``keep``."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    where, pg_name = prepare_database(url, tmp)
    os.environ["DJANGO_DEBUG"] = "0"  # time the pages as served, not with DEBUG's query log
    os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))  # required with DEBUG off
    os.environ["DJANGO_ALLOWED_HOSTS"] = "testserver"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    try:
        return bench(where)
    finally:
        from django.db import connections

        connections.close_all()
        if pg_name and not keep:
            drop_database(url, pg_name)
        if keep and not pg_name:
            print(f"kept the SQLite database in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


class Generator:
    """Builds runs and their steps the way the recorder leaves them, counters included."""

    def __init__(self, *, rng: random.Random, steps_per_run: int) -> None:
        from agents.policies import PRESETS
        from tracer.models import PolicyVariant

        self.rng = rng
        self.steps_per_run = steps_per_run
        self.presets = list(PRESETS)
        self.settings = {name: p.settings() for name, p in PRESETS.items()}
        self.variants = {v.name: v for v in PolicyVariant.objects.filter(name__in=self.presets)}

    def step_count(self) -> int:
        half = self.steps_per_run // 2
        return self.rng.randint(max(1, self.steps_per_run - half), self.steps_per_run + half)

    def plan(self, scenario: str, policy: str, active: bool) -> tuple[str, str, str]:
        """(stop reason, guard, verdict) of one run."""
        from tracer.models import Run

        if active:
            return "", "", ""
        r = self.rng.random()
        reason, guard = Run.StopReason.FINAL_ANSWER, ""
        if scenario == "fatal-credentials" and policy in ("structured", "message"):
            reason = Run.StopReason.FATAL_ERROR
        elif policy == "fragile" and r < 0.4:
            reason = Run.StopReason.CRASHED
        elif policy == "structured" and (scenario == "stuck-model" or r < 0.12):
            reason, guard = Run.StopReason.CONSECUTIVE_ERRORS, "3 tool errors in a row"
        elif policy == "starter" and r < 0.08:
            reason, guard = Run.StopReason.MAX_STEPS, "max steps reached"
        elif r > 0.995:
            reason = Run.StopReason.INTERRUPTED
        if reason != Run.StopReason.FINAL_ANSWER:
            verdict = Run.Verdict.FAIL
        else:
            verdict = Run.Verdict.PASS if self.rng.random() < PASS_RATE.get(policy, 0.5) else Run.Verdict.FAIL
        return reason, guard, verdict

    def attempts(self, policy: str, category: str, retryable: bool, message: str, fails: bool) -> list:
        """The ``agents.events.Attempt`` of each try the policy makes."""
        from tests.factories import failed_attempt, ok_attempt

        ok_latency_ms = round(self.rng.uniform(2, 40), 2)
        if not fails:
            return [ok_attempt(1, "done", latency_ms=ok_latency_ms, result_content="done")]
        if policy == "starter" or (policy in ("structured", "message") and retryable):
            tries = 3
        else:
            tries = 1
        out = []
        for number in range(1, tries + 1):
            backoff_s = 0.0 if number == 1 else 0.2 * 2 ** (number - 2)
            if retryable and number > 1 and self.rng.random() < 0.5:
                out.append(
                    ok_attempt(number, "done", backoff_s=backoff_s, latency_ms=ok_latency_ms, result_content="done")
                )
                break
            out.append(
                failed_attempt(
                    number,
                    category=category,
                    retryable=retryable,
                    message=message,
                    backoff_s=backoff_s,
                    latency_ms=round(self.rng.uniform(2, 40), 2),
                    result_content=self.result(policy, category, retryable, message),
                )
            )
        return out

    @staticmethod
    def row(step, *, created, tool_use_id: str = ""):
        """The recorder's row of ``step``, dated ``step.index`` seconds after ``created``."""
        from tests.factories import step_row

        row = step_row(step)
        row.created_at = created + timedelta(seconds=step.index)
        if tool_use_id:
            row.tool_use_id = tool_use_id
        return row

    @staticmethod
    def result(policy: str, category: str, retryable: bool, message: str):
        if policy == "starter":
            return "Error"
        if policy == "structured":
            return {"isError": True, "error": {"errorCategory": category, "isRetryable": retryable, "message": message}}
        return message

    def run_with_steps(
        self,
        *,
        number: int,
        scenario: str,
        policy: str,
        created,
        active: bool,
        steps: int | None = None,
        experiment=None,
    ):
        """An unsaved Run and its unsaved Steps (``run`` set after the run is saved): the steps as agent
        events (``tests.factories``), stored and counted the way the recorder does."""
        from tests.factories import final_step, tool_step
        from tracer import recording
        from tracer.models import Run
        from tracer.signatures import event_fields, stop_key

        rng = self.rng
        n = steps or self.step_count()
        reason, guard, verdict = self.plan(scenario, policy, active)
        imported = not scenario
        tool, base_input, category, retryable, message = CALLS.get(scenario, GENERIC_CALL)
        ends_in_answer = reason in (Run.StopReason.FINAL_ANSWER, Run.StopReason.FATAL_ERROR) and n > 1
        tool_steps = n - 1 if ends_in_answer else n
        forced_errors = (
            3
            if reason in (Run.StopReason.CONSECUTIVE_ERRORS, Run.StopReason.CRASHED, Run.StopReason.FATAL_ERROR)
            else 0
        )
        rows, events = [], []
        for i in range(1, tool_steps + 1):
            fails = i > tool_steps - forced_errors or rng.random() < 0.35
            attempts = self.attempts(policy, category, retryable, message, fails)
            step_input = {**base_input, "note": rng.choice(WORDS), "request_id": f"req-{number}-{i}"}
            tokens = (120 + 45 * i, rng.randint(20, 70))
            step = tool_step(
                i, attempts, tool=tool, input=step_input, result_content=attempts[-1].result_content, tokens=tokens
            )
            rows.append(self.row(step, created=created, tool_use_id=f"toolu_{number:07d}_{i:03d}"))
            events.append(step)
        answer = ""
        if ends_in_answer:
            word = rng.choice(WORDS)
            answer = (
                (
                    f"I couldn't finish that: {message.lower()}. Your {word} order is unchanged; "
                    f"reply here if you want me to try another way."
                )
                if any(step.is_error for step in events)
                else (f"Done: the {word} request went through. Reference req-{number}.")
            )
            step = final_step(n, answer, tokens=(120 + 45 * n, 80))
            rows.append(self.row(step, created=created))
            events.append(step)
        counters = dict(
            step_count=n,
            tool_call_count=tool_steps,
            error_count=sum(step.is_error for step in events),
            retry_count=sum(step.retry_count for step in events),
            wasted_retry_count=sum(recording._wasted_retries(step) for step in events),
            input_tokens=sum(step.input_tokens for step in events),
            output_tokens=sum(step.output_tokens for step in events),
        )
        search_text = "".join(text + "\n" for step in events if (text := recording._step_values(step).search))
        judged_by_model = bool(verdict) and not imported and rng.random() < MODEL_JUDGED
        model_verdict = ""
        if judged_by_model:
            other = Run.Verdict.FAIL if verdict == Run.Verdict.PASS else Run.Verdict.PASS
            model_verdict = other if rng.random() < MODEL_DISAGREES else verdict
        task = f"{scenario or 'imported transcript'} #{number}"
        run = Run(
            experiment=experiment,
            source=Run.Source.IMPORT if imported else Run.Source.AGENT,
            scenario=scenario,
            policy_name=policy,
            policy=self.variants.get(policy),
            policy_settings=self.settings.get(policy, {}),
            model_backend=Run.ModelBackend.IMPORTED if imported else Run.ModelBackend.SIMULATED,
            model_name="" if imported else "simulated-1",
            task=task,
            status=(Run.Status.RUNNING if active else Run.Status.FINISHED),
            stop_reason=reason,
            guard=guard,
            verdict="" if imported else verdict,
            verdict_reason="" if imported or not verdict else f"judged {verdict}",
            judge="claude" if judged_by_model else None,
            model_verdict=model_verdict if judged_by_model else None,
            model_verdict_reason=f"claude-sonnet-4-5: judged {model_verdict}" if judged_by_model else None,
            judges_disagree=(model_verdict != verdict) if judged_by_model else None,
            final_answer=answer,
            error=message if reason in (Run.StopReason.CRASHED, Run.StopReason.FATAL_ERROR) else "",
            transcript=[{"role": "user", "content": task}]
            + ([{"role": "assistant", "content": answer}] if answer else []),
            search_text=search_text,
            worker_name="bench@host",
            created_at=created,
            started_at=created,
            finished_at=None if active else created + timedelta(seconds=n + 1),
            # as diagnosis writes it when the run ends
            stop_signature=None if active else stop_key(scenario, policy, reason, event_fields(events[-1])),
            **counters,
        )
        return run, rows


def generate(args, rng: random.Random) -> dict:
    """Write the dataset in batches, one transaction each; returns the runs the pages are timed on."""
    from django.db import transaction
    from django.utils import timezone

    from agents.scenarios import scenario_names
    from tracer.models import Experiment, Run, Step, StopReview

    # The recorder's rows get "now"; the benchmark spreads them over the last 90 days instead.
    Run._meta.get_field("created_at").auto_now_add = False
    Step._meta.get_field("created_at").auto_now_add = False
    gen = Generator(rng=rng, steps_per_run=args.steps_per_run)
    scenarios = list(scenario_names())
    presets = gen.presets
    total = args.runs
    now = timezone.now()
    span = timedelta(days=90)
    first = now - span
    running_from = total - max(3, total // 200)  # a few running runs among the newest
    running_p = max(3, total // 2000) / max(1, total - running_from)
    exp_jobs = [(s, p) for _ in range(args.experiment_repeats) for s in scenarios for p in ("starter", "structured")]
    exp_start = total // 2 if total >= 2 * len(exp_jobs) else total
    experiment = Experiment.objects.create(
        name="bench experiment",
        scenarios=scenarios,
        policies=["starter", "structured"],
        repeats=args.experiment_repeats,
        total_runs=len(exp_jobs) if exp_start < total else 0,
        finished_runs=len(exp_jobs) if exp_start < total else 0,
    )
    started = time.perf_counter()
    steps_written = 0
    done = 0
    while done < total:
        batch = min(args.batch, total - done)
        runs, steps = [], []
        for k in range(done, done + batch):
            exp = None
            if exp_start <= k < exp_start + len(exp_jobs):
                scenario, policy = exp_jobs[k - exp_start]
                exp = experiment
            elif rng.random() < 0.02:
                scenario, policy = "", ""  # arrived from outside: scenario and policy unknown
            else:
                scenario, policy = rng.choice(scenarios), rng.choice(presets)
            active = k >= running_from and exp is None and rng.random() < running_p
            created = first + span * (k / total)
            run, rows = gen.run_with_steps(
                number=k + 1, scenario=scenario, policy=policy, created=created, active=active, experiment=exp
            )
            runs.append(run)
            steps.append(rows)
        with transaction.atomic():
            Run.objects.bulk_create(runs, batch_size=500)
            flat = []
            for run, rows in zip(runs, steps, strict=True):
                for row in rows:
                    row.run_id = run.pk
                    flat.append(row)
            Step.objects.bulk_create(flat, batch_size=1000)
            in_queue = [r for r in runs if r.stop_reason in Run.GUARD_STOPS or r.judges_disagree]
            StopReview.objects.bulk_create(
                [
                    StopReview(
                        run_id=r.pk, verdict=rng.choice(StopReview.Verdict.values), note="looked at in the bench"
                    )
                    for r in in_queue
                    if rng.random() < 0.4
                ]
            )
        steps_written += len(flat)
        done += batch
        bar(done, total, "runs", started)
    print()
    # One long run, finished, newest: the run page with 500 steps.
    long_run, rows = gen.run_with_steps(
        number=total + 1,
        scenario="lookup-flaky-exhausted",
        policy="starter",
        created=now - timedelta(minutes=5),
        active=False,
        steps=args.long_steps,
    )
    with transaction.atomic():
        long_run.save()
        for row in rows:
            row.run = long_run
        Step.objects.bulk_create(rows, batch_size=1000)
    steps_written += len(rows)
    Run._meta.get_field("created_at").auto_now_add = True
    Step._meta.get_field("created_at").auto_now_add = True
    return {
        "seconds": time.perf_counter() - started,
        "runs": total + 1,
        "steps": steps_written,
        "experiment": experiment if exp_start < total else None,
        "long_run": long_run,
    }


def pick_targets(long_run, steps_per_run: int) -> dict:
    from tracer.models import Run

    finished = Run.objects.filter(status=Run.Status.FINISHED, parent__isnull=True).exclude(scenario="")
    run = (
        finished.filter(step_count=steps_per_run, stop_reason=Run.StopReason.FINAL_ANSWER).order_by("-id").first()
        or finished.order_by("-id").first()
    )
    a = finished.filter(scenario="refund-too-old", policy_name="starter").order_by("-id").first()
    b = finished.filter(scenario="refund-too-old", policy_name="structured").order_by("-id").first()
    live = Run.objects.filter(status=Run.Status.RUNNING).order_by("-id").first()
    return {"run": run, "a": a, "b": b, "live": live, "long": long_run}


def time_page(client, url: str, *, requests: int, warmup: int, headers: dict | None = None) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    headers = headers or {}
    for _ in range(warmup):
        response = client.get(url, headers=headers)
        if response.status_code != 200:
            raise SystemExit(f"{url}: HTTP {response.status_code}")
    times = []
    for _ in range(requests):
        t0 = time.perf_counter()
        response = client.get(url, headers=headers)
        times.append((time.perf_counter() - t0) * 1000)
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, headers=headers)
    return {
        "p50": statistics.median(times),
        "p95": percentile(times, 95),
        "queries": len(ctx.captured_queries),
        "kb": len(response.content) / 1024,
        "captured": list(ctx.captured_queries),
    }


def slowest_query(captured: list[dict]) -> tuple[dict, float]:
    """The page's SELECT that takes longest when run again on its own, and its time in ms."""
    from django.db import connection

    best, best_ms = captured[0], -1.0
    for query in captured:
        if not query["sql"].lstrip().upper().startswith("SELECT"):
            continue
        with connection.cursor() as cursor:
            t0 = time.perf_counter()
            cursor.execute(query["sql"])
            cursor.fetchall()
            ms = (time.perf_counter() - t0) * 1000
        if ms > best_ms:
            best, best_ms = query, ms
    return best, best_ms


def explain(sql: str) -> tuple[list[str], bool, list[str]]:
    """The plan's lines, whether any index is used, and the full scans and full sorts in it."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + sql)
            lines = [row[3] for row in cursor.fetchall()]
            uses = any(("USING" in line and "INDEX" in line) or "PRIMARY KEY" in line for line in lines)
            scans = [line for line in lines if line.startswith("SCAN ") and "USING" not in line]
            scans += [f"sorts every matching row ({line})" for line in lines if "TEMP B-TREE" in line]
        else:
            cursor.execute("EXPLAIN " + sql)
            lines = [row[0] for row in cursor.fetchall()]
            uses = any(
                word in line for line in lines for word in ("Index Scan", "Index Only Scan", "Bitmap Index Scan")
            )
            scans = [line.strip().lstrip("-> ").strip() for line in lines if "Seq Scan" in line]
            scans += [
                f"sorts every matching row ({line.strip().lstrip('-> ').strip()})"
                for line in lines
                if line.strip().lstrip("-> ").startswith("Sort  (cost")
            ]
    return lines, uses, scans


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20000, help="runs to generate (default 20000)")
    parser.add_argument("--steps-per-run", type=int, default=15, help="mean steps per run (default 15)")
    parser.add_argument("--requests", type=int, default=50, help="timed requests per page (default 50)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed requests per page first (default 3)")
    parser.add_argument("--long-steps", type=int, default=500, help="steps of the long run (default 500)")
    parser.add_argument("--experiment-repeats", type=int, default=5, help="repeats in the experiment (default 5)")
    parser.add_argument("--batch", type=int, default=1000, help="runs per transaction while generating")
    parser.add_argument("--slow-ms", type=float, default=100.0, help="EXPLAIN every page slower than this p50")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--database-url", help="postgres://user@host:port/name: a scratch PostgreSQL database")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards (SQLite: its folder)")
    args = parser.parse_args()
    for name in ("runs", "steps_per_run", "requests", "long_steps", "batch", "experiment_repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: expected a whole number of 1 or more")
    if args.warmup < 0:
        parser.error("--warmup: expected a whole number of 0 or more")

    return served_in_process(args.database_url, "rlt-bench-pages-", lambda where: bench(args, where), keep=args.keep)


def bench(args, where: str) -> int:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.urls import reverse

    call_command("migrate", verbosity=0, interactive=False)
    # Pages name their static files by hashed name with DEBUG off, as served: the manifest goes to the
    # temporary RLT_VAR_DIR's static/ (a page asking for a file missing from it would fail).
    call_command("collectstatic", verbosity=0, interactive=False)
    print(f"database: {where}")
    print(f"generating {args.runs:,} runs of about {args.steps_per_run} steps (batches of {args.batch:,}) ...")
    data = generate(args, random.Random(args.seed))
    print(
        f"generated {data['runs']:,} runs and {data['steps']:,} steps in {data['seconds']:.1f} s "
        f"({data['steps'] / data['seconds']:,.0f} steps/s)"
    )
    if connection.vendor == "postgresql":
        t0 = time.perf_counter()
        with connection.cursor() as cursor:
            # What autovacuum does soon after a bulk insert: statistics, and the visibility map
            # that lets COUNT(*) and other index-only scans skip the table.
            cursor.execute("VACUUM ANALYZE")
        print(f"VACUUM ANALYZE took {time.perf_counter() - t0:.1f} s")
    else:
        print("SQLite: no ANALYZE (the app never runs it), the planner uses its defaults")

    targets = pick_targets(data["long_run"], args.steps_per_run)
    user = get_user_model().objects.create_user("bench", password=None)
    client = Client()
    client.force_login(user)
    runs_url = reverse("tracer:runs")
    run, live = targets["run"], targets["live"]
    pages = [
        ("runs list, latest 50", runs_url, None),
        ("runs list, scenario + policy", f"{runs_url}?scenario=refund-too-old&policy=structured", None),
        ("runs list, search 'laptop'", f"{runs_url}?q=laptop", None),
        ("runs list, search one run's id", f"{runs_url}?q=req-{args.runs // 3}-1%22", None),
        ("runs list, page 100", f"{runs_url}?page=100", None),
        (f"run page, {run.step_count} steps", reverse("tracer:run", args=[run.pk]), None),
        (f"run page, {targets['long'].step_count} steps", reverse("tracer:run", args=[targets["long"].pk]), None),
    ]
    # The picture of the run alone (the fragment a running run's page redraws as steps arrive): its share
    # of the run page above.
    picture = {"HX-Request": "true", "HX-Target": "run-waterfall"}
    for target in (run, targets["long"]):
        pages.append(
            (f"run's waterfall (htmx), {target.step_count} steps", reverse("tracer:run", args=[target.pk]), picture)
        )
    if live is not None:
        pages.append(
            (
                "live step poll (htmx)",
                f"{reverse('tracer:run-steps', args=[live.pk])}?after={max(live.step_count - 1, 0)}",
                {"HX-Request": "true"},
            )
        )
    if targets["a"] and targets["b"]:
        pages.append(
            (
                "compare starter / structured",
                f"{reverse('tracer:compare')}?a={targets['a'].pk}&b={targets['b'].pk}",
                None,
            )
        )
    pages += [
        ("policies matrix", reverse("tracer:policies"), None),
        ("stops queue", reverse("tracer:stops"), None),
    ]
    if data["experiment"] is not None:
        pages.append(
            (
                f"experiment page ({data['experiment'].total_runs} runs)",
                reverse("tracer:experiment", args=[data["experiment"].pk]),
                None,
            )
        )

    print(f"\ntiming {len(pages)} pages, {args.requests} requests each after {args.warmup} warm-up ...")
    results = []
    for i, (label, url, headers) in enumerate(pages, 1):
        print(f"\r  [{i}/{len(pages)}] {label:<48}", end="", flush=True)
        results.append(
            (label, url, time_page(client, url, requests=args.requests, warmup=args.warmup, headers=headers))
        )
    print()

    print(f"\n{data['runs']:,} runs, {data['steps']:,} steps, {connection.vendor}; generation {data['seconds']:.1f} s")
    print(f"{'page':<40} {'p50 ms':>8} {'p95 ms':>8} {'queries':>8} {'KB':>7}")
    for label, _url, r in results:
        print(f"{label:<40} {r['p50']:8.1f} {r['p95']:8.1f} {r['queries']:8d} {r['kb']:7.1f}")
    print(
        "\npeers, from ../shared/bench/README.md: a different workload (500 runs, 8,302 spans, exported over "
        "OTLP/HTTP), same 2-core machine; for context only"
    )
    print(f"{'figure':<24} {'system':<32} {'p50 ms':>8} {'p95 ms':>8}")
    for figure, system, p50, p95 in PEERS:
        print(f"{figure:<24} {system:<32} {p50:8d} {p95:8d}")

    slowest = max(results, key=lambda item: item[2]["p50"])
    to_explain = [item for item in results if item[2]["p50"] > args.slow_ms and item is not slowest]
    for label, url, r in [slowest, *to_explain]:
        main_query, main_ms = slowest_query(r["captured"])
        lines, uses_index, scans = explain(main_query["sql"])
        kind = "slowest page" if (label, url, r) == slowest else f"slower than {args.slow_ms:.0f} ms"
        print(f"\n{kind}: {label} ({r['p50']:.1f} ms p50), {url}")
        print(f"main query ({main_ms:.1f} ms, the slowest of its {len(r['captured'])} queries run again one by one):")
        print("  " + main_query["sql"][:600] + (" ..." if len(main_query["sql"]) > 600 else ""))
        print("plan:")
        for line in lines:
            print("  " + line)
        verdict = "uses an index" if uses_index else "uses no index"
        if scans:
            verdict += "; but " + "; ".join(scans)
        print(f"=> {verdict}")
        if "LIKE '%" in main_query["sql"] or "LIKE UPPER('%" in main_query["sql"]:
            print(
                "   a LIKE '%...%' substring match cannot use a b-tree index: every row the index lets "
                "through is read and matched"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
