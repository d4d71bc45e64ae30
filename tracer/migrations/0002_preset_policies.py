"""Create the four preset policy variants (fragile, starter, message, structured) from agents.policies."""

from django.db import migrations


def create_presets(apps, schema_editor):
    from agents.policies import PRESETS

    PolicyVariant = apps.get_model("tracer", "PolicyVariant")
    for policy in PRESETS.values():
        PolicyVariant.objects.update_or_create(
            name=policy.name,
            defaults={"description": policy.description, "settings": policy.settings(), "is_preset": True},
        )


def remove_presets(apps, schema_editor):
    from agents.policies import PRESETS

    apps.get_model("tracer", "PolicyVariant").objects.filter(name__in=list(PRESETS), is_preset=True).delete()


class Migration(migrations.Migration):
    dependencies = [("tracer", "0001_initial")]

    operations = [migrations.RunPython(create_presets, remove_presets)]
