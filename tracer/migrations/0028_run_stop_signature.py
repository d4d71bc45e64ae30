"""Run.stop_signature: each guard stop's signature (tracer/signatures.py), filled here for the stops
recorded before, from their last steps, a thousand at a time; nullable without a default, so SQLite
adds the column without rebuilding tracer_run (its triggers stay)."""

from django.conf import settings
from django.db import migrations, models

from tracer.signatures import GUARD_STOPS, SIGNATURE_STEP_FIELDS, stop_key


def fill_signatures(apps, schema_editor):
    Run = apps.get_model("tracer", "Run")
    Step = apps.get_model("tracer", "Step")
    stops = list(
        Run.objects.filter(stop_reason__in=GUARD_STOPS)
        .order_by("id")
        .values_list("id", "scenario", "policy_name", "stop_reason", "step_count")
    )
    for first in range(0, len(stops), 1000):
        batch = stops[first : first + 1000]
        last = {
            run_id: tuple(fields)
            for run_id, *fields in Step.objects.filter(
                run_id__in=[r[0] for r in batch], index=models.F("run__step_count")
            ).values_list("run_id", *SIGNATURE_STEP_FIELDS)
        }
        runs = []
        for run_id, scenario, policy, reason, _ in batch:
            step = last.get(run_id)
            runs.append(Run(pk=run_id, stop_signature=stop_key(scenario, policy, reason, step)))
        Run.objects.bulk_update(runs, ["stop_signature"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("tracer", "0027_matrix_tally"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="stop_signature",
            field=models.CharField(blank=True, max_length=16, null=True),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("stop_signature__isnull", False)),
                fields=["stop_signature"],
                name="run_stop_signature_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(
                    ("stop_reason__in", ["consecutive_errors", "max_steps"]), ("stop_signature__isnull", True)
                ),
                fields=["stop_reason"],
                name="run_stop_unsigned_idx",
            ),
        ),
        migrations.RunPython(fill_signatures, migrations.RunPython.noop),
    ]
