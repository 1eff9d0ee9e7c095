"""Token streaming throughput through the whole real stack, against a bare-consumer baseline.

    .venv/bin/python bench/stream.py [--words 2000] [--runs 7] [--warmup 1] [--profile]

Tether: a daphne process serving ``chatproject.asgi`` with ``CHAT_APP=sessions_app.default_app``
(the engine runtime and the echo engine subprocess), SQLite in a temp dir (``SQLITE_PATH``,
migrated first) unless ``DATABASE_URL`` names a PostgreSQL database (created and migrated
when missing), the in-memory channel layer unless ``REDIS_URL`` is set. The client is
python-socketio's ``AsyncClient`` authenticated by an API token; each turn sends a
``client_message`` of N words, and the echo engine streams ``Echo #k: <the N words>`` back
word by word: N+2 ``stream_token`` events, then ``update_message`` and ``task_end``.

Baseline: a second daphne serving ``bench/baseline_asgi.py``, a bare Channels consumer that
answers a ``go`` event by emitting the same N+2 ``stream_token`` events back to back with
direct sends; the same client measures it the same way.

Rounds alternate the two servers so drift in machine load hits both alike. Per turn:
tokens/s from the first to the last ``stream_token`` (the tokens after the first event over
that span), and from the send to the last token (all tokens over that span). Every turn is
checked: all N+2 tokens arrived, all for the streamed step, and their concatenation equals the
final ``update_message`` output (none missing, doubled or out of order). A server may batch
several tokens into one event; the "tokens/events" column shows it. The bar: Tether's median
first-to-last rate at least 0.5 of the baseline's. Also printed: CPU per token of each daphne,
of the echo engine subprocess and of this process (the client), from /proc and process_time.

Reading the numbers: the baseline consumer never yields between its sends, so daphne (Twisted)
flushes its whole reply at once; its "1st token ms" is the time to produce the whole burst and
its first-to-last rate is the client's decode rate alone, with the server idle. Tether's daphne
produces while the client decodes, and the two share the cores.

``--profile`` runs the Tether daphne under cProfile and prints where its time went;
``--tether-app`` serves another ASGI application (a patched server) in its place.
"""

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make `bench` importable
from bench import common

BENCH_USER = "bench-stream"
BAR = 0.5
VOCABULARY = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "the",
    "engine",
    "streams",
    "every",
    "token",
    "of",
    "its",
    "answer",
    "to",
    "the",
    "socket",
    "and",
    "the",
    "client",
    "joins",
    "them",
    "into",
    "one",
    "message",
    "in",
    "order",
    "without",
    "gaps",
]


# --- setup --------------------------------------------------------------------------------------


def api_token(env: dict[str, str], *, coalesce: bool = True) -> str:
    """Create the bench user and its DRF token through the ORM (same env as the server);
    ``coalesce`` goes into the user's box options (the echo engine's delta merging)."""
    common.setup_django(env)
    from django.db import connections

    from threads_app.services import default_box_for

    user, token = common.bench_user(BENCH_USER)
    box = default_box_for(user)
    box.engine_options = {**box.engine_options, "coalesce": coalesce}
    box.save(update_fields=["engine_options"])
    connections.close_all()
    return token


# --- the client ---------------------------------------------------------------------------------


class Failed(Exception):
    pass


@dataclass
class Turn:
    sent: float
    first: float  # arrival of the first stream_token event
    last: float  # arrival of the last one
    tokens: int  # engine tokens (words) delivered
    events: int  # stream_token events that carried them (fewer when the server batches)
    after_first: int  # tokens in the events after the first

    @property
    def stream_rate(self) -> float:
        return self.after_first / (self.last - self.first) if self.last > self.first else float("inf")

    @property
    def total_rate(self) -> float:
        return self.tokens / (self.last - self.sent)

    @property
    def first_latency_ms(self) -> float:
        return (self.first - self.sent) * 1000


class StreamClient:
    """One python-socketio AsyncClient; records every event with its arrival time."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url
        self.token = token
        self.sio = common.socketio_client()
        self.events: list[tuple[float, str, Any]] = []
        self.done = asyncio.Event()
        self.sio.on("*", self._record)
        self.sio.on("disconnect", self._disconnected)

    async def _record(self, event: str, data: Any = None, *_rest: Any) -> None:
        self.events.append((time.perf_counter(), event, data))
        if event in ("task_end", "error"):
            self.done.set()

    async def _disconnected(self, *_reason: Any) -> None:
        self.events.append((time.perf_counter(), "disconnect", None))
        self.done.set()

    async def connect(self) -> None:
        await common.connect_socket(self.sio, self.url, self.token)

    async def turn(
        self, event: str, payload: Any, expected_tokens: int, sent_text: str, timeout: float
    ) -> Turn:
        self.events.clear()
        self.done.clear()
        sent = time.perf_counter()
        await self.sio.emit(event, payload)
        try:
            await asyncio.wait_for(self.done.wait(), timeout)
        except TimeoutError:
            raise Failed(f"no task_end within {timeout}s ({self._summary()})") from None
        names = [name for _t, name, _d in self.events]
        if "error" in names or "disconnect" in names:
            bad = next(d for _t, n, d in self.events if n in ("error", "disconnect"))
            raise Failed(f"the server answered {bad!r} ({self._summary()})")
        tokens = [(t, d) for t, n, d in self.events if n == "stream_token"]
        finals = [d for _t, n, d in self.events if n == "update_message"]
        if not tokens or not finals:
            raise Failed(f"no stream or no update_message ({self._summary()})")
        final = finals[-1]
        ids = {d["id"] for _t, d in tokens}
        if ids != {final["id"]}:
            raise Failed(
                f"stream_token ids {sorted(ids)[:3]} differ from the update_message id {final['id']}"
            )
        joined = "".join(d["token"] for _t, d in tokens)
        if joined != final["output"]:
            at = next(
                (i for i, (a, b) in enumerate(zip(joined, final["output"], strict=False)) if a != b), None
            )
            raise Failed(
                f"the tokens joined ({len(joined)} chars) differ from the final output "
                f"({len(final['output'])} chars) at char {at}"
            )
        if not final["output"].endswith(sent_text):
            raise Failed("the final output does not end with the text sent")
        # The reply's words are its tokens; a server may batch several into one event, as long as
        # every one arrives, in order (checked above).
        words = len(final["output"].split(" "))
        if words != expected_tokens or len(tokens) > words:
            raise Failed(f"{words} tokens in {len(tokens)} stream_token events, expected {expected_tokens}")
        first_words = len(tokens[0][1]["token"].split())
        return Turn(
            sent=sent,
            first=tokens[0][0],
            last=tokens[-1][0],
            tokens=words,
            events=len(tokens),
            after_first=words - first_words,
        )

    def _summary(self) -> str:
        counts: dict[str, int] = {}
        for _t, name, _d in self.events:
            counts[name] = counts.get(name, 0) + 1
        return ", ".join(f"{n} x{c}" for n, c in counts.items()) or "nothing received"

    async def close(self) -> None:
        await common.disconnect_socket(self.sio)


# --- the benchmark ------------------------------------------------------------------------------


@dataclass
class Side:
    name: str
    server: common.Daphne
    client: StreamClient
    turns: list[Turn] = field(default_factory=list)
    cpu: float = 0.0  # daphne's CPU seconds over the timed turns
    engine_cpu: float = 0.0  # its children's (the echo engine subprocess)
    client_cpu: float = 0.0  # this process's (the AsyncClient decoding the stream)


def text_of(words: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(VOCABULARY) for _ in range(words))


async def tether_turn(side: Side, text: str, timeout: float) -> Turn:
    payload = {"message": {"id": str(uuid.uuid4()), "output": text}}
    return await side.client.turn("client_message", payload, len(text.split(" ")) + 2, text, timeout)


async def baseline_turn(side: Side, text: str, round_no: int, timeout: float) -> Turn:
    reply = f"Echo #{round_no}: {text}"  # the same N+2 tokens the echo engine streams
    payload = {"id": str(uuid.uuid4()), "text": reply}
    return await side.client.turn("go", payload, len(reply.split(" ")), reply, timeout)


async def run_bench(tether: Side, baseline: Side, args: argparse.Namespace) -> None:
    await tether.client.connect()
    await tether.client.sio.emit("connection_successful")
    await asyncio.sleep(0.3)  # its answers (task_end, clear_ask, clear_call_fn) are not a turn
    await baseline.client.connect()
    for round_no in range(1, args.warmup + args.runs + 1):
        timed = round_no > args.warmup
        text = text_of(args.words, round_no)
        order = [tether, baseline] if round_no % 2 else [baseline, tether]
        for side in order:
            (cpu_before, engine_before), client_before = side.server.cpu_seconds(), time.process_time()
            if side is tether:
                turn = await tether_turn(side, text, args.timeout)
            else:
                turn = await baseline_turn(side, text, round_no, args.timeout)
            if timed:
                side.turns.append(turn)
                cpu_after, engine_after = side.server.cpu_seconds()
                side.cpu += cpu_after - cpu_before
                side.engine_cpu += engine_after - engine_before
                side.client_cpu += time.process_time() - client_before
            await asyncio.sleep(args.pause)
    await tether.client.close()
    await baseline.client.close()


# --- report -------------------------------------------------------------------------------------


def describe(args: argparse.Namespace, load: tuple[float, float]) -> str:
    database = "PostgreSQL" if os.environ.get("DATABASE_URL") else "SQLite (temp dir)"
    return (
        f"{database}, {common.channel_layer(os.environ)}, {args.words} words/turn, {args.runs} runs + {args.warmup} warmup, "
        f"{os.cpu_count()} cores, load avg {load[0]:.1f} -> {load[1]:.1f}, "
        f"{'one event per token' if args.no_coalesce else 'waiting deltas merged'}"
        f"{', Tether daphne under cProfile' if args.profile else ''}"
    )


def report(tether: Side, baseline: Side, context: str) -> float:
    print()
    print(f"Tether token streaming vs a bare Channels consumer  ({context})")
    print()
    print(
        f"{'run':>3}  {'tether tok/s':>12}  {'send->last':>10}  {'1st token ms':>12}  "
        f"{'baseline tok/s':>14}  {'send->last':>10}  {'1st token ms':>12}"
    )
    for i, (t, b) in enumerate(zip(tether.turns, baseline.turns, strict=True), 1):
        print(
            f"{i:>3}  {t.stream_rate:>12,.0f}  {t.total_rate:>10,.0f}  {t.first_latency_ms:>12.1f}  "
            f"{b.stream_rate:>14,.0f}  {b.total_rate:>10,.0f}  {b.first_latency_ms:>12.1f}"
        )
    print()
    rows = []
    for side in (tether, baseline):
        turns = side.turns
        tokens = sum(t.tokens for t in turns)
        rows.append(
            (
                side.name,
                statistics.median(t.stream_rate for t in turns),
                statistics.median(t.total_rate for t in turns),
                statistics.median(t.first_latency_ms for t in turns),
                side.cpu / tokens * 1e6,
                side.engine_cpu / tokens * 1e6,
                side.client_cpu / tokens * 1e6,
                f"{turns[0].tokens}/{statistics.median(t.events for t in turns):.0f}",
            )
        )
    print(
        f"{'server':<9} {'tokens/events':>13}  {'median tok/s first->last':>24}  "
        f"{'median tok/s send->last':>23}  {'median 1st token ms':>19}  {'CPU us/token: daphne':>20}  "
        f"{'engine':>6}  {'client':>6}"
    )
    for name, stream, total, latency, cpu, engine, client, tokens_events in rows:
        print(
            f"{name:<9} {tokens_events:>13}  {stream:>24,.0f}  {total:>23,.0f}  {latency:>19.1f}  {cpu:>20.1f}  "
            f"{engine:>6.1f}  {client:>6.1f}"
        )
    ratio = rows[0][1] / rows[1][1]
    ratio_total = rows[0][2] / rows[1][2]
    verdict = "ok" if ratio >= BAR else "BELOW THE BAR"
    print()
    print(
        f"tether / baseline (first->last): {ratio:.2f}  [{verdict}] bar: at least {BAR} of the baseline"
        f"   (send->last: {ratio_total:.2f})"
    )
    print(
        "every turn checked: all tokens arrived, for the streamed step, and joined they equal the "
        "update_message output (none missing, doubled or out of order)"
    )
    return ratio


# --- main ---------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--words", type=int, default=2000, help="words per message (N+2 tokens per reply)")
    parser.add_argument("--runs", type=int, default=7, help="timed turns per server")
    parser.add_argument("--warmup", type=int, default=1, help="untimed turns per server first")
    parser.add_argument("--pause", type=float, default=0.1, help="seconds between turns")
    parser.add_argument("--timeout", type=float, default=60, help="seconds a turn may take")
    parser.add_argument("--profile", action="store_true", help="run the Tether daphne under cProfile")
    parser.add_argument(
        "--no-coalesce",
        action="store_true",
        help="one event per token: turn off the echo engine's merging of deltas already waiting in the pipe",
    )
    parser.add_argument(
        "--tether-app",
        default="chatproject.asgi:application",
        help="the ASGI application the Tether daphne serves (to try a patched server)",
    )
    parser.add_argument("--profile-lines", type=int, default=35)
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tether-stream-") as tmp:
        workdir = Path(tmp)
        env = common.bench_env("sessions_app.default_app", workdir=workdir)
        common.prepare_database(env)
        token = api_token(env, coalesce=not args.no_coalesce)
        profile_path = workdir / "tether.prof" if args.profile else None
        servers = [
            common.Daphne(
                env, workdir / "tether.log", args.tether_app, label="tether daphne", profile_to=profile_path
            ),
            common.Daphne(
                env,
                workdir / "baseline.log",
                "bench.baseline_asgi:application",
                label="baseline daphne",
                ready_path="/",
            ),
        ]
        try:
            for server in servers:
                server.wait_ready()
            tether = Side("tether", servers[0], StreamClient(servers[0].url, token))
            baseline = Side("baseline", servers[1], StreamClient(servers[1].url, None))
            load_before = os.getloadavg()[0]
            asyncio.run(run_bench(tether, baseline, args))
            load_after = os.getloadavg()[0]
        except BaseException:
            for server in servers:
                print(f"--- {server.label} log:\n{server.log_tail()}", file=sys.stderr)
            raise
        finally:
            for server in servers:
                server.stop()
            if env.get("DATABASE_URL"):
                common.remove_users(BENCH_USER)  # a SQLite database goes with the temp dir
        ratio = report(tether, baseline, describe(args, (load_before, load_after)))
        if profile_path is not None:
            common.print_profile(profile_path, args.profile_lines, "Tether daphne")
    print(f"\ntotal {time.perf_counter() - started:.1f}s")
    return 0 if ratio >= BAR else 1


if __name__ == "__main__":
    sys.exit(main())
