"""PostgreSQL's CPU for the statements of one hooks-API turn, sent in a loop from one connection,
against the floor's two INSERTs in the same loop: what the turn's SQL costs the database with
no server, no sockets and no concurrency around it.

    .venv/bin/python bench/pg_turn.py [--turns 300] [--rounds 4]

One process, one connection (``DATABASE_URL``, default ``tether_bench_pg_turn`` on the local
server; created and migrated when missing; it must run on this machine: the backend's CPU is
read from /proc). A fresh thread and session per round; per turn, the calls a server makes for a
hooks-API turn that answers with one ``Message.send()``, with the same functions and the same
prepared SQL: the send's INSERT with the turn's claim (``turn_statements.accept_claiming``),
the user step under the claim (``transcript.user_step``), the reply under the claim
(``services.upsert_step``), the release with the send's outcome (``turn_statements.release``).
Four statements, four commits. ``floor``: the two INSERTs of ``bench/baseline_asgi.py``'s floor
(the user's message and the reply, each its own commit) on the same connection.

Variants that are NOT what Tether does, to say where the turn's cost goes (each on the same
connection, in the same rounds, their order rotating):

- ``async commit``: ``SET synchronous_commit = off`` (a commit no longer waits for its WAL
  flush; the WAL writer flushes instead): what the four commits' flushes cost;
- ``no FK checks``: ``SET session_replication_role = replica`` (no triggers, so no foreign-key
  checks): what the six checks per turn cost;
- ``one transaction``: the four statements in one transaction (one commit, plus BEGIN and
  COMMIT).

Per round and variant: the backend's CPU per turn (``/proc/<pid>/schedstat``: time on a CPU,
nanoseconds), the CPU of the database's backends and the server's own processes (WAL writer,
checkpointer: ``common.postgres_cpu``, 10 ms ticks), this process's CPU and the wall time per
turn; then the medians and the turn / floor ratio.
"""

import argparse
import contextlib
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make `bench` importable
from bench import common

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/tether_bench_pg_turn"
BENCH_USER = "bench-pg-turn"
OWNER = "bench-pg-turn-process"
FLOOR_TABLE = (
    "CREATE TABLE IF NOT EXISTS bench_floor_step (id uuid PRIMARY KEY, thread_id uuid NOT NULL,"
    " seq integer NOT NULL, kind text NOT NULL, output text NOT NULL,"
    " created_at timestamptz NOT NULL DEFAULT now())"
)
FLOOR_INSERT = "INSERT INTO bench_floor_step (id, thread_id, seq, kind, output) VALUES (%s, %s, %s, %s, %s)"
WARMUP = 10  # turns per round before the clock runs: every statement prepared, plans settled


@dataclass
class Variant:
    name: str
    settings: list[str] = field(default_factory=list)  # SET ... for the round, RESET after
    floor: bool = False
    one_transaction: bool = False


VARIANTS = [
    Variant("turn"),
    Variant("floor", floor=True),
    Variant("async commit", ["synchronous_commit = off"]),
    Variant("no FK checks", ["session_replication_role = replica"]),
    Variant("one transaction", one_transaction=True),
]


@dataclass
class Sample:
    backend_ms: float
    postgres_ms: float
    client_ms: float
    wall_ms: float


def on_cpu_ns(pid: int) -> int:
    """Nanoseconds process ``pid`` has run on a CPU (its main thread: a backend has one)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


class Loop:
    """A thread, a session and the turn's calls, on this process's connection."""

    def __init__(self, user: Any) -> None:
        from sessions_app.models import SocketSession
        from threads_app.models import Thread
        from threads_app.services import default_box_for

        self.user = user
        self.thread = Thread.objects.create(owner=user, box=default_box_for(user), name="pg_turn")
        self.session = SocketSession.objects.create(id=uuid.uuid4(), user=user, thread_id=self.thread.pk)
        self.turns = 0

    def turn(self) -> None:
        """A hooks-API turn's statements, as the server sends them."""
        from django.utils import timezone

        from sessions_app import turn_statements
        from sessions_app.runtime import transcript
        from sessions_app.runtime.engines.base import UserTurn
        from sessions_app.turns import turn_fence
        from threads_app import services
        from threads_app.fencing import Fence
        from threads_app.models import AcceptedMessage

        i, self.turns = self.turns, self.turns + 1
        message_id = uuid.uuid4()
        send, epoch = turn_statements.accept_claiming(
            OWNER,
            id=AcceptedMessage.key(self.thread.pk, message_id),
            client_id=message_id,
            thread=self.thread,
            box_id=self.thread.box_id,
            author=self.user,
            text=f"echo #{i}",
            images=[],
            source=AcceptedMessage.Source.HOOK,
            session_id=self.session.id,
            holder=OWNER,
            queued=False,
        )
        if send is None or not epoch:
            raise RuntimeError(f"turn {i}: the send or its claim was not made")
        fence = turn_fence(self.session.id, OWNER, epoch)
        send_fence = Fence(AcceptedMessage, send.pk, "holder", None, OWNER, None)
        transcript.user_step(
            self.thread.pk, UserTurn.of_send(send), self.user.username, fence.with_also(send_fence)
        )
        now = timezone.now()
        services.upsert_step(
            self.thread.pk,
            uuid.uuid4(),
            type="assistant_message",
            name="assistant",
            output=f"{2 * i + 1}: echo #{i}",
            start=now,
            end=now,
            fence=fence,
        )
        if not turn_statements.release(self.session.id, OWNER, (send.pk, "replied"), epoch=epoch):
            raise RuntimeError(f"turn {i}: the release found the claim taken")

    def floor(self) -> None:
        """The floor's two INSERTs, each its own commit."""
        from threads_app import prepared

        i, self.turns = self.turns, self.turns + 1
        with prepared.cursor() as cursor:
            cursor.execute(FLOOR_INSERT, (uuid.uuid4(), self.thread.pk, 2 * i, "user", f"echo #{i}"))
            cursor.execute(FLOOR_INSERT, (uuid.uuid4(), self.thread.pk, 2 * i + 1, "assistant", f"echo #{i}"))


@contextlib.contextmanager
def session_settings(settings: list[str]) -> Iterator[None]:
    from django.db import connection

    with connection.cursor() as cursor:
        for setting in settings:
            cursor.execute(f"SET {setting}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            for setting in settings:
                cursor.execute(f"RESET {setting.split('=')[0].strip()}")


def one_round(variant: Variant, user: Any, turns: int, backend: int, database: str) -> Sample:
    from django.db import transaction

    loop = Loop(user)
    step: Callable[[], None] = loop.floor if variant.floor else loop.turn
    if variant.one_transaction:

        def step() -> None:
            with transaction.atomic():
                loop.turn()

    with session_settings(variant.settings):
        for _ in range(WARMUP):
            step()
        ns0, pg0, client0, wall0 = (
            on_cpu_ns(backend),
            common.postgres_cpu(database),
            time.process_time(),
            time.perf_counter(),
        )
        for _ in range(turns):
            step()
        ns1, pg1, client1, wall1 = (
            on_cpu_ns(backend),
            common.postgres_cpu(database),
            time.process_time(),
            time.perf_counter(),
        )
    return Sample(
        (ns1 - ns0) / turns / 1e6,
        (pg1 - pg0) * 1000 / turns,
        (client1 - client0) * 1000 / turns,
        (wall1 - wall0) * 1000 / turns,
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=300, help="timed turns per round and variant")
    parser.add_argument("--rounds", type=int, default=4, help="rounds (every variant once per round)")
    args = parser.parse_args()

    env = common.bench_env("bench.echo_app", default_database_url=DEFAULT_DATABASE_URL)
    common.prepare_database(env)
    common.setup_django(env)
    from django.db import connection

    database = common.database_name(env)
    common.remove_users(BENCH_USER)
    user, _token = common.bench_user(BENCH_USER)
    with connection.cursor() as cursor:
        cursor.execute(FLOOR_TABLE)
        cursor.execute("SELECT pg_backend_pid()")
        backend = int(cursor.fetchone()[0])
    samples: dict[str, list[Sample]] = {v.name: [] for v in VARIANTS}
    load0 = os.getloadavg()[0]
    try:
        for n in range(args.rounds):
            order = VARIANTS[n % len(VARIANTS) :] + VARIANTS[: n % len(VARIANTS)]
            for variant in order:
                samples[variant.name].append(one_round(variant, user, args.turns, backend, database))
            print(f"round {n + 1} of {args.rounds} done (load {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        common.remove_users(BENCH_USER)
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS bench_floor_step")
    print()
    print(
        f"PostgreSQL CPU per turn, one connection, {args.turns} turns x {args.rounds} rounds"
        f" ({database}; load {load0:.1f} -> {os.getloadavg()[0]:.1f}); medians, rounds in brackets"
    )
    print()

    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):.3f} ({min(values):.2f}-{max(values):.2f})"

    rows = [
        [
            name,
            cell([s.backend_ms for s in found]),
            cell([s.postgres_ms for s in found]),
            cell([s.client_ms for s in found]),
            cell([s.wall_ms for s in found]),
        ]
        for name, found in samples.items()
    ]
    headers = ["variant", "backend ms/turn", "postgres ms/turn", "client ms/turn", "wall ms/turn"]
    print(common.table(headers, rows, left={0}))
    turn = statistics.median(s.backend_ms for s in samples["turn"])
    floor = statistics.median(s.backend_ms for s in samples["floor"])
    print()
    print(f"turn / floor (backend CPU): {turn / floor:.2f}x")
    for variant in VARIANTS[2:]:
        other = statistics.median(s.backend_ms for s in samples[variant.name])
        print(
            f"{variant.name}: {other - turn:+.3f} ms of backend CPU per turn against the turn ({other / turn:.2f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
