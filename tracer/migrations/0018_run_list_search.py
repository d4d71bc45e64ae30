"""The runs list (issue 13): an index per sortable column, and an index for its search on each database.

- ``run_sort_*_idx``: top-level runs by one column, then id (``reads.runs_list.RUN_SORTS``).
- The search (``tracer/search.py``) looks for a substring of scenario, policy_name, search_text,
  final_answer and error. On SQLite 3.34 or newer: an FTS5 table with the trigram tokenizer whose
  content is those columns of tracer_run (not copied), filled here and kept in step by triggers. On
  PostgreSQL: pg_trgm GIN indexes on UPPER() of scenario, policy_name and error, the expressions
  Django's icontains compares (0005 made those of search_text and final_answer).
- A run's search_text now holds each step's error messages (the recorder adds them from now on);
  for runs recorded before, it is made again here from their stored steps.

Careful with a later migration that makes SQLite rebuild tracer_run (Django copies the table to
change some columns): the copy has no triggers. tests/tracer/test_search.py fails then; create the
triggers again (TRIGGERS below) in that migration.
"""

import json
import sqlite3

from django.db import DatabaseError, migrations, models, transaction

COLUMNS = ("scenario", "policy_name", "search_text", "final_answer", "error")
FTS_MIN_SQLITE = (3, 34, 0)
OLD = ", ".join(f"old.{c}" for c in COLUMNS)
NEW = ", ".join(f"new.{c}" for c in COLUMNS)
NAMES = ", ".join(COLUMNS)
CHANGED = " OR ".join(f"old.{c} IS NOT new.{c}" for c in COLUMNS)
FTS_TABLE = (
    f"CREATE VIRTUAL TABLE tracer_run_search USING fts5({NAMES}, "
    "content='tracer_run', content_rowid='id', tokenize='trigram')"
)
TRIGGERS = [
    f"""CREATE TRIGGER tracer_run_search_insert AFTER INSERT ON tracer_run BEGIN
        INSERT INTO tracer_run_search(rowid, {NAMES}) VALUES (new.id, {NEW});
    END""",
    f"""CREATE TRIGGER tracer_run_search_delete AFTER DELETE ON tracer_run BEGIN
        INSERT INTO tracer_run_search(tracer_run_search, rowid, {NAMES}) VALUES ('delete', old.id, {OLD});
    END""",
    # Counter updates name search_text (F("search_text") when a step adds no text): only a change
    # of the text itself re-indexes the run.
    f"""CREATE TRIGGER tracer_run_search_update AFTER UPDATE OF {NAMES} ON tracer_run WHEN {CHANGED} BEGIN
        INSERT INTO tracer_run_search(tracer_run_search, rowid, {NAMES}) VALUES ('delete', old.id, {OLD});
        INSERT INTO tracer_run_search(rowid, {NAMES}) VALUES (new.id, {NEW});
    END""",
]
# Index name: the expression icontains compares (varchar columns are cast to text).
PG_INDEXES = {
    "run_scenario_trgm_idx": 'UPPER("scenario"::text)',
    "run_policy_name_trgm_idx": 'UPPER("policy_name"::text)',
    "run_error_trgm_idx": 'UPPER("error")',
}


def create_search_index(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            if sqlite3.sqlite_version_info < FTS_MIN_SQLITE:
                return  # no trigram tokenizer: the search reads every run (tracer/search.py)
            cursor.execute(FTS_TABLE)
            for trigger in TRIGGERS:
                cursor.execute(trigger)
            cursor.execute("INSERT INTO tracer_run_search(tracer_run_search) VALUES ('rebuild')")
        elif connection.vendor == "postgresql":
            try:
                with transaction.atomic(using=connection.alias):
                    cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            except DatabaseError:
                return  # as in 0005: the search works, without the index
            for name, expression in PG_INDEXES.items():
                cursor.execute(
                    f"CREATE INDEX IF NOT EXISTS {name} ON tracer_run USING gin (({expression}) gin_trgm_ops)"
                )


def drop_search_index(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            for name in ("insert", "delete", "update"):
                cursor.execute(f"DROP TRIGGER IF EXISTS tracer_run_search_{name}")
            cursor.execute("DROP TABLE IF EXISTS tracer_run_search")
        elif connection.vendor == "postgresql":
            for name in PG_INDEXES:
                cursor.execute(f"DROP INDEX IF EXISTS {name}")


def step_text(tool_name, step_input, attempts, text):
    """A frozen copy of tracer.recording._row_search_text as this migration writes it."""
    parts = [tool_name] if tool_name else []
    if step_input is not None:
        parts.append(json.dumps(step_input, ensure_ascii=False, sort_keys=True))
    messages = (a.get("message") for a in attempts or [] if isinstance(a, dict) and not a.get("ok"))
    parts += list(dict.fromkeys(str(m) for m in messages if m))
    if text:
        parts.append(text)
    return " ".join(parts)


def search_text_with_errors(apps, schema_editor):
    """Make search_text again, from the stored steps, for each run with a failed attempt (a step that
    failed, or was retried)."""
    Run = apps.get_model("tracer", "Run")
    Step = apps.get_model("tracer", "Step")
    failed = Step.objects.filter(models.Q(is_error=True) | models.Q(retry_count__gt=0))
    failed = failed.order_by().values("run_id").distinct()
    run_ids = sorted(failed.values_list("run_id", flat=True))
    for start in range(0, len(run_ids), 500):
        chunk = run_ids[start : start + 500]
        texts = {run_id: [] for run_id in chunk}
        rows = Step.objects.filter(run_id__in=chunk).order_by("run_id", "index")
        for run_id, tool_name, step_input, attempts, text in rows.values_list(
            "run_id", "tool_name", "input", "attempts", "text"
        ):
            if piece := step_text(tool_name, step_input, attempts, text):
                texts[run_id].append(piece + "\n")
        for run_id, pieces in texts.items():
            Run.objects.filter(pk=run_id).update(search_text="".join(pieces))


SORTED = (
    ("scenario", "scenario"),
    ("policy", "policy_name"),
    ("status", "status"),
    ("steps", "step_count"),
    ("errors", "error_count"),
    ("retries", "retry_count"),
)


class Migration(migrations.Migration):
    dependencies = [("tracer", "0017_api_stop_reason")]

    operations = [
        *(
            migrations.AddIndex(
                model_name="run",
                index=models.Index(fields=["parent", column, "id"], name=f"run_sort_{name}_idx"),
            )
            for name, column in SORTED
        ),
        migrations.RunPython(search_text_with_errors, migrations.RunPython.noop),
        migrations.RunPython(create_search_index, drop_search_index),
    ]
