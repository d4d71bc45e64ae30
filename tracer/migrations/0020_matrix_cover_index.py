"""The policy matrix's covering index holds every column the matrix now reads (issue 12).

The matrix groups by scenario, policy, model backend and experiment and sums tool calls, retries, model
retries, tokens and durations: with status and parent first (its filter), then those group columns in
order, then the summed ones, SQLite and PostgreSQL read the index alone, in group order, without the
table. Same name as before: the stop queue's "latest finished run per scenario × policy" still reads it.
Adding and dropping an index does not make SQLite rebuild tracer_run, so 0018's triggers stay.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("tracer", "0019_sentence_case_labels")]

    operations = [
        migrations.RemoveIndex(model_name="run", name="run_matrix_cover_idx"),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                fields=[
                    "status",
                    "parent",
                    "scenario",
                    "policy_name",
                    "model_backend",
                    "experiment",
                    "verdict",
                    "stop_reason",
                    "source",
                    "tool_call_count",
                    "retry_count",
                    "wasted_retry_count",
                    "model_retry_count",
                    "input_tokens",
                    "output_tokens",
                    "started_at",
                    "finished_at",
                    "id",
                ],
                name="run_matrix_cover_idx",
            ),
        ),
    ]
