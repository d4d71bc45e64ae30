# The database says what must execute; the broker only delivers (docs/recording.md, "Leases"). A
# claim writes a token and a lease that its holder renews; a lapsed lease ends the run interrupted
# and queues one re-run of it (``rerun_of``); a queued run's message is sent again when it is due
# (``enqueued_at``, ``send_count``).
#
# Runs queued before this migration were sent once, when they were created: they count as sent then,
# so the sweep sends them again if their message was lost. Running runs keep no lease (null): the
# sweep takes them as lapsed, since nothing that claimed them can renew one.

from django.db import migrations, models
from django.db.models import F


def queued_runs_were_sent_at_creation(apps, schema_editor):
    Run = apps.get_model("tracer", "Run")
    Run.objects.filter(status="queued", parent__isnull=True).update(send_count=1, enqueued_at=F("created_at"))


class Migration(migrations.Migration):
    dependencies = [
        ("tracer", "0007_reviewer_group"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="claim_token",
            field=models.CharField(blank=True, max_length=32),
        ),
        migrations.AddField(
            model_name="run",
            name="lease_expires_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="enqueued_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="send_count",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="run",
            name="rerun_of",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=models.deletion.SET_NULL,
                related_name="reruns",
                to="tracer.run",
            ),
        ),
        migrations.RunPython(queued_runs_were_sent_at_creation, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["status", "lease_expires_at"], name="run_lease_idx"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["status", "enqueued_at"], name="run_enqueued_idx"),
        ),
    ]
