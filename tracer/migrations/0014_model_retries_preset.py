"""The preset policies learn three settings, starter's description counts attempts, and a fifth preset.

- Every preset row gets ``retry_flag_path``, ``swallow_errors``, ``ask_model_to_retry`` and
  ``tool_transport`` (merged into its stored settings, so settings other migrations add are kept).
- starter's description says three attempts (two retries), which is what its counters show.
- ``model-retries``: structured errors, a harness that never retries, and a system prompt asking the
  model to retry a retryable failure once (lesson 002's Agent SDK path).

A frozen copy of ``agents.policies.PRESETS`` as it is now, like 0002, not an import of it.
"""

from django.db import migrations

NEW_SETTINGS = {
    "retry_flag_path": "error.isRetryable",
    "swallow_errors": False,
    "ask_model_to_retry": False,
    "tool_transport": "in_process",  # issue 10 part 4's setting, which no earlier migration wrote
}
STARTER_BEFORE = 'Bare "Error", every failure retried three times, an empty result is an error.'
STARTER = 'Bare "Error", every failure tried three times (two retries), an empty result is an error.'
MODEL_RETRIES_DESCRIPTION = (
    "Structured errors; the harness never retries, and the system prompt asks the model to retry a "
    "retryable failure once (lesson 002's Agent SDK path)."
)
MODEL_RETRIES = {
    "name": "model-retries",
    "description": MODEL_RETRIES_DESCRIPTION,
    "error_format": "structured",
    "retry_on": "none",
    "max_attempts": 1,
    "backoff_base_s": 0.2,
    "backoff_max_s": 2.0,
    "backoff_jitter": 0.5,
    "empty_is_error": False,
    "consecutive_error_limit": 3,
    "stop_on_fatal": True,
    "max_steps": 10,
    "retry_flag_path": "error.isRetryable",
    "swallow_errors": False,
    "ask_model_to_retry": True,
    "tool_transport": "in_process",
}
PRESET_NAMES = ("fragile", "starter", "message", "structured")


def forwards(apps, schema_editor):
    PolicyVariant = apps.get_model("tracer", "PolicyVariant")
    for variant in PolicyVariant.objects.filter(name__in=PRESET_NAMES, is_preset=True):
        variant.settings = {**variant.settings, **NEW_SETTINGS}
        if variant.name == "starter":
            variant.description = variant.settings["description"] = STARTER
        variant.save(update_fields=["settings", "description"])
    PolicyVariant.objects.update_or_create(
        name="model-retries",
        defaults={"description": MODEL_RETRIES_DESCRIPTION, "settings": MODEL_RETRIES, "is_preset": True},
    )


def backwards(apps, schema_editor):
    PolicyVariant = apps.get_model("tracer", "PolicyVariant")
    PolicyVariant.objects.filter(name="model-retries", is_preset=True).delete()
    for variant in PolicyVariant.objects.filter(name__in=PRESET_NAMES, is_preset=True):
        variant.settings = {k: v for k, v in variant.settings.items() if k not in NEW_SETTINGS}
        if variant.name == "starter":
            variant.description = variant.settings["description"] = STARTER_BEFORE
        variant.save(update_fields=["settings", "description"])


class Migration(migrations.Migration):
    dependencies = [("tracer", "0013_otlp_span_batches")]

    operations = [migrations.RunPython(forwards, backwards)]
