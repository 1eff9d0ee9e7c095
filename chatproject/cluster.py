"""Several daphne (or uvicorn) processes behind nginx on one address, supervised: ``make cluster``.

``python -m chatproject.cluster`` starts ``--processes`` server processes (``--server``, by
default ``SERVER`` from the environment, else daphne: ``chatproject.servers``) on ports of their
own (``--port`` + 1, + 2, ...) and nginx on ``--port`` with a rendered copy of
``chatproject/nginx/tether.conf``, the production file with only its listen and backend lines
replaced. Every file it writes (the rendered configuration, nginx's pid file, logs and
temporary files, each daphne's log) is under ``var/cluster/``, and nginx runs as the current
user. It prints where to connect, restarts a daphne that exits, and on Ctrl-C or SIGTERM
drains: SIGTERM to every daphne (each finishes or hands over its work and releases its
claims, ``sessions_app.shutdown``), then it stops nginx. A second Ctrl-C stops the daphne
processes at once.

Several processes share state only through PostgreSQL and Redis, so ``DATABASE_URL`` and
``REDIS_URL`` must name them: the embedded SQLite file and in-memory channel layer are one
process's. Without them, or without nginx, it refuses and says what to do.

Tests and benches use :class:`Cluster` directly (``with Cluster(...).start() as cluster:``).
The supervisor imports nothing from Django: it serves no request, and the processes it starts
read their settings from the environment it gives them, not from its own.
"""

import argparse
import atexit
import contextlib
import grp
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

# The Makefile's DAPHNE_ARGS and UVICORN_ARGS are the servers' defaults (`make run`; `make
# cluster` passes its own): daphne's 1 MiB WebSocket message cap also limits what the server
# sends, and a long resume_thread is bigger.
from chatproject.servers import SERVER_ARGS, UnknownServer, chosen_server, server_command

ROOT = Path(__file__).resolve().parent.parent
SITE_TEMPLATE = Path(__file__).resolve().parent / "nginx" / "tether.conf"
# Where nginx is when it is not on PATH (Debian puts it in /usr/sbin, not on a user's PATH).
NGINX_CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")
NGINX_INSTALL_HINT = (
    "nginx is not installed. On Debian or Ubuntu: sudo apt-get install nginx-light (or nginx); "
    "elsewhere install nginx from your system's packages, or name the binary in NGINX=/path/to/nginx"
)
SERVICES_HINT = (
    "several processes share sessions and events only through PostgreSQL and Redis (the embedded "
    "SQLite file and in-memory channel layer belong to one process). Set both, e.g. "
    "DATABASE_URL=postgres://postgres@127.0.0.1:5432/tether REDIS_URL=redis://127.0.0.1:6379/0"
)
POSTGRES_SCHEMES = ("postgres", "postgresql", "pgsql", "postgis")
REDIS_SCHEMES = ("redis", "rediss", "unix")
BACKEND_MARK = "# cluster:backend"
LISTEN_MARK = "# cluster:listen"
TEMP_PATHS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
# A daphne that exits this soon after it started, this many times in a row, is not restarted.
QUICK_EXIT_SECONDS = 10.0
QUICK_EXITS_TOLERATED = 3
POLL = 0.1


class ClusterRefused(Exception):
    """The cluster cannot run here; the message says what to change."""


class ClusterFailed(Exception):
    """A process of the cluster did not start, or keeps exiting."""


class StartInterrupted(Exception):
    """A stop was requested while the cluster was starting."""


# --- configuration ------------------------------------------------------------------------


def check_services(env: Mapping[str, str]) -> None:
    """Refuse unless ``env`` names PostgreSQL and Redis for the processes to share."""
    database = env.get("DATABASE_URL", "")
    redis = env.get("REDIS_URL", "")
    missing = [name for name, value in (("DATABASE_URL", database), ("REDIS_URL", redis)) if not value]
    if missing:
        raise ClusterRefused(f"{' and '.join(missing)} not set: {SERVICES_HINT}")
    if database.split(":", 1)[0] not in POSTGRES_SCHEMES:
        raise ClusterRefused(f"DATABASE_URL must name PostgreSQL (postgres://...): {SERVICES_HINT}")
    if redis.split(":", 1)[0] not in REDIS_SCHEMES:
        raise ClusterRefused(f"REDIS_URL must name Redis (redis://...): {SERVICES_HINT}")


def find_nginx(env: Mapping[str, str]) -> str:
    """The nginx binary: ``NGINX`` from ``env``, else on ``PATH``, else where packages put it."""
    named = env.get("NGINX")
    if named:
        if shutil.which(named):
            return named
        raise ClusterRefused(f"NGINX={named} names no executable. {NGINX_INSTALL_HINT}")
    found = shutil.which("nginx", path=env.get("PATH")) or next(
        (path for path in NGINX_CANDIDATES if os.access(path, os.X_OK)), None
    )
    if found is None:
        raise ClusterRefused(NGINX_INSTALL_HINT)
    return found


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def render_site(template: str, *, listen: str, backends: Sequence[str]) -> str:
    """The production site file with its ``listen`` line (marked ``# cluster:listen``) set to
    ``listen``, and its backend lines (marked ``# cluster:backend``) replaced by one per address
    in ``backends``, each with the first marked line's parameters. Nothing else changes."""
    lines = template.splitlines(keepends=True)
    marked = [i for i, line in enumerate(lines) if BACKEND_MARK in line]
    if not marked or sum(LISTEN_MARK in line for line in lines) != 1:
        raise ValueError(f"the site template needs one '{LISTEN_MARK}' line and '{BACKEND_MARK}' lines")
    rendered: list[str] = []
    for i, line in enumerate(lines):
        if i == marked[0]:
            rendered += [
                re.sub(r"\bserver\s+\S+", f"server {address}", line, count=1) for address in backends
            ]
        elif i in marked:
            continue
        elif LISTEN_MARK in line:
            rendered.append(re.sub(r"\blisten\s+[^;]+;", f"listen {listen};", line, count=1))
        else:
            rendered.append(line)
    return "".join(rendered)


def render_main(workdir: Path, site: Path, *, worker_connections: int = 4096) -> str:
    """The top-level nginx.conf of a local cluster: in the foreground, as the current user, with
    every path nginx writes under ``workdir``, and ``site`` included in the http block."""
    lines = [
        "# Rendered by chatproject/cluster.py for a local cluster; the site is in tether.conf.",
        "daemon off;",
        "worker_processes 1;",
        f"pid {workdir / 'nginx.pid'};",
        f"error_log {workdir / 'nginx-error.log'} warn;",
    ]
    if os.geteuid() == 0:  # a root master would run its workers as nobody, who cannot write here
        lines.append(f"user {pwd.getpwuid(os.getuid()).pw_name} {grp.getgrgid(os.getgid()).gr_name};")
    lines += [
        f"events {{ worker_connections {worker_connections}; }}",
        "http {",
        f"    access_log {workdir / 'nginx-access.log'};",
        *(f"    {name}_temp_path {workdir / 'nginx-temp' / name};" for name in TEMP_PATHS),
        f"    include {site};",
        "}",
        "",
    ]
    return "\n".join(lines)


# --- processes ------------------------------------------------------------------------------


@dataclass
class Daphne:
    """One server process of the cluster (daphne or uvicorn, the cluster's ``server``), on its
    own port."""

    port: int
    log_path: Path
    process: "subprocess.Popen[bytes] | None" = None
    started_at: float = 0.0
    quick_exits: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def _signal(process: "subprocess.Popen[bytes] | None", signum: int) -> None:
    if process is not None and process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signum)


def _wait(process: "subprocess.Popen[bytes] | None", timeout: float) -> None:
    """Wait up to ``timeout`` s for ``process`` to exit, then SIGKILL it."""
    if process is None:
        return
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def probe(url: str, host: str, timeout: float = 2.0) -> tuple[int, str]:
    """GET ``url`` with ``Host: host``: (status, body), or (0, why) when nothing answered."""
    request = urllib.request.Request(url, headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    except OSError as error:
        return 0, str(error)


class Cluster:
    """``processes`` server processes behind one nginx on ``host:port``: ``server`` (daphne or
    uvicorn; default ``SERVER`` from ``env`` or this environment, else daphne) with
    ``daphne_args`` (default the server's ``SERVER_ARGS``).

    ``env`` is added to this process's environment for every daphne (it must name PostgreSQL
    and Redis); ``backend_ports`` defaults to the ports after ``port``; ``workdir`` (default
    ``var/cluster``) receives every file. :meth:`start` returns once each process is ready
    (``/readyz``) and the proxy answers; :meth:`stop` drains and stops everything.
    """

    def __init__(
        self,
        *,
        processes: int = 2,
        host: str = "127.0.0.1",
        port: int = 8000,
        backend_ports: Sequence[int] | None = None,
        workdir: Path | None = None,
        env: Mapping[str, str] | None = None,
        server: str | None = None,
        daphne_args: Sequence[str] | None = None,
    ) -> None:
        self.env = {"PROXY_COUNT": "1", **os.environ, **(env or {})}
        self.server = server or chosen_server(self.env)
        ports = list(backend_ports) if backend_ports else [port + i for i in range(1, processes + 1)]
        if not ports:
            raise ValueError("a cluster needs at least one process")
        self.host = host
        self.port = port
        var_dir = Path(self.env.get("TETHER_VAR_DIR") or ROOT / "var")
        self.workdir = (workdir or var_dir / "cluster").resolve()
        # The processes' metrics files (prometheus-client's multiprocess mode): any process's
        # /metrics answers for all of them.
        self.env.setdefault("PROMETHEUS_MULTIPROC_DIR", str(self.workdir / "metrics"))
        self.daphne_args = list(SERVER_ARGS[self.server] if daphne_args is None else daphne_args)
        self.daphnes = [Daphne(p, self.workdir / f"{self.server}-{p}.log") for p in ports]
        self.nginx: subprocess.Popen[bytes] | None = None
        self.stop_requested = False
        self._stopping = False
        atexit.register(self._at_exit)

    # --- addresses ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Where clients connect: the proxy."""
        local = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{_address(local, self.port)}"

    @property
    def host_header(self) -> str:
        """The Host a browser at :attr:`url` sends (what ALLOWED_HOSTS must accept)."""
        return self.url.removeprefix("http://")

    @property
    def site_path(self) -> Path:
        return self.workdir / "tether.conf"

    @property
    def config_path(self) -> Path:
        return self.workdir / "nginx.conf"

    # --- starting -------------------------------------------------------------------------

    def check(self) -> str:
        """Refuse (:class:`ClusterRefused`) without PostgreSQL, Redis or nginx; the nginx binary."""
        check_services(self.env)
        return find_nginx(self.env)

    def write_config(self) -> None:
        """Render the site file and the top-level nginx.conf into the work directory."""
        for name in TEMP_PATHS:
            (self.workdir / "nginx-temp" / name).mkdir(parents=True, exist_ok=True)
        site = render_site(
            SITE_TEMPLATE.read_text(),
            listen=_address(self.host or "0.0.0.0", self.port),
            backends=[f"127.0.0.1:{d.port}" for d in self.daphnes],
        )
        self.site_path.write_text(site)
        self.config_path.write_text(render_main(self.workdir, self.site_path))

    def nginx_command(self, nginx: str, *extra: str) -> list[str]:
        return [
            nginx,
            "-p",
            str(self.workdir),
            "-c",
            str(self.config_path),
            "-e",
            str(self.workdir / "nginx-error.log"),
            *extra,
        ]

    def start(self, timeout: float = 60) -> Self:
        """Check, start every daphne and wait until each is ready, then start nginx and wait
        until it answers. On failure, or a stop requested meanwhile (:class:`StartInterrupted`),
        what was started is drained and stopped again."""
        nginx = self.check()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._fresh_metrics_files()
        self.write_config()
        try:
            for daphne in self.daphnes:
                self._spawn(daphne)
            deadline = time.monotonic() + timeout
            for daphne in self.daphnes:
                self.wait_ready(daphne, deadline - time.monotonic())
            with open(self.workdir / "nginx.out", "ab") as out:
                self.nginx = subprocess.Popen(
                    self.nginx_command(nginx),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    process_group=0,
                )
            self._wait_proxy(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, daphne: Daphne) -> None:
        # The server's command line with Tether's WebSocket options.
        command = server_command(self.server, "127.0.0.1", daphne.port, self.daphne_args)
        with open(daphne.log_path, "ab") as log:
            # A process group of its own: Ctrl-C in the terminal reaches the supervisor only,
            # which turns it into the SIGTERM that makes daphne drain.
            daphne.process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                process_group=0,
            )
        daphne.started_at = time.monotonic()

    def wait_ready(self, daphne: Daphne, timeout: float = 60) -> None:
        """Wait until ``daphne`` answers ``/readyz`` with 200 (its database and Redis reached)."""
        deadline = time.monotonic() + timeout
        status, body = 0, ""
        while time.monotonic() < deadline:
            if self.stop_requested:
                raise StartInterrupted("stop requested while starting")
            if not daphne.alive():
                raise ClusterFailed(f"daphne on port {daphne.port} exited:\n{self._tail(daphne.log_path)}")
            status, body = probe(f"{daphne.url}/readyz", self.host_header)
            if status == 200:
                return
            time.sleep(POLL)
        raise ClusterFailed(
            f"daphne on port {daphne.port} was not ready in time (last answer: {status} {body})\n"
            f"{self._tail(daphne.log_path)}"
        )

    def _wait_proxy(self, deadline: float) -> None:
        status, body = 0, ""
        while time.monotonic() < deadline:
            if self.stop_requested:
                raise StartInterrupted("stop requested while starting")
            if not self.nginx_alive():
                log = self._tail(self.workdir / "nginx-error.log") + self._tail(self.workdir / "nginx.out")
                raise ClusterFailed(f"nginx exited:\n{log}")
            status, body = probe(f"{self.url}/healthz", self.host_header)
            if status == 200:
                return
            time.sleep(POLL)
        raise ClusterFailed(f"nginx did not answer on {self.url} in time (last answer: {status} {body})")

    @staticmethod
    def _tail(path: Path, size: int = 3000) -> str:
        try:
            return path.read_text(errors="replace")[-size:]
        except FileNotFoundError:
            return ""

    # --- running --------------------------------------------------------------------------

    def nginx_alive(self) -> bool:
        return self.nginx is not None and self.nginx.poll() is None

    def restart_exited(self) -> list[tuple[Daphne, int]]:
        """Start again each daphne that exited on its own; returns them with their exit codes.
        Raises :class:`ClusterFailed` for one that keeps exiting right after it starts."""
        restarted: list[tuple[Daphne, int]] = []
        for daphne in self.daphnes:
            if self._stopping or daphne.process is None or daphne.alive():
                continue
            code = daphne.process.returncode
            quick = time.monotonic() - daphne.started_at < QUICK_EXIT_SECONDS
            daphne.quick_exits = daphne.quick_exits + 1 if quick else 0
            if daphne.quick_exits >= QUICK_EXITS_TOLERATED:
                raise ClusterFailed(
                    f"daphne on port {daphne.port} keeps exiting (code {code}):\n{self._tail(daphne.log_path)}"
                )
            self._spawn(daphne)
            restarted.append((daphne, code))
        return restarted

    def request_stop(self) -> None:
        """What a signal does: the first asks the supervisor to drain and stop; another one
        while it drains stops the daphne processes at once."""
        if self.stop_requested:
            self.hurry()
        self.stop_requested = True

    def hurry(self) -> None:
        """A second SIGTERM to every daphne: it stops without waiting for its turns."""
        for daphne in self.daphnes:
            _signal(daphne.process, signal.SIGTERM)

    # --- stopping -------------------------------------------------------------------------

    def drain_timeout(self) -> float:
        """How long a draining daphne may take: its SHUTDOWN_GRACE and time to release claims."""
        try:
            grace = float(self.env.get("SHUTDOWN_GRACE") or 10)
        except ValueError:
            grace = 10.0
        return grace + 20.0

    def stop(self, grace: float | None = None) -> None:
        """SIGTERM every daphne and wait for them to drain (up to ``grace`` s, by default
        :meth:`drain_timeout`; SIGKILL after), then stop nginx. Safe to call twice."""
        self._stopping = True
        timeout = self.drain_timeout() if grace is None else grace
        for daphne in self.daphnes:
            _signal(daphne.process, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for daphne in self.daphnes:
            _wait(daphne.process, max(0.0, deadline - time.monotonic()))
        self._stop_nginx()
        atexit.unregister(self._at_exit)

    def _stop_nginx(self) -> None:
        """SIGQUIT (requests in flight finish), then SIGTERM (at once), then SIGKILL. The
        master stops its workers on the first two; killed, it would leave them running."""
        for signum in (signal.SIGQUIT, signal.SIGTERM):
            _signal(self.nginx, signum)
            try:
                if self.nginx is not None:
                    self.nginx.wait(5.0)
                return
            except subprocess.TimeoutExpired:
                continue
        _wait(self.nginx, 0)

    def _at_exit(self) -> None:
        # An interpreter that exits without stop() must not leave the processes behind.
        for daphne in self.daphnes:
            if daphne.process is not None and daphne.process.poll() is None:
                daphne.process.kill()
        _signal(self.nginx, signal.SIGTERM)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _fresh_metrics_files(self) -> None:
        """An earlier cluster's metrics files would still be counted: a new one starts at zero."""
        metrics_dir = Path(self.env["PROMETHEUS_MULTIPROC_DIR"])
        if metrics_dir.is_dir():
            for old in metrics_dir.glob("*.db"):
                old.unlink()
        metrics_dir.mkdir(parents=True, exist_ok=True)

    def describe(self) -> str:
        """Where everything is, for the terminal."""
        lines = [
            f"Tether: {len(self.daphnes)} {self.server} processes behind nginx on {self.url}/",
            f"  connect to   {self.url}/  (web UI, API, Socket.IO at /ws/socket.io/)",
            f"  health       {self.url}/healthz  {self.url}/readyz  (answered by any one process)",
            f"  metrics      {self.daphnes[0].url}/metrics  (every process's; deploy/prometheus.yml)",
        ]
        for daphne in self.daphnes:
            lines.append(
                f"  {self.server:<12} {daphne.url}/  pid {daphne.pid}  log {self._shown(daphne.log_path)}"
            )
        nginx_pid = self.nginx.pid if self.nginx is not None else None
        lines.append(
            f"  nginx        pid {nginx_pid}  config {self._shown(self.site_path)}  "
            f"logs {self._shown(self.workdir)}/nginx-*.log"
        )
        lines.append(f"Ctrl-C (or SIGTERM) drains the {self.server} processes, then stops nginx.")
        return "\n".join(lines)

    @staticmethod
    def _shown(path: Path) -> str:
        with contextlib.suppress(ValueError):
            return str(path.relative_to(Path.cwd()))
        return str(path)


# --- the supervisor -------------------------------------------------------------------------


def _ports(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m chatproject.cluster",
        description="Run several daphne or uvicorn processes behind nginx on one address (make cluster).",
    )
    parser.add_argument("--processes", type=int, default=2, help="server processes (default 2)")
    parser.add_argument(
        "--server", help="daphne or uvicorn (default: SERVER from the environment, else daphne)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address nginx listens on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port nginx listens on (default 8000)")
    parser.add_argument(
        "--backend-ports",
        type=_ports,
        help="the server processes' ports, comma-separated (default PORT+1...)",
    )
    parser.add_argument("--workdir", type=Path, help="where files go (default var/cluster)")
    parser.add_argument(
        "--check", action="store_true", help="only check PostgreSQL, Redis and nginx, then exit"
    )
    parser.add_argument(
        "daphne_args",
        nargs="*",
        help="the server's options after --, instead of the defaults (make run's)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Start the cluster, supervise it until SIGINT, SIGTERM or SIGHUP, drain it; the exit status."""
    args = parse_args(argv)
    try:
        cluster = Cluster(
            processes=args.processes,
            host=args.host,
            port=args.port,
            backend_ports=args.backend_ports,
            workdir=args.workdir,
            server=args.server and chosen_server({"SERVER": args.server}),
            daphne_args=args.daphne_args or None,
        )
        nginx = cluster.check()
    except (ClusterRefused, UnknownServer) as refusal:
        print(f"make cluster: {refusal}", file=sys.stderr)
        return 2
    if args.check:
        print(f"PostgreSQL and Redis are configured; nginx is {nginx}; the server is {cluster.server}")
        return 0

    def on_signal(signum: int, _frame: object) -> None:
        cluster.request_stop()

    # SIGHUP too: a closed terminal would end the supervisor and leave the processes running
    # (they are in process groups of their own).
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    try:
        cluster.start()
    except StartInterrupted:
        print("stopped while starting", flush=True)
        return 0
    except ClusterFailed as failure:
        print(f"make cluster: {failure}", file=sys.stderr)
        return 1
    print(cluster.describe(), flush=True)
    status = 0
    try:
        while not cluster.stop_requested:
            for daphne, code in cluster.restart_exited():
                print(
                    f"daphne on port {daphne.port} exited ({code}); started again, pid {daphne.pid}",
                    flush=True,
                )
            if not cluster.nginx_alive():
                print("nginx exited; stopping", file=sys.stderr, flush=True)
                status = 1
                break
            time.sleep(0.5)
    except ClusterFailed as failure:
        print(f"make cluster: {failure}", file=sys.stderr, flush=True)
        status = 1
    print(f"draining the {cluster.server} processes (Ctrl-C again to stop them at once)", flush=True)
    cluster.stop()
    print("stopped", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
