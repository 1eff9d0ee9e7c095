"""ASGI entry point: Django for HTTP, the Socket.IO consumer for WebSockets and Engine.IO
long-polling at the socket path, under daphne or uvicorn (``chatproject.servers``)."""

import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatproject.settings")

from chatproject import tracing

# Traces (off unless OTEL_ENABLED): before Django builds its middleware chain, which the
# Django instrumentation joins.
tracing.start()
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from chainlit_frontend.cors import ChainlitCors  # noqa: E402
from chatproject.body_limits import BodyLimitMiddleware  # noqa: E402
from chatproject.budget_gate import BudgetGate  # noqa: E402
from sessions_app.auth import SocketAuthMiddleware  # noqa: E402
from sessions_app.chat.hooks import load_app  # noqa: E402
from sessions_app.origin import BrowserOriginValidator  # noqa: E402
from sessions_app.polling.endpoint import polling_app  # noqa: E402
from sessions_app.routing import websocket_urlpatterns  # noqa: E402
from sessions_app.shutdown import graceful_shutdown, lifespan  # noqa: E402
from sessions_app.socket_paths import socket_paths  # noqa: E402
from sessions_app.startup import install_on_daphne as start_on_daphne  # noqa: E402

# The chat app is imported now: one that fails to import stops the server's start here, with
# its traceback, rather than answering every socket with an internal error later.
load_app()

django_http_app = ASGIStaticFilesHandler(django_asgi_app) if settings.SERVE_STATIC else django_asgi_app
SOCKET_PATHS = socket_paths()


async def http_routes(scope: Any, receive: Any, send: Any) -> None:
    """Engine.IO long-polling at the socket path (``sessions_app.polling``); Django elsewhere."""
    if scope.get("path") in SOCKET_PATHS:
        await polling_app(scope, receive, send)
    else:
        await django_http_app(scope, receive, send)


# Bodies over their endpoint's budget are refused before Django reads them, and repeats of a
# request a budget just refused before anything else. Chainlit's paths answer pages of the
# origins the site trusts (the copilot widget on another site: chainlit_frontend.cors).
http_app = ChainlitCors(BudgetGate(BodyLimitMiddleware(http_routes)))

application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": BrowserOriginValidator(
            # types-channels wants its check-only _ExtendedURLPattern; path() gives URLPatterns.
            SocketAuthMiddleware(URLRouter(websocket_urlpatterns))  # type: ignore[arg-type]
        ),
        # uvicorn's startup and shutdown (daphne sends no lifespan scope): the shutdown drains.
        "lifespan": lifespan,
    }
)

# SIGTERM drains the process (finish or hand over turns, release claims, close sockets).
graceful_shutdown.install_on_daphne()
# The mailbox and the recovery loop run from the start, not from the first socket.
start_on_daphne()
