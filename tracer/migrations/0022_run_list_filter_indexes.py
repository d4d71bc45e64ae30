"""The runs list's indexes, as the benchmark at 100,000 runs showed they must be (docs/performance.md).

- Filtered on stop reason, verdict, model or status, newest first: (column, created_at, id) instead of
  the column alone, from which SQLite sorted every match (25 ms on stop_reason).
- Sorted by a column, on PostgreSQL: partial indexes of (column, id) over top-level runs. It cannot read
  the order of 0018's (parent, column, id) after "parent_id IS NULL" and sorted every run (221 ms);
  SQLite reads those (its planner, without statistics, takes the parent equality over a partial index).
"""

from django.conf import settings
from django.db import migrations, models

SORTED = {
    "scenario": "scenario",
    "policy": "policy_name",
    "status": "status",
    "steps": "step_count",
    "errors": "error_count",
    "retries": "retry_count",
}


def create_postgresql_sort_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for name, column in SORTED.items():
            cursor.execute(
                f'CREATE INDEX IF NOT EXISTS run_top_sort_{name}_idx ON tracer_run ("{column}", id) '
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
        ("tracer", "0021_pace_and_sub_agent_step"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="run",
            name="run_stop_reason_idx",
        ),
        migrations.RemoveIndex(
            model_name="run",
            name="run_verdict_idx",
        ),
        migrations.RemoveIndex(
            model_name="run",
            name="run_backend_idx",
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["stop_reason", "-created_at", "-id"], name="run_stop_created_idx"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["verdict", "-created_at", "-id"], name="run_verdict_created_idx"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["model_backend", "-created_at", "-id"], name="run_backend_created_idx"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["status", "-created_at", "-id"], name="run_status_created_idx"),
        ),
        migrations.RunPython(create_postgresql_sort_indexes, drop_postgresql_sort_indexes),
    ]
