# Run.is_error_carried: False for a run whose source cannot carry a tool_result's is_error (GenAI's
# messages drop it), which the run page says; Run.failed_attempt_count: tool attempts that failed,
# retried or not (runs recorded before count from here on). Adding the column rebuilds tracer_run on SQLite without
# the search triggers, so they are made again as 0024 does.

import importlib

from django.db import migrations, models

FINDINGS = importlib.import_module("tracer.migrations.0024_findings")


class Migration(migrations.Migration):
    dependencies = [
        ("tracer", "0025_experiment_archived"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="is_error_carried",
            field=models.BooleanField(default=True),
        ),
        migrations.AddField(
            model_name="run",
            name="failed_attempt_count",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(FINDINGS.search_triggers_again, migrations.RunPython.noop),
    ]
