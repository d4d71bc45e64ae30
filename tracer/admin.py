from django.contrib import admin

from .models import Experiment, PolicyVariant, Run, Step, StopReview


@admin.register(PolicyVariant)
class PolicyVariantAdmin(admin.ModelAdmin):
    list_display = ("name", "is_preset", "created_by", "created_at")
    list_filter = ("is_preset",)
    search_fields = ("name", "description")


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "model_backend", "repeats", "finished_runs", "total_runs", "created_at")
    list_filter = ("model_backend",)
    list_select_related = ("created_by",)


class StepInline(admin.TabularInline):
    model = Step
    extra = 0
    can_delete = False
    fields = ("index", "kind", "tool_name", "is_error", "category", "retryable", "retry_count", "latency_ms")
    readonly_fields = fields
    show_change_link = False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
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
    list_display = ("run", "verdict", "reviewer", "reviewed_at")
    list_filter = ("verdict",)
    raw_id_fields = ("run",)
