"""Stop reasons and step kinds labelled in sentence case ("Final answer"), the one wording every page
uses (issue 12). Labels only: nothing changes in the database."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("tracer", "0018_run_list_search")]

    operations = [
        migrations.AlterField(
            model_name="run",
            name="stop_reason",
            field=models.CharField(
                blank=True,
                choices=[
                    ("final_answer", "Final answer"),
                    ("consecutive_errors", "Consecutive errors"),
                    ("max_steps", "Max steps"),
                    ("fatal_error", "Fatal error"),
                    ("crashed", "Crashed"),
                    ("interrupted", "Interrupted"),
                    ("max_tokens", "Max tokens"),
                    ("refusal", "Refusal"),
                ],
                max_length=20,
            ),
        ),
        migrations.AlterField(
            model_name="step",
            name="kind",
            field=models.CharField(
                choices=[("tool_use", "Tool use"), ("final_answer", "Final answer"), ("model_stop", "Model stop")],
                max_length=12,
            ),
        ),
    ]
