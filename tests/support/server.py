"""Start real daphne processes serving ``chatproject.asgi`` on the test database."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
# The same WebSocket message cap as `make run` (daphne's 1 MiB default also limits what the
# server may send, and a long thread's resume_thread is bigger).
WS_MAX_MESSAGE = str(32 * 1024 * 1024)
DAPHNE_ARGS = ["--websocket-max-message-size", WS_MAX_MESSAGE, "--websocket-max-frame-size", WS_MAX_MESSAGE]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


class LiveServer:
    def __init__(self, process: subprocess.Popen, port: int, hook_log: Path, log_path: Path) -> None:
        self.process = process
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.hook_log = hook_log
        self.log_path = log_path

    def hooks(self, session: str | None = None, hook: str | None = None) -> list[dict[str, Any]]:
        """Hook calls logged by the test app, optionally filtered by session and hook name."""
        if not self.hook_log.exists():
            return []
        calls = [json.loads(line) for line in self.hook_log.read_text().splitlines() if line.strip()]
        return [
            c
            for c in calls
            if (session is None or c["session"] == session) and (hook is None or c["hook"] == hook)
        ]

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
            self.process.wait()


class ServerFactory:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.servers: list[LiveServer] = []

    def start(self, *, hook_log: Path | None = None, **env: str) -> LiveServer:
        port = free_port()
        hook_log = hook_log or self.workdir / f"hooks-{port}.jsonl"
        log_path = self.workdir / f"daphne-{port}.log"
        full_env = {
            **os.environ,
            **database_env(),
            "DJANGO_SETTINGS_MODULE": "chatproject.settings",
            "CHAT_APP": "tests.apps.lifecycle_app",
            "HOOK_LOG": str(hook_log),
            "SECRET_KEY": settings.SECRET_KEY,
            "PYTHONPATH": str(ROOT),
            **env,
        }
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                *DAPHNE_ARGS,
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "chatproject.asgi:application",
            ],
            cwd=ROOT,
            env=full_env,
            stdout=open(log_path, "wb"),  # noqa: SIM115 - the process owns it
            stderr=subprocess.STDOUT,
        )
        server = LiveServer(process, port, hook_log, log_path)
        self.servers.append(server)
        self._wait_ready(server)
        return server

    def _wait_ready(self, server: LiveServer) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not server.alive():
                raise RuntimeError(f"daphne exited:\n{server.log_path.read_text()}")
            try:
                with urllib.request.urlopen(f"{server.url}/accounts/login/", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"daphne did not start:\n{server.log_path.read_text()}")

    def stop_all(self) -> None:
        for server in self.servers:
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
