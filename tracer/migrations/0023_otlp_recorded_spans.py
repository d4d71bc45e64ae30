# The OTLP receiver answers a batch once its spans are stored and writes their runs right after
# (tracer/otlp/receiver.py): OtlpTrace.recorded_spans says how many of a trace's spans its run was
# written from, and the sweep writes the runs of traces left behind (a process that died after
# answering). Traces stored before were written before they were answered: all recorded.

from django.conf import settings
from django.db import migrations, models


def all_recorded(apps, schema_editor):
    OtlpTrace = apps.get_model("tracer", "OtlpTrace")
    OtlpTrace.objects.update(recorded_spans=models.F("span_count"))


class Migration(migrations.Migration):
    dependencies = [
        ("tracer", "0022_run_list_filter_indexes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="otlptrace",
            name="recorded_spans",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(all_recorded, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="otlptrace",
            index=models.Index(
                condition=models.Q(("recorded_spans__lt", models.F("span_count"))),
                fields=["updated_at"],
                name="otlptrace_unrecorded_idx",
            ),
        ),
    ]
