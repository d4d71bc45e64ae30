from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponseRedirect
from django.templatetags.static import static
from django.urls import include, path
from django.views.decorators.http import require_safe

from tracer.api import api
from tracer.intake.otlp import views as otlp_views


@require_safe
def favicon(request: HttpRequest) -> HttpResponseRedirect:
    """Pages link static/favicon.svg; browsers and tools that ask /favicon.ico anyway (the admin, the
    API docs) are sent there, rather than to a 404. Looked up per request: its served name has a hash."""
    return HttpResponseRedirect(static("favicon.svg"))


urlpatterns = [
    path("favicon.ico", favicon),
    path("admin/", admin.site.urls),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", api.urls),
    # OTLP/HTTP's standard path for traces, where exporters send by default (docs/otlp.md)
    path("v1/traces", otlp_views.traces_receive, name="otlp-traces"),
    path("", include("tracer.urls")),
]

# A database that cannot be used answers 503 with Retry-After wherever it is met, not 500.
handler500 = "tracer.outage.server_error"
