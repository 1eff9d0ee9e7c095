"""How Tether runs daphne: ``python -m chatproject.serve [daphne's arguments] chatproject.asgi:application``.

Daphne's own command line, with one change to its WebSocket server: autobahn does not validate
incoming text frames as UTF-8. Daphne decodes every text frame with Python's codec anyway
(which validates too), and autobahn's validator is the costliest step of receiving a frame:
about 2 ms per MB here, 30 times the decoder, half of all the time a frame takes. A user
sending 900 KB frames at 100 a second (the issue's settings flood) kept the event loop busy
enough to triple other users' round trips with it, and left them as fast as idle without it.
A frame that is not UTF-8 still ends the connection, as autobahn's validator ended it (the
TCP connection is dropped): ``TetherWebSocketProtocol`` does it where the decoder finds out.
"""

from collections.abc import Callable
from typing import Any

from daphne.cli import CommandLineInterface as DaphneCommandLine
from daphne.server import Server
from daphne.ws_protocol import WebSocketProtocol


class TetherWebSocketProtocol(WebSocketProtocol):  # type: ignore[misc]  # daphne has no types
    """Daphne's WebSocket protocol; a text frame its decoder refuses drops the connection."""

    def onMessage(self, payload: bytes, isBinary: bool) -> None:  # autobahn's names
        try:
            super().onMessage(payload, isBinary)
        except UnicodeDecodeError:
            self.dropConnection(abort=True)


class TetherServer(Server):  # type: ignore[misc]
    """Daphne's server; once it has built its WebSocket factory (``ready_callable`` runs just
    before the reactor starts), the factory is given Tether's protocol and options."""

    ready_callable: Callable[[], None] | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
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
