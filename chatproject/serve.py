"""How Tether runs daphne (the default server, ``chatproject.servers``): ``python -m chatproject.serve [daphne's arguments] chatproject.asgi:application``.

Daphne's own command line, with one change to its WebSocket server: autobahn does not validate
incoming text frames as UTF-8. Daphne decodes every text frame with Python's codec anyway
(which validates too), and autobahn's validator is the costliest step of receiving a frame:
about 2 ms per MB here, 30 times the decoder, half of all the time a frame takes. A user
sending 900 KB frames at 100 a second (the issue's settings flood) kept the event loop busy
enough to triple other users' round trips with it, and left them as fast as idle without it.
A frame that is not UTF-8 still ends the connection, as autobahn's validator ended it (the
TCP connection is dropped): ``TetherWebSocketProtocol`` does it where the decoder finds out.

And daphne reads a socket as fast as its client writes, queueing every frame for the
application however far behind it is: 6000 settings changes of 60 KB at link speed, refused
cheaply one by one, still left a thousand of them (70 MiB) waiting at times on a busy machine.
``TetherWebSocketProtocol`` stops reading a socket with ``RECEIVE_HIGH_WATER`` frames waiting
until the application has taken half of them, so TCP pushes back on that client alone.
"""

import logging
from collections.abc import Callable
from typing import Any, cast

from daphne.access import AccessLogGenerator
from daphne.cli import CommandLineInterface as DaphneCommandLine
from daphne.server import Server
from daphne.ws_protocol import WebSocketProtocol
from django.conf import settings

from chatproject.servers import RECEIVE_HIGH_WATER

# How often a paused socket looks again.
RESUME_CHECK_SECONDS = 0.005


class TetherWebSocketProtocol(WebSocketProtocol):  # type: ignore[misc]  # daphne has no types
    """Daphne's WebSocket protocol; a text frame its decoder refuses drops the connection, and
    a socket whose frames pile up is not read until the application caught up."""

    reading_paused = False

    def onMessage(self, payload: bytes, isBinary: bool) -> None:  # autobahn's names
        try:
            super().onMessage(payload, isBinary)
        except UnicodeDecodeError:
            self.dropConnection(abort=True)
            return
        queue = getattr(self, "application_queue", None)
        if not self.reading_paused and queue is not None and queue.qsize() >= RECEIVE_HIGH_WATER:
            self.reading_paused = True
            self.transport.pauseProducing()
            self.resume_when_drained()

    def resume_when_drained(self) -> None:
        from twisted.internet import reactor  # the reactor daphne installed

        if getattr(self.transport, "disconnected", True):
            self.reading_paused = False
            return
        if self.application_queue.qsize() <= RECEIVE_HIGH_WATER // 2:
            self.reading_paused = False
            self.transport.resumeProducing()
            return
        cast(Any, reactor).callLater(RESUME_CHECK_SECONDS, self.resume_when_drained)


class AccessLogLines:
    """A stream for daphne's access log that hands each entry to the ``daphne.access`` logger."""

    def __init__(self) -> None:
        self.logger = logging.getLogger("daphne.access")

    def write(self, text: str) -> None:
        if text.strip():
            self.logger.info(text.strip())

    def flush(self) -> None:
        pass


class TetherServer(Server):  # type: ignore[misc]
    """Daphne's server; once it has built its WebSocket factory (``ready_callable`` runs just
    before the reactor starts), the factory is given Tether's protocol and options."""

    ready_callable: Callable[[], None] | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("action_logger") is not None and settings.LOG_FORMAT == "json":
            # daphne writes its access log to stdout as text; under LOG_FORMAT=json each
            # entry goes through logging instead, a JSON line like every other.
            kwargs["action_logger"] = AccessLogGenerator(AccessLogLines())
        super().__init__(*args, **kwargs)
        self.when_ready = self.ready_callable
        self.ready_callable = self.tune_websockets

    def tune_websockets(self) -> None:
        self.ws_factory.protocol = TetherWebSocketProtocol
        self.ws_factory.setProtocolOptions(utf8validateIncoming=False)
        if self.when_ready is not None:
            self.when_ready()


class CommandLineInterface(DaphneCommandLine):  # type: ignore[misc]
    server_class = TetherServer


if __name__ == "__main__":
    CommandLineInterface.entrypoint()
