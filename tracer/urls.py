from django.urls import path

from . import views
from .otlp import views as otlp_views

app_name = "tracer"
urlpatterns = [
    path("", views.run_list, name="runs"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("runs/<int:pk>/steps/", views.run_steps, name="run-steps"),
    path("runs/<int:pk>/otlp.json", otlp_views.run_otlp, name="run-otlp"),
    path("compare/", views.compare, name="compare"),
    path("policies/", views.policies, name="policies"),
    path("policies/new/", views.policy_create, name="policy-create"),
    path("stops/", views.stops, name="stops"),
    path("stops/<int:pk>/review/", views.stop_review, name="stop-review"),
    path("launch/", views.launch, name="launch"),
    path("experiments/<int:pk>/", views.experiment, name="experiment"),
]
