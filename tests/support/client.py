"""A python-socketio AsyncClient that records every event, logged in through the real page."""

import asyncio
import re
import time
import uuid
from typing import Any, cast

import aiohttp
import socketio


async def login_cookie(base_url: str, username: str, password: str) -> str:
    """Sign in through ``/accounts/login/`` and return the Cookie header the browser would send."""
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        async with http.get(f"{base_url}/accounts/login/") as response:
            page = await response.text()
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert csrf, "login page has no CSRF token"
        async with http.post(
            f"{base_url}/accounts/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": csrf.group(1)},
            allow_redirects=False,
        ) as response:
            assert response.status == 302, f"login failed with {response.status}"
        return "; ".join(f"{c.key}={c.value}" for c in http.cookie_jar)


async def user_cookie(base_url: str, user: Any) -> str:
    """The Cookie header of ``user`` (made by ``make_user``, which keeps ``raw_password``)
    signed in on the server at ``base_url``."""
    return await login_cookie(base_url, user.username, user.raw_password)


async def session_cookie(user: Any) -> str:
    """A Cookie header with a Django session of ``user``, made without a server: for the
    in-process socket tests, where no login page is served."""
    from asgiref.sync import sync_to_async
    from django.conf import settings
    from django.test import Client

    def sign_in() -> str:
        client = Client()
        client.force_login(user)
        return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"

    return await sync_to_async(sign_in)()


class ChatClient:
    """One browser tab's worth of socket: a sessionId, the cookie, and the events received."""

    def __init__(
        self,
        base_url: str,
        cookie: str | None = None,
        *,
        session_id: str | None = None,
        transports: tuple[str, ...] | None = ("websocket",),
        socketio_path: str = "/ws/socket.io",
    ) -> None:
        self.base_url = base_url
        # Where the endpoint is: Chainlit's frontend looks under its own root (CHAINLIT_PATH_PREFIX).
        self.socketio_path = socketio_path
        # python-socketio's transports; None is its default (polling, then the upgrade).
        self.transports = transports
        self.cookie = cookie
        self.session_id = session_id or str(uuid.uuid4())
        self.events: list[tuple[str, Any]] = []
        # (monotonic time, reason) of each drop of a socket this client opened.
        self.disconnects: list[tuple[float, tuple[Any, ...]]] = []
        self._changed = asyncio.Condition()
        self.sio: socketio.AsyncClient | None = None

    def new_socketio_client(self) -> socketio.AsyncClient:
        sio = socketio.AsyncClient(reconnection=False)

        async def record(event: str, *args: Any) -> None:
            self.events.append((event, args[0] if len(args) == 1 else list(args)))
            async with self._changed:
                self._changed.notify_all()

        async def dropped(*reason: Any) -> None:
            self.disconnects.append((time.monotonic(), reason))

        sio.on("*", record)
        sio.on("disconnect", dropped)  # kept apart: tests compare ``events`` exactly
        return sio

    async def connect(
        self, *, thread_id: str | None = None, headers: dict[str, str] | None = None, **auth: Any
    ) -> None:
        self.sio = self.new_socketio_client()
        all_headers = dict(headers or {})
        if self.cookie:
            all_headers["Cookie"] = self.cookie
        payload = {"sessionId": self.session_id, "clientType": "webapp", "userEnv": "{}", **auth}
        if thread_id:
            payload["threadId"] = thread_id
        await self.sio.connect(
            self.base_url,
            headers=all_headers,
            auth=payload,
            transports=list(self.transports) if self.transports else None,
            socketio_path=self.socketio_path,
            wait_timeout=10,
        )

    async def refused(self, auth: dict[str, Any]) -> Any:
        """Connect with exactly ``auth`` (and the cookie, if any), which the server must
        refuse; return what its ``connect_error`` said, as a client's handler would see it."""
        errors: list[Any] = []
        self.sio = self.new_socketio_client()
        self.sio.on("connect_error", errors.append)
        try:
            await self.sio.connect(
                self.base_url,
                headers={"Cookie": self.cookie} if self.cookie else {},
                auth=auth,
                transports=["websocket"],
                socketio_path="/ws/socket.io",
                wait_timeout=10,
            )
        except socketio.exceptions.ConnectionError:
            assert errors, "refused without a connect_error"
            return errors[-1]
        finally:
            self.sio = None
        raise AssertionError("the server accepted the connection")

    async def start(self, **kwargs: Any) -> None:
        """Connect and send ``connection_successful``, as the web client does on every connect."""
        await self.connect(**kwargs)
        await self.emit("connection_successful")

    async def emit(self, event: str, data: Any = None) -> None:
        assert self.sio is not None
        await self.sio.emit(event, data)

    async def call(self, event: str, data: Any = None, timeout: float = 10) -> Any:
        assert self.sio is not None
        return await self.sio.call(event, data, timeout=timeout)

    async def send(self, text: str, message_id: str | None = None) -> dict[str, Any]:
        answer: dict[str, Any] = await self.call(
            "client_message", {"message": {"id": message_id or str(uuid.uuid4()), "output": text}}
        )
        return answer

    async def disconnect(self) -> None:
        if self.sio is not None and self.sio.connected:
            await self.sio.disconnect()
        self.sio = None

    def named(self, event: str) -> list[Any]:
        return [data for name, data in self.events if name == event]

    def replies(self) -> list[str]:
        """The engine's finished replies (an engine app streams, then updates the message)."""
        return [m["output"] for m in self.named("update_message") if m["type"] == "assistant_message"]

    def texts(self) -> list[str]:
        return [m["output"] for m in self.named("new_message") + self.named("update_message")]

    async def wait_for(self, predicate: Any, timeout: float = 10) -> None:
        """Wait until ``predicate(self)`` is true."""

        async def check() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: predicate(self))

        await asyncio.wait_for(check(), timeout)

    async def wait_event(self, event: str, count: int = 1, timeout: float = 10) -> list[Any]:
        await self.wait_for(lambda c: len(c.named(event)) >= count, timeout)
        return self.named(event)

    async def wait_text(self, text: str, timeout: float = 10) -> None:
        await self.wait_for(lambda c: text in c.texts(), timeout)


async def signed_in(server: Any, user: Any) -> ChatClient:
    """A ``ChatClient`` (not connected yet) for ``user``, signed in on ``server``."""
    return ChatClient(server.url, await user_cookie(server.url, user))


async def api_token(user) -> str:
    """A DRF API token for ``user`` (what ``manage.py create_chat_user`` hands integrators)."""
    from asgiref.sync import sync_to_async
    from rest_framework.authtoken.models import Token

    token, _ = await sync_to_async(Token.objects.get_or_create)(user=user)
    return cast(str, token.key)
