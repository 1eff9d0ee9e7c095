"""Which ASGI server runs Tether, and its command line: daphne (the default) or uvicorn.

``SERVER=uvicorn`` in the environment picks uvicorn for ``make run``, ``make cluster``, the
tests' servers and the benches; both run the same ``chatproject.asgi:application`` with the
same bounds (a socket's frames waiting for the application, the WebSocket message size) and
the same graceful SIGTERM drain. Each has a wrapper of Tether's: ``chatproject.serve`` for
daphne, ``chatproject.serve_uvicorn`` for uvicorn. Nothing here imports Django or a server:
the cluster supervisor and the benches build their command lines from this module alone.
"""

import sys
from collections.abc import Mapping, Sequence

ASGI_APP = "chatproject.asgi:application"
DEFAULT_SERVER = "daphne"
SERVER_MODULES = {"daphne": "chatproject.serve", "uvicorn": "chatproject.serve_uvicorn"}
SERVERS = tuple(SERVER_MODULES)
# daphne's 1 MiB WebSocket message cap also limits what the server sends, and a long thread's
# resume_thread is bigger; uvicorn caps only what it receives (16 MiB by default). Both get
# 32 MiB; inbound frames are still limited by SOCKETIO_MAX_PAYLOAD.
WS_MAX_MESSAGE = str(32 * 1024 * 1024)
DAPHNE_ARGS = ("--websocket-max-message-size", WS_MAX_MESSAGE, "--websocket-max-frame-size", WS_MAX_MESSAGE)
UVICORN_ARGS = ("--ws-max-size", WS_MAX_MESSAGE)
# Frames of one socket waiting for the application, at most, before its reading pauses (a
# client that is not flooding has one or two); reading goes on once half were taken.
RECEIVE_HIGH_WATER = 32
SERVER_ARGS: dict[str, tuple[str, ...]] = {"daphne": DAPHNE_ARGS, "uvicorn": UVICORN_ARGS}


class UnknownServer(ValueError):
    """``SERVER`` names no server Tether runs on."""


def chosen_server(env: Mapping[str, str]) -> str:
    """The server ``env`` asks for (``SERVER``; daphne when unset or empty)."""
    name = (env.get("SERVER") or DEFAULT_SERVER).strip().lower()
    if name not in SERVER_MODULES:
        raise UnknownServer(f"SERVER={name!r}: Tether runs on {' or '.join(SERVERS)}")
    return name


def server_command(
    server: str, host: str, port: int, args: Sequence[str] | None = None, python: str = sys.executable
) -> list[str]:
    """The command that serves Tether with ``server`` on ``host:port``; ``args`` replace the
    server's default options (``SERVER_ARGS``). Both wrappers take daphne's ``-b`` / ``-p``."""
    options = SERVER_ARGS[server] if args is None else tuple(args)
    return [python, "-m", SERVER_MODULES[server], *options, "-b", host, "-p", str(port), ASGI_APP]
