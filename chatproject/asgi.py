"""ASGI entry point: Django for HTTP, the Socket.IO consumer for WebSockets."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatproject.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from chatproject.body_limits import BodyLimitMiddleware  # noqa: E402
from sessions_app.auth import SocketAuthMiddleware  # noqa: E402
from sessions_app.origin import BrowserOriginValidator  # noqa: E402
from sessions_app.routing import websocket_urlpatterns  # noqa: E402
from sessions_app.shutdown import graceful_shutdown  # noqa: E402

django_http_app = ASGIStaticFilesHandler(django_asgi_app) if settings.SERVE_STATIC else django_asgi_app
# Bodies over their endpoint's budget are refused before Django reads them.
http_app = BodyLimitMiddleware(django_http_app)

application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": BrowserOriginValidator(
            # types-channels wants its check-only _ExtendedURLPattern; path() gives URLPatterns.
            SocketAuthMiddleware(URLRouter(websocket_urlpatterns))  # type: ignore[arg-type]
        ),
    }
)

# SIGTERM drains the process (finish or hand over turns, release claims, close sockets).
graceful_shutdown.install_on_daphne()
