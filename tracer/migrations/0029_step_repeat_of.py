"""A step's ``repeat_of``: the earlier step whose call the model sent again after it failed."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tracer", "0028_run_stop_signature"),
    ]

    operations = [
        migrations.AddField(
            model_name="step",
            name="repeat_of",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
    ]
