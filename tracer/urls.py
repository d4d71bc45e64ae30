from django.urls import path

from . import import_views, views

app_name = "tracer"
urlpatterns = [
    path("", views.run_list, name="runs"),
    path("runs/live/", views.run_rows_live, name="run-rows-live"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("runs/<int:pk>/steps/", views.run_steps, name="run-steps"),
    path("runs/<int:pk>/steps/<int:index>/<slug:field>/", views.step_value, name="step-value"),
    path("runs/<int:pk>/value/<slug:name>/", views.run_value, name="run-value"),
    path("runs/<int:pk>/review/", views.run_review, name="run-review"),
    path("runs/<int:pk>/export.json", import_views.run_export, name="run-export"),
    path("runs/<int:pk>/otlp.json", import_views.run_otlp, name="run-otlp"),
    path("compare/", views.compare, name="compare"),
    path("compare/suggest/", views.compare_suggest, name="compare-suggest"),
    path("compare/export.jsonl", import_views.compare_export, name="compare-export"),
    path("policies/", views.policies, name="policies"),
    path("policies/variants/", views.policy_variants, name="policy-variants"),
    path("policies/variants/new/", views.policy_create, name="policy-create"),
    path("policies/variants/<str:name>/archive/", views.policy_archive, name="policy-archive"),
    path("stops/", views.stops, name="stops"),
    path("reviews/bulk/<int:pk>/undo/", views.bulk_review_undo, name="bulk-review-undo"),
    path("tools/", views.tools, name="tools"),
    path("findings/", views.findings, name="findings"),
    path("launch/", views.launch, name="launch"),
    path("experiments/<int:pk>/", views.experiment, name="experiment"),
    path("experiments/<int:pk>/export.jsonl", import_views.experiment_export, name="experiment-export"),
    path("import/", import_views.import_runs, name="import"),
    path("tokens/", views.api_tokens, name="tokens"),
    path("tokens/new/", views.api_token_create, name="token-create"),
    path("tokens/<int:pk>/revoke/", views.api_token_revoke, name="token-revoke"),
]
