"""Create the four preset policy variants (fragile, starter, message, structured).

The presets are a frozen copy of ``agents.policies.PRESETS`` (description and ``settings()``), not
an import of it, so migrating a database gives the same rows whatever the live code says later. A
change to a preset that existing databases should get needs a data migration of its own.
"""

from django.db import migrations

PRESETS = {
    "fragile": {
        "description": "Raises on any failure: the run dies with the exception.",
        "settings": {
            "name": "fragile",
            "description": "Raises on any failure: the run dies with the exception.",
            "error_format": "raise",
            "retry_on": "none",
            "max_attempts": 1,
            "backoff_base_s": 0.0,
            "backoff_max_s": 2.0,
            "backoff_jitter": 0.0,
            "empty_is_error": False,
            "consecutive_error_limit": None,
            "stop_on_fatal": False,
            "max_steps": 10,
        },
    },
    "starter": {
        "description": 'Bare "Error", every failure retried three times, an empty result is an error.',
        "settings": {
            "name": "starter",
            "description": 'Bare "Error", every failure retried three times, an empty result is an error.',
            "error_format": "bare",
            "retry_on": "all",
            "max_attempts": 3,
            "backoff_base_s": 0.0,
            "backoff_max_s": 2.0,
            "backoff_jitter": 0.0,
            "empty_is_error": True,
            "consecutive_error_limit": None,
            "stop_on_fatal": False,
            "max_steps": 10,
        },
    },
    "message": {
        "description": "is_error with the exception's message; transient failures retried in code.",
        "settings": {
            "name": "message",
            "description": "is_error with the exception's message; transient failures retried in code.",
            "error_format": "message",
            "retry_on": "transient",
            "max_attempts": 3,
            "backoff_base_s": 0.2,
            "backoff_max_s": 2.0,
            "backoff_jitter": 0.0,
            "empty_is_error": False,
            "consecutive_error_limit": None,
            "stop_on_fatal": True,
            "max_steps": 10,
        },
    },
    "structured": {
        "description": "Category, isRetryable and message; only transient retried, bounded, with jittered backoff; fatal stops the run; 3 consecutive errors stop the run.",
        "settings": {
            "name": "structured",
            "description": "Category, isRetryable and message; only transient retried, bounded, with jittered backoff; fatal stops the run; 3 consecutive errors stop the run.",
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
        },
    },
}


def create_presets(apps, schema_editor):
    PolicyVariant = apps.get_model("tracer", "PolicyVariant")
    for name, preset in PRESETS.items():
        PolicyVariant.objects.update_or_create(
            name=name,
            defaults={"description": preset["description"], "settings": preset["settings"], "is_preset": True},
        )


def remove_presets(apps, schema_editor):
    apps.get_model("tracer", "PolicyVariant").objects.filter(name__in=list(PRESETS), is_preset=True).delete()


class Migration(migrations.Migration):
    dependencies = [("tracer", "0001_initial")]

    operations = [migrations.RunPython(create_presets, remove_presets)]
