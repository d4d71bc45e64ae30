# A run's worker was one string, "<worker name> pid <pid>", matched by prefix: interrupting the runs
# of "w@web" also finished those of "w@web2". The name and the pid are now two fields, matched by
# equality. Existing values are split; a value without " pid <digits>" keeps all of it as the name.

from django.db import migrations, models


def split_worker(apps, schema_editor):
    Run = apps.get_model("tracer", "Run")
    for run in Run.objects.filter(worker_name__contains=" pid ").only("pk", "worker_name").iterator():
        name, _, pid = run.worker_name.rpartition(" pid ")
        if pid.isdigit():
            Run.objects.filter(pk=run.pk).update(worker_name=name, worker_pid=int(pid))


def join_worker(apps, schema_editor):
    Run = apps.get_model("tracer", "Run")
    for run in Run.objects.filter(worker_pid__isnull=False).only("pk", "worker_name", "worker_pid").iterator():
        Run.objects.filter(pk=run.pk).update(worker_name=f"{run.worker_name} pid {run.worker_pid}"[:200])


class Migration(migrations.Migration):
    dependencies = [
        ("tracer", "0005_run_search_trigram"),
    ]

    operations = [
        migrations.RenameField(model_name="run", old_name="worker", new_name="worker_name"),
        migrations.AddField(
            model_name="run",
            name="worker_pid",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(split_worker, join_worker),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["worker_name", "status"], name="run_worker_idx"),
        ),
    ]
