# Choices for the model backend and a step's error category, built from agents.vocabulary like the
# stop reasons and step kinds already were. Choices only: no column changes.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tracer", "0008_run_lease"),
    ]

    operations = [
        migrations.AlterField(
            model_name="experiment",
            name="model_backend",
            field=models.CharField(
                choices=[("simulated", "simulated"), ("claude", "claude"), ("replay", "replay")],
                default="simulated",
                max_length=20,
            ),
        ),
        migrations.AlterField(
            model_name="run",
            name="model_backend",
            field=models.CharField(
                choices=[
                    ("simulated", "simulated"),
                    ("claude", "claude"),
                    ("replay", "replay"),
                    ("imported", "imported"),
                ],
                default="simulated",
                max_length=20,
            ),
        ),
        migrations.AlterField(
            model_name="step",
            name="category",
            field=models.CharField(
                blank=True,
                choices=[
                    ("validation", "validation"),
                    ("transient", "transient"),
                    ("permission", "permission"),
                    ("business", "business"),
                    ("fatal", "fatal"),
                ],
                max_length=12,
            ),
        ),
    ]
