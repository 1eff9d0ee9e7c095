"""How Tether runs uvicorn: ``python -m chatproject.serve_uvicorn [--ws-max-size N] -b HOST -p PORT``.

``SERVER=uvicorn`` picks it (``chatproject.servers``). uvicorn with its fast parts (uvloop,
httptools, the websockets library's sans-I/O protocol) and the same behaviour as Tether's
daphne (``chatproject.serve``), option by option:

- A socket is not read while ``RECEIVE_HIGH_WATER`` (32) of its frames wait for the
  application, and is read again once half were taken, so a flood waits in its client's TCP
  buffers (uvicorn's own protocol pauses after every frame and resumes when none waits: the
  same bound, with a pause and a resume per frame on the hot path).
- The WebSocket message cap is 32 MiB (what daphne gets in ``DAPHNE_ARGS``); text frames are
  decoded as UTF-8 and one that is not ends the connection (1007), as under daphne.
- SIGTERM drains the process (``sessions_app.shutdown``) while uvicorn still listens (new
  sockets are refused and ``/readyz`` answers 503, as under daphne), then uvicorn stops; a
  second SIGTERM stops at once. The exit status of a drained process is 0, as daphne's.
  (A plain ``uvicorn chatproject.asgi:application`` drains too, through the ASGI lifespan
  protocol, but only after uvicorn closed every socket itself.)
- No proxy headers: ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are read by Django's
  settings (``PROXY_COUNT``, ``SECURE_PROXY_SSL_HEADER``), as under daphne; uvicorn's default
  would trust them from any local peer, ``make run``'s clients included.
- No per-message compression (autobahn under daphne accepts none; deflating MBs of resume
  payload is the costliest thing a socket could do), no access log (daphne logs none either),
  and kept-alive HTTP connections stay open 75 s, longer than nginx keeps its idle upstream
  connections (60 s), so nginx never reuses one uvicorn is closing.
"""

import argparse
import asyncio
import os
import signal
import socket
from collections.abc import Sequence
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.config import LOGGING_CONFIG
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from chatproject.servers import ASGI_APP, RECEIVE_HIGH_WATER, WS_MAX_MESSAGE

KEEP_ALIVE_SECONDS = 75
# After the drain, what uvicorn itself still waits for (HTTP requests in flight).
STOP_GRACE_SECONDS = 5


class TetherWebSocketsProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol, read until ``RECEIVE_HIGH_WATER`` frames wait for the
    application, then again once it took half of them."""

    def send_receive_event_to_app(self) -> None:
        paused = self.read_paused
        self.read_paused = True  # uvicorn pauses after each frame unless already paused
        try:
            super().send_receive_event_to_app()
        finally:
            self.read_paused = paused
        if not paused and self.queue.qsize() >= RECEIVE_HIGH_WATER and not self.transport.is_closing():
            self.read_paused = True
            self.transport.pause_reading()

    async def receive(self) -> Any:
        message = await self.queue.get()
        if self.read_paused and self.queue.qsize() <= RECEIVE_HIGH_WATER // 2:
            self.read_paused = False
            self.transport.resume_reading()
        return message


class TetherUvicornServer(uvicorn.Server):
    """uvicorn's server; SIGTERM drains the process first (``sessions_app.shutdown``)."""

    loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig != signal.SIGTERM or self.loop is None:
            super().handle_exit(sig, frame)  # Ctrl-C: uvicorn's stop (the lifespan drains)
            return
        from sessions_app.shutdown import graceful_shutdown  # Django is set up by now

        # Not passed on to super(): uvicorn would raise SIGTERM again after stopping, and the
        # process would die of it instead of exiting 0.
        self.loop.call_soon_threadsafe(graceful_shutdown.begin, self.stop, self.stop_now)

    def stop(self) -> None:
        self.should_exit = True

    def stop_now(self) -> None:
        self.should_exit = self.force_exit = True


def config(host: str, port: int, ws_max_size: int, app: str = ASGI_APP) -> uvicorn.Config:
    """uvicorn's configuration for Tether (see the module docstring)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        ws=TetherWebSocketsProtocol,
        ws_max_size=ws_max_size,
        ws_per_message_deflate=False,
        # Tether's application answers the lifespan scope (its shutdown drains); another one
        # (the benches' bare consumer) may not.
        lifespan="on" if app == ASGI_APP else "auto",
        proxy_headers=False,
        server_header=False,
        access_log=False,
        # LOG_FORMAT=json: uvicorn's own lines go through Django's logging (JSON) too.
        log_config=None if os.environ.get("LOG_FORMAT", "").strip().lower() == "json" else LOGGING_CONFIG,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        timeout_graceful_shutdown=STOP_GRACE_SECONDS,
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m chatproject.serve_uvicorn", description="Serve Tether with uvicorn."
    )
    parser.add_argument("-b", "--bind", default="127.0.0.1", help="address to listen on")
    parser.add_argument("-p", "--port", type=int, default=8000, help="port to listen on")
    parser.add_argument(
        "--ws-max-size", type=int, default=int(WS_MAX_MESSAGE), help="largest WebSocket message, bytes"
    )
    parser.add_argument("application", nargs="?", default=ASGI_APP, help="the ASGI application")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    TetherUvicornServer(config(args.bind, args.port, args.ws_max_size, args.application)).run()


if __name__ == "__main__":
    main()
