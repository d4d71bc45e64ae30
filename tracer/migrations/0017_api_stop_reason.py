"""The Messages API's stop_reason on each step and run (issue 11), and the stop reasons and step kind
it brings: max_tokens and refusal end a run, a model_stop step is the turn that ended it."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("tracer", "0016_model_attempts")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="api_stop_reason",
            field=models.CharField(blank=True, max_length=40),
        ),
        migrations.AddField(
            model_name="step",
            name="api_stop_reason",
            field=models.CharField(blank=True, max_length=40),
        ),
        migrations.AlterField(
            model_name="run",
            name="stop_reason",
            field=models.CharField(
                blank=True,
                choices=[
                    ("final_answer", "Final Answer"),
                    ("consecutive_errors", "Consecutive Errors"),
                    ("max_steps", "Max Steps"),
                    ("fatal_error", "Fatal Error"),
                    ("crashed", "Crashed"),
                    ("interrupted", "Interrupted"),
                    ("max_tokens", "Max Tokens"),
                    ("refusal", "Refusal"),
                ],
                max_length=20,
            ),
        ),
        migrations.AlterField(
            model_name="step",
            name="kind",
            field=models.CharField(
                choices=[("tool_use", "Tool Use"), ("final_answer", "Final Answer"), ("model_stop", "Model Stop")],
                max_length=12,
            ),
        ),
    ]
