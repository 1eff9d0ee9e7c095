"""Two processes against one, on the engine runtime's message path, behind the same nginx.

    .venv/bin/python bench/scale.py [--clients 20] [--messages 50] [--warmup 2] [--users-spread]

It prepares a PostgreSQL database (``DATABASE_URL``, default ``tether_bench_scale``; created and
migrated when missing), needs Redis (``REDIS_URL``; several processes share events only
there) and nginx, and runs ``chatproject.cluster.Cluster`` (the ``make cluster`` supervisor)
three times with ``CHAT_APP=sessions_app.default_app`` (the echo engine, one subprocess per
thread):

- ``one``: one daphne behind nginx, ``--clients`` clients of as many different users;
- ``two``: two daphnes behind nginx (least connections: half the sockets on each), clients of
  different users;
- ``two, one user``: the same, every client signed in as ONE user: one box, whose threads
  are spread over both processes. Each thread's session runs where its socket first needed it
  (``sessions_app.runtime.ownership``), so this should cost what different users cost; when
  a box's sessions all lived in one process, the other forwarded every turn to it.

Clients: python-socketio ``AsyncClient``s through the proxy, each its own session and thread,
authenticated by an API token; each sends ``client_message`` and WAITS for the engine's
complete reply (``Echo #n: <text>``, the n-th of its thread) before the next send: closed loop,
``--warmup`` untimed messages first. Any other reply, a missing one or an error fails the run.

Reported per phase: messages/s (the phase's messages over its wall time), latency p50 / p95
from the send to the complete reply, and how many of the machine's cores were busy (every
process on it: the servers, PostgreSQL, Redis, nginx, the engines and the clients) with the
machine's CPU per message. Since all of that shares the machine, more processes can only go
beyond all cores over the one-process phase's busy cores by making a message cheaper; the
report prints that estimate. Then
two / one (bar: at least 1.6) and two-one-user / two (bar: at least 0.9); PASS/FAIL printed,
the exit status depends only on correctness.
"""

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make `bench` importable
from bench import common

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/tether_bench_scale"
CHAT_APP = "sessions_app.default_app"
USER_PREFIX = "bench-scale-"
TWO_OVER_ONE_BAR = 1.6
ONE_USER_BAR = 0.9


class Failed(Exception):
    """A reply, an ack or the connection was not what it must be."""


class ReplyClient:
    """One socket on its own session and thread; ``say`` waits for the complete reply."""

    def __init__(self, url: str, token: str, name: str) -> None:
        self.url = url
        self.token = token
        self.name = name
        self.sio = common.socketio_client()
        self.turns = 0
        self.replies: asyncio.Queue[str] = asyncio.Queue()
        self.sio.on("*", self._record)

    async def _record(self, event: str, *args: Any) -> None:
        step = args[0] if args else None
        if event in ("new_message", "update_message") and isinstance(step, dict):
            if step.get("type") == "assistant_message" and not step.get("streaming"):
                self.replies.put_nowait(str(step.get("output")))
        elif event == "error":
            self.replies.put_nowait(f"error: {step}")

    async def connect(self) -> None:
        await common.connect_socket(self.sio, self.url, self.token)
        await self.sio.emit("connection_successful")

    async def say(self, index: int, timeout: float) -> float:
        text = f"{self.name} message {index}"
        started = time.perf_counter()
        message_id = str(uuid.uuid4())
        answer = await self.sio.call(
            "client_message", {"message": {"id": message_id, "output": text}}, timeout=timeout
        )
        if not (isinstance(answer, dict) and answer.get("messageId") == message_id):
            raise Failed(f"{self.name}: client_message answered {answer!r}")
        self.turns += 1
        expected = f"Echo #{self.turns}: {text}"
        while (reply := await asyncio.wait_for(self.replies.get(), timeout)) != expected:
            if reply.startswith("error") or not reply.startswith("Echo #"):
                raise Failed(f"{self.name}: expected {expected!r}, got {reply!r}")
        return time.perf_counter() - started

    async def close(self) -> None:
        await common.disconnect_socket(self.sio)


@dataclass
class Phase:
    label: str
    processes: int
    one_user: bool
    latencies: list[float] = field(default_factory=list)
    wall: float = 0.0
    cores_busy: float = 0.0  # cores in use on the machine during the phase (everything on it)

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.wall if self.wall else 0.0


async def run_phase(phase: Phase, url: str, tokens: list[str], args: argparse.Namespace) -> None:
    clients = [ReplyClient(url, tokens[i], f"c{i}") for i in range(args.clients)]
    await asyncio.gather(*(c.connect() for c in clients))
    for i in range(args.warmup):
        await asyncio.gather(*(c.say(-1 - i, args.timeout) for c in clients))

    async def loop(client: ReplyClient) -> None:
        for i in range(args.messages):
            phase.latencies.append(await client.say(i, args.timeout))

    busy0, total0 = common.machine_cpu()
    started = time.perf_counter()
    await asyncio.gather(*(loop(c) for c in clients))
    phase.wall = time.perf_counter() - started
    busy1, total1 = common.machine_cpu()
    phase.cores_busy = (busy1 - busy0) / (total1 - total0) * (os.cpu_count() or 1)
    await asyncio.gather(*(c.close() for c in clients))


def run(args: argparse.Namespace) -> int:
    from chatproject.cluster import Cluster

    workdir = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    env = common.bench_env(
        CHAT_APP,
        workdir=workdir,
        default_database_url=DEFAULT_DATABASE_URL,
        SEND_THROTTLE_RATE="off",
        LOG_LEVEL="WARNING",
    )
    if not env.get("REDIS_URL"):
        print("bench/scale.py needs REDIS_URL (and PostgreSQL): processes share events only through Redis")
        return 2
    common.prepare_database(env)
    common.setup_django(env)
    usernames = [f"{USER_PREFIX}{i}" for i in range(args.clients)]
    common.remove_users(*usernames)
    tokens = [common.bench_user(name)[1] for name in usernames]
    from django.db import connections

    connections.close_all()

    phases = [
        Phase("one process", 1, False),
        Phase("two processes", 2, False),
        Phase("two processes, one user", 2, True),
    ]
    failed = False
    try:
        for phase in phases:
            port = common.free_port()
            backends = [common.free_port() for _ in range(phase.processes)]
            with Cluster(
                processes=phase.processes,
                port=port,
                backend_ports=backends,
                workdir=workdir / phase.label.replace(" ", "-").replace(",", ""),
                env=env,
            ).start() as cluster:
                phase_tokens = [tokens[0]] * args.clients if phase.one_user else tokens
                try:
                    asyncio.run(run_phase(phase, cluster.url, phase_tokens, args))
                except (Failed, TimeoutError, OSError) as exc:
                    print(f"{phase.label}: FAILED: {exc!r}")
                    failed = True
                    break
            print(f"{phase.label}: {phase.rate:.0f} msg/s", flush=True)
    finally:
        common.remove_users(*usernames)
    report(phases, env, args)
    return 1 if failed else 0


def report(phases: list[Phase], env: dict[str, str], args: argparse.Namespace) -> None:
    print()
    print(
        f"bench/scale.py: {args.clients} clients x {args.messages} messages (each waits for the engine's "
        f"reply), {CHAT_APP}, PostgreSQL {common.database_name(env)}, {common.channel_layer(env)}, "
        f"nginx in front, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end "
        "(the machine's busy cores include any other work on it)"
    )
    rows = []
    for p in phases:
        if not p.latencies:
            continue
        rows.append(
            [
                p.label,
                f"{p.rate:.0f}",
                f"{common.percentile(p.latencies, 0.5) * 1000:.1f}",
                f"{common.percentile(p.latencies, 0.95) * 1000:.1f}",
                f"{p.cores_busy:.2f} of {os.cpu_count()}",
                f"{p.cores_busy * 1000 / p.rate:.1f}",
            ]
        )
    headers = ["phase", "msg/s", "p50 ms", "p95 ms", "machine cores busy", "machine CPU ms/msg"]
    print(common.table(headers, rows, left=[0]))
    one, two, one_user = phases
    if one.rate and two.rate:
        ratio = two.rate / one.rate
        verdict = "PASS" if ratio >= TWO_OVER_ONE_BAR else "FAIL"
        print(f"two / one processes: {ratio:.2f}x (bar {TWO_OVER_ONE_BAR}x) {verdict}")
    if one.rate and one.cores_busy:
        # Everything runs on this machine (servers, PostgreSQL, Redis, nginx, engines, clients):
        # at the one-process phase's CPU per message, all cores give at most this much more.
        ceiling = (os.cpu_count() or 1) / one.cores_busy
        print(
            f"  at the one-process phase's machine CPU per message, all {os.cpu_count()} cores give at "
            f"most {ceiling:.2f}x (it kept {one.cores_busy:.2f} busy); more only if a message costs less"
        )
    if two.rate and one_user.rate:
        ratio = one_user.rate / two.rate
        verdict = "PASS" if ratio >= ONE_USER_BAR else "FAIL"
        print(f"one user spread / different users spread: {ratio:.2f}x (bar {ONE_USER_BAR}x) {verdict}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for one reply")
    return parser.parse_args()


def main() -> int:
    return run(parse_args())


if __name__ == "__main__":
    sys.exit(main())
