from typing import Any

from django.urls import path

from sessions_app.consumers import ChatConsumer
from sessions_app.polling.upgrade import upgrade_app, upgrade_sid
from sessions_app.socket_paths import socket_paths

chat_consumer = ChatConsumer.as_asgi()


async def socket_endpoint(scope: Any, receive: Any, send: Any) -> None:
    """A WebSocket of its own (``ChatConsumer``), or the upgrade of a polling session."""
    if upgrade_sid(scope) is None:
        await chat_consumer(scope, receive, send)
    else:
        await upgrade_app(scope, receive, send)


websocket_urlpatterns = [
    path(route.lstrip("/"), socket_endpoint)  # type: ignore[arg-type]  # an ASGI app, as Channels allows
    for route in sorted(socket_paths())
]
