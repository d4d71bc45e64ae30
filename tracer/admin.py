"""The Django admin. Recorded history is evidence: runs, their steps and experiments are read-only
here and never deleted; a superuser archives an experiment (kept, hidden from the default views) with a
LogEntry and a log line, and only retention removes runs (tracer/retention.py). Stop reviews may be
edited."""

import logging

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.db import models, transaction
from django.utils import timezone

from . import diagnosis
from .forms import BoundedJSONField
from .models import Experiment, PolicyVariant, Run, Step, StopReview

logger = logging.getLogger(__name__)


class ReadOnly:
    """Mixed into an admin or an inline: shown, never added, changed or deleted here."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


# JSON typed into an admin form is read with the bounds of every other JSON reader (tracer/json_input.py).
BOUNDED_JSON = {models.JSONField: {"form_class": BoundedJSONField}}


@admin.register(PolicyVariant)
class PolicyVariantAdmin(admin.ModelAdmin):
    formfield_overrides = BOUNDED_JSON
    list_display = ("name", "is_preset", "created_by", "created_at")
    list_filter = ("is_preset",)
    search_fields = ("name", "description")


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "name",
        "model_backend",
        "repeats",
        "finished_runs",
        "total_runs",
        "created_at",
        "archived_at",
    )
    list_filter = ("model_backend", ("archived_at", admin.EmptyFieldListFilter))
    list_select_related = ("created_by",)
    actions = ["archive", "unarchive"]

    def has_add_permission(self, request):
        return False  # experiments are launched from the dashboard, which queues their runs

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # recorded history is evidence: archive it; retention removes old runs (tracer/retention.py)

    def has_archive_permission(self, request):
        return request.user.is_active and request.user.is_superuser

    @admin.action(
        description="Archive the selected experiments (kept, hidden from the default views)", permissions=["archive"]
    )
    def archive(self, request, queryset):
        self._archive(request, queryset.filter(archived_at__isnull=True), timezone.now(), "archived")

    @admin.action(description="Bring the selected experiments back from the archive", permissions=["archive"])
    def unarchive(self, request, queryset):
        self._archive(request, queryset.filter(archived_at__isnull=False), None, "brought back")

    def _archive(self, request, queryset, when, what: str) -> None:
        experiments = list(queryset)
        with transaction.atomic():
            Experiment.objects.filter(pk__in=[e.pk for e in experiments]).update(archived_at=when)
            # the Tools and Findings pages' rollups leave an archived experiment's runs out
            diagnosis.experiment_runs_rediagnose(experiment_ids=[e.pk for e in experiments])
        for experiment in experiments:
            self.log_change(request, experiment, f"{what.capitalize()}.")
            logger.warning(
                "experiment %s (%r) %s by %s", experiment.pk, experiment.name, what, request.user.get_username()
            )
        self.message_user(request, f"{len(experiments)} experiment(s) {what}; their runs are kept.")


class StepInline(ReadOnly, admin.TabularInline):
    model = Step
    extra = 0
    can_delete = False
    fields = ("index", "kind", "tool_name", "is_error", "category", "retryable", "retry_count", "latency_ms")
    readonly_fields = fields
    show_change_link = False


@admin.register(Run)
class RunAdmin(ReadOnly, admin.ModelAdmin):
    list_display = (
        "id",
        "scenario",
        "policy_name",
        "model_backend",
        "status",
        "stop_reason",
        "verdict",
        "step_count",
        "error_count",
        "retry_count",
        "created_at",
    )
    list_filter = ("status", "stop_reason", "verdict", "model_backend", "policy_name", "source")
    search_fields = ("scenario", "search_text")
    raw_id_fields = ("experiment", "parent", "policy")
    inlines = [StepInline]
    show_full_result_count = False


@admin.register(StopReview)
class StopReviewAdmin(admin.ModelAdmin):
    formfield_overrides = BOUNDED_JSON
    list_display = ("run", "verdict", "verdict_override", "reviewer", "reviewed_at")
    list_filter = ("verdict", "verdict_override")
    raw_id_fields = ("run",)

    def get_readonly_fields(self, request, obj=None):
        return ("run",) if obj is not None else ()  # a review's verdict and note change, not its run


class DateOverflowSafeChangeList(ChangeList):
    """Django's date hierarchy turns a year, month or day it cannot make a date of into its "incorrect
    lookup" answer (the changelist again with ``?e=1``) only when ``datetime()`` raises ValueError; a
    year past a C int (``?attempt_time__year=10000000000``) raises OverflowError, a 500. The same answer
    here."""

    def get_filters(self, request):
        try:
            return super().get_filters(request)
        except OverflowError as exc:
            raise IncorrectLookupParameters(exc) from exc


def date_hierarchy_overflow_guard(site: admin.AdminSite) -> None:
    """Every registered admin with a date hierarchy (django-axes' three logs) lists with the class above;
    called from ``TracerConfig.ready``, when every app's admin module has been imported."""
    for model_admin in site._registry.values():
        if model_admin.date_hierarchy and model_admin.get_changelist.__func__ is admin.ModelAdmin.get_changelist:
            model_admin.get_changelist = lambda request, **kwargs: DateOverflowSafeChangeList
