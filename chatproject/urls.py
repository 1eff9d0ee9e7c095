from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import include, path
from django.views.defaults import page_not_found
from django.views.i18n import JavaScriptCatalog
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from chatproject import health, metrics_endpoint, views
from sessions_app import dashboard


def _route_under(prefix: str) -> str:
    """``/chainlit`` as a route prefix (``chainlit/``); ``/`` is the root."""
    return f"{prefix.strip('/')}/" if prefix.strip("/") else ""


urlpatterns = [
    path("", views.home, name="home"),
    path("thread/<uuid:thread_id>/", views.thread_page, name="thread"),
    # Liveness and readiness of this process, for balancers (chatproject.health).
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    # Prometheus metrics, for an allowed scraper (chatproject.metrics_endpoint).
    path("metrics", metrics_endpoint.metrics, name="metrics"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # The admin's live dashboard (sessions_app.dashboard), staff only, linked from its index.
    path("admin/tether/dashboard/", dashboard.dashboard_page, name="admin-dashboard"),
    path("admin/tether/dashboard/data.json", dashboard.dashboard_data, name="admin-dashboard-data"),
    path("admin/", admin.site.urls),
    # The web UI's translated strings for its scripts (sessions_app/static/tether/i18n.js).
    path("jsi18n/", JavaScriptCatalog.as_view(), name="javascript-catalog"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("", include("threads_app.urls")),
    path("", include("media_app.urls")),
    path("", include("sessions_app.urls")),
    # Chainlit's HTTP API, for Chainlit's frontend (chainlit_compat); its sign-in path is also
    # the frontend's sign-in page.
    path(_route_under(settings.CHAINLIT_PATH_PREFIX), include("chainlit_frontend.sign_in_urls")),
    path(_route_under(settings.CHAINLIT_PATH_PREFIX), include("chainlit_compat.urls")),
    # Chainlit's frontend and copilot (chainlit_frontend), when a build is configured: last,
    # since its index page answers every other GET under the prefix.
    path(_route_under(settings.CHAINLIT_PATH_PREFIX), include("chainlit_frontend.urls")),
]


def handler404(request: HttpRequest, exception: Exception) -> HttpResponse:
    """API clients get DRF's JSON 404 body for any path under /api/ that matches no route
    (the schema documents JSON errors); everything else gets Django's page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)
