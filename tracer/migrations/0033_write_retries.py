"""Policies learn ``write_retries``: how the harness treats a failed call of a tool that declares it
changes something and is not safe to repeat.

- ``structured`` and ``model-retries`` retry it only with an idempotency key the harness fills in
  (``idempotency_key``); ``message`` never retries it (``never``); ``starter`` and ``fragile``, and
  every variant made before the setting existed, retry it like any call (``blind``), as they did.

A frozen copy of the settings as they are now, like 0014, not an import of ``agents.policies``.
"""

from django.db import migrations

PRESETS = {"structured": "idempotency_key", "model-retries": "idempotency_key", "message": "never"}


def forwards(apps, schema_editor):
    PolicyVariant = apps.get_model("tracer", "PolicyVariant")
    for variant in PolicyVariant.objects.all():
        if "write_retries" in variant.settings:
            continue
        mode = PRESETS.get(variant.name, "blind") if variant.is_preset else "blind"
        variant.settings = {**variant.settings, "write_retries": mode}
        variant.save(update_fields=["settings"])


def backwards(apps, schema_editor):
    PolicyVariant = apps.get_model("tracer", "PolicyVariant")
    for variant in PolicyVariant.objects.all():
        variant.settings = {k: v for k, v in variant.settings.items() if k != "write_retries"}
        variant.save(update_fields=["settings"])


class Migration(migrations.Migration):
    dependencies = [("tracer", "0032_run_model_judge")]

    operations = [migrations.RunPython(forwards, backwards)]
