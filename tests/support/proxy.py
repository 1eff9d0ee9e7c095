"""A loopback TCP proxy that breaks the connections it carries on demand, for fault tests.

Put it between a client and one or more daphne processes (it then plays "N processes behind
one address", like a load balancer without sticky sessions), or between a server and Redis.
Its event loop runs in a daemon thread of its own: the controls work from sync tests, from
async tests on any loop, and keep working while the test's own loop is blocked.

Faults, each applied to the connections open at the time of the call:

- ``drop()``: an orderly close, a FIN to both peers (what a restarting load balancer does).
- ``reset()``: an RST to both peers (SO_LINGER 0), what a crashed middlebox or host does.
- ``half_open()``: nothing crosses any more, in either direction, and nothing is closed:
  a dead network path. Only the peers' own timeouts (Engine.IO pings, TCP keepalive) can
  notice. The proxy stops reading, so once the socket buffers fill the sender's writes
  block, as they would with no ACKs coming back.

and, for connections that arrive later: ``refuse_new(True)`` (accepted and closed at once),
``half_open(new=True)`` (accepted and black-holed), ``heal()`` (back to normal).

In front of Redis: start the server with ``REDIS_URL=f"redis://127.0.0.1:{proxy.port}/0"`` to
break its pooled connections while Redis itself stays up. The python-socketio client notices
a black hole only through missing pings, ``pingInterval + pingTimeout`` after the last packet
it received (45 s with the server's defaults; start the server with short
``SOCKETIO_PING_INTERVAL`` / ``SOCKETIO_PING_TIMEOUT`` in tests), and a pending ``call()``
still waits for its own timeout after that disconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import Self, TypeVar, cast, overload

HOST = "127.0.0.1"
CHUNK = 64 * 1024
CONNECT_TIMEOUT = 5.0  # per backend; a refused loopback port fails at once
FIN_GRACE = 2.0  # how long dropped peers get to close their end before the proxy closes anyway
CONTROL_TIMEOUT = 15.0
MAX_CONNECTIONS = 1024
MAX_ROUTED = 10_000

T = TypeVar("T")


class _Link:
    """A client connection and the backend connection it is paired with."""

    def __init__(
        self,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        backend: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        port: int,
    ) -> None:
        self.client_reader, self.client_writer = client
        self.backend_reader, self.backend_writer = backend
        self.port = port
        self.pumps: list[asyncio.Task[None]] = []
        self.black_holed = False
        self.closing = False
        self.finished = asyncio.Event()
        self.eofs = 0

    @property
    def writers(self) -> tuple[asyncio.StreamWriter, asyncio.StreamWriter]:
        return self.client_writer, self.backend_writer

    async def stop_pumps(self) -> None:
        """Stop forwarding; returns once no pump reads any more (so others may read)."""
        current = asyncio.current_task()
        pumps = [p for p in self.pumps if p is not current]
        for pump in pumps:
            pump.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)


class FaultProxy:
    """TCP proxy ``127.0.0.1:<port>`` -> ``127.0.0.1:<backend ports>``, round robin over the
    backends that accept; controls are thread-safe and return once applied."""

    def __init__(
        self, backends: Iterable[int], *, port: int = 0, max_connections: int = MAX_CONNECTIONS
    ) -> None:
        self._backends: tuple[int, ...] = tuple(backends)
        self._next_backend = 0
        self._max_connections = max_connections
        self._links: set[_Link] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._refuse = False
        self._black_hole_new = False
        self._routed: list[int] = []
        self._stopped = False
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(port,), name=f"FaultProxy->{self._backends}", daemon=True
        )
        self._thread.start()
        self._started.wait(CONTROL_TIMEOUT)
        if self._start_error is not None:
            raise RuntimeError("FaultProxy could not listen") from self._start_error
        server = cast("asyncio.Server | None", self._server)  # set by _run, on the proxy's thread
        assert server is not None
        self.port: int = server.sockets[0].getsockname()[1]

    # --- addresses and state -------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: what a client uses instead of the server's URL."""
        return f"http://{HOST}:{self.port}"

    @property
    def backends(self) -> tuple[int, ...]:
        return self._backends

    @property
    def connections(self) -> int:
        """Connections open through the proxy now, black-holed ones included."""
        return len(self._links)

    def connections_to(self, port: int) -> int:
        """Connections open now to one backend."""
        return sum(1 for link in list(self._links) if link.port == port)

    @property
    def routed(self) -> list[int]:
        """The backend port each connection was sent to, oldest first (the last 10,000)."""
        return list(self._routed)

    # --- controls ---------------------------------------------------------------------------------

    def drop(self) -> int:
        """Close every current connection with a FIN to both peers; returns how many."""
        return self._call(self._drop_all)

    def reset(self) -> int:
        """Abort every current connection with an RST to both peers; returns how many."""
        return self._call(self._reset_all)

    def half_open(self, *, new: bool = False) -> int:
        """Stop forwarding bytes on every current connection without closing it; with
        ``new=True`` later connections are accepted and black-holed too, until :meth:`heal`.
        Returns how many connections were black-holed now."""
        return self._call(lambda: self._half_open_all(new))

    def refuse_new(self, refuse: bool = True) -> None:
        """While set, new connections are accepted and closed at once (current ones go on)."""
        self._call(lambda: self._set(refuse=refuse))

    def heal(self) -> None:
        """New connections are forwarded normally again. Connections already black-holed stay
        dead: their peers must notice and reconnect, as after a real outage."""
        self._call(lambda: self._set(refuse=False, black_hole_new=False))

    def set_backends(self, ports: Iterable[int]) -> None:
        """Route new connections to these backend ports; current connections keep theirs."""
        chosen = tuple(ports)
        self._call(lambda: self._set(backends=chosen))

    def stop(self) -> None:
        """Close the listener and abort every connection; the thread ends. Idempotent."""
        if self._stopped:
            return
        if self._loop.is_running():
            with contextlib.suppress(Exception):
                self._call(self._shutdown)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._stopped = True
        self._thread.join(CONTROL_TIMEOUT)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- the loop thread --------------------------------------------------------------------------

    def _run(self, port: int) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._accept, HOST, port, limit=CHUNK, reuse_address=True)
            )
        except BaseException as exc:
            self._start_error = exc
            self._started.set()
            self._loop.close()
            return
        self._started.set()
        try:
            self._loop.run_forever()
            # Finish what stop() left pending (drops in their grace period, handlers).
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        finally:
            self._loop.close()

    @overload
    def _call(self, fn: Callable[[], Awaitable[T]]) -> T: ...
    @overload
    def _call(self, fn: Callable[[], None]) -> None: ...
    def _call(self, fn: Callable[[], Awaitable[T] | None]) -> T | None:
        """Run ``fn`` on the proxy's loop and return its result (awaited if a coroutine)."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("FaultProxy controls cannot be called from the proxy's own thread")
        if self._stopped:
            raise RuntimeError("FaultProxy is stopped")

        async def run() -> T | None:
            result = fn()
            if result is None:
                return None
            return await result

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(CONTROL_TIMEOUT)

    def _set(
        self,
        *,
        refuse: bool | None = None,
        black_hole_new: bool | None = None,
        backends: tuple[int, ...] | None = None,
    ) -> None:
        if refuse is not None:
            self._refuse = refuse
        if black_hole_new is not None:
            self._black_hole_new = black_hole_new
        if backends is not None:
            self._backends = backends

    def _closed_to_new(self) -> bool:
        """Stopped, or refusing new connections (either can change while one connects)."""
        return self._stopped or self._refuse

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closed_to_new() or len(self._links) >= self._max_connections:
            writer.close()
            return
        routed = await self._connect_backend()
        if routed is None:  # no backend accepts
            writer.close()
            return
        port, backend = routed
        if self._closed_to_new():  # changed while we connected
            writer.close()
            backend[1].close()
            return
        link = _Link((reader, writer), backend, port)
        self._links.add(link)
        self._routed.append(port)
        del self._routed[:-MAX_ROUTED]
        if self._black_hole_new:
            link.black_holed = True
        else:
            link.pumps = [
                asyncio.create_task(self._pump(link, reader, backend[1])),
                asyncio.create_task(self._pump(link, backend[0], writer)),
            ]
        await link.finished.wait()  # the handler holds the streams while the link lives

    async def _connect_backend(
        self,
    ) -> tuple[int, tuple[asyncio.StreamReader, asyncio.StreamWriter]] | None:
        ports = self._backends
        if not ports:
            return None
        # Claim the turn before awaiting, so concurrent accepts still alternate.
        first = self._next_backend
        self._next_backend += 1
        for i in range(len(ports)):
            port = ports[(first + i) % len(ports)]
            try:
                streams = await asyncio.wait_for(
                    asyncio.open_connection(HOST, port, limit=CHUNK), CONNECT_TIMEOUT
                )
            except (OSError, TimeoutError):
                continue  # refused (or gone): skip it, like a health-checking balancer
            self._next_backend += i  # the skipped ones do not count as turns of the next backend
            return port, streams
        return None

    async def _pump(self, link: _Link, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await source.read(CHUNK)
                if link.black_holed or link.closing:
                    return  # a fault arrived while reading: this chunk is lost
                if not data:
                    # The peer half-closed: pass its FIN on, as a network path would.
                    if sink.can_write_eof():
                        sink.write_eof()
                    link.eofs += 1
                    if link.eofs == 2:
                        self._close_link(link)
                    return
                sink.write(data)
                await sink.drain()
        except asyncio.CancelledError:
            raise
        except (OSError, RuntimeError):
            # One side reset or broke: abort the other side too.
            if not (link.black_holed or link.closing):
                self._close_link(link, rst=True)

    def _close_link(self, link: _Link, *, rst: bool = False) -> None:
        link.closing = True
        for pump in link.pumps:
            if pump is not asyncio.current_task():
                pump.cancel()
        for writer in link.writers:
            if rst:
                _abort_with_rst(writer)
            else:
                writer.close()
        self._links.discard(link)
        link.finished.set()

    async def _drop_all(self) -> int:
        links = [link for link in self._links if not link.closing]
        for link in links:
            link.closing = True
        await asyncio.gather(*(link.stop_pumps() for link in links))
        for link in links:
            for writer in link.writers:
                with contextlib.suppress(OSError, RuntimeError):
                    if writer.can_write_eof() and not writer.is_closing():
                        writer.write_eof()
            task = asyncio.create_task(self._finish_drop(link))
            self._background.add(task)  # the loop keeps only weak references to tasks
            task.add_done_callback(self._background.discard)
        return len(links)

    async def _finish_drop(self, link: _Link) -> None:
        """Wait for each peer to close its end after our FIN, reading out what it still
        sends: closing a socket with unread input would send an RST instead of the FIN."""

        async def read_out(reader: asyncio.StreamReader) -> None:
            with contextlib.suppress(OSError, RuntimeError):
                while await reader.read(CHUNK):
                    pass

        await asyncio.wait(
            [
                asyncio.create_task(read_out(link.client_reader)),
                asyncio.create_task(read_out(link.backend_reader)),
            ],
            timeout=FIN_GRACE,
        )
        self._close_link(link)

    async def _reset_all(self) -> int:
        links = list(self._links)
        for link in links:
            self._close_link(link, rst=True)
        return len(links)

    async def _half_open_all(self, new: bool) -> int:
        if new:
            self._black_hole_new = True
        links = [link for link in self._links if not link.black_holed and not link.closing]
        for link in links:
            link.black_holed = True
        await asyncio.gather(*(link.stop_pumps() for link in links))
        return len(links)

    async def _shutdown(self) -> None:
        self._stopped = True  # refuse what is still being accepted
        if self._server is not None:
            self._server.close()
        for link in list(self._links):
            self._close_link(link, rst=True)
        await asyncio.sleep(0)  # let the transports close


def _abort_with_rst(writer: asyncio.StreamWriter) -> None:
    """Close at once with an RST: SO_LINGER on, timeout 0, then close without flushing."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
