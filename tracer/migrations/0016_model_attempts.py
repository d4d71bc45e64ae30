"""Model API attempts (issue 11): each step keeps the attempts of the model call that produced it, a
run counts its model retries and keeps the attempts of the model call that ended it."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("tracer", "0015_run_reviews")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="model_retry_count",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="run",
            name="failed_model_call",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="step",
            name="model_attempts",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
