"""Another user's latency while an abuse runs: the abuse tests' measure of "the server spends,
but nobody else pays for it".

A ``LatencyProbe`` is a second, ordinary user on the same daphne: one socket, sending short
messages one after another and timing each from the send to its complete reply
(``probe_process``). It runs in a process of its own, so the abuse's client side (megabytes
encoded, dozens of other clients, all in this test's interpreter) cannot delay its timings;
only the server, and the machine the server shares, can. Medians of many round trips are
compared, since one round trip is a few milliseconds; idle and abused measurements alternate
in blocks, so a change in the machine's other load (another test run on these two cores)
lands on both sides of the comparison.

An abuse is replayed at its finding's own rate where the issue gives one (200 messages in
2 s, 40 uploads in a second); otherwise ``paced`` holds it to ``REQUESTS_PER_SECOND`` (the
fastest of those) and its bytes to ``LINK_BYTES_PER_SECOND``. Unpaced, a flood over loopback
measures the machine rather than the server: 10 MB bodies sent back to back slow this probe
about 2x even when they go to *another* process (a bare ASGI app), through the sender's and
the kernel's share of two cores; and any request flood without a rate limit in front (a
reverse proxy's job) costs what daphne and Django cost per request, whatever it carries.
"""

import asyncio
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# Round trips per measurement: enough for a median that one slow round trip cannot move.
ROUNDS = 30
# Idle and abused measurements alternate in this many blocks (of ROUNDS / BLOCKS each).
BLOCKS = 3
# Other users' median round trip under an abuse may be at most this many times the idle one.
SLOWDOWN_BOUND = 2.0
# Comparisons made before a test fails (see ``assert_others_unaffected``).
ATTEMPTS = 3
# How fast an abuser's bytes arrive: a client saturating a gigabit link.
LINK_BYTES_PER_SECOND = 125_000_000
# How fast an abuser's requests arrive when the finding says no rate (the socket flood's).
REQUESTS_PER_SECOND = 100


@dataclass(frozen=True)
class Latency:
    """Round-trip times in seconds, in the order they were taken."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p95(self) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]

    def __str__(self) -> str:
        return f"median {self.median * 1000:.1f} ms, p95 {self.p95 * 1000:.1f} ms ({len(self.samples)} round trips)"


class LatencyProbe:
    """The probe user's process (``tests.support.probe_process``) on ``url``; use it through
    ``latency_probe``."""

    def __init__(self, url: str, username: str, password: str) -> None:
        self.args = [url, username, password]
        self.process: asyncio.subprocess.Process | None = None

    async def open(self) -> None:
        """Start the process; it signs in, connects and takes a first round trip."""
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.support.probe_process",
            *self.args,
            cwd=ROOT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        await self._answer(timeout=60)

    async def _answer(self, timeout: float) -> dict[str, Any]:
        assert self.process is not None and self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        if not line:
            raise AssertionError(f"the latency probe exited ({await self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise AssertionError(f"the latency probe failed: {answer['error']}")
        return answer

    async def measure(self, rounds: int = ROUNDS, spacing: float = 0.0) -> Latency:
        """``rounds`` round trips, one after another, each starting at least ``spacing``
        seconds after the one before (to spread them over a long abuse)."""
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(json.dumps({"rounds": rounds, "spacing": spacing}).encode() + b"\n")
        answer = await self._answer(timeout=60 + rounds * (spacing + 30))
        return Latency(tuple(answer["samples"]))

    async def during(
        self, abuse: Callable[[], Awaitable[object]], rounds: int = ROUNDS, spacing: float = 0.0
    ) -> tuple[Latency, int]:
        """``measure(rounds, spacing)`` while ``abuse()`` runs, again and again until the
        round trips are in (an abuse shorter than the measurement is repeated, so every round
        trip shares the server with it); the run under way then finishes, its assertions
        included. Returns the latency and how many times the abuse ran; a failure of the
        abuse ends the measurement (and the probe) and is raised."""
        enough = asyncio.Event()
        runs = 0

        async def keep_abusing() -> None:
            nonlocal runs
            while not enough.is_set():
                await abuse()
                runs += 1

        abusing = asyncio.create_task(keep_abusing())
        measuring = asyncio.create_task(self.measure(rounds, spacing))
        await asyncio.wait({abusing, measuring}, return_when=asyncio.FIRST_COMPLETED)
        enough.set()
        if abusing.done():  # it only ends early by raising
            measuring.cancel()
            await self.close()  # mid-measurement: its answer would come to nobody
            abusing.result()
        await abusing
        return measuring.result(), runs

    async def close(self) -> None:
        process, self.process = self.process, None
        if process is None or process.returncode is not None:
            return
        assert process.stdin is not None
        process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()


@asynccontextmanager
async def latency_probe(server: Any, user: Any) -> AsyncIterator[LatencyProbe]:
    """A probe for ``user`` (made by ``make_user``) on ``server``, connected and warmed up. The
    server's app answers the probe's messages: the echo engine, or a test app's ``echo:``."""
    probe = LatencyProbe(server.url, user.username, user.raw_password)
    try:
        await probe.open()
        yield probe
    finally:
        await probe.close()


def paced(
    abuse: Callable[[], Awaitable[object]], *, requests: int = 1, nbytes: int = 0
) -> Callable[[], Awaitable[None]]:
    """``abuse``, which makes ``requests`` requests carrying ``nbytes`` bytes, held to
    ``REQUESTS_PER_SECOND`` and ``LINK_BYTES_PER_SECOND``."""
    seconds = max(requests / REQUESTS_PER_SECOND, nbytes / LINK_BYTES_PER_SECOND)

    async def run() -> None:
        started = time.monotonic()
        await abuse()
        await asyncio.sleep(seconds - (time.monotonic() - started))

    return run


async def compare(
    probe: LatencyProbe, abuse: Callable[[], Awaitable[object]], *, rounds: int, spacing: float, blocks: int
) -> tuple[Latency, Latency, int]:
    """The probe idle and while ``abuse`` runs, alternating in ``blocks`` blocks; and how many
    times the abuse ran."""
    idle: list[float] = []
    busy: list[float] = []
    runs = 0
    for _ in range(blocks):
        idle += (await probe.measure(rounds // blocks, spacing)).samples
        abused, block_runs = await probe.during(abuse, rounds // blocks, spacing)
        busy += abused.samples
        runs += block_runs
    return Latency(tuple(idle)), Latency(tuple(busy)), runs


async def assert_others_unaffected(
    probe: LatencyProbe,
    abuse: Callable[[], Awaitable[object]],
    what: str,
    *,
    rounds: int = ROUNDS,
    spacing: float = 0.0,
    blocks: int = BLOCKS,
) -> tuple[Latency, Latency]:
    """Assert that another user's median round trip while ``abuse`` runs is within
    ``SLOWDOWN_BOUND`` times the idle one (``compare``; ``spacing`` as in ``measure``: a run's
    duration over ``rounds / blocks`` spreads a block over a whole run). A comparison over the
    bound is made again (up to ``ATTEMPTS`` in all), since a burst of the machine's other load can land
    on one side of it; a server that slows others down fails every attempt. The figures are
    printed (``pytest -s`` shows them)."""
    for attempt in range(1, ATTEMPTS + 1):
        at_rest, abused, runs = await compare(probe, abuse, rounds=rounds, spacing=spacing, blocks=blocks)
        ratio = abused.median / at_rest.median
        print(
            f"\n{what}: another user's round trip idle {at_rest}; under the abuse ({runs} runs) "
            f"{abused}; {ratio:.2f}x" + (f" (attempt {attempt})" if attempt > 1 else "")
        )
        if abused.median <= SLOWDOWN_BOUND * at_rest.median:
            break
    assert abused.median <= SLOWDOWN_BOUND * at_rest.median, (
        f"{what}: another user's median round trip went from {at_rest.median * 1000:.1f} ms to "
        f"{abused.median * 1000:.1f} ms ({ratio:.1f}x, the bound is {SLOWDOWN_BOUND:g}x, {ATTEMPTS} attempts)"
    )
    return at_rest, abused
