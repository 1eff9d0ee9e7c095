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

Scale is judged as cost, not as a ceiling of this machine: what a message costs the servers
must not grow when they are more, whatever the machine's cores (the bench shares them with
PostgreSQL, Redis, nginx, the engines and the clients, so msg/s says more about the machine).
Reported per phase, over the timed messages only (after the warmup): the daphne processes' CPU
per message, summed over the phase's processes (user + system time from /proc/<pid>/stat,
every thread of each), the engines' (the daphnes' echo subprocesses, live and reaped), the
database's (the PostgreSQL backends connected to the bench's database, from
``pg_stat_activity`` and /proc) and Redis's (its ``INFO cpu``: the whole server, so other
work on it counts too); then messages/s, latency p50 / p95 from the send to the complete
reply, and the machine's busy cores, for information. Then the bars, on daphne CPU per
message: two / one at most 1.15x (the forwarding and bus traffic between the processes are
the difference) and two-one-user / two at most 1.1x; PASS/FAIL printed, the exit status
depends only on correctness.
"""

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make `bench` importable
from bench import common
from chatproject.servers import SERVERS, chosen_server

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/tether_bench_scale"
CHAT_APP = "sessions_app.default_app"
USER_PREFIX = "bench-scale-"
TWO_OVER_ONE_BAR = 1.15  # daphne CPU per message, two processes over one: at most
ONE_USER_BAR = 1.1  # daphne CPU per message, two processes one user over different users: at most


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
    cpu: "Cpu | None" = None  # CPU seconds spent during the timed messages

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.wall if self.wall else 0.0

    def per_message(self, seconds: float) -> float:
        """``seconds`` of CPU over the phase's messages, in milliseconds per message."""
        return seconds * 1000 / len(self.latencies) if self.latencies else 0.0


@dataclass(frozen=True)
class Cpu:
    """CPU seconds so far of what serves the messages; subtract two readings for a phase."""

    daphne: float  # the daphne processes, all their threads
    engines: float  # their echo subprocesses, live and reaped
    postgres: float  # the backends connected to the bench's database
    redis: float  # the Redis server (all its clients' work)

    def __sub__(self, other: "Cpu") -> "Cpu":
        return Cpu(*(a - b for a, b in zip(astuple(self), astuple(other), strict=True)))


class CpuMeter:
    """Reads :class:`Cpu` for the daphne ``pids`` of a phase, the bench's database and Redis."""

    def __init__(self, pids: list[int], env: dict[str, str]) -> None:
        import psycopg
        import redis

        self.pids = pids
        self.database = psycopg.connect(env["DATABASE_URL"], autocommit=True)
        self.redis = redis.Redis.from_url(env["REDIS_URL"])
        self._backends: dict[int, float] = {}  # CPU of each backend seen, its last reading

    def read(self) -> Cpu:
        own = [common.proc_stat(pid) for pid in self.pids]
        daphne = sum(common.cpu_of(fields) for fields in own)
        engines = sum(common.cpu_of(fields, children=True) for fields in own) + sum(
            common.cpu_of(common.proc_stat(child)) for pid in self.pids for child in common.child_pids(pid)
        )
        info = self.redis.info("cpu")
        redis_cpu = float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
        return Cpu(daphne, engines, self._postgres(), redis_cpu)

    def _postgres(self) -> float:
        """CPU of the database's backends (this meter's own excluded); a backend that exited
        since the last reading keeps its last figure (the pool keeps them open in a phase)."""
        rows = self.database.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
        for (pid,) in rows:
            self._backends[pid] = common.cpu_of(common.proc_stat(pid))
        return sum(self._backends.values())

    def close(self) -> None:
        self.database.close()
        self.redis.close()


async def run_phase(
    phase: Phase, url: str, tokens: list[str], meter: CpuMeter, args: argparse.Namespace
) -> None:
    clients = [ReplyClient(url, tokens[i], f"c{i}") for i in range(args.clients)]
    await asyncio.gather(*(c.connect() for c in clients))
    for i in range(args.warmup):
        await asyncio.gather(*(c.say(-1 - i, args.timeout) for c in clients))

    async def loop(client: ReplyClient) -> None:
        for i in range(args.messages):
            phase.latencies.append(await client.say(i, args.timeout))

    busy0, total0 = common.machine_cpu()
    cpu0 = meter.read()
    started = time.perf_counter()
    await asyncio.gather(*(loop(c) for c in clients))
    phase.wall = time.perf_counter() - started
    phase.cpu = meter.read() - cpu0
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
                server=args.server,
            ).start() as cluster:
                phase_tokens = [tokens[0]] * args.clients if phase.one_user else tokens
                meter = CpuMeter([d.pid for d in cluster.daphnes if d.pid is not None], env)
                try:
                    asyncio.run(run_phase(phase, cluster.url, phase_tokens, meter, args))
                except (Failed, TimeoutError, OSError) as exc:
                    print(f"{phase.label}: FAILED: {exc!r}")
                    failed = True
                    break
                finally:
                    meter.close()
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
        f"{args.server} processes behind nginx, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end "
        "(Redis's CPU and the machine's busy cores include any other work on them)"
    )
    rows = []
    for p in phases:
        if not p.latencies or p.cpu is None:
            continue
        rows.append(
            [
                p.label,
                f"{p.per_message(p.cpu.daphne):.2f}",
                f"{p.per_message(p.cpu.engines):.2f}",
                f"{p.per_message(p.cpu.postgres):.2f}",
                f"{p.per_message(p.cpu.redis):.2f}",
                f"{p.rate:.0f}",
                f"{common.percentile(p.latencies, 0.5) * 1000:.1f}",
                f"{common.percentile(p.latencies, 0.95) * 1000:.1f}",
                f"{p.cores_busy:.2f} of {os.cpu_count()}",
            ]
        )
    headers = [
        "phase",
        "daphne CPU ms/msg",
        "engines ms/msg",
        "postgres ms/msg",
        "redis ms/msg",
        "msg/s",
        "p50 ms",
        "p95 ms",
        "machine cores busy",
    ]
    print(common.table(headers, rows, left=[0]))
    one, two, one_user = phases
    for name, over, under, bar in (
        ("two / one processes", two, one, TWO_OVER_ONE_BAR),
        ("one user spread / different users spread", one_user, two, ONE_USER_BAR),
    ):
        if over.cpu is None or under.cpu is None or not under.cpu.daphne:
            print(f"{name}: not measured")
            continue
        ratio = over.per_message(over.cpu.daphne) / under.per_message(under.cpu.daphne)
        verdict = "PASS" if ratio <= bar else "FAIL"
        print(f"{name}, daphne CPU per message: {ratio:.2f}x (bar: at most {bar}x) {verdict}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--server", choices=SERVERS, help="daphne or uvicorn processes (default: SERVER, else daphne)"
    )
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for one reply")
    args = parser.parse_args()
    args.server = args.server or chosen_server(os.environ)
    return args


def main() -> int:
    return run(parse_args())


if __name__ == "__main__":
    sys.exit(main())
