"""Send acceptance throughput and latency through the whole real stack, against transport baselines.

    .venv/bin/python bench/send.py [--duration 5] [--clients 20] [--warmup 3] [--profile]

It prepares a PostgreSQL database (``DATABASE_URL``, default ``tether_bench_send`` on the local
server; created and migrated when missing), starts one daphne process serving
``chatproject.asgi`` with ``CHAT_APP=sessions_app.default_app`` (the engine runtime and the
echo engine subprocess, one per thread), a temp ``ECHO_STATE_DIR``, the channel layer from
``REDIS_URL`` when set (else in-memory) and ``SEND_THROTTLE_RATE`` set out of reach, and
measures, closed loop for ``--duration`` seconds each:

- ``POST /api/chat/send`` (aiohttp, ``Authorization: Token``): from 1 client, sequential, and
  from ``--clients`` clients at once, each on its own connection and its own thread;
- the socket ``client_message`` (python-socketio ``call``, answered by the ack
  ``{threadId, messageId, queued}``): 1 socket sequential, ``--clients`` sockets at once,
  each its own session and thread.

Every send has a fresh messageId and a short text. Timed: from the request until its answer
(the 200 / the ack); accepted/s is answers over the phase's wall time. Each accepted send
also starts or queues an echo engine turn in the server; that work runs in the background
(and is what the engine's "queued" answer counts). It is reported as context per phase: CPU
of daphne, of its echo subprocesses, of PostgreSQL and of this process (the clients, which
also decode what the engine streams to the sockets), the turns the engine ran, and the time
the engine needed after the phase to transcribe everything accepted ("drain").

Baselines, in the same run, on the same server and clients: ``GET /accounts/login/`` (a plain
Django view, no database), ``POST /api/chat/send`` without a messageId (token auth, throttle
and DRF validation, answered 400 before any acceptance), and a bare socket round trip (an
unknown event, answered by an error ack). The baselines run before any send, with every
engine idle.

Database connections. Under ASGI each HTTP request runs its sync view in a thread of its own;
with persistent per-thread connections 20 clients used to exhaust PostgreSQL's
``max_connections`` in about a second. Tether now takes connections from a process-wide pool
(``DB_POOL_SIZE``). A short probe (``--probe-requests``) fires requests from 20 clients at a
daphne of its own and prints how many connections the database saw: it stays at the pool's
size. ``--settings MODULE`` serves a patched configuration.

Also printed: the database work of one send (the acceptance before the answer, and the
transcript writes of the engine turn it starts), timed in this process with the server's own
functions; in daphne all of it runs on the one thread of ``database_sync_to_async``.

``--only`` runs some phases (login, invalid, ping, http-send, socket-send); ``--profile`` runs
daphne under cProfile and prints where its time went (the event loop's thread only).
"""

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make `bench` importable
from bench import common
from chatproject.servers import chosen_server  # imports neither Django nor a server

if TYPE_CHECKING:
    from asgiref.sync import SyncToAsync

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/tether_bench_send"
HTTP_USER = "bench-send-http"
SOCKET_USER = "bench-send-socket"
PROBE_USER = "bench-send-probe"
TEXT = "hello"
PHASES = ("login", "invalid", "ping", "http-send", "socket-send")


# --- fixtures (synchronous ORM) ----------------------------------------------------------------


def remove_bench_users() -> None:
    """Drop the bench users (the probe's too) and everything they own."""
    common.remove_users(HTTP_USER, SOCKET_USER, PROBE_USER)


def make_tokens() -> dict[str, str]:
    """A fresh user per path (so each path has its own box and engine pool) and its API token."""
    from django.db import connections

    remove_bench_users()
    tokens = {name: common.bench_user(name)[1] for name in (HTTP_USER, SOCKET_USER)}
    connections.close_all()
    return tokens


@dataclass
class Backlog:
    pending: int  # accepted sends not transcribed yet
    user_steps: int  # engine turns taken (a turn carries every send queued behind it)
    assistant_steps: int  # engine turns answered


def backlog(username: str) -> Backlog:
    from django.db import close_old_connections

    from threads_app.models import AcceptedMessage, Step

    close_old_connections()
    steps = Step.objects.filter(thread__owner__username=username)
    return Backlog(
        pending=AcceptedMessage.objects.filter(
            author__username=username, state=AcceptedMessage.State.PENDING
        ).count(),
        user_steps=steps.filter(type="user_message").count(),
        assistant_steps=steps.filter(type="assistant_message").count(),
    )


@dataclass
class Work:
    label: str
    queries: int
    ms: float  # median


P = ParamSpec("P")
R = TypeVar("R")


def undecorated(fn: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, R]:
    """The sync function under ``database_sync_to_async`` (types-channels hides its ``.func``)."""
    return cast("SyncToAsync[P, R]", fn).func


def db_work_per_send(reps: int) -> list[Work]:
    """The database work of one send, run here with the server's own functions (sync ORM,
    one connection, sequential, no other load), for a throwaway user and thread: what the
    acceptance path does before it answers, and what the engine turn it starts writes."""
    from django.contrib.auth import get_user_model
    from django.db import connection, connections
    from django.test.utils import CaptureQueriesContext

    from sessions_app.runtime import ownership, transcript
    from sessions_app.runtime.engines.base import UserTurn
    from threads_app.models import Thread
    from threads_app.selectors import box_of_thread
    from threads_app.services import accept_message, ensure_thread, record_queued

    user = get_user_model().objects.create(username=PROBE_USER)
    try:
        thread, _ = ensure_thread(user, uuid.uuid4(), name="probe")
        me = f"bench-send-probe-{uuid.uuid4().hex}"

        def acceptance(i: int) -> uuid.UUID:
            message_id = uuid.uuid4()
            Thread.objects.get(pk=thread.pk)  # client_message's Thread.objects.aget
            accept_message(message_id=message_id, thread=thread, author=user, text=TEXT)
            box = box_of_thread(thread.pk)  # accept_and_submit
            assert box is not None
            ownership.claim_box(box.id, me)  # at_owner -> owner_of
            box_of_thread(thread.pk)  # submit_here
            record_queued(message_id, False)
            return message_id

        def turn(i: int, message_id: uuid.UUID) -> None:
            undecorated(transcript.write_user_step)(
                thread.pk, UserTurn(text=TEXT, accepted_ids=[message_id]), PROBE_USER
            )
            undecorated(transcript.write_engine_step)(
                thread.pk, f"m{i}", type="assistant_message", name="assistant", output=f"Echo #{i}: {TEXT}"
            )

        timings: dict[str, list[float]] = {"acceptance": [], "turn": []}
        counts: dict[str, int] = {}
        for i in range(reps + 3):
            with CaptureQueriesContext(connection) as accepted:
                began = time.perf_counter()
                message_id = acceptance(i)
                took_accept = time.perf_counter() - began
            with CaptureQueriesContext(connection) as turned:
                began = time.perf_counter()
                turn(i, message_id)
                took_turn = time.perf_counter() - began
            if i >= 3:
                timings["acceptance"].append(took_accept * 1000)
                timings["turn"].append(took_turn * 1000)
                counts = {"acceptance": len(accepted), "turn": len(turned)}
        return [
            Work(
                "acceptance before the answer (Thread get, accept_message, _box_of x2, _claim, record_queued)",
                counts["acceptance"],
                statistics.median(timings["acceptance"]),
            ),
            Work(
                "the engine turn's transcript (write_user_step, write_engine_step)",
                counts["turn"],
                statistics.median(timings["turn"]),
            ),
        ]
    finally:
        get_user_model().objects.filter(pk=user.pk).delete()
        connections.close_all()


# --- the server ---------------------------------------------------------------------------------


class ConnectionWatch:
    """Samples the number of PostgreSQL connections to the bench database (a thread of its own)."""

    def __init__(self, url: str, every: float = 0.1) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.every = every
        self.peak = 0
        self.last = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def count(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
        return int(row[0]) if row else 0

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            with contextlib.suppress(Exception):
                self.last = self.count()
                self.peak = max(self.peak, self.last)

    def reset(self) -> None:
        self.peak = self.last

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.conn.close()


@dataclass
class Probe:
    clients: int
    requests: int  # requests answered before the probe stopped
    seconds: float
    before: int  # connections to the bench database before
    peak: int
    later: int  # two seconds after the last request
    cap: int
    errors: int


def connection_probe(
    env: dict[str, str], workdir: Path, server_args: list[str], token: str, args: argparse.Namespace
) -> Probe:
    """Tether's own settings, ``chatproject.settings``: ``--probe-clients`` threads send
    token-authenticated requests (each answered 400 after authentication) until
    ``--probe-requests`` were answered, or until the bench database holds ``--probe-cap``
    more PostgreSQL connections than before (so that the probe never exhausts the server's
    ``max_connections``, which other databases share)."""
    from concurrent.futures import ThreadPoolExecutor

    server = common.Daphne(env, workdir / "probe.log", args=server_args)
    watch = None
    try:
        server.wait_ready()
        watch = ConnectionWatch(env["DATABASE_URL"], every=0.02)
        time.sleep(0.1)
        before = watch.count()
        cap = before + args.probe_cap
        stop = threading.Event()
        answered = errors = 0
        lock = threading.Lock()

        def client() -> None:
            nonlocal answered, errors
            while not stop.is_set():
                request = urllib.request.Request(
                    f"{server.url}/api/chat/send",
                    data=b'{"message": "hi"}',
                    headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
                )
                try:
                    with urllib.request.urlopen(request, timeout=30):
                        pass
                    ok = False
                except urllib.error.HTTPError as exc:
                    ok = exc.code == 400
                except OSError:
                    ok = False
                with lock:
                    answered += 1
                    errors += not ok
                    if answered >= args.probe_requests or watch.peak >= cap:
                        stop.set()

        began = time.perf_counter()
        with ThreadPoolExecutor(args.probe_clients) as pool:
            for _ in range(args.probe_clients):
                pool.submit(client)
        seconds = time.perf_counter() - began
        time.sleep(2)
        return Probe(args.probe_clients, answered, seconds, before, watch.peak, watch.count(), cap, errors)
    except BaseException:
        print(f"probe daphne log:\n{server.log_tail()}", file=sys.stderr)
        raise
    finally:
        if watch is not None:
            watch.close()
        server.stop()


# --- the clients --------------------------------------------------------------------------------


class Failed(Exception):
    """An answer that was not the expected one."""


class HttpClient:
    """One aiohttp session (its own keep-alive connection), with the user's token."""

    def __init__(self, url: str, token: str) -> None:
        import aiohttp

        self.url = url
        self.headers = {"Authorization": f"Token {token}"}
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=1), timeout=aiohttp.ClientTimeout(total=60)
        )
        self.thread_id: str | None = None

    async def login_page(self) -> None:
        async with self.session.get(f"{self.url}/accounts/login/") as response:
            await response.read()
            if response.status != 200:
                raise Failed(f"GET /accounts/login/ answered {response.status}")

    async def invalid_send(self) -> None:
        """Token auth, throttle and validation, no acceptance: answered 400."""
        body = {"message": TEXT}
        async with self.session.post(
            f"{self.url}/api/chat/send", json=body, headers=self.headers
        ) as response:
            await response.read()
            if response.status != 400:
                raise Failed(f"POST /api/chat/send without messageId answered {response.status}")

    async def send(self) -> bool:
        """One accepted send (the first one opens the client's thread); returns ``queued``."""
        body: dict[str, Any] = {"messageId": str(uuid.uuid4()), "message": TEXT}
        if self.thread_id:
            body["threadId"] = self.thread_id
        async with self.session.post(
            f"{self.url}/api/chat/send", json=body, headers=self.headers
        ) as response:
            text = await response.text()
        if response.status != 200:
            raise Failed(f"POST /api/chat/send answered {response.status}: {text[:120]!r}")
        answer = json.loads(text)
        if "queued" not in answer:
            raise Failed(f"POST /api/chat/send answered {answer}")
        if answer["messageId"] != body["messageId"]:
            raise Failed(f"answer for another message: {answer}")
        self.thread_id = answer["threadId"]
        return bool(answer["queued"])

    async def close(self) -> None:
        await self.session.close()


class SocketClient:
    """One python-socketio AsyncClient on its own session; counts the events pushed to it."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.token = token
        self.sio = common.socketio_client()
        self.pushed = 0  # events the server pushed (engine stream, bus events, error events)
        self.ready = asyncio.Event()
        self.sio.on("*", self._record)

    async def _record(self, event: str, *_args: Any) -> None:
        self.pushed += 1
        if event == "clear_call_fn":  # the last answer to connection_successful
            self.ready.set()

    async def connect(self) -> None:
        await common.connect_socket(self.sio, self.url, self.token)
        await self.sio.emit("connection_successful")
        await asyncio.wait_for(self.ready.wait(), 30)

    async def ping(self) -> None:
        """A bare round trip: an unknown event, answered by an error ack."""
        answer = await self.sio.call("bench_ping", {}, timeout=30)
        if not (isinstance(answer, dict) and "error" in answer):
            raise Failed(f"bench_ping answered {answer!r}")

    async def send(self) -> bool:
        message_id = str(uuid.uuid4())
        answer = await self.sio.call(
            "client_message", {"message": {"id": message_id, "output": TEXT}}, timeout=60
        )
        if not (isinstance(answer, dict) and "queued" in answer and answer.get("messageId") == message_id):
            raise Failed(f"client_message answered {answer!r}")
        return bool(answer["queued"])

    async def close(self) -> None:
        await common.disconnect_socket(self.sio)


# --- measurement --------------------------------------------------------------------------------

Op = Callable[[], Awaitable[bool | None]]


@dataclass
class Phase:
    label: str
    transport: str  # "http" or "socket"
    clients: int
    sends: bool  # an acceptance phase (else a baseline)
    samples: list[float] = field(default_factory=list)  # ms
    queued: int = 0
    errors: list[str] = field(default_factory=list)
    wall: float = 0.0
    cpu_daphne: float = 0.0
    cpu_engine: float = 0.0
    cpu_postgres: float = 0.0
    cpu_client: float = 0.0
    pushed: int = 0  # events pushed to the sockets during the phase
    turns: int | None = None  # engine turns taken for the phase's sends (after draining)
    drain: float | None = None  # seconds after the phase until every send was transcribed
    drain_cpu_daphne: float = 0.0
    drain_cpu_engine: float = 0.0
    connections: int = 0  # peak PostgreSQL connections to the bench database during the phase
    redis_connections: int | None = None  # connections Redis accepted during the phase (REDIS_URL)

    @property
    def rate(self) -> float:
        return len(self.samples) / self.wall if self.wall else 0.0


async def closed_loop(ops: list[Op], duration: float, phase: Phase | None, warmup: int) -> None:
    """Every op in a loop of its own: ``warmup`` untimed calls, then calls for ``duration`` s."""
    failures: list[BaseException] = []
    for _ in range(warmup):
        results = await asyncio.gather(*(op() for op in ops), return_exceptions=True)
        failures += [r for r in results if isinstance(r, BaseException)]
    if failures:
        raise Failed(f"{len(failures)} warmup calls failed, e.g. {failures[0]!r}")
    if phase is None:
        return

    async def worker(op: Op, deadline: float) -> None:
        while time.perf_counter() < deadline:
            began = time.perf_counter()
            try:
                queued = await op()
            except Exception as exc:  # every failure is reported, the loop goes on
                phase.errors.append(f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(0.05)
                continue
            phase.samples.append((time.perf_counter() - began) * 1000)
            phase.queued += bool(queued)

    started = time.perf_counter()
    await asyncio.gather(*(worker(op, started + duration) for op in ops))
    phase.wall = time.perf_counter() - started


@dataclass
class Bench:
    server: common.Daphne
    args: argparse.Namespace
    tokens: dict[str, str]
    watch: ConnectionWatch
    redis: Any = None  # a client of REDIS_URL, to count the connections Redis accepts
    phases: list[Phase] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    async def measure(
        self,
        phase: Phase,
        ops: list[Op],
        sockets: list[SocketClient] | None = None,
        user: str | None = None,
    ) -> None:
        sockets = sockets or []
        # Warm: connections used, threads opened, engines started, everything answered and
        # transcribed before the clock runs.
        try:
            await closed_loop(ops, 0, None, self.args.warmup)
        except Failed as exc:
            phase.errors.append(str(exc))
            self.phases.append(phase)
            return
        if user is not None:
            await self.drain(user, None)
        before = await asyncio.to_thread(backlog, user) if user else None
        daphne0, engine0 = self.server.cpu_seconds()
        pg0, client0, pushed0 = common.postgres_cpu(), time.process_time(), sum(s.pushed for s in sockets)
        self.watch.reset()
        redis0 = self.redis_accepted()
        await closed_loop(ops, self.args.duration, phase, 0)
        phase.connections = self.watch.peak
        if redis0 is not None:
            phase.redis_connections = cast(int, self.redis_accepted()) - redis0  # self.redis is set
        daphne1, engine1 = self.server.cpu_seconds()
        phase.cpu_daphne, phase.cpu_engine = daphne1 - daphne0, engine1 - engine0
        phase.cpu_postgres = common.postgres_cpu() - pg0
        phase.cpu_client = time.process_time() - client0
        if user is not None and before is not None:
            after = await self.drain(user, phase)
            phase.turns = after.user_steps - before.user_steps
        phase.pushed = sum(s.pushed for s in sockets) - pushed0
        self.phases.append(phase)

    def redis_accepted(self) -> int | None:
        if self.redis is None:
            return None
        return int(self.redis.info("stats")["total_connections_received"])

    async def drain(self, user: str, phase: Phase | None) -> Backlog:
        """Wait until every accepted send of ``user`` is transcribed and answered."""
        began = time.perf_counter()
        daphne0, engine0 = self.server.cpu_seconds()
        deadline = began + self.args.drain_timeout
        while True:
            state = await asyncio.to_thread(backlog, user)
            if state.pending == 0 and state.assistant_steps >= state.user_steps:
                break
            if time.perf_counter() > deadline:
                self.notes.append(
                    f"{phase.label if phase else 'warmup'}: not drained after {self.args.drain_timeout:.0f}s "
                    f"({state.pending} sends pending, {state.user_steps - state.assistant_steps} turns open)"
                )
                break
            await asyncio.sleep(0.05)
        if phase is not None:
            phase.drain = time.perf_counter() - began
            daphne1, engine1 = self.server.cpu_seconds()
            phase.drain_cpu_daphne, phase.drain_cpu_engine = daphne1 - daphne0, engine1 - engine0
        return state

    async def run(self) -> None:
        n = self.args.clients
        url, http_token, socket_token = self.server.url, self.tokens[HTTP_USER], self.tokens[SOCKET_USER]
        http = [HttpClient(url, http_token) for _ in range(n)]
        sockets = [SocketClient(url, socket_token) for _ in range(n)]
        try:
            await asyncio.gather(*(s.connect() for s in sockets))

            only = self.args.only
            login, invalid = (
                "GET /accounts/login/ (plain Django view)",
                "POST /api/chat/send, no messageId -> 400",
            )
            ping, http_send = "socket unknown event -> error ack", "POST /api/chat/send (accepted)"
            socket_send = "socket client_message (ack)"
            # Baselines first, every engine idle; then the sends.
            if "login" in only:
                await self.measure(Phase(login, "http", 1, False), [http[0].login_page])
                await self.measure(Phase(login, "http", n, False), [c.login_page for c in http])
            if "invalid" in only:
                await self.measure(Phase(invalid, "http", 1, False), [http[0].invalid_send])
                await self.measure(Phase(invalid, "http", n, False), [c.invalid_send for c in http])
            if "ping" in only:
                await self.measure(Phase(ping, "socket", 1, False), [sockets[0].ping])
                await self.measure(Phase(ping, "socket", n, False), [s.ping for s in sockets])
            if "http-send" in only:
                await self.measure(Phase(http_send, "http", 1, True), [http[0].send], user=HTTP_USER)
                await self.measure(Phase(http_send, "http", n, True), [c.send for c in http], user=HTTP_USER)
            if "socket-send" in only:
                await self.measure(
                    Phase(socket_send, "socket", 1, True), [sockets[0].send], sockets, user=SOCKET_USER
                )
                await self.measure(
                    Phase(socket_send, "socket", n, True),
                    [s.send for s in sockets],
                    sockets,
                    user=SOCKET_USER,
                )
        finally:
            await asyncio.gather(*(c.close() for c in http), *(s.close() for s in sockets))


# --- report -------------------------------------------------------------------------------------


def latency_row(p: Phase) -> list[str]:
    kind = "send" if p.sends else "base"
    if not p.samples:
        return [kind, p.label, str(p.clients), "0", "-", "-", "-", "-", "-", str(len(p.errors))]
    return [
        kind,
        p.label,
        str(p.clients),
        str(len(p.samples)),
        f"{p.rate:,.0f}",
        f"{statistics.median(p.samples):.1f}",
        f"{common.percentile(p.samples, 0.99):.1f}",
        f"{max(p.samples):.1f}",
        f"{100 * p.queued / len(p.samples):.0f}%" if p.sends else "",
        str(len(p.errors)),
    ]


def per_op(seconds: float, p: Phase) -> str:
    return f"{seconds * 1000 / len(p.samples):.2f}" if p.samples else "-"


def load_row(p: Phase) -> list[str]:
    drain = "" if p.drain is None else f"{p.drain:.2f}"
    return [
        p.transport,
        str(p.clients),
        "send" if p.sends else "base",
        per_op(p.cpu_daphne, p),
        per_op(p.cpu_engine, p),
        per_op(p.cpu_postgres, p),
        per_op(p.cpu_client, p),
        f"{(p.cpu_daphne + p.cpu_engine) / p.wall * 100:.0f}%" if p.wall else "-",
        "" if p.turns is None else str(p.turns),
        f"{p.pushed / len(p.samples):.1f}" if p.transport == "socket" and p.samples else "",
        drain,
        f"{p.drain_cpu_daphne:.2f}/{p.drain_cpu_engine:.2f}" if p.drain is not None else "",
        str(p.connections),
        "" if p.redis_connections is None else f"{p.redis_connections / max(1, len(p.samples)):.2f}",
    ]


def cost_lines(phases: list[Phase]) -> list[str]:
    def find(label_start: str, clients: int) -> Phase | None:
        return next(
            (p for p in phases if p.label.startswith(label_start) and p.clients == clients and p.samples),
            None,
        )

    lines = []
    for clients in sorted({p.clients for p in phases}):
        pairs = [
            (
                "HTTP",
                find("POST /api/chat/send (accepted)", clients),
                find("POST /api/chat/send, no", clients),
            ),
            ("HTTP", find("POST /api/chat/send (accepted)", clients), find("GET /accounts/login/", clients)),
            ("socket", find("socket client_message", clients), find("socket unknown event", clients)),
        ]
        for name, send, base in pairs:
            if send is None or base is None:
                continue
            extra = statistics.median(send.samples) - statistics.median(base.samples)
            lines.append(
                f"{name} x{clients}: acceptance adds {extra:+.1f} ms to the median over '{base.label}' "
                f"({statistics.median(send.samples):.1f} vs {statistics.median(base.samples):.1f} ms); "
                f"throughput {send.rate / base.rate:.2f}x of it"
            )
    return lines


def report(
    bench: Bench, context: str, server_errors: list[str], probe: Probe | None, work: list[Work]
) -> None:
    phases = bench.phases
    print()
    print(f"Tether send acceptance  ({context})")
    print()
    rows = [latency_row(p) for p in phases]
    headers = ["", "path", "clients", "answers", "per s", "p50 ms", "p99 ms", "max ms", "queued", "errors"]
    print(common.table(headers, rows, left={0, 1}))
    print()
    for line in cost_lines(phases):
        print(line)
    print()
    print(
        "Load during each timed phase: CPU ms per answer of daphne, its echo engines, PostgreSQL (every\n"
        "process of the server: other databases' work included) and this process (the clients); busy =\n"
        "daphne + engines over wall time (100% = one core); the engine turns the phase's sends started;\n"
        "events pushed to the sockets per send; the drain after the phase (seconds, and CPU s of daphne /\n"
        "engines meanwhile); peak PostgreSQL connections to the bench database; new Redis connections per answer:"
    )
    load_headers = [
        "path",
        "clients",
        "",
        "daphne",
        "engines",
        "postgres",
        "client",
        "busy",
        "turns",
        "pushed/send",
        "drain s",
        "drain CPU s d/e",
        "pg conns",
        "redis conns/answer",
    ]
    print(common.table(load_headers, [load_row(p) for p in phases], left={0, 2}))
    if work:
        print()
        print(
            "Database work of one send, timed in the bench process with the server's own functions "
            "(sync ORM, one connection, no other load; in daphne all of it runs on the one thread of "
            "database_sync_to_async):"
        )
        print(
            common.table(
                ["work", "queries", "median ms"],
                [[w.label, str(w.queries), f"{w.ms:.2f}"] for w in work],
                left={0},
            )
        )
    if probe is not None:
        print()
        capped = " (stopped at the cap)" if probe.peak >= probe.cap else ""
        print(
            f"PostgreSQL connections, chatproject.settings as configured (a daphne of its own): "
            f"{probe.requests} token-authenticated HTTP requests from {probe.clients} clients in "
            f"{probe.seconds:.1f}s took the bench database from {probe.before} to {probe.peak} "
            f"connections{capped}, {probe.later} two seconds later; {probe.errors} not answered 400."
        )
    problems = [p for p in phases if p.errors]
    if problems or bench.notes or server_errors:
        print()
        for p in problems:
            distinct = sorted(set(p.errors))
            print(f"ERRORS in {p.label} x{p.clients}: {len(p.errors)}, e.g. {distinct[:3]}")
        for note in bench.notes:
            print(f"note: {note}")
        for line in server_errors[:10]:
            print(f"daphne: {line.strip()}")


# --- main ---------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=5.0, help="seconds of each timed phase")
    parser.add_argument("--clients", type=int, default=20, help="concurrent clients / sockets")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls per client before each phase")
    parser.add_argument("--drain-timeout", type=float, default=30.0, help="seconds to wait for the engines")
    common.add_websocket_size_argument(parser)
    parser.add_argument(
        "--only",
        type=lambda text: {part.strip() for part in text.split(",") if part.strip()},
        default=set(PHASES),
        help=f"comma-separated phases to run, of {','.join(PHASES)} (default: all)",
    )
    parser.add_argument(
        "--settings",
        default="",
        help="serve this settings module instead (a patched configuration; put its folder on PYTHONPATH)",
    )
    parser.add_argument(
        "--probe-requests", type=int, default=400, help="requests of the connection probe (0: no probe)"
    )
    parser.add_argument("--probe-clients", type=int, default=20, help="concurrent clients of the probe")
    parser.add_argument(
        "--probe-cap", type=int, default=30, help="stop the probe at this many new PostgreSQL connections"
    )
    parser.add_argument(
        "--work-reps", type=int, default=30, help="repetitions of the in-process database timing (0: skip)"
    )
    parser.add_argument("--profile", action="store_true", help="run daphne under cProfile")
    parser.add_argument("--profile-lines", type=int, default=40)
    parser.add_argument("--keep-data", action="store_true", help="leave the bench users' threads behind")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tether-send-") as tmp:
        workdir = Path(tmp)
        env = common.bench_env(
            "sessions_app.default_app",
            workdir=workdir,
            default_database_url=DEFAULT_DATABASE_URL,
            SEND_THROTTLE_RATE="1000000/min",
        )
        created = common.prepare_database(env)
        common.setup_django(env)
        tokens = make_tokens()
        work = db_work_per_send(args.work_reps) if args.work_reps > 0 else []
        server_args = common.websocket_size_args(args.ws_max_message_size, chosen_server(env))
        probe = None
        if args.probe_requests > 0:
            probe = connection_probe(env, workdir, server_args, tokens[HTTP_USER], args)
        settings_module = args.settings or common.SETTINGS
        profile_path = workdir / "daphne.prof" if args.profile else None
        server = common.Daphne(
            {**env, "DJANGO_SETTINGS_MODULE": settings_module},
            workdir / "daphne.log",
            args=server_args,
            profile_to=profile_path,
        )
        watch = ConnectionWatch(env["DATABASE_URL"])
        redis_client = None
        if env.get("REDIS_URL"):
            import redis

            redis_client = redis.Redis.from_url(env["REDIS_URL"])
        try:
            server.wait_ready()
            bench = Bench(server, args, tokens, watch, redis_client)
            load_before = os.getloadavg()[0]
            asyncio.run(bench.run())
            load_after = os.getloadavg()[0]
            engines = len(server.children())
            server_errors = sorted(set(server.log_lines("Error")))
        except BaseException:
            print(f"daphne log:\n{server.log_tail()}", file=sys.stderr)
            raise
        finally:
            watch.close()
            server.stop()
            if redis_client is not None:
                redis_client.close()
            if not args.keep_data:
                remove_bench_users()
        context = (
            f"PostgreSQL {common.database_name(env)}{' (created)' if created else ''}, "
            f"{common.channel_layer(env)}, 1 {chosen_server(env)} process, settings {settings_module}"
            f"{' under cProfile' if args.profile else ''}, {os.cpu_count()} cores, {args.duration:g}s per phase, "
            f"{engines} echo subprocesses at the end, load avg {load_before:.1f} -> {load_after:.1f}"
        )
        report(bench, context, server_errors, probe, work)
        if profile_path is not None:
            common.print_profile(profile_path, args.profile_lines)
    print(f"\ntotal {time.perf_counter() - started:.1f}s")
    failed = any(p.errors for p in bench.phases) or not bench.phases
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
