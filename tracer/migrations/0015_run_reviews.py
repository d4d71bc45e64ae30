"""Reviews of any run: a verdict override with its reason beside the judge's verdict, and tags; the
guard-stop verdict becomes optional (only guard stops have one)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tracer", "0014_model_retries_preset"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ReviewTag",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=40)),
            ],
            options={
                "ordering": ["name"],
            },
        ),
        migrations.AddField(
            model_name="stopreview",
            name="override_reason",
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name="stopreview",
            name="verdict_override",
            field=models.CharField(blank=True, choices=[("pass", "Pass"), ("fail", "Fail")], max_length=4),
        ),
        migrations.AlterField(
            model_name="stopreview",
            name="verdict",
            field=models.CharField(
                blank=True,
                choices=[
                    ("unhelpful_error", "unhelpful error message"),
                    ("model_stuck", "model stuck"),
                    ("expected", "expected"),
                    ("other", "other"),
                ],
                max_length=20,
            ),
        ),
        migrations.AddIndex(
            model_name="stopreview",
            index=models.Index(fields=["verdict_override"], name="review_override_idx"),
        ),
        migrations.AddField(
            model_name="reviewtag",
            name="review",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="tags", to="tracer.stopreview"
            ),
        ),
        migrations.AddIndex(
            model_name="reviewtag",
            index=models.Index(fields=["name", "review"], name="reviewtag_name_idx"),
        ),
        migrations.AddConstraint(
            model_name="reviewtag",
            constraint=models.UniqueConstraint(fields=("review", "name"), name="reviewtag_review_name_unique"),
        ),
    ]
