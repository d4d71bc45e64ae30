from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured


class TracerConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "tracer"
    verbose_name = "Repair Loop Tracer"

    def ready(self) -> None:
        # The scenario packs RLT_SCENARIO_PACKS names are loaded as the web process, a worker or a
        # command starts: a module that cannot be loaded stops it here, named, not mid-run.
        from agents.scenarios import PackError, registry

        try:
            registry()
        except PackError as exc:
            raise ImproperlyConfigured(str(exc)) from None

        # So are the policy modules RLT_POLICY_PACKS names (fail, should_retry).
        from agents.policy_code import PolicyCodeError, policy_modules

        try:
            policy_modules()
        except PolicyCodeError as exc:
            raise ImproperlyConfigured(str(exc)) from None

        # A retention rule that cannot be read stops every process at start, named.
        from .retention import RetentionError, retention_rules

        try:
            retention_rules()
        except RetentionError as exc:
            raise ImproperlyConfigured(str(exc)) from None

        # An id too large for any column matches no row in `in`, as in `exact`, on SQLite too.
        from django.db.models import IntegerField

        from .lookups import IntegerIn

        IntegerField.register_lookup(IntegerIn)

        # django-axes' admin logs answer a year too large for a date as Django answers a bad one.
        from django.contrib import admin

        from .admin import date_hierarchy_overflow_guard

        date_hierarchy_overflow_guard(admin.site)

        # The matrix's tallies are kept by triggers (tracer/tallies.py): after every migrate they are
        # put back when a migration dropped them (SQLite rebuilds a table to alter it) or they changed.
        from django.db.models.signals import post_migrate

        from .tallies import tallies_ensure

        post_migrate.connect(tallies_ensure, sender=self)
