from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from tracer.api import api
from tracer.otlp import views as otlp_views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", api.urls),
    # OTLP/HTTP's standard path for traces, where exporters send by default (docs/otlp.md)
    path("v1/traces", otlp_views.traces_receive, name="otlp-traces"),
    path("", include("tracer.urls")),
]
