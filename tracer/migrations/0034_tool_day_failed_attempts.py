"""A tool's failed attempts per day on the Tools page (ToolDay.failed_attempts); ``manage.py
findings --recompute`` fills it for the runs that ended before."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tracer", "0033_write_retries"),
    ]

    operations = [
        migrations.AddField(
            model_name="toolday",
            name="failed_attempts",
            field=models.PositiveIntegerField(default=0),
        ),
    ]
