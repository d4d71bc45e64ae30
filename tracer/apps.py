from django.apps import AppConfig


class TracerConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "tracer"
    verbose_name = "Repair Loop Tracer"
