"""A Redis server of the test's own, to stop, kill, freeze and restart during fault tests.

The shared Redis on 6379 serves everyone's test runs and must never be touched, so a test
that needs Redis to fail starts ``redis-server`` itself: loopback only, a free port, no
persistence (a restart comes back empty, as after losing a cache node), its own directory,
and not daemonized, so the process belongs to the test and ends with it.
"""

from __future__ import annotations

import atexit
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from tests.support.server import free_port

REDIS_SERVER = "/usr/bin/redis-server"
HOST = "127.0.0.1"
START_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0


class PrivateRedis:
    """``redis-server`` on ``127.0.0.1:<port>``; the port stays the same across restarts, so
    clients configured with ``url`` reconnect to the new process as they would in production."""

    def __init__(self, workdir: Path | None = None, *, executable: str = REDIS_SERVER) -> None:
        self._own_dir = workdir is None
        self.workdir = Path(tempfile.mkdtemp(prefix="private-redis-")) if workdir is None else workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.executable = executable
        self.port = 0  # chosen on the first start, kept afterwards
        self.process: subprocess.Popen[bytes] | None = None
        self._frozen = False
        atexit.register(self._at_exit)

    # --- addresses ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The URL for ``REDIS_URL`` / redis-py (database 0)."""
        if not self.port:
            raise RuntimeError("PrivateRedis has not been started yet")
        return f"redis://{HOST}:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.workdir / "redis.log"

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the server (on the same port as before, if it ran already) and wait until it
        answers PING. Does nothing if it is running."""
        if self.alive():
            return self
        if self.port:
            self._spawn(self.port)
            return self
        # First start: another process may take the free port before redis binds it; try a few.
        for attempt in range(5):
            port = free_port()
            try:
                self._spawn(port)
            except RuntimeError:
                if attempt == 4:
                    raise
                continue
            return self
        raise AssertionError("unreachable")

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM and wait: Redis closes every client connection and exits (no save)."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        self.thaw()
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:  # our own process; do not leave it behind
            process.kill()
            process.wait()

    def kill(self) -> None:
        """SIGKILL: the process vanishes without closing anything gracefully."""
        process = self.process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        self._frozen = False

    def restart(self) -> Self:
        """Stop, then start again on the same port (the data is gone: nothing is persisted)."""
        self.stop()
        return self.start()

    def freeze(self) -> None:
        """SIGSTOP: connections stay open and requests go unanswered, like a hung server."""
        if self.alive() and not self._frozen:
            assert self.process is not None
            self.process.send_signal(signal.SIGSTOP)
            self._frozen = True

    def thaw(self) -> None:
        """SIGCONT after :meth:`freeze`."""
        if self._frozen and self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
        self._frozen = False

    def alive(self) -> bool:
        """The process is running (it may be frozen)."""
        return self.process is not None and self.process.poll() is None

    def ping(self, timeout: float = 1.0) -> bool:
        """True if the server answers PING now (a raw socket, so no client pool is involved)."""
        try:
            with socket.create_connection((HOST, self.port), timeout=timeout) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def close(self) -> None:
        """Stop the server and remove the directory this object created."""
        self.stop()
        atexit.unregister(self._at_exit)
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- internals ---------------------------------------------------------------------------

    def _spawn(self, port: int) -> None:
        with open(self.log_path, "ab") as log:
            log.write(f"--- starting on port {port} ---\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                [
                    self.executable,
                    "--port",
                    str(port),
                    "--bind",
                    HOST,
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--daemonize",
                    "no",
                    "--dir",
                    str(self.workdir),
                    "--logfile",
                    "",
                ],
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._frozen = False
        self.port, previous = port, self.port
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.port = previous
                tail = self.log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"redis-server exited with {self.process.returncode}:\n{tail}")
            if self.ping():
                return
            time.sleep(0.02)
        self.kill()
        self.port = previous
        raise RuntimeError(f"redis-server did not answer PING on port {port}")

    def _at_exit(self) -> None:
        # A crashed test run must not leave the server behind.
        self.kill()
