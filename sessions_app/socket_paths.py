"""Where the Socket.IO endpoint answers: ``/ws/socket.io/``, and the same path under
``CHAINLIT_PATH_PREFIX``, where Chainlit's frontend served there looks for it (it connects to
``<its root>/ws/socket.io``)."""

from django.conf import settings

SOCKET_PATH = "/ws/socket.io/"


def socket_paths() -> frozenset[str]:
    """Every path of the endpoint (WebSocket and long-polling alike), with leading and trailing
    slashes."""
    prefix = settings.CHAINLIT_PATH_PREFIX.rstrip("/")
    return frozenset({SOCKET_PATH, f"{prefix}{SOCKET_PATH}"})
