"""The ``reviewer`` group: browses and compares runs and reviews guard stops, changes no settings.

Permissions are made here first: Django creates them only after all migrations have run.
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

REVIEWER_GROUP = "reviewer"
REVIEWER_PERMISSIONS = [
    "view_run",
    "view_step",
    "view_experiment",
    "view_policyvariant",
    "view_stopreview",
    "add_stopreview",
    "change_stopreview",
]


def reviewer_group_create(apps, schema_editor):
    """Also called by the tests after a transactional test has emptied every table."""
    tracer = apps.get_app_config("tracer")
    # create_permissions skips an app whose models module is unset, as it is in a migration's app registry.
    tracer.models_module = getattr(tracer, "models_module", None) or True
    create_permissions(tracer, verbosity=0, apps=apps)
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name=REVIEWER_GROUP)
    group.permissions.add(
        *Permission.objects.filter(content_type__app_label="tracer", codename__in=REVIEWER_PERMISSIONS)
    )


def reviewer_group_delete(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name=REVIEWER_GROUP).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("tracer", "0006_run_worker_identity"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(reviewer_group_create, reviewer_group_delete)]
