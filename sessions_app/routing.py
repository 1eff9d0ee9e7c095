from django.urls import path

from sessions_app.consumers import ChatConsumer

websocket_urlpatterns = [
    path("ws/socket.io/", ChatConsumer.as_asgi()),  # type: ignore[arg-type]  # an ASGI app, as Channels allows
]
