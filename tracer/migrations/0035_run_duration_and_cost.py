"""A run's duration as its steps measured it (model and tool latencies and the waits before retries)
and its cost, on the run, so the runs list shows and sorts by both from the row; and the list's sorts
by verdict, stop reason, duration and cost, each on an index as the other sorts are (0022): (parent,
column, id) for SQLite, partial (column, id) of top-level runs for PostgreSQL. Cost sorts an unknown
cost (no price, or still running) below every known one in both directions' reading of one index.

Existing runs are filled in from their steps and their model's price on their day. Adding the
columns rebuilds tracer_run on SQLite without the search triggers, so they are made again as 0026 does
(the matrix's triggers are made again after migrate: tracer.apps).
"""

import importlib
import math
from datetime import UTC

from django.db import migrations, models

SORTED = {
    "verdict": '"verdict"',
    "stop": '"stop_reason"',
    "duration": '"measured_ms"',
    "cost": '"cost_usd" NULLS FIRST',
}
BATCH = 2000
FINDINGS = importlib.import_module("tracer.migrations.0024_findings")


def _number(value):
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return 0.0
    return float(value)


def _step_ms(model_attempts, attempts):
    total = waited = 0.0
    for group, wait_name in ((model_attempts, "wait_s"), (attempts, "backoff_s")):
        for a in group if isinstance(group, list) else []:
            if isinstance(a, dict):
                wait = _number(a.get(wait_name))
                total += wait + _number(a.get("latency_ms")) / 1000
                waited += wait
    return total * 1000, waited * 1000


def fill(apps, schema_editor):
    from agents import prices

    Run = apps.get_model("tracer", "Run")
    Step = apps.get_model("tracer", "Step")
    times: dict[int, list[float]] = {}
    rows = Step.objects.order_by().values_list("run_id", "model_attempts", "attempts")
    for run_id, model_attempts, attempts in rows.iterator(chunk_size=BATCH):
        total, waited = _step_ms(model_attempts, attempts)
        if total:
            t = times.setdefault(run_id, [0.0, 0.0])
            t[0] += total
            t[1] += waited
    changed = []
    runs = Run.objects.order_by().only(
        "id", "status", "model_name", "started_at", "created_at", "input_tokens", "output_tokens"
    )
    for run in runs.iterator(chunk_size=BATCH):
        run.measured_ms, run.waited_ms = times.get(run.pk, (0.0, 0.0))
        run.cost_usd = None
        if run.status == "finished":
            if not (run.input_tokens or run.output_tokens):
                run.cost_usd = 0.0
            elif run.model_name:
                day = (run.started_at or run.created_at).astimezone(UTC).date()
                cost = prices.cost(run.model_name, run.input_tokens, run.output_tokens, on=day)
                run.cost_usd = None if cost is None else float(cost)
        if run.measured_ms or run.cost_usd is not None:
            changed.append(run)
        if len(changed) >= BATCH:
            Run.objects.bulk_update(changed, ["measured_ms", "waited_ms", "cost_usd"])
            changed = []
    if changed:
        Run.objects.bulk_update(changed, ["measured_ms", "waited_ms", "cost_usd"])


def create_postgresql_sort_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for name, column in SORTED.items():
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS run_top_sort_{name}_idx ON tracer_run ({column}, id) "
                "WHERE parent_id IS NULL"
            )


def drop_postgresql_sort_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for name in SORTED:
            cursor.execute(f"DROP INDEX IF EXISTS run_top_sort_{name}_idx")


class Migration(migrations.Migration):
    dependencies = [
        ("tracer", "0034_tool_day_failed_attempts"),
    ]

    operations = [
        migrations.AddField(model_name="run", name="measured_ms", field=models.FloatField(default=0)),
        migrations.AddField(model_name="run", name="waited_ms", field=models.FloatField(default=0)),
        migrations.AddField(model_name="run", name="cost_usd", field=models.FloatField(blank=True, null=True)),
        *(
            migrations.AddIndex(
                model_name="run",
                index=models.Index(fields=["parent", column, "id"], name=f"run_sort_{name}_idx"),
            )
            for name, column in (
                ("verdict", "verdict"),
                ("stop", "stop_reason"),
                ("duration", "measured_ms"),
                ("cost", "cost_usd"),
            )
        ),
        migrations.RunPython(FINDINGS.search_triggers_again, migrations.RunPython.noop),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.RunPython(create_postgresql_sort_indexes, drop_postgresql_sort_indexes),
    ]
