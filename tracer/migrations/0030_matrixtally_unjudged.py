from django.db import migrations, models


class Migration(migrations.Migration):
    """The matrix keeps the runs with no verdict apart: they are neither passes nor fails. The tallies'
    triggers are rebuilt after ``migrate`` (``tracer/tallies.py``), which fills the column from the runs."""

    dependencies = [
        ("tracer", "0029_step_repeat_of"),
    ]

    operations = [
        migrations.AddField(
            model_name="matrixtally",
            name="unjudged",
            field=models.BigIntegerField(default=0),
        ),
    ]
