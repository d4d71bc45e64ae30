"""The policy matrix's tallies: MatrixTally, kept by triggers on tracer_run (tracer/tallies.py).

The triggers are created, and the table filled from the runs, after migrate (tracer.apps); going back,
they are dropped before the table goes.
"""

from django.db import migrations, models


def drop_triggers(apps, schema_editor):
    from tracer.tallies import tallies_drop

    tallies_drop(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("tracer", "0026_run_is_error_carried"),
    ]

    operations = [
        migrations.CreateModel(
            name="MatrixTally",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("scenario", models.CharField(max_length=100)),
                ("policy_name", models.CharField(max_length=40)),
                ("model_backend", models.CharField(max_length=20)),
                ("experiment", models.BigIntegerField()),
                ("runs", models.BigIntegerField(default=0)),
                ("passes", models.BigIntegerField(default=0)),
                ("tool_calls", models.BigIntegerField(default=0)),
                ("retries", models.BigIntegerField(default=0)),
                ("wasted_retries", models.BigIntegerField(default=0)),
                ("model_retries", models.BigIntegerField(default=0)),
                ("guard_stops", models.BigIntegerField(default=0)),
                ("max_steps_stops", models.BigIntegerField(default=0)),
                ("cut_off", models.BigIntegerField(default=0)),
                ("refusals", models.BigIntegerField(default=0)),
                ("crashes", models.BigIntegerField(default=0)),
                ("interrupted", models.BigIntegerField(default=0)),
                ("imported", models.BigIntegerField(default=0)),
                ("tokens", models.BigIntegerField(default=0)),
                ("duration_us", models.BigIntegerField(default=0)),
                ("timed", models.BigIntegerField(default=0)),
            ],
            options={
                "indexes": [models.Index(fields=["experiment"], name="matrixtally_experiment_idx")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("scenario", "policy_name", "model_backend", "experiment"), name="matrixtally_key_unique"
                    )
                ],
            },
        ),
        migrations.RunPython(migrations.RunPython.noop, drop_triggers),
    ]
