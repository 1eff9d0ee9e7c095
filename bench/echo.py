"""Message round trips of a hooks-API app through the whole real stack, against a bare-consumer baseline.

    .venv/bin/python bench/echo.py [--single-messages 200] [--clients 20] [--messages 50]
                                   [--warmup 3] [--only tether|baseline|floor] [--profile]
                                   [--guard RATIO [--rounds 5]] [--server daphne|uvicorn|both]

``--server both`` (the default) runs the whole bench twice, every process on daphne, then every
process on uvicorn (``chatproject.serve_uvicorn``), each with its own floor in the same run.

Tether: one daphne process serving ``chatproject.asgi`` with ``CHAT_APP=bench.echo_app`` (a
hooks-API app whose ``on_message`` answers every message with exactly one
``chat.Message(content=f"{len(chat.chat_context.get())}: {text}").send()``), on PostgreSQL
(``DATABASE_URL``, default ``tether_bench_echo`` on the local server; created and migrated when
missing), the channel layer from ``REDIS_URL`` when set (else in-memory), ``SEND_THROTTLE_RATE``
out of reach (``SEND_RATE``: a burst of a million, refilled slower than the bench sends, as a
deployed rate is, so the send budget's allowance works as deployed) and the WebSocket size flags of ``make run``.

Baseline: a second daphne serving ``bench/baseline_asgi.py``, a bare Channels consumer that
answers an ``echo`` event (the same payload as ``client_message``) with its ack and one
``new_message`` carrying the same reply, from a context list in memory: no database, no
session, no hooks, no ``task_start``/``task_end``.

Floor: the same bare consumer answering a ``floor`` event (the same payload) with what a
hooks-API turn's contract cannot do without, as cheaply as the stack allows: the user's
message committed before the ack and the reply committed before it is shown (two INSERTs on
psycopg's async pool), and the five events Tether pushes per turn (``chat-user-message``,
``task_start``, the user's ``new_message``, the reply's ``new_message``, ``task_end``). What the
floor reaches on this machine is the most any server on daphne speaking Tether's protocol
could; the report says whether the bars are within it.

Clients: python-socketio ``AsyncClient``s, WebSocket transport, each its own session (a new
sessionId, so a thread of its own); Tether's authenticated by an API token and opened the way
the web client does (``connection_successful``, answered before the clock runs). Each client
sends ``client_message {message: {id, output}}`` (``echo`` to the baseline) with a fresh
message id and a short text unique to the client and the message, WAITS for the reply, then
sends the next: closed loop, one message in flight per client. The reply is the
``new_message`` event with an ``assistant_message`` step; its output must be exactly
``"<2k+1>: <the text sent>"`` for the k-th message of the session (counting from 0, warmup
included): the user's message is in ``chat_context`` when ``on_message`` runs, and every
earlier turn left two messages there. Every ack must name the message sent. Any other reply,
a missing one (``--timeout``), an ``error`` event, a disconnect or an assistant message
nobody waited for fails the run (exit 1).

Phases, each on fresh sockets after ``--warmup`` untimed messages per client:

- A: 1 client, ``--single-messages`` (200) messages in sequence;
- B: ``--clients`` (20) clients at once, ``--messages`` (50) each.

Per phase and server: messages/s (the phase's messages over its wall time, from the first
send to the last reply), latency from the send to the reply's arrival in the client's event
handler (p50, p95, max), the events the server pushed per message (acks not counted), and CPU
per message of daphne, of PostgreSQL (the bench database's backends and the server's own
processes, such as the WAL writer; other databases on a shared server are left out) and of this process (the clients), from /proc and process_time;
busy is daphne's CPU over the wall time (100% = one core). Also per Tether phase: how many of
its sends were announced to their own socket by ``chat-user-message`` (the thread's bus, through
the channel layer, not awaited by the client) by the last reply, and how many more within
``--grace`` seconds after it (untimed); the ones never seen are printed as a note, not a
failure. Then Tether / baseline per phase, Tether's B rate / A rate, and the bars: at least
400 msg/s with 1 client, at least 600 msg/s with 20 clients, B / A at least 1.5 (PASS/FAIL
printed; the exit status does not depend on them, only on correctness).

``--guard RATIO`` (CI, ``.ci/run``) measures cost instead: ``--rounds`` rounds of the B phase
(``--clients`` x ``--messages``, fresh sockets, ``--warmup`` untimed messages each), Tether
and the floor in turn, their order alternating from round to round, no baseline. Per round it
prints each daphne's CPU per message (user + system time from /proc over the timed phase:
what a loaded machine delays, not what it costs) and Tether's over the floor's; the median of
those per-round ratios is the verdict, PASS within ``RATIO``, else FAIL and exit status 3
(a correctness failure still exits 1). Pairs measured side by side and a median over rounds
keep other work on the machine from deciding it.

``--observability`` measures what metrics, JSON logs and the admin dashboard's publisher cost:
``--rounds`` rounds of the B phase on two Tether daphnes, one with ``METRICS_ENABLED=1``
(multiprocess mode), ``LOG_FORMAT=json`` and the dashboard's samples written every
``--publish-every`` seconds (1 by default, five times the production default, so that every
timed phase holds writes: an upper bound), one with ``METRICS_ENABLED=0``, text logs and no
publisher (``DASHBOARD_PUBLISH_EVERY=0``), their order alternating; per round each one's daphne
CPU per message and the timed phase's seconds, and the median of the per-round ratios (on / off).

``--traces REF`` measures what traces cost (``chatproject.tracing``): ``--rounds`` rounds of
the B phase on three Tether daphnes, their order alternating: ``off`` (this tree, traces off:
the default), ``plain`` (the code of git revision ``REF``, a tree without the traces, checked
out for the run into a temporary worktree) and ``on`` (this tree, ``OTEL_ENABLED=1``, every span
exported to a file); per round each one's daphne CPU per message, and the medians of the
per-round ratios off / plain (what the feature costs when off) and on / off.

``--profile`` runs the Tether daphne under cProfile and prints where its time went (the
event loop's thread only; the database calls run on threads of their own).
"""

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make `bench` importable
from bench import common
from chatproject.servers import SERVERS as ASGI_SERVERS

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/tether_bench_echo"
CHAT_APP = "bench.echo_app"
BASELINE_APP = "bench.baseline_asgi:application"
BENCH_USER = "bench-echo"
SERVERS = ("tether", "baseline", "floor")
ONE_CLIENT_BAR = 400.0  # msg/s, phase A
MANY_CLIENTS_BAR = 600.0  # msg/s, phase B (at 20 clients)
SCALING_BAR = 1.5  # phase B rate over phase A rate
# --observability: the two Tethers it compares, and their settings.
# ``observed`` also gets ``DASHBOARD_PUBLISH_EVERY`` from ``--publish-every``.
OBSERVABILITY = {
    "observed": {"METRICS_ENABLED": "1", "LOG_FORMAT": "json"},
    "plain": {"METRICS_ENABLED": "0", "LOG_FORMAT": "text", "DASHBOARD_PUBLISH_EVERY": "0"},
}
# --traces: the three Tethers it compares (``plain`` runs the code of another revision).
TRACES = {
    "off": {"OTEL_ENABLED": "0"},
    "plain": {"OTEL_ENABLED": "0"},
    "on": {"OTEL_ENABLED": "1", "OTEL_TRACES_EXPORTER": "file"},
}
SEND_RATE = "1000000/d"  # the send budget: a burst of a million, refilled at 11.6 a second
GUARD_EXCEEDED = 3  # exit status of --guard when Tether's CPU per message is over RATIO x the floor's


class Failed(Exception):
    """A reply, an ack or the connection was not what it must be."""


# --- the client ---------------------------------------------------------------------------------


class EchoClient:
    """One python-socketio AsyncClient on its own session, one message in flight at a time."""

    def __init__(self, name: str, url: str, token: str | None, event: str, timeout: float) -> None:
        self.name = name
        self.url = url
        self.token = token
        self.event = event  # client_message (Tether), echo (baseline) or floor
        self.timeout = timeout
        self.sio = common.socketio_client()
        self.sio.on("*", self._record)
        self.sio.on("disconnect", self._disconnected)
        self.sent = 0  # messages sent on this session, warmup included
        self.sent_ids: list[str] = []  # their message ids, in order
        self.bus_ids: set[str] = set()  # message ids announced by chat-user-message (the thread's bus)
        self.pushed: Counter[str] = Counter()  # events the server pushed, by name (acks are not events)
        self.ready = asyncio.Event()
        self.problems: list[str] = []  # what arrived while nothing was awaited
        self._reply: asyncio.Future[tuple[float, Any]] | None = None
        self._acks: list[tuple[str, asyncio.Future[tuple[Any, ...]]]] = []

    async def _record(self, event: str, *args: Any) -> None:
        arrived = time.perf_counter()
        self.pushed[event] += 1
        data = args[0] if args else None
        if event == "clear_call_fn":  # the last answer to connection_successful
            self.ready.set()
        elif event == "new_message" and isinstance(data, dict) and data.get("type") == "assistant_message":
            self._settle(arrived, data, f"an assistant message nobody waited for: {data.get('output')!r}")
        elif event == "chat-user-message" and isinstance(data, dict):
            self.bus_ids.add(str(data.get("messageId")))
        elif event == "error":
            self._fail(f"the server sent an error: {data!r}")

    async def _disconnected(self, *_reason: Any) -> None:
        self._fail("the server closed the socket")

    def _settle(self, arrived: float, data: Any, unexpected: str) -> None:
        if self._reply is not None and not self._reply.done():
            self._reply.set_result((arrived, data))
        else:
            self.problems.append(unexpected)

    def _fail(self, problem: str) -> None:
        if self._reply is not None and not self._reply.done():
            self._reply.set_exception(Failed(problem))
        else:
            self.problems.append(problem)

    async def connect(self, handshake: bool) -> None:
        """Connect on a new session; ``handshake``: then say ``connection_successful`` as the
        web client does and wait for its answers."""
        await common.connect_socket(self.sio, self.url, self.token)
        if handshake:
            await self.sio.emit("connection_successful")
            await asyncio.wait_for(self.ready.wait(), self.timeout)

    async def exchange(self, text: str) -> float:
        """Send ``text``, wait for its reply and check it; returns the seconds between the two."""
        index = self.sent
        self.sent += 1
        loop = asyncio.get_running_loop()
        reply: asyncio.Future[tuple[float, Any]] = loop.create_future()
        ack: asyncio.Future[tuple[Any, ...]] = loop.create_future()
        message_id = str(uuid.uuid4())
        self.sent_ids.append(message_id)
        self._acks.append((message_id, ack))
        self._reply = reply

        def acked(*answer: Any) -> None:
            if not ack.done():
                ack.set_result(answer)

        began = time.perf_counter()
        await self.sio.emit(self.event, {"message": {"id": message_id, "output": text}}, callback=acked)
        try:
            arrived, step = await asyncio.wait_for(reply, self.timeout)
        except TimeoutError:
            raise Failed(
                f"{self.name}: no reply to message #{index} {text!r} within {self.timeout:g}s"
            ) from None
        except Failed as failure:
            raise Failed(f"{self.name}, message #{index} {text!r}: {failure}") from None
        finally:
            self._reply = None
        expected = f"{2 * index + 1}: {text}"
        output = step.get("output")
        if output != expected:
            prefix, _, rest = str(output).partition(": ")
            what = "the context length" if rest == text else "the reply"
            raise Failed(
                f"{self.name}, message #{index}: {what} is wrong: expected {expected!r}, got {output!r}"
                f" (context length seen: {prefix!r})"
            )
        if step.get("isError"):
            raise Failed(f"{self.name}, message #{index}: the reply is an error step: {step!r}")
        return arrived - began

    async def check_acks(self) -> None:
        """Every message sent since the last check was acked, naming it."""
        acks, self._acks = self._acks, []
        for message_id, ack in acks:
            try:
                answer = await asyncio.wait_for(ack, self.timeout)
            except TimeoutError:
                raise Failed(f"{self.name}: no ack for message {message_id}") from None
            body = answer[0] if answer else None
            if not (isinstance(body, dict) and body.get("messageId") == message_id and "queued" in body):
                raise Failed(f"{self.name}: message {message_id} was acked {answer!r}")
        if self.problems:
            raise Failed(f"{self.name}: {self.problems[0]} ({len(self.problems)} such)")

    async def close(self) -> None:
        await common.disconnect_socket(self.sio)


# --- measurement --------------------------------------------------------------------------------


@dataclass
class Phase:
    label: str  # "A" or "B"
    server: str  # "tether", "baseline" or "floor"
    clients: int
    messages: int  # per client
    samples: list[float] = field(default_factory=list)  # seconds, send -> reply
    errors: list[str] = field(default_factory=list)
    wall: float = 0.0
    cpu_daphne: float = 0.0
    cpu_postgres: float = 0.0
    cpu_client: float = 0.0
    pushed: Counter[str] = field(default_factory=Counter)  # events pushed during the phase, by name
    # The phase's sends announced on the thread's bus (chat-user-message, through the channel
    # layer): by the last reply, and within --grace seconds after it.
    bus_by_reply: int = 0
    bus_after: int = 0

    @property
    def rate(self) -> float:
        return len(self.samples) / self.wall if self.wall and self.samples else 0.0


@dataclass
class Server:
    name: str
    daphne: common.Daphne
    token: str | None
    event: str
    handshake: bool


def daphnes(servers: list[Server]) -> list[common.Daphne]:
    """The daphne processes behind ``servers`` (the baseline's serves the floor too), once each."""
    return list({id(s.daphne): s.daphne for s in servers}.values())


def text_of(client: str, index: int) -> str:
    return f"echo {client} #{index}"


async def client_loop(client: EchoClient, messages: int, samples: list[float] | None) -> None:
    """``messages`` round trips in sequence (``samples``: where their times go, None: warmup)."""
    for _ in range(messages):
        took = await client.exchange(text_of(client.name, client.sent))
        if samples is not None:
            samples.append(took)
    await client.check_acks()


async def run_phase(server: Server, phase: Phase, args: argparse.Namespace) -> Phase:
    clients = [
        EchoClient(
            f"{server.name}-{phase.label}{i}", server.daphne.url, server.token, server.event, args.timeout
        )
        for i in range(phase.clients)
    ]
    try:
        try:
            await asyncio.gather(*(c.connect(server.handshake) for c in clients))
            if args.warmup:
                await asyncio.gather(*(client_loop(c, args.warmup, None) for c in clients))
        except Exception as exc:
            phase.errors.append(f"before the phase: {type(exc).__name__}: {exc}")
            return phase
        daphne0, _ = server.daphne.cpu_seconds()
        pg0, client0 = common.postgres_cpu(args.database), time.process_time()
        pushed0 = sum((c.pushed for c in clients), Counter[str]())
        began = time.perf_counter()
        results = await asyncio.gather(
            *(client_loop(c, phase.messages, phase.samples) for c in clients), return_exceptions=True
        )
        phase.wall = time.perf_counter() - began
        daphne1, _ = server.daphne.cpu_seconds()
        phase.cpu_daphne = daphne1 - daphne0
        phase.cpu_postgres = common.postgres_cpu(args.database) - pg0
        phase.cpu_client = time.process_time() - client0
        phase.pushed = sum((c.pushed for c in clients), Counter[str]()) - pushed0
        phase.errors += [f"{type(r).__name__}: {r}" for r in results if isinstance(r, BaseException)]
        expected = phase.clients * phase.messages
        if not phase.errors and len(phase.samples) != expected:
            phase.errors.append(f"{len(phase.samples)} replies timed, {expected} expected")

        def announced() -> int:
            return sum(len(set(c.sent_ids[args.warmup :]) & c.bus_ids) for c in clients)

        phase.bus_by_reply = announced()
        if server.name != "baseline" and phase.bus_by_reply < expected:
            await asyncio.sleep(args.grace)
            phase.bus_after = announced() - phase.bus_by_reply
        return phase
    finally:
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)


async def run_bench(servers: list[Server], args: argparse.Namespace) -> list[Phase]:
    phases: list[Phase] = []
    for label, clients, messages in (("A", 1, args.single_messages), ("B", args.clients, args.messages)):
        for server in servers:
            phases.append(await run_phase(server, Phase(label, server.name, clients, messages), args))
            await asyncio.sleep(args.pause)  # the last turns' bookkeeping (persist, settle) ends
    return phases


async def run_guard(servers: list[Server], args: argparse.Namespace) -> list[Phase]:
    """``--rounds`` B phases per server, labelled R1, R2...; the servers' order alternates, so
    neither always runs first after the other's bookkeeping."""
    phases: list[Phase] = []
    for n in range(1, args.rounds + 1):
        for server in servers if n % 2 else servers[::-1]:
            phase = Phase(f"R{n}", server.name, args.clients, args.messages)
            phases.append(await run_phase(server, phase, args))
            await asyncio.sleep(args.pause)
    return phases


# --- report -------------------------------------------------------------------------------------


def per_message(seconds: float, p: Phase) -> str:
    return f"{seconds * 1000 / len(p.samples):.2f}" if p.samples else "-"


def row(p: Phase) -> list[str]:
    server = f"{p.server} (FAILED)" if p.errors else p.server
    if not p.samples:
        return [p.label, server, str(p.clients), "0", *["-"] * 10]
    ms = [s * 1000 for s in p.samples]
    return [
        p.label,
        server,
        str(p.clients),
        str(len(p.samples)),
        f"{p.wall:.2f}",
        f"{p.rate:,.1f}",
        f"{common.percentile(ms, 0.5):.2f}",
        f"{common.percentile(ms, 0.95):.2f}",
        f"{max(ms):.2f}",
        f"{p.pushed.total() / len(p.samples):.1f}",
        per_message(p.cpu_daphne, p),
        per_message(p.cpu_postgres, p),
        per_message(p.cpu_client, p),
        f"{p.cpu_daphne / p.wall * 100:.0f}%" if p.wall else "-",
    ]


def find(phases: list[Phase], label: str, server: str) -> Phase | None:
    """The phase, when it ran without errors (a failed phase's figures go into no ratio or bar)."""
    return next(
        (p for p in phases if p.label == label and p.server == server and p.samples and not p.errors), None
    )


def cpu_ms(p: Phase) -> float:
    """The phase's daphne CPU per message, in milliseconds."""
    return p.cpu_daphne * 1000 / len(p.samples)


def guard_passed(phases: list[Phase], args: argparse.Namespace) -> bool:
    """Print each round's CPU per message and the verdict: True when the median of the
    rounds' Tether / floor ratios is within ``--guard``."""
    print()
    print("Guard: daphne CPU per message (user + system, timed phase only), Tether / floor per round")
    limit: float = args.guard
    ratios: list[float] = []
    tether_ms: list[float] = []
    floor_ms: list[float] = []
    for n in range(1, args.rounds + 1):
        tether, floor = find(phases, f"R{n}", "tether"), find(phases, f"R{n}", "floor")
        if tether is None or floor is None or floor.cpu_daphne <= 0:
            print(f"  round {n}: not measured")
            continue
        tether_ms.append(cpu_ms(tether))
        floor_ms.append(cpu_ms(floor))
        ratios.append(tether_ms[-1] / floor_ms[-1])
        print(f"  round {n}: tether {tether_ms[-1]:.2f} ms, floor {floor_ms[-1]:.2f} ms: {ratios[-1]:.2f}x")
    if len(ratios) * 2 <= args.rounds:
        print(f"  GUARD FAIL: only {len(ratios)} of {args.rounds} rounds measured")
        return False
    ratio = statistics.median(ratios)
    verdict = "PASS" if ratio <= limit else "GUARD FAIL"
    print(
        f"  median: tether {statistics.median(tether_ms):.2f} ms, floor {statistics.median(floor_ms):.2f} ms;"
        f" ratio {ratio:.2f}x (median of {len(ratios)} rounds; range {min(ratios):.2f}-{max(ratios):.2f})"
        f"  [{verdict}] limit: at most {limit:g}x"
    )
    return ratio <= limit


def observability_cost(phases: list[Phase], args: argparse.Namespace) -> None:
    """Print each round's daphne CPU per message with metrics, JSON logs and the dashboard's
    publisher on and off (and the timed phase's seconds: how many writes it held), and the
    median of the per-round ratios."""
    on, off = OBSERVABILITY
    print()
    print(
        f"Observability: daphne CPU per message (user + system, timed phase only), {on} / {off} per round;"
        f" {on} publishes the dashboard's samples every {args.publish_every:g} s"
    )
    ratios: list[float] = []
    on_ms: list[float] = []
    off_ms: list[float] = []
    for n in range(1, args.rounds + 1):
        with_it, without = find(phases, f"R{n}", on), find(phases, f"R{n}", off)
        if with_it is None or without is None or without.cpu_daphne <= 0:
            print(f"  round {n}: not measured")
            continue
        on_ms.append(cpu_ms(with_it))
        off_ms.append(cpu_ms(without))
        ratios.append(on_ms[-1] / off_ms[-1])
        print(
            f"  round {n}: {on} {on_ms[-1]:.2f} ms ({with_it.wall:.1f} s), {off} {off_ms[-1]:.2f} ms"
            f" ({without.wall:.1f} s): {ratios[-1]:.3f}x"
        )
    if ratios:
        print(
            f"  median: {on} {statistics.median(on_ms):.2f} ms, {off} {statistics.median(off_ms):.2f} ms;"
            f" ratio {statistics.median(ratios):.3f}x (median of {len(ratios)} rounds;"
            f" range {min(ratios):.3f}-{max(ratios):.3f}); bar: at most 1.05x"
        )


@contextlib.contextmanager
def checked_out(ref: str, path: Path) -> Iterator[Path]:
    """Git revision ``ref`` checked out at ``path`` for the block (a temporary worktree)."""
    git = ["git", "-C", str(common.ROOT), "worktree"]
    subprocess.run([*git, "add", "--detach", str(path), ref], check=True, capture_output=True)
    try:
        yield path
    finally:
        subprocess.run([*git, "remove", "--force", str(path)], check=False, capture_output=True)


def traces_cost(phases: list[Phase], args: argparse.Namespace) -> None:
    """Print each round's daphne CPU per message with traces off, without them (``plain``)
    and on, and the medians of the per-round ratios off / plain and on / off."""
    print()
    print(f"Traces: daphne CPU per message (user + system, timed phase only); plain = {args.traces}")
    ms: dict[str, list[float]] = {name: [] for name in TRACES}
    ratios: dict[str, list[float]] = {"off / plain": [], "on / off": []}
    for n in range(1, args.rounds + 1):
        measured = {name: find(phases, f"R{n}", name) for name in TRACES}
        if any(p is None or p.cpu_daphne <= 0 for p in measured.values()):
            print(f"  round {n}: not measured")
            continue
        cpu = {name: cpu_ms(p) for name, p in measured.items() if p is not None}
        for name, value in cpu.items():
            ms[name].append(value)
        ratios["off / plain"].append(cpu["off"] / cpu["plain"])
        ratios["on / off"].append(cpu["on"] / cpu["off"])
        print(
            f"  round {n}: off {cpu['off']:.2f} ms, plain {cpu['plain']:.2f} ms, on {cpu['on']:.2f} ms:"
            f" off / plain {ratios['off / plain'][-1]:.3f}x, on / off {ratios['on / off'][-1]:.3f}x"
        )
    if ratios["on / off"]:
        medians = ", ".join(f"{name} {statistics.median(values):.2f} ms" for name, values in ms.items())
        print(f"  median: {medians}")
        for name, values in ratios.items():
            print(
                f"  {name}: {statistics.median(values):.3f}x (median of {len(values)} rounds;"
                f" range {min(values):.3f}-{max(values):.3f})"
            )


def bar_line(name: str, value: float | None, bar: float, unit: str) -> str:
    if value is None:
        return f"{name}: not measured"
    verdict = "PASS" if value >= bar else "FAIL"
    return f"{name}: {value:,.2f}{unit}  [{verdict}] bar: at least {bar:g}{unit}"


def report(phases: list[Phase], context: str, args: argparse.Namespace, server_errors: list[str]) -> None:
    print()
    print(f"Tether hooks-API echo round trips vs a bare Channels consumer  ({context})")
    print()
    headers = [
        "phase",
        "server",
        "clients",
        "messages",
        "wall s",
        "msg/s",
        "p50 ms",
        "p95 ms",
        "max ms",
        "events/msg",
        "daphne CPU ms/msg",
        "postgres ms/msg",
        "client ms/msg",
        "busy",
    ]
    print(common.table(headers, [row(p) for p in phases], left={0, 1}))
    print()
    for label in ("A", "B"):
        tether = find(phases, label, "tether")
        for other in ("baseline", "floor"):
            versus = find(phases, label, other)
            if tether and versus:
                print(
                    f"phase {label} ({tether.clients} client{'s' if tether.clients > 1 else ''}): "
                    f"tether / {other} = {tether.rate / versus.rate:.3f} "
                    f"({tether.rate:,.1f} vs {versus.rate:,.1f} msg/s; p50 "
                    f"{common.percentile(tether.samples, 0.5) * 1000:.2f} vs "
                    f"{common.percentile(versus.samples, 0.5) * 1000:.2f} ms)"
                )
    for server in SERVERS:
        a, b = find(phases, "A", server), find(phases, "B", server)
        if a and b:
            print(f"{server}: {b.clients} clients rate / 1 client rate = {b.rate / a.rate:.2f}")
    for p in phases:
        if p.label == "B" and p.samples and not p.errors:
            mix = ", ".join(f"{name} {n / len(p.samples):.2f}" for name, n in sorted(p.pushed.items()))
            print(f"{p.server}: events pushed per message in phase B: {mix}")
    for p in phases:
        if p.server != "baseline" and p.samples and not p.errors:
            sends = len(p.samples)
            missing = sends - p.bus_by_reply - p.bus_after
            verdict = "all" if missing == 0 else f"NOTE: {missing} never arrived ({missing / sends:.0%})"
            print(
                f"{p.server} phase {p.label}: chat-user-message (one per accepted send) for "
                f"{p.bus_by_reply}/{sends} sends by the last reply, {p.bus_after} more within "
                f"{args.grace:g}s: {verdict}"
            )
    tether_a, tether_b = find(phases, "A", "tether"), find(phases, "B", "tether")
    if any(p.server == "tether" and p.label in ("A", "B") for p in phases):  # not the --guard rounds
        print()
        print("Bars (Tether):")
        print("  " + bar_line("1 client", tether_a.rate if tether_a else None, ONE_CLIENT_BAR, " msg/s"))
        clients = tether_b.clients if tether_b else args.clients
        note = "" if clients == 20 else " (the bar is for 20 clients)"
        print(
            "  "
            + bar_line(f"{clients} clients", tether_b.rate if tether_b else None, MANY_CLIENTS_BAR, " msg/s")
            + note
        )
        scaling = tether_b.rate / tether_a.rate if tether_a and tether_b else None
        print("  " + bar_line(f"{clients} clients / 1 client", scaling, SCALING_BAR, "x"))
    floor_a, floor_b = find(phases, "A", "floor"), find(phases, "B", "floor")
    if floor_a or floor_b:
        print()
        print(
            "The floor (the protocol's five events and two commits per turn, nothing else) on this machine:"
        )
        for label, floor, bar in (
            ("1 client", floor_a, ONE_CLIENT_BAR),
            ("20 clients", floor_b, MANY_CLIENTS_BAR),
        ):
            if floor is not None:
                reach = "within reach" if floor.rate >= bar else "OUT OF REACH for any server on this stack"
                print(f"  {label}: {floor.rate:,.1f} msg/s; the bar of {bar:g} msg/s is {reach}")
    failed = [p for p in phases if p.errors]
    print()
    if failed:
        for p in failed:
            distinct = sorted(set(p.errors))
            print(f"FAILED phase {p.label} on {p.server}: {len(p.errors)} errors, e.g.")
            for error in distinct[:3]:
                print(f"  {error}")
    else:
        print(
            "every reply checked: exactly '<2k+1>: <text sent>' for the session's k-th message "
            "(chat_context grew by two per turn), every ack named its message"
        )
    for line in server_errors[:10]:
        print(f"daphne log: {line.strip()}")


# --- main ---------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--single-messages", type=int, default=200, help="messages of phase A (1 client)")
    parser.add_argument("--clients", type=int, default=20, help="clients of phase B")
    parser.add_argument("--messages", type=int, default=50, help="messages per client in phase B")
    parser.add_argument("--warmup", type=int, default=3, help="untimed messages per client before a phase")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds a reply (or ack) may take")
    parser.add_argument("--pause", type=float, default=0.5, help="seconds between phases")
    parser.add_argument(
        "--grace",
        type=float,
        default=5.0,
        help="seconds to wait after a phase for chat-user-message events still missing (not timed)",
    )
    parser.add_argument("--only", choices=SERVERS, help="measure one server only")
    parser.add_argument(
        "--guard",
        type=float,
        metavar="RATIO",
        help="CI guard: only B phases, Tether and the floor alternating for --rounds rounds; exit "
        f"status {GUARD_EXCEEDED} when Tether's daphne CPU per message is over RATIO x the floor's (median)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds of --guard or --observability")
    parser.add_argument(
        "--observability",
        action="store_true",
        help="only B phases on two Tether daphnes, metrics, JSON logs and the dashboard's publisher on and off, "
        "alternating for --rounds rounds",
    )
    parser.add_argument(
        "--publish-every",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="DASHBOARD_PUBLISH_EVERY of --observability's observed daphne (default 1: five times the "
        "production rate, so that every timed phase holds writes)",
    )
    parser.add_argument(
        "--traces",
        metavar="REF",
        help="only B phases on three Tether daphnes, traces off, the code of git revision REF (plain) "
        "and traces on, alternating for --rounds rounds",
    )
    parser.add_argument(
        "--server",
        choices=(*ASGI_SERVERS, "both"),
        default="both",
        help="the ASGI server every process runs on: daphne, uvicorn, or both in turn (default)",
    )
    common.add_websocket_size_argument(parser)
    parser.add_argument("--profile", action="store_true", help="run the Tether daphne under cProfile")
    parser.add_argument("--profile-lines", type=int, default=40)
    parser.add_argument("--keep-data", action="store_true", help="leave the bench user's threads behind")
    args = parser.parse_args()
    if args.guard is not None and args.only is not None:
        parser.error("--guard compares Tether with the floor: it takes no --only")
    if args.observability and (args.guard is not None or args.only is not None):
        parser.error("--observability compares two Tethers: it takes no --guard or --only")
    if args.traces and (args.guard is not None or args.only is not None or args.observability):
        parser.error("--traces compares three Tethers: it takes no --guard, --only or --observability")
    return args


def main() -> int:
    args = parse_args()
    started = time.perf_counter()
    statuses = []
    for server in ASGI_SERVERS if args.server == "both" else (args.server,):
        if args.server == "both":
            print(f"\n=== {server} ===", flush=True)
        statuses.append(run_on(server, args))
    print(f"\ntotal {time.perf_counter() - started:.1f}s")
    return 1 if 1 in statuses else max(statuses)


def run_on(asgi_server: str, args: argparse.Namespace) -> int:
    """The whole bench (Tether, baseline and floor; Tether and the floor under ``--guard``) with
    every process on ``asgi_server``, daphne or uvicorn: 0, 1 (a reply was wrong, or no phase
    ran) or GUARD_EXCEEDED."""
    with tempfile.TemporaryDirectory(prefix="tether-echo-") as tmp, contextlib.ExitStack() as stack:
        workdir = Path(tmp)
        env = common.bench_env(
            CHAT_APP,
            workdir=workdir,
            default_database_url=DEFAULT_DATABASE_URL,
            # Out of reach, yet refilled slower than the bench sends, like a deployed rate
            # (120/min): a process's allowance of ten tokens then lasts for ten sends, as
            # deployed. At 1000000/min the bucket refilled an allowance within a millisecond,
            # so it expired before the next send and every send paid a Redis script.
            SEND_THROTTLE_RATE=SEND_RATE,
        )
        created, token = common.prepare_bench(env, BENCH_USER)
        args.database = common.database_name(env)  # PostgreSQL CPU: this database's backends

        daphne_args = common.websocket_size_args(args.ws_max_message_size, asgi_server)
        profile_path = workdir / "tether.prof" if args.profile else None
        servers: list[Server] = []
        try:
            if args.traces:
                plain_tree = stack.enter_context(checked_out(args.traces, workdir / "plain"))
                for name, extra in TRACES.items():
                    traces_env = {**env, **extra, "OTEL_TRACES_FILE": str(workdir / "spans.jsonl")}
                    daphne = common.Daphne(
                        traces_env,
                        workdir / f"traces-{name}.log",
                        args=daphne_args,
                        label=f"tether traces {name}",
                        server=asgi_server,
                        cwd=plain_tree if name == "plain" else common.ROOT,
                    )
                    servers.append(Server(name, daphne, token, "client_message", handshake=True))
            elif args.observability:
                for name, extra in OBSERVABILITY.items():
                    on_env = {**env, **extra}
                    if extra["METRICS_ENABLED"] == "1":
                        on_env["PROMETHEUS_MULTIPROC_DIR"] = str(workdir / "prometheus")
                        on_env["DASHBOARD_PUBLISH_EVERY"] = str(args.publish_every)
                    daphne = common.Daphne(
                        on_env,
                        workdir / f"{name}.log",
                        args=daphne_args,
                        label=f"tether {name}",
                        server=asgi_server,
                    )
                    servers.append(Server(name, daphne, token, "client_message", handshake=True))
            elif args.only in (None, "tether"):
                daphne = common.Daphne(
                    env,
                    workdir / "tether.log",
                    args=daphne_args,
                    label=f"tether {asgi_server}",
                    profile_to=profile_path,
                    server=asgi_server,
                )
                servers.append(Server("tether", daphne, token, "client_message", handshake=True))
            if args.only in (None, "baseline", "floor") and not (args.observability or args.traces):
                # --guard: the floor only
                daphne = common.Daphne(
                    env,
                    workdir / "baseline.log",
                    BASELINE_APP,
                    label=f"baseline {asgi_server}",
                    args=daphne_args,
                    ready_path="/",
                    server=asgi_server,
                )
                if args.only in (None, "baseline") and args.guard is None:
                    servers.append(Server("baseline", daphne, None, "echo", handshake=False))
                if args.only in (None, "floor"):
                    servers.append(Server("floor", daphne, None, "floor", handshake=False))
            for daphne in daphnes(servers):
                daphne.wait_ready(timeout=90)  # several start at once, on a machine maybe busy
            load_before = os.getloadavg()[0]
            comparing = args.guard is not None or args.observability or args.traces
            measure = run_guard if comparing else run_bench
            phases = asyncio.run(measure(servers, args))
            load_after = os.getloadavg()[0]
            server_errors = [f"{d.label}: {line}" for d in daphnes(servers) for line in d.problems()]
        except BaseException:
            for daphne in daphnes(servers):
                print(f"--- {daphne.label} log:\n{daphne.log_tail()}", file=sys.stderr)
            raise
        finally:
            for daphne in daphnes(servers):
                daphne.stop()
            if not args.keep_data:
                common.remove_users(BENCH_USER)
        context = (
            f"PostgreSQL {common.database_name(env)}{' (created)' if created else ''}, "
            f"{common.channel_layer(env)}, 1 {asgi_server} process per server"
            f"{f', Tether {asgi_server} under cProfile' if args.profile else ''}, {os.cpu_count()} cores, "
            f"{args.warmup} warmup messages per client, load avg {load_before:.1f} -> {load_after:.1f}"
        )
        report(phases, context, args, server_errors)
        if args.observability:
            observability_cost(phases, args)
        if args.traces:
            traces_cost(phases, args)
        within_guard = args.guard is None or guard_passed(phases, args)
        if profile_path is not None:
            common.print_profile(profile_path, args.profile_lines, f"Tether {asgi_server}")
    if any(p.errors for p in phases) or not phases:
        return 1
    return 0 if within_guard else GUARD_EXCEEDED


if __name__ == "__main__":
    sys.exit(main())
