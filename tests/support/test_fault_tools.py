"""The fault-injection tools do what the fault tests rely on.

``FaultProxy`` forwards to real daphne processes and breaks connections the three ways a
network does (FIN, RST, black hole); ``PrivateRedis`` goes away and comes back on the same
port; ``LiveServer`` takes a Redis URL, a SIGTERM and a restart. Raw-socket tests pin down the
TCP-level behaviour (which peer sees what); Socket.IO tests show what the real client sees.
"""

import asyncio
import logging
import os
import socket
import socketserver
import threading
import time
import urllib.request
import uuid
from typing import Any

import pytest
import redis
import socketio

from tests.support.client import ChatClient, signed_in
from tests.support.proxy import FaultProxy
from tests.support.redis_server import PrivateRedis
from tests.support.server import LiveServer, free_port

pytestmark = [pytest.mark.fault, pytest.mark.django_db(transaction=True)]

# The half-open test's server pings every second and waits 3 s for the pong; the client
# gives up after ping interval + ping timeout (4 s) without hearing from the server.
PING_INTERVAL = 1.0
PING_TIMEOUT = 3.0


class TagServer(socketserver.ThreadingTCPServer):
    """A TCP backend that answers every chunk with ``tag + chunk`` and records how each
    connection ended ("eof" or "reset"), so tests can see what the backend side observed."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, tag: bytes) -> None:
        super().__init__(("127.0.0.1", 0), TagHandler)
        self.tag = tag
        self.endings: list[str] = []
        self.open: list[socket.socket] = []
        self.ended = threading.Condition()
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def port(self) -> int:
        return self.server_address[1]

    def wait_endings(self, count: int, timeout: float = 10) -> list[str]:
        with self.ended:
            self.ended.wait_for(lambda: len(self.endings) >= count, timeout)
        return list(self.endings)

    def close_open(self) -> None:
        """Close the backend's end of every open connection (a FIN towards the proxy)."""
        for sock in list(self.open):
            sock.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class TagHandler(socketserver.BaseRequestHandler):
    server: TagServer

    def handle(self) -> None:
        self.server.open.append(self.request)
        ending = "eof"
        try:
            while data := self.request.recv(65536):
                self.request.sendall(self.server.tag + data)
        except ConnectionResetError:
            ending = "reset"
        except OSError:
            ending = "error"
        with self.server.ended:
            self.server.open.remove(self.request)
            self.server.endings.append(ending)
            self.server.ended.notify_all()


@pytest.fixture
def tag_servers():
    servers = [TagServer(b"A"), TagServer(b"B")]
    yield servers
    for server in servers:
        server.stop()


def talk(proxy: FaultProxy, data: bytes = b"x") -> tuple[socket.socket, bytes]:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    sock.sendall(data)
    return sock, sock.recv(100)


def wait_until(predicate: Any, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


# --- the proxy at the TCP level -------------------------------------------------------------


def test_round_robin_over_live_backends_skipping_refused_ones(tag_servers, fault_proxy):
    a, b = tag_servers
    dead = free_port()
    proxy = fault_proxy(dead, a.port, b.port)

    answers = []
    for _ in range(4):
        sock, answer = talk(proxy)
        answers.append(answer)
        sock.close()
    assert answers == [b"Ax", b"Bx", b"Ax", b"Bx"]
    assert proxy.routed == [a.port, b.port, a.port, b.port]

    proxy.set_backends([b.port])
    sock, answer = talk(proxy)
    assert answer == b"Bx"
    assert proxy.connections_to(b.port) == 1
    sock.close()

    proxy.set_backends([dead])  # nobody accepts: the client is closed at once
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    assert sock.recv(100) == b""
    sock.close()


def test_drop_sends_fin_and_reset_sends_rst_to_both_peers(tag_servers, fault_proxy):
    a, _ = tag_servers
    proxy = fault_proxy(a.port)

    sock, answer = talk(proxy)
    assert answer == b"Ax"
    assert proxy.drop() == 1
    assert sock.recv(100) == b""  # an orderly end of stream
    assert a.wait_endings(1) == ["eof"]
    sock.close()
    wait_until(lambda: proxy.connections == 0)

    sock, answer = talk(proxy)
    assert answer == b"Ax"
    assert proxy.reset() == 1
    with pytest.raises(ConnectionResetError):
        sock.recv(100)
    assert a.wait_endings(2) == ["eof", "reset"]
    sock.close()
    assert proxy.connections == 0


def test_half_open_black_holes_without_closing(tag_servers, fault_proxy):
    a, _ = tag_servers
    proxy = fault_proxy(a.port)
    sock, answer = talk(proxy)
    assert answer == b"Ax"

    assert proxy.half_open() == 1
    sock.settimeout(0.5)
    sock.sendall(b"lost")
    with pytest.raises(TimeoutError):  # neither an answer nor a close
        sock.recv(100)
    a.close_open()  # the backend gives up on its end: its FIN does not cross either
    assert a.wait_endings(1) == ["eof"]
    with pytest.raises(TimeoutError):
        sock.recv(100)
    assert proxy.connections == 1

    # Only the connections open at the time are dead; new ones go through.
    fresh, answer = talk(proxy)
    assert answer == b"Ax"
    fresh.close()

    # A black-holed connection can still be dropped.
    proxy.drop()
    assert sock.recv(100) == b""
    sock.close()


def test_refuse_new_and_black_holing_new_connections_until_heal(tag_servers, fault_proxy):
    a, _ = tag_servers
    proxy = fault_proxy(a.port)
    kept, answer = talk(proxy)
    assert answer == b"Ax"

    proxy.refuse_new(True)
    refused = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    assert refused.recv(100) == b""
    refused.close()
    kept.sendall(b"y")  # connections made before go on
    assert kept.recv(100) == b"Ay"

    proxy.heal()
    sock, answer = talk(proxy)
    assert answer == b"Ax"
    sock.close()

    proxy.half_open(new=True)
    hole = socket.create_connection(("127.0.0.1", proxy.port), timeout=0.5)
    hole.sendall(b"x")
    with pytest.raises(TimeoutError):
        hole.recv(100)
    hole.close()

    proxy.heal()
    sock, answer = talk(proxy)
    assert answer == b"Ax"
    sock.close()
    kept.close()


# --- the proxy in front of daphne -----------------------------------------------------------


def login_page(url: str) -> str:
    with urllib.request.urlopen(f"{url}/accounts/login/", timeout=10) as response:
        assert response.status == 200
        page: str = response.read().decode()
        return page


def test_proxy_forwards_http_to_daphne(server, fault_proxy):
    proxy = fault_proxy(free_port(), server.port)  # the first backend refuses
    assert "csrfmiddlewaretoken" in login_page(proxy.url)
    assert "csrfmiddlewaretoken" in login_page(proxy.url)
    assert proxy.routed == [server.port, server.port]

    proxy.refuse_new(True)
    with pytest.raises(OSError):  # RemoteDisconnected / ConnectionResetError are OSErrors
        login_page(proxy.url)
    proxy.heal()
    assert "csrfmiddlewaretoken" in login_page(proxy.url)


class DisconnectWatch:
    """Records when and why the Socket.IO client reported its disconnect."""

    def __init__(self, client: ChatClient) -> None:
        assert client.sio is not None
        self.event = asyncio.Event()
        self.at: float | None = None
        self.reason: Any = None
        client.sio.on("disconnect", self._seen)

    async def _seen(self, *args: Any) -> None:
        self.at = time.monotonic()
        self.reason = args[0] if args else None
        self.event.set()

    async def wait(self, timeout: float) -> float:
        await asyncio.wait_for(self.event.wait(), timeout)
        assert self.at is not None
        return self.at


async def chat_through(proxy: FaultProxy, user: Any) -> ChatClient:
    """A signed-in client (the login goes through the proxy too) that got its greeting."""
    client = await signed_in(proxy, user)
    await client.start()
    await client.wait_text("greeting")
    return client


@pytest.mark.parametrize("fault", ["drop", "reset"])
async def test_socketio_client_sees_drop_and_reset_at_once(fault, server, fault_proxy, make_user):
    proxy = fault_proxy(server.port)
    client = await chat_through(proxy, make_user())
    watch = DisconnectWatch(client)

    began = time.monotonic()
    assert getattr(proxy, fault)() == 1  # a plain call from async code
    noticed = await watch.wait(timeout=10) - began
    assert client.sio is not None and not client.sio.connected
    assert noticed < 2, f"the client took {noticed:.2f}s to see the {fault}"
    print(f"\n{fault}: client saw the disconnect after {noticed * 1000:.0f} ms ({watch.reason})")

    # The same session reconnects through the same address.
    client.events.clear()
    await client.start()
    await client.wait_event("task_end")
    assert client.sio.connected
    await client.disconnect()
    await asyncio.to_thread(wait_until, lambda: proxy.connections == 0)


@pytest.fixture(scope="module")
def fast_ping_server(server_factory):
    server = server_factory.start(
        SOCKETIO_PING_INTERVAL=str(PING_INTERVAL), SOCKETIO_PING_TIMEOUT=str(PING_TIMEOUT)
    )
    yield server
    server.stop()


async def test_socketio_client_on_a_half_open_socket(fast_ping_server, fault_proxy, make_user, caplog):
    caplog.set_level(logging.WARNING, logger="engineio.client")
    user = make_user()
    proxy = fault_proxy(fast_ping_server.port)
    client = await chat_through(proxy, user)
    watch = DisconnectWatch(client)

    began = time.monotonic()
    assert proxy.half_open() == 1
    with pytest.raises(socketio.exceptions.TimeoutError):  # the send never arrives
        message = {"message": {"id": str(uuid.uuid4()), "output": "lost in the hole"}}
        await client.call("client_message", message, timeout=1)
    assert client.sio is not None and client.sio.connected, "a black hole must not look like a close"
    assert not watch.event.is_set()

    # Other connections through the same proxy are unaffected.
    other = await chat_through(proxy, user)
    await other.disconnect()

    noticed = await watch.wait(timeout=PING_INTERVAL + PING_TIMEOUT + 10) - began
    assert not client.sio.connected
    # Only the missing pings gave it away: nothing was closed.
    assert "Server has stopped communicating" in caplog.text
    assert noticed >= PING_TIMEOUT - 0.5, noticed
    assert proxy.connections == 1  # the proxy still holds the dead connection open
    print(
        f"\nhalf-open: client noticed after {noticed:.2f}s "
        f"(pingInterval {PING_INTERVAL}s + pingTimeout {PING_TIMEOUT}s, reason {watch.reason!r})"
    )
    await client.disconnect()


# --- Redis and server processes -------------------------------------------------------------


def test_private_redis_stops_and_comes_back_on_the_same_port(private_redis):
    store = redis.Redis.from_url(private_redis.url, socket_timeout=2)
    url = private_redis.url
    assert store.set("k", "v") and store.get("k") == b"v"

    private_redis.stop()
    assert not private_redis.alive()
    with pytest.raises(redis.ConnectionError):
        store.ping()

    private_redis.start()
    assert private_redis.url == url
    assert store.ping()  # the same client reconnects
    assert store.get("k") is None  # nothing persisted

    private_redis.kill()
    assert not private_redis.alive()
    with pytest.raises(redis.ConnectionError):
        store.ping()
    private_redis.restart()
    assert private_redis.url == url and store.ping()

    private_redis.freeze()
    with pytest.raises(redis.TimeoutError):  # connected, but nobody answers
        redis.Redis.from_url(url, socket_timeout=0.5).ping()
    private_redis.thaw()
    assert store.ping()
    store.close()


def test_private_redis_owns_its_process_and_directory():
    with PrivateRedis() as private:
        process = private.process
        assert process is not None and private.ping()
        workdir = private.workdir
        assert workdir.is_dir()
    assert process.poll() is not None
    assert not workdir.exists()


async def test_server_uses_the_given_redis_terminates_and_restarts(server_factory, private_redis, make_user):
    server: LiveServer = server_factory.start(REDIS_URL=private_redis.url)
    user = make_user()
    client = await signed_in(server, user)
    await client.start()
    await client.wait_text("greeting")
    group = f"asgi:group:session.{uuid.UUID(client.session_id).hex}"
    store = redis.Redis.from_url(private_redis.url)
    try:
        assert store.exists(group) == 1
        if os.environ.get("REDIS_URL"):
            shared = redis.Redis.from_url(os.environ["REDIS_URL"])
            assert shared.exists(group) == 0
            shared.close()
    finally:
        store.close()
    await client.disconnect()

    first_pid = server.process.pid
    code = await asyncio.to_thread(server.terminate, timeout=30)
    assert code is not None, "daphne did not exit within 30 s of SIGTERM"
    assert code >= 0, f"daphne was ended by signal {-code} instead of exiting by itself"
    assert not server.alive()
    print(f"\ndaphne exit code after SIGTERM: {code}")

    await asyncio.to_thread(server.restart)
    assert server.alive() and server.process.pid != first_pid
    assert "csrfmiddlewaretoken" in await asyncio.to_thread(login_page, server.url)
    server.kill()
    assert server.process.returncode == -9
