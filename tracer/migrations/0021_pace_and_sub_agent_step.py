"""A pace per experiment (seconds a worker pauses after each step) and the step that started a sub-agent
(issue 12). Both columns are nullable without a default, so SQLite adds them without rebuilding
tracer_run and 0018's triggers stay."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tracer", "0020_matrix_cover_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="experiment",
            name="step_delay_s",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="parent_step",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
    ]
