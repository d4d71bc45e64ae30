"""Two more presets, each the structured harness with one of the lessons' mistakes in it.

- ``nested-flag-bug``: the retry rule reads ``isRetryable`` at the top level of the tool_result, one
  level above where it is (``retry_flag_path``), so a retryable failure is never retried (lesson 002).
- ``swallowed-errors``: every failure becomes an empty result with no ``is_error``
  (``swallow_errors``), so the model takes it for nothing found (lesson 001).

A variant someone already saved under either name becomes the preset, with the preset's settings.
A frozen copy of ``agents.policies.PRESETS`` as it is now, like 0014, not an import of it.
"""

from django.db import migrations

# structured's settings as they are now; each preset below changes one of them.
STRUCTURED = {
    "error_format": "structured",
    "retry_on": "transient",
    "max_attempts": 3,
    "backoff_base_s": 0.2,
    "backoff_max_s": 2.0,
    "backoff_jitter": 0.5,
    "empty_is_error": False,
    "consecutive_error_limit": 3,
    "stop_on_fatal": True,
    "max_steps": 10,
    "retry_flag_path": "error.isRetryable",
    "swallow_errors": False,
    "clean_error_text": True,
    "write_retries": "idempotency_key",
    "ask_model_to_retry": False,
    "tool_transport": "in_process",
}
NESTED_FLAG_BUG = (
    "Structured errors, but the retry rule reads isRetryable at the top level of the tool_result, one "
    "level above where it is, so a retryable failure is never retried (lesson 002's nested-flag bug)."
)
SWALLOWED_ERRORS = (
    "Every failure becomes an empty result with no is_error, so the model takes it for nothing found "
    "(lesson 001's common mistake)."
)
PRESETS = {
    "nested-flag-bug": {
        "name": "nested-flag-bug",
        "description": NESTED_FLAG_BUG,
        **STRUCTURED,
        "retry_flag_path": "isRetryable",
    },
    "swallowed-errors": {
        "name": "swallowed-errors",
        "description": SWALLOWED_ERRORS,
        **STRUCTURED,
        "swallow_errors": True,
    },
}


def forwards(apps, schema_editor):
    PolicyVariant = apps.get_model("tracer", "PolicyVariant")
    for name, settings in PRESETS.items():
        PolicyVariant.objects.update_or_create(
            name=name, defaults={"description": settings["description"], "settings": settings, "is_preset": True}
        )


def backwards(apps, schema_editor):
    PolicyVariant = apps.get_model("tracer", "PolicyVariant")
    PolicyVariant.objects.filter(name__in=PRESETS, is_preset=True).delete()


class Migration(migrations.Migration):
    dependencies = [("tracer", "0035_run_duration_and_cost")]

    operations = [migrations.RunPython(forwards, backwards)]
