"""Plumbing shared by the benchmark scripts: the environment, the database, daphne (or uvicorn:
``SERVER``, ``chatproject.servers``), the bench
user, the Socket.IO client and the report helpers.

Every script measures the whole real stack the same way: a daphne subprocess serving Tether
with the flags ``make run`` uses, a database created and migrated when missing, and clients
authenticated by a DRF token. What a script measures and prints stays in the script.
"""

import argparse
import contextlib
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from chatproject.servers import SERVER_MODULES, chosen_server  # imports neither Django nor a server

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = "chatproject.settings"
TETHER_APP = "chatproject.asgi:application"
# What `make run` passes to daphne: its own 1 MiB default caps what the server sends too.
WS_MAX_MESSAGE_SIZE = 32 * 1024 * 1024


# --- environment and database -------------------------------------------------------------------


def bench_env(
    chat_app: str,
    *,
    workdir: Path | None = None,
    default_database_url: str | None = None,
    **extra: str,
) -> dict[str, str]:
    """The environment shared by the bench process, ``manage.py migrate`` and daphne, so that
    all of them see the same settings, chat app and database.

    The database is ``DATABASE_URL`` when set, else ``default_database_url`` (PostgreSQL), else
    a SQLite file in ``workdir``. With a ``workdir`` the runtime's state (``TETHER_VAR_DIR``,
    ``ECHO_STATE_DIR``) goes there too, so a run leaves nothing behind. ``extra`` is set last.
    """
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = SETTINGS
    env["CHAT_APP"] = chat_app
    if default_database_url is not None:
        env.setdefault("DATABASE_URL", default_database_url)
    if workdir is not None:
        env["TETHER_VAR_DIR"] = str(workdir / "var")
        env["ECHO_STATE_DIR"] = str(workdir / "echo")
        if not env.get("DATABASE_URL"):
            env["SQLITE_PATH"] = str(workdir / "db.sqlite3")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def ensure_database(url: str) -> bool:
    """Create the PostgreSQL database named by ``url`` if it does not exist (connecting to the
    server's ``postgres`` database to do it); True when created."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict

    params: dict[str, Any] = conninfo_to_dict(url)  # values are str once parsed from a URL
    name: str = params.pop("dbname")
    with psycopg.connect(**{**params, "dbname": "postgres"}, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            return False
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return True


def migrate(env: Mapping[str, str]) -> None:
    """Bring the env's database to the current schema, in a subprocess with the server's env."""
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True
    )


def prepare_database(env: Mapping[str, str]) -> bool:
    """Create the env's PostgreSQL database when missing (a SQLite file creates itself), then
    migrate it; True when it was created."""
    created = ensure_database(env["DATABASE_URL"]) if env.get("DATABASE_URL") else False
    migrate(env)
    return created


def setup_django(env: Mapping[str, str]) -> None:
    """Set Django up in this process with the server's env, for fixtures through the ORM."""
    os.environ.update(env)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def database_name(env: Mapping[str, str]) -> str:
    """The database part of ``DATABASE_URL``, for the report's context line."""
    return env["DATABASE_URL"].rsplit("/", 1)[-1]


def channel_layer(env: Mapping[str, str]) -> str:
    """The channel layer the server runs with, for the report's context line."""
    return "channels-redis (REDIS_URL)" if env.get("REDIS_URL") else "in-memory channel layer"


# --- fixtures (synchronous ORM, after setup_django) ---------------------------------------------


def bench_user(username: str) -> tuple[Any, str]:
    """The bench user (created without a usable password when missing) and its DRF token key,
    which the clients send as ``Authorization: Token``."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user, created = get_user_model().objects.get_or_create(username=username)
    if created:
        user.set_unusable_password()
        user.save()
    token, _ = Token.objects.get_or_create(user=user)
    return user, token.key


def prepare_bench(env: Mapping[str, str], username: str) -> tuple[bool, str]:
    """The env's database created when missing and migrated, Django set up in this process,
    and a fresh bench user (what an interrupted run left is dropped first): ``(database
    created, the user's API token)``."""
    created = prepare_database(env)
    setup_django(env)
    from django.db import connections

    remove_users(username)
    _user, token = bench_user(username)
    connections.close_all()
    return created, token


def remove_users(*usernames: str) -> None:
    """Drop the bench users and, by cascade, their tokens, boxes, threads, sends and sessions."""
    from django.contrib.auth import get_user_model
    from django.db import connections

    get_user_model().objects.filter(username__in=usernames).delete()
    connections.close_all()


# --- the server ---------------------------------------------------------------------------------


def free_port() -> int:
    """A port nothing listens on, so that parallel runs never collide."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def add_websocket_size_argument(parser: argparse.ArgumentParser) -> None:
    """``--ws-max-message-size``: what every bench passes daphne, as ``make run`` does."""
    parser.add_argument(
        "--ws-max-message-size",
        type=int,
        default=WS_MAX_MESSAGE_SIZE,
        help="--websocket-max-message-size/--websocket-max-frame-size for daphne (bytes, 0 = no "
        "limit; the default is what `make run` uses; daphne's own 1 MiB also caps what it sends)",
    )


def websocket_size_args(size: int | None, server: str = "daphne") -> list[str]:
    """The server's flags for the largest WebSocket message and frame (``None``: its default;
    0: no limit, which uvicorn spells as a size)."""
    if size is None:
        return []
    if server == "uvicorn":
        return ["--ws-max-size", str(size or 2**62)]
    return ["--websocket-max-message-size", str(size), "--websocket-max-frame-size", str(size)]


def proc_stat(pid: int | str) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` (comm first, unparenthesised), [] when unknown."""
    with contextlib.suppress(OSError, IndexError):
        text = Path(f"/proc/{pid}/stat").read_text()
        return [text[text.index("(") + 1 : text.rindex(")")], *text.rsplit(")", 1)[1].split()]
    return []


def cpu_of(fields: list[str], *, children: bool = False) -> float:
    """User + system CPU seconds from a /proc stat line (of the reaped children: ``children``)."""
    if len(fields) < 17:
        return 0.0
    first = 14 if children else 12  # utime/stime, cutime/cstime (after comm and state)
    return (int(fields[first]) + int(fields[first + 1])) / os.sysconf("SC_CLK_TCK")


def postgres_cpu(database: str | None = None) -> float:
    """CPU seconds of every PostgreSQL process on this machine (all databases' backends),
    including the backends that have exited (reaped by the postmaster, in its children's time).

    ``database``: only its backends, and the server's own processes (WAL writer, checkpointer,
    background writer), which work for every database: a server shared with other work on
    this machine then counts what this database costs. A backend of it that exits during the
    measurement takes its time with it (the benches' servers keep their pooled connections)."""
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = proc_stat(entry.name)
            if fields and fields[0].startswith("postgres"):
                stats[entry.name] = fields
    total = 0.0
    for pid, fields in stats.items():
        postmaster = fields[2] not in stats  # its parent is not a PostgreSQL process
        if database is not None:
            if not postmaster and _serves(pid, database):
                total += cpu_of(fields)
            continue
        total += cpu_of(fields)
        if postmaster:
            total += cpu_of(fields, children=True)
    return total


def _serves(pid: str, database: str) -> bool:
    """Whether PostgreSQL process ``pid`` is a backend of ``database`` or one of the server's
    own (``postgres: 15/main: walwriter``; a backend reads ``... main: <user> <database> <client>``)."""
    with contextlib.suppress(OSError):
        title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        words = title.split(": ", 2)[-1].split()
        return len(words) < 3 or words[1] == database
    return False


def child_pids(pid: int) -> list[int]:
    """The live child processes of every thread of process ``pid`` (a daphne's echo engines)."""
    pids: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError):
                pids += [int(p) for p in (task / "children").read_text().split()]
    return pids


def machine_cpu() -> tuple[float, float]:
    """``(busy, elapsed)`` CPU seconds of the whole machine so far, all cores together (from
    /proc/stat): busy over elapsed between two readings is the share of the machine in use."""
    fields = [float(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle and iowait
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guests are in user)
    return (total - idle) / ticks, total / ticks


class Daphne:
    """One daphne subprocess serving ``app`` on a free port, its output in ``log_path``;
    ``profile_to`` runs it under cProfile (the profile is written on SIGTERM)."""

    def __init__(
        self,
        env: Mapping[str, str],
        log_path: Path,
        app: str = TETHER_APP,
        *,
        label: str = "daphne",
        args: list[str] | None = None,
        ready_path: str = "/accounts/login/",
        profile_to: Path | None = None,
        server: str | None = None,
        cwd: Path = ROOT,
    ) -> None:
        """``cwd``: the tree whose code it runs (another checkout: ``echo.py --traces REF``)."""
        self.label = label
        # daphne unless ``server`` or SERVER says uvicorn (chatproject.servers); ``args`` are
        # that server's (``websocket_size_args(size, server)``).
        self.server = server or chosen_server(env)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ready_path = ready_path
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        launcher = ["-m", "cProfile", "-o", str(profile_to)] if profile_to else []
        self.process = subprocess.Popen(
            [
                *(
                    sys.executable,
                    *launcher,
                    "-m",
                    SERVER_MODULES[self.server],
                    "-b",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                ),
                *(args or []),
                app,
            ],
            cwd=cwd,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 30) -> None:
        """Return once ``ready_path`` answers 200: only then is the application loaded."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.label} exited:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + self.ready_path, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.label} did not start:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server's output, to show when a run fails."""
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def problems(self) -> list[str]:
        """The distinct lines of the server's output that report errors or warnings."""
        return sorted(
            {line for needle in ("Error", "Traceback", "WARNING") for line in self.log_lines(needle)}
        )

    def log_lines(self, needle: str) -> list[str]:
        """The server's output lines containing ``needle`` (errors it logged during the run)."""
        self._log.flush()
        return [line for line in self.log_path.read_text(errors="replace").splitlines() if needle in line]

    def children(self) -> list[int]:
        """The live child processes (echo engines) of every daphne thread."""
        return child_pids(self.process.pid)

    def cpu_seconds(self) -> tuple[float, float]:
        """CPU of daphne itself, and of its echo subprocesses (live ones and reaped ones)."""
        own = proc_stat(self.process.pid)
        engines = cpu_of(own, children=True) + sum(cpu_of(proc_stat(pid)) for pid in self.children())
        return cpu_of(own), engines

    def rss_mib(self) -> float:
        """The server's resident memory (Linux), 0 when unknown."""
        try:
            with open(f"/proc/{self.process.pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def stop(self) -> None:
        """SIGTERM (daphne shuts down cleanly, cProfile writes its file), SIGKILL after 20 s."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


# --- the Socket.IO client -----------------------------------------------------------------------


def socketio_client() -> Any:
    """A python-socketio ``AsyncClient`` behaving like a browser tab: no reconnection, and no
    cap on an incoming frame (aiohttp's default is 4 MiB)."""
    import socketio

    return socketio.AsyncClient(reconnection=False, websocket_extra_options={"max_msg_size": 0})


async def connect_socket(
    sio: Any,
    url: str,
    token: str | None,
    session_id: str | None = None,
    thread_id: uuid.UUID | None = None,
    extra_auth: dict[str, Any] | None = None,
) -> None:
    """Connect ``sio`` the way the web client does: WebSocket transport on Tether's path, the
    token (when given) in the headers, the auth payload with a sessionId (a new one unless
    given), to resume a thread its threadId, and ``extra_auth`` (e.g. ``resumeSteps``)."""
    auth: dict[str, Any] = {
        "sessionId": session_id or str(uuid.uuid4()),
        "clientType": "webapp",
        "userEnv": "{}",
        **(extra_auth or {}),
    }
    if thread_id is not None:
        auth["threadId"] = str(thread_id)
    await sio.connect(
        url,
        headers={"Authorization": f"Token {token}"} if token else {},
        auth=auth,
        transports=["websocket"],
        socketio_path="/ws/socket.io",
        wait_timeout=30,
    )


async def disconnect_socket(sio: Any) -> None:
    """Disconnect ``sio`` unless the server already did."""
    if sio.connected:
        await sio.disconnect()


# --- report -------------------------------------------------------------------------------------


def percentile(samples: list[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (0 < q <= 1) of non-empty ``samples``."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def table(headers: list[str], rows: list[list[str]], left: Collection[int] = ()) -> str:
    """A plain-text table, columns padded to their widest cell: the ``left`` columns left
    aligned (text), the others right aligned (numbers)."""
    widths = [max(len(headers[i]), *(len(r[i]) for r in rows)) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(headers), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


def print_profile(path: Path, limit: int, title: str = "daphne") -> None:
    """Where a daphne run under cProfile spent its time, by own time and by cumulative time."""
    import pstats

    if not path.exists():
        print(f"\nno profile written at {path}")
        return
    stats = pstats.Stats(str(path))
    stats.strip_dirs()
    for order in ("tottime", "cumulative"):
        print(f"\n--- {title}, cProfile by {order} (top {limit}) ---")
        stats.sort_stats(order).print_stats(limit)
