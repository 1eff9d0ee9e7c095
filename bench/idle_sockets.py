"""Server memory per idle socket: daphne's RSS growth for N connected, idle sockets.

    .venv/bin/python bench/idle_sockets.py [--sockets 300] [--batch 25] [--settle 2] [--no-baseline]

Tether: a fresh daphne process serving ``chatproject.asgi`` with ``CHAT_APP=bench.echo_app``
(``--chat-app``), on PostgreSQL (``DATABASE_URL``, default ``tether_bench_echo`` on the local
server; created and migrated when missing), the channel layer from ``REDIS_URL`` when set (else
in-memory) and the WebSocket size flags of ``make run``.

Each socket is a python-socketio ``AsyncClient`` (all in this process, one asyncio loop),
WebSocket transport, authenticated by an API token, on a session of its own (a new sessionId,
so a fresh thread that is never created, as no message is sent), opened the way the web client
opens a tab: connect, then ``connection_successful`` and its answers. ``--warmup`` sockets are
opened first and kept open (the first sockets load code, fill the database pool and the Redis
connections: a one-time cost, not a per-socket one); after ``--settle`` seconds daphne's RSS
(VmRSS, /proc) is read, then ``--sockets`` more are opened ``--batch`` at a time, and after
``--settle`` seconds the RSS is read again. Printed: the growth in KiB per idle socket (the
bar: at most 40 KiB), the sockets still connected at the end (all must be, else exit 1), the
time to open them and daphne's CPU doing it, and the RSS once they are all disconnected (the
sessions stay in memory until ``SESSION_TIMEOUT``).

For scale, the same is measured against ``bench/baseline_asgi.py`` (a bare Channels consumer
with the same channel layer, no auth, session or database) on a daphne of its own, unless
``--no-baseline``.
"""

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make `bench` importable
from bench import common
from chatproject.servers import chosen_server  # imports neither Django nor a server

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/tether_bench_echo"
CHAT_APP = "bench.echo_app"
BASELINE_APP = "bench.baseline_asgi:application"
BENCH_USER = "bench-idle"
BAR_KIB = 40.0


class Failed(Exception):
    pass


class IdleClient:
    """One AsyncClient that connects and then does nothing but answer the server's pings."""

    def __init__(self, url: str, token: str | None, timeout: float) -> None:
        self.url = url
        self.token = token
        self.timeout = timeout
        self.sio = common.socketio_client()
        self.ready = asyncio.Event()
        self.dropped = False
        self.sio.on("clear_call_fn", self._ready)  # the last answer to connection_successful
        self.sio.on("disconnect", self._disconnected)

    async def _ready(self, *_args: Any) -> None:
        self.ready.set()

    async def _disconnected(self, *_reason: Any) -> None:
        self.dropped = True

    async def open(self, handshake: bool) -> None:
        await common.connect_socket(self.sio, self.url, self.token)
        if handshake:
            await self.sio.emit("connection_successful")
            await asyncio.wait_for(self.ready.wait(), self.timeout)

    async def close(self) -> None:
        await common.disconnect_socket(self.sio)


@dataclass
class Result:
    name: str
    sockets: int
    rss_start: float  # MiB, before any socket
    rss_before: float  # MiB, with the warmup sockets open
    rss_after: float  # MiB, with every socket open
    rss_closed: float  # MiB, after every socket disconnected
    open_seconds: float
    open_cpu: float  # daphne's CPU seconds while the measured sockets opened
    connected: int  # measured sockets still connected before the close
    errors: list[str]

    @property
    def kib_per_socket(self) -> float:
        return (self.rss_after - self.rss_before) * 1024 / self.sockets


async def open_all(
    clients: list[IdleClient], batch: int, handshake: bool, errors: list[str]
) -> list[IdleClient]:
    """Open ``clients`` ``batch`` at a time; returns the ones that connected."""
    opened: list[IdleClient] = []
    for start in range(0, len(clients), batch):
        group = clients[start : start + batch]
        results = await asyncio.gather(*(c.open(handshake) for c in group), return_exceptions=True)
        for client, result in zip(group, results, strict=True):
            if isinstance(result, BaseException):
                errors.append(f"{type(result).__name__}: {result}")
            else:
                opened.append(client)
    return opened


async def measure(
    name: str,
    server: common.Daphne,
    token: str | None,
    handshake: bool,
    args: argparse.Namespace,
    probe: Path,
) -> Result:
    errors: list[str] = []
    rss_start = server.rss_mib()
    warm = [IdleClient(server.url, token, args.timeout) for _ in range(args.warmup)]
    measured = [IdleClient(server.url, token, args.timeout) for _ in range(args.sockets)]
    try:
        await open_all(warm, args.batch, handshake, errors)
        await asyncio.sleep(args.settle)
        rss_before = server.rss_mib()
        if args.tracemalloc:
            await asyncio.to_thread(snapshot, server, probe, 0)
        cpu0, _ = server.cpu_seconds()
        began = time.perf_counter()
        opened = await open_all(measured, args.batch, handshake, errors)
        open_seconds = time.perf_counter() - began
        cpu1, _ = server.cpu_seconds()
        await asyncio.sleep(args.settle)
        rss_after = server.rss_mib()
        if args.tracemalloc:
            await asyncio.to_thread(snapshot, server, probe, 1)
        connected = sum(1 for c in opened if c.sio.connected and not c.dropped)
    finally:
        await asyncio.gather(*(c.close() for c in warm + measured), return_exceptions=True)
    await asyncio.sleep(args.settle)
    return Result(
        name,
        args.sockets,
        rss_start,
        rss_before,
        rss_after,
        server.rss_mib(),
        open_seconds,
        cpu1 - cpu0,
        connected,
        errors,
    )


def report(results: list[Result], context: str, args: argparse.Namespace, server_errors: list[str]) -> None:
    print()
    print(f"daphne memory per idle socket  ({context})")
    print()
    headers = [
        "server",
        "sockets",
        "RSS MiB: start",
        f"+{args.warmup} warm",
        "all open",
        "all closed",
        "KiB/socket",
        "open s",
        "daphne CPU ms/socket",
        "connected",
    ]
    rows = [
        [
            r.name,
            str(r.sockets),
            f"{r.rss_start:.1f}",
            f"{r.rss_before:.1f}",
            f"{r.rss_after:.1f}",
            f"{r.rss_closed:.1f}",
            f"{r.kib_per_socket:.1f}",
            f"{r.open_seconds:.2f}",
            f"{r.open_cpu * 1000 / r.sockets:.2f}",
            f"{r.connected}/{r.sockets}",
        ]
        for r in results
    ]
    print(common.table(headers, rows, left={0}))
    print()
    for r in results:
        if r.name == "tether":
            verdict = "PASS" if r.kib_per_socket <= BAR_KIB else "FAIL"
            print(
                f"Tether: {r.kib_per_socket:.1f} KiB per idle socket  [{verdict}] bar: at most {BAR_KIB:g} KiB"
            )
    tether = next((r for r in results if r.name == "tether"), None)
    baseline = next((r for r in results if r.name == "baseline"), None)
    if tether and baseline:
        print(
            f"Tether - baseline: {tether.kib_per_socket - baseline.kib_per_socket:.1f} KiB per socket "
            "(what Tether's session, consumer and groups add to the bare consumer)"
        )
    for r in results:
        if r.errors:
            print(
                f"FAILED on {r.name}: {len(r.errors)} sockets did not open, e.g. {sorted(set(r.errors))[:3]}"
            )
        if r.connected != r.sockets:
            print(f"FAILED on {r.name}: {r.sockets - r.connected} sockets not connected at the end")
    for line in server_errors[:10]:
        print(f"daphne log: {line.strip()}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sockets", "--idle-sockets", type=int, default=300, help="idle sockets measured")
    parser.add_argument("--batch", type=int, default=25, help="sockets opened at once")
    parser.add_argument(
        "--warmup", type=int, default=10, help="sockets opened (and kept) before the first RSS"
    )
    parser.add_argument("--settle", type=float, default=2.0, help="seconds before each RSS reading")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds a socket may take to open")
    parser.add_argument("--chat-app", default=CHAT_APP, help="CHAT_APP of the Tether daphne")
    parser.add_argument("--no-baseline", action="store_true", help="skip the bare-consumer daphne")
    common.add_websocket_size_argument(parser)
    parser.add_argument("--keep-data", action="store_true", help="leave the bench user's sessions behind")
    parser.add_argument(
        "--tracemalloc",
        type=int,
        default=0,
        metavar="N",
        help="run daphne under tracemalloc and print the N sites that grew most per socket",
    )
    return parser.parse_args()


def snapshot(server: common.Daphne, directory: Path, n: int) -> None:
    """Ask a daphne started with ``bench/memory_probe`` on its path for snapshot ``n``."""
    server.process.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 60
    while not (directory / f"{n}.snapshot").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)  # the file is complete once its writer is done


def print_growth(directory: Path, sockets: int, limit: int) -> None:
    """Where the memory that the measured sockets added was allocated (the innermost frame of
    Tether's own code or a library's, grouped by line)."""
    import tracemalloc

    before = tracemalloc.Snapshot.load(str(directory / "0.snapshot"))
    after = tracemalloc.Snapshot.load(str(directory / "1.snapshot"))
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]
    stats = after.filter_traces(ignore).compare_to(before.filter_traces(ignore), "lineno")
    total = sum(stat.size_diff for stat in stats)
    print(
        f"\ntracemalloc: {total / sockets / 1024:.1f} KiB per socket allocated by Python; top {limit} lines:"
    )
    for stat in stats[:limit]:
        frame = stat.traceback[0]
        print(f"  {stat.size_diff / sockets:8.0f} B/socket  {frame.filename}:{frame.lineno}")
    print(f"by file, top {limit}:")
    files = after.filter_traces(ignore).compare_to(before.filter_traces(ignore), "filename")
    for stat in files[:limit]:
        print(f"  {stat.size_diff / sockets:8.0f} B/socket  {stat.traceback[0].filename}")


def main() -> int:
    args = parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tether-idle-") as tmp:
        workdir = Path(tmp)
        env = common.bench_env(args.chat_app, workdir=workdir, default_database_url=DEFAULT_DATABASE_URL)
        created, token = common.prepare_bench(env, BENCH_USER)
        server_args = common.websocket_size_args(args.ws_max_message_size, chosen_server(env))

        plan: list[tuple[str, str, str, str | None, bool]] = [
            ("tether", common.TETHER_APP, "/accounts/login/", token, True)
        ]
        if not args.no_baseline:
            plan.append(("baseline", BASELINE_APP, "/", None, False))
        results: list[Result] = []
        server_errors: list[str] = []
        load_before = os.getloadavg()[0]
        try:
            for name, app, ready_path, server_token, handshake in plan:
                # One server at a time, each fresh: the other's sockets do not load the machine.
                probe = workdir / f"{name}-memory"
                server_env = env
                if args.tracemalloc:
                    probe.mkdir()
                    server_env = {
                        **env,
                        "MEMORY_PROBE_DIR": str(probe),
                        "PYTHONPATH": os.pathsep.join(
                            [str(Path(__file__).parent / "memory_probe"), env["PYTHONPATH"]]
                        ),
                    }
                server = common.Daphne(
                    server_env,
                    workdir / f"{name}.log",
                    app,
                    label=f"{name} daphne",
                    args=server_args,
                    ready_path=ready_path,
                )
                try:
                    server.wait_ready()
                    results.append(asyncio.run(measure(name, server, server_token, handshake, args, probe)))
                    if args.tracemalloc:
                        print_growth(probe, args.sockets, args.tracemalloc)
                    server_errors += [f"{name}: {line}" for line in server.problems()]
                except BaseException:
                    print(f"--- {server.label} log:\n{server.log_tail()}", file=sys.stderr)
                    raise
                finally:
                    server.stop()
        finally:
            if not args.keep_data:
                common.remove_users(BENCH_USER)
        load_after = os.getloadavg()[0]
        context = (
            f"PostgreSQL {common.database_name(env)}{' (created)' if created else ''}, "
            f"{common.channel_layer(env)}, CHAT_APP={args.chat_app}, {os.cpu_count()} cores, "
            f"batches of {args.batch}, {args.settle:g}s settle, load avg {load_before:.1f} -> {load_after:.1f}"
        )
        report(results, context, args, server_errors)
    print(f"\ntotal {time.perf_counter() - started:.1f}s")
    failed = any(r.errors or r.connected != r.sockets for r in results) or not results
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
