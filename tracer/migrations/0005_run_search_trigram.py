# The runs list's search is a substring match (icontains), which a B-tree index cannot serve: at
# 100,000 runs PostgreSQL read every run (1.4 to 1.8 s). On PostgreSQL, trigram GIN indexes on the
# two searched columns serve it. pg_trgm is a trusted extension (a database owner may create it);
# where it cannot be created the search still works, without the index. SQLite is left as it is.

from django.db import DatabaseError, migrations, transaction

INDEXES = {
    "run_search_text_trgm_idx": "search_text",
    "run_final_answer_trgm_idx": "final_answer",
}


def create_trigram_indexes(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        try:
            with transaction.atomic(using=connection.alias):
                cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        except DatabaseError:
            return
        for name, column in INDEXES.items():
            # Django's icontains on PostgreSQL compares UPPER(column) LIKE UPPER(pattern).
            cursor.execute(
                f'CREATE INDEX IF NOT EXISTS {name} ON tracer_run USING gin (UPPER("{column}") gin_trgm_ops)'
            )


def drop_trigram_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for name in INDEXES:
            cursor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [
        ("tracer", "0004_run_matrix_index_holds_id"),
    ]

    operations = [
        migrations.RunPython(create_trigram_indexes, drop_trigram_indexes),
    ]
