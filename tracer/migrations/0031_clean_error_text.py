"""Policies learn ``clean_error_text``: a failure's stack traces, SQL, hostnames, file paths and secrets
are taken out before the model reads it.

- ``structured`` and ``model-retries`` clean (and structured's description says so); every other
  preset, and every variant made before the setting existed, keeps sending the text as the tool
  wrote it, as it did when it was made.

A frozen copy of the settings as they are now, like 0014, not an import of ``agents.policies``.
"""

from django.db import migrations

CLEANING = ("structured", "model-retries")
STRUCTURED_BEFORE = (
    "Category, isRetryable and message; only transient retried, bounded, with jittered backoff; fatal stops "
    "the run; 3 consecutive errors stop the run."
)
STRUCTURED = (
    "Category, isRetryable and message, internal details cleaned out; only transient retried, bounded, with "
    "jittered backoff; fatal stops the run; 3 consecutive errors stop the run."
)


def forwards(apps, schema_editor):
    PolicyVariant = apps.get_model("tracer", "PolicyVariant")
    for variant in PolicyVariant.objects.all():
        if "clean_error_text" in variant.settings:
            continue
        cleans = variant.is_preset and variant.name in CLEANING
        variant.settings = {**variant.settings, "clean_error_text": cleans}
        if variant.is_preset and variant.name == "structured":
            variant.description = variant.settings["description"] = STRUCTURED
        variant.save(update_fields=["settings", "description"])


def backwards(apps, schema_editor):
    PolicyVariant = apps.get_model("tracer", "PolicyVariant")
    for variant in PolicyVariant.objects.all():
        variant.settings = {k: v for k, v in variant.settings.items() if k != "clean_error_text"}
        if variant.is_preset and variant.name == "structured":
            variant.description = variant.settings["description"] = STRUCTURED_BEFORE
        variant.save(update_fields=["settings", "description"])


class Migration(migrations.Migration):
    dependencies = [("tracer", "0030_matrixtally_unjudged")]

    operations = [migrations.RunPython(forwards, backwards)]
