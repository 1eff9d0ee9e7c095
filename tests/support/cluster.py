"""Two server processes (daphne, or uvicorn: ``server``) behind one fault proxy, on a private Redis: the stage of fault tests.

Both processes share the test database (PostgreSQL) and one hook log, so "once per session"
and "once per message" can be counted across processes. The proxy is the users' only way in
(it stands for a load balancer without sticky sessions); the tests point it at one process or
the other, and break it, kill processes or stop Redis between the two.
"""

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async

from sessions_app.models import SocketSession
from sessions_app.processes import live_processes
from tests.support.client import ChatClient, signed_in
from tests.support.proxy import FaultProxy
from tests.support.redis_server import PrivateRedis
from tests.support.server import LiveServer, ServerFactory
from threads_app.models import AcceptedMessage, Step

APPS = {"hooks": "tests.apps.lifecycle_app", "engine": "sessions_app.default_app"}


@dataclass
class Cluster:
    kind: str  # "hooks" or "engine"
    a: LiveServer
    b: LiveServer
    proxy: FaultProxy
    redis: PrivateRedis
    hook_log: Path
    clients: list[ChatClient] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.proxy.url

    def route_to(self, server: LiveServer) -> None:
        """New connections go to ``server`` from now on."""
        self.proxy.set_backends([server.port])

    async def client(self, user: Any) -> ChatClient:
        client = await signed_in(self, user)
        self.clients.append(client)
        return client

    def hooks(self, session: str | None = None, hook: str | None = None) -> list[dict[str, Any]]:
        return self.a.hooks(session, hook)  # one log for both processes

    def slow_message(self, words: int = 40) -> str:
        """A message whose reply streams for a while (about 0.08 s a token)."""
        if self.kind == "hooks":
            return f"slowstream {words} 0.08"
        return "!slow 0.08\n" + " ".join(f"w{i}" for i in range(words))

    def replies_to(self, text: str) -> Callable[[str], bool]:
        """Does an assistant step's output answer ``text`` (alone, not merged)?"""
        if self.kind == "hooks":
            return lambda output: output == f"echo: {text}"
        return lambda output: output.startswith("Echo #") and output.split(": ", 1)[-1] == text

    async def close(self) -> None:
        for client in self.clients:
            with contextlib.suppress(Exception):  # the socket may be half-open or its server dead
                await asyncio.wait_for(client.disconnect(), 5)


def start_cluster(
    factory: ServerFactory,
    redis: PrivateRedis,
    proxy_for: Callable[[int], FaultProxy],
    kind: str,
    workdir: Path,
    server: str | None = None,
    *,
    a_settings: Mapping[str, str] | None = None,
    b_settings: Mapping[str, str] | None = None,
    **settings: str,
) -> Cluster:
    """Both processes, with ``settings`` (environment variables) over the stage's own, and
    ``a_settings`` / ``b_settings`` over those for one process alone (e.g. a sampler each)."""
    hook_log = workdir / f"hooks-{uuid.uuid4().hex[:6]}.jsonl"
    env = {
        "CHAT_APP": APPS[kind],
        "REDIS_URL": redis.url,
        "SESSION_TIMEOUT": "4",
        "SHUTDOWN_GRACE": "8",
        "SOCKETIO_PING_INTERVAL": "1",
        "SOCKETIO_PING_TIMEOUT": "2",
        "ECHO_STATE_DIR": str(workdir / "echo"),
        "LOG_LEVEL": "INFO",
        **settings,
    }
    a = factory.start(hook_log=hook_log, server=server, **{**env, **(a_settings or {})})
    b = factory.start(hook_log=hook_log, server=server, **{**env, **(b_settings or {})})
    return Cluster(kind, a, b, proxy_for(a.port), redis, hook_log)


@sync_to_async
def thread_record(thread_id: str) -> dict[str, Any]:
    """What the database says of a thread's sends (by their clients' ids) and transcript."""
    accepted = {
        str(a.client_id): (a.state, a.outcome, a.failure)
        for a in AcceptedMessage.objects.filter(thread_id=thread_id).order_by("accepted_at")
    }
    steps = list(Step.objects.filter(thread_id=thread_id).order_by("seq"))
    return {
        "accepted": accepted,
        "user_steps": [s for s in steps if s.type == "user_message"],
        "replies": [s.output for s in steps if s.type == "assistant_message" and not s.is_error],
        "errors": [s.output for s in steps if s.is_error],
        "steps": steps,
    }


async def all_settled(thread_id: str) -> bool:
    """Every send of the thread answered (transcribed with an outcome) or failed with a reason."""
    record = await thread_record(thread_id)
    return bool(record["accepted"]) and all(
        (state == "transcribed" and outcome) or (state == "failed" and failure)
        for state, outcome, failure in record["accepted"].values()
    )


def assert_each_send_transcribed_once(record: dict[str, Any]) -> None:
    """Every transcribed send is carried by exactly one user step; failed ones by none."""
    carried = [i for step in record["user_steps"] for i in step.metadata.get("acceptedIds", [])]
    for accepted_id, (state, _outcome, _failure) in record["accepted"].items():
        expected = 1 if state == "transcribed" else 0
        assert carried.count(accepted_id) == expected, (accepted_id, state, carried)


@sync_to_async
def sessions_on_dead_sockets() -> list[str]:
    """Sessions still attached to a socket of a process that is not alive."""
    live = set(live_processes().values_list("address", flat=True))
    return [
        str(s.pk)
        for s in SocketSession.objects.filter(ended=False).exclude(socket_channel="")
        if s.socket_owner not in live
    ]
