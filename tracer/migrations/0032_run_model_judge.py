"""The optional model judge's verdict beside the rules' one (Run.judge, model_verdict, model_verdict_reason,
judges_disagree), all nullable without defaults so that SQLite adds them without rebuilding tracer_run."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tracer", "0031_clean_error_text"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="judge",
            field=models.CharField(blank=True, max_length=10, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="judges_disagree",
            field=models.BooleanField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="model_verdict",
            field=models.CharField(blank=True, max_length=4, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="model_verdict_reason",
            field=models.TextField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("judges_disagree", True)), fields=["-created_at", "-id"], name="run_disagree_idx"
            ),
        ),
    ]
