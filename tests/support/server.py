"""Start real server processes serving ``chatproject.asgi`` on the test database, the way
production runs them (``chatproject.servers``: daphne by default, uvicorn with
``SERVER=uvicorn`` in the tests' environment or ``server="uvicorn"`` for one server)."""

import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any, Self

from django.conf import settings
from django.db import connection

# The same command lines as `make run` and `make cluster` (daphne's 1 MiB WebSocket message
# cap also limits what the server may send, and a long thread's resume_thread is bigger).
from chatproject.servers import chosen_server, server_command
from tests.support.hook_log import hook_calls

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def uses_shared_services() -> bool:
    """Several processes can share state only with PostgreSQL and Redis."""
    return bool(os.environ.get("DATABASE_URL")) and bool(os.environ.get("REDIS_URL"))


def database_env() -> dict[str, str]:
    """Environment that points a server process at the (already created) test database."""
    name = connection.settings_dict["NAME"]
    if connection.vendor == "sqlite":
        return {"SQLITE_PATH": str(name)}
    url = os.environ["DATABASE_URL"]
    base, _, _old = url.rpartition("/")
    return {"DATABASE_URL": f"{base}/{name}"}


def tests_server() -> str:
    """The server the tests start unless one asks for another: ``SERVER`` (daphne if unset)."""
    return chosen_server(os.environ)


# An access-log line (daphne's and uvicorn's): "127.0.0.1:5000 - - [date] ..." or "INFO: ...".
ACCESS_LINE = re.compile(r"^(\S+:\d+ - - \[|INFO: )")


class LiveServer:
    """One server process (daphne or uvicorn) on a fixed port; it can be stopped, killed and
    started again there."""

    def __init__(self, port: int, hook_log: Path, log_path: Path, env: dict[str, str], server: str) -> None:
        self.server = server
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.hook_log = hook_log
        self.log_path = log_path
        self.env = env
        self.process: subprocess.Popen[bytes] = self._spawn()

    def hooks(self, session: str | None = None, hook: str | None = None) -> list[dict[str, Any]]:
        """Hook calls logged by the test app, optionally filtered by session and hook name."""
        return hook_calls(self.hook_log, session, hook)

    def alive(self) -> bool:
        return self.process.poll() is None

    def complaints(self, limit: int = 30) -> str:
        """What this server logged besides its access log (warnings, errors, tracebacks), each
        distinct line once with how often it came (ids vary, so the first 160 characters count
        as the line): for a failing test's evidence, since the log itself goes with pytest's
        temporary directory."""
        lines = self.log_path.read_text(errors="replace").splitlines() if self.log_path.exists() else []
        seen: Counter[str] = Counter(line[:160] for line in lines if line and not ACCESS_LINE.match(line))
        shown = [f"{count:5d} x {line}" for line, count in seen.most_common(limit)]
        return f"{self.server} :{self.port}, {sum(seen.values())} lines besides requests" + "".join(
            f"\n  {line}" for line in shown
        )

    def stop(self) -> None:
        """Clean up: SIGTERM, and SIGKILL if it has not exited after 10 s."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def terminate(self, wait: bool = True, timeout: float = 30) -> int | None:
        """SIGTERM, as a supervisor sends on shutdown or deploy, and (with ``wait``) wait up to
        ``timeout`` s for the exit. Returns the exit code, or None if the process is still
        running: a graceful shutdown that hangs is for the test to see, so no SIGKILL here."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
        if wait:
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                return None
        return self.process.poll()

    def kill(self) -> None:
        """SIGKILL (``kill -9``): no shutdown code runs, claims and heartbeats are left behind."""
        if self.alive():
            self.process.kill()
            self.process.wait()

    def restart(self, *, kill: bool = False, **env: str) -> Self:
        """End the process (SIGTERM via :meth:`stop`, or SIGKILL with ``kill``) and start a new
        one on the same port, hook log and environment (updated with ``env``); returns once it
        serves. ``process`` is the new process afterwards."""
        if kill:
            self.kill()
        else:
            self.stop()
        self.env = {**self.env, **env}
        self.process = self._spawn()
        wait_ready(self)
        return self

    def _spawn(self) -> subprocess.Popen[bytes]:
        with open(self.log_path, "ab") as log:
            return subprocess.Popen(
                server_command(self.server, "127.0.0.1", self.port),
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )


def wait_ready(server: LiveServer, timeout: float = 30) -> None:
    """Wait until the login page answers (the ASGI app is loaded and the port is bound)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not server.alive():
            raise RuntimeError(f"{server.server} exited:\n{server.log_path.read_text()}")
        try:
            with urllib.request.urlopen(f"{server.url}/accounts/login/", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{server.server} did not start:\n{server.log_path.read_text()}")


class ServerFactory:
    """Starts the tests' server processes (``tests_server()`` unless ``server=`` says). A server lives until the end of the test module
    that started it (``stop_transient``, from an autouse fixture), unless ``start_for_session``
    started it: each holds a pool of PostgreSQL connections, and servers kept for the
    whole run would exhaust the server's ``max_connections``."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.servers: list[LiveServer] = []
        self.session_servers: list[LiveServer] = []

    def start(self, *, hook_log: Path | None = None, server: str | None = None, **env: str) -> LiveServer:
        """Start a server (``server``: daphne or uvicorn, default ``tests_server()``) on a free
        port; it stops with the module. ``env`` overrides the inherited environment, e.g.
        ``REDIS_URL=private_redis.url`` for a channel layer and cache of the test's own, or
        ``REDIS_URL=""`` for the in-memory layer."""
        live = self._spawn(hook_log, env, server)
        self.servers.append(live)
        wait_ready(live)
        return live

    def start_for_session(self, *, server: str | None = None, **env: str) -> LiveServer:
        """Start a server for the whole run (the shared ``server`` and ``engine_server``, and
        the other server's twins of them, ``server_each`` and ``engine_server_each``)."""
        live = self._spawn(None, env, server)
        self.session_servers.append(live)
        wait_ready(live)
        return live

    def _spawn(self, hook_log: Path | None, env: dict[str, str], server: str | None) -> LiveServer:
        kind = server or tests_server()
        port = free_port()
        hook_log = hook_log or self.workdir / f"hooks-{port}.jsonl"
        log_path = self.workdir / f"{kind}-{port}.log"
        full_env = {
            **os.environ,
            **database_env(),
            "DJANGO_SETTINGS_MODULE": "chatproject.settings",
            "CHAT_APP": "tests.apps.lifecycle_app",
            "HOOK_LOG": str(hook_log),
            "SECRET_KEY": settings.SECRET_KEY,
            "PYTHONPATH": str(ROOT),
            # The servers of a run share one database, so any server's task workers would take
            # any test's webhook attempts with its own settings: only the servers of the tests
            # that deliver webhooks run workers (``TASK_WORKER_THREADS`` in their env).
            "TASK_WORKER_THREADS": "0",
            **env,
        }
        return LiveServer(port, hook_log, log_path, full_env, kind)

    def stop_transient(self) -> None:
        """Stop the servers started since the last call, except the session's."""
        servers, self.servers = self.servers, []
        for server in servers:
            server.stop()

    def stop_all(self) -> None:
        self.stop_transient()
        for server in self.session_servers:
            server.stop()


def drop_stray_connections() -> None:
    """End connections to the test database that worker threads left open, so that the
    database can be dropped at the end of the run (PostgreSQL refuses while any remain)."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
    connection.close()
