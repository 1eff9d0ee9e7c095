"""The latency probe's own process: one ordinary user's socket, timing round trips on demand.

``python -m tests.support.probe_process URL USERNAME PASSWORD`` signs in, connects, takes a
first round trip (an engine app starts the user's run on it) and says ``{"ready": true}``;
then each line on stdin, ``{"rounds": N, "spacing": S}``, is answered with one line,
``{"samples": [seconds, ...]}`` (or ``{"error": "..."}``). End of input ends it. A process of
its own, so that nothing the test does (encoding megabytes, 45 other clients) shares its
interpreter: its timings are the server's.
"""

import asyncio
import json
import sys
import time
import uuid
from typing import Any

from tests.support.client import ChatClient, login_cookie


def is_reply(event: str, data: Any, text: str) -> bool:
    """The complete answer to ``text``: a (non-streaming) assistant message quoting it, as the
    echo engine (``Echo #N: text``) and the test apps (``echo: text``) answer."""
    return (
        event in ("new_message", "update_message")
        and isinstance(data, dict)
        and data.get("type") == "assistant_message"
        and not data.get("streaming")
        and str(data.get("output", "")).endswith(text)
    )


def turn_running(client: ChatClient) -> bool:
    """Whether the session's last word on turns was ``task_start``."""
    marks = [name for name, _ in client.events if name in ("task_start", "task_end")]
    return bool(marks) and marks[-1] == "task_start"


class Probe:
    def __init__(self, client: ChatClient) -> None:
        self.client = client
        self.sent = 0

    async def round_trip(self, timeout: float = 30) -> float:
        """Send one short message and time it until its reply is complete. The previous turn
        has ended (``task_end``) before the clock starts, so no send waits behind another; a
        send the probe user's budget refuses is sent again once the budget allows it."""
        client = self.client
        await client.wait_for(lambda c: not turn_running(c), timeout)
        deadline = time.monotonic() + timeout
        while True:
            self.sent += 1
            text = f"probe {self.sent} {uuid.uuid4().hex[:8]}"
            seen = len(client.events)
            started = time.perf_counter()
            answer = await client.send(text)
            if "error" not in answer:
                break
            # The probe user's own send budget (a test's several attempts can spend its burst):
            # wait as told and send again; the refused try is not a round trip.
            if "retryAfter" not in answer or time.monotonic() + answer["retryAfter"] > deadline:
                raise RuntimeError(f"the probe's send was refused: {answer}")
            await asyncio.sleep(answer["retryAfter"])
        await client.wait_for(lambda c: any(is_reply(e, d, text) for e, d in c.events[seen:]), timeout)
        return time.perf_counter() - started

    async def measure(self, rounds: int, spacing: float) -> list[float]:
        """``rounds`` round trips, each starting at least ``spacing`` s after the one before."""
        samples = []
        for _ in range(rounds):
            started = time.monotonic()
            samples.append(await self.round_trip())
            await asyncio.sleep(spacing - (time.monotonic() - started))
        return samples


def say(answer: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


async def main(url: str, username: str, password: str) -> None:
    client = ChatClient(url, await login_cookie(url, username, password))
    await client.start()
    probe = Probe(client)
    await probe.round_trip()
    say({"ready": True})
    commands = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    try:
        while line := await commands.readline():
            command = json.loads(line)
            try:
                say({"samples": await probe.measure(command["rounds"], command["spacing"])})
            except (RuntimeError, TimeoutError) as exc:
                say({"error": str(exc) or type(exc).__name__})
    finally:
        await client.disconnect()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
