"""What a refusal costs the server: CPU per request or frame a budget refuses, against the
floor of any request or frame.

    .venv/bin/python bench/refusals.py [--count 2000] [--profile]

Starts one daphne (``chatproject.asgi``, the default app, a SQLite database and state in a
temporary directory unless ``DATABASE_URL`` / ``REDIS_URL`` are set) with the feedback and
ask-answer budgets at 1/min, spends them, then sends ``--count`` of each, one after another
on one connection, and prints daphne's CPU (``/proc``, less what it spends idle in as long)
per request or frame:

- ``GET /healthz``: the floor of a request through Django (no database);
- ``PUT /api/feedback`` past the feedback budget (token auth): a refused HTTP request;
- an unknown socket event: the floor of a socket frame answered with an error ack;
- ``ask_answer`` past the ask-answer budget: a refused socket frame.

``--profile`` runs daphne under cProfile and prints where its time went. Run it from an older
checkout to compare (it needs nothing of the budgets it measures: a refusal is a refusal).
"""

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Daphne, bench_env, cpu_of, prepare_bench, print_profile, proc_stat

IDLE_SAMPLE = 2.0


class CPU:
    """daphne's CPU beyond idle, per item, for one phase."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def now(self) -> float:
        return cpu_of(proc_stat(self.pid))

    async def idle(self) -> None:
        before = self.now()
        await asyncio.sleep(IDLE_SAMPLE)
        self.idle_rate = (self.now() - before) / IDLE_SAMPLE

    async def per_item(self, phase: object, count: int) -> float:
        await self.idle()
        started, before = time.monotonic(), self.now()
        await phase  # type: ignore[misc]  # a coroutine
        return (self.now() - before - self.idle_rate * (time.monotonic() - started)) / count


async def http_phase(http: aiohttp.ClientSession, method: str, url: str, count: int, expect: int) -> None:
    body = {"feedback": {"forId": str(uuid.uuid4()), "value": 1}}
    for _ in range(count):
        async with http.request(method, url, json=body if method == "PUT" else None) as answer:
            await answer.read()
            assert answer.status == expect, (url, answer.status)


async def socket_phase(ws: aiohttp.ClientWebSocketResponse, frame: str, count: int, expect: str) -> None:
    """``count`` frames sent at once, then their acks read (each an ``{error}``)."""
    for ack_id in range(count):
        await ws.send_str(f"42{1000 + ack_id}{frame}")
    left = count
    while left:
        text = (await ws.receive()).data
        if text == "2":
            await ws.send_str("3")
        elif text.startswith("43"):
            assert expect in text, text
            left -= 1


async def measure(url: str, token: str, pid: int, count: int) -> list[tuple[str, float]]:
    cpu = CPU(pid)
    results = []
    headers = {"Authorization": f"Token {token}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        results.append(
            (
                "GET /healthz (a request's floor)",
                await cpu.per_item(http_phase(http, "GET", f"{url}/healthz", count, 200), count),
            )
        )
        await http_phase(http, "PUT", f"{url}/api/feedback", 1, 404)  # spends the budget
        results.append(
            (
                "PUT /api/feedback, refused (429)",
                await cpu.per_item(http_phase(http, "PUT", f"{url}/api/feedback", count, 429), count),
            )
        )
        ws = await http.ws_connect(f"{url.replace('http', 'ws')}/ws/socket.io/?EIO=4&transport=websocket")
        await ws.receive()  # the open packet
        await ws.send_str(
            "40" + json.dumps({"sessionId": str(uuid.uuid4()), "clientType": "webapp", "userEnv": "{}"})
        )
        while not (await ws.receive()).data.startswith("40"):
            pass
        unknown = json.dumps(["no_such_event", {}])
        results.append(
            (
                "unknown socket event (a frame's floor)",
                await cpu.per_item(socket_phase(ws, unknown, count, "unknown event"), count),
            )
        )
        answer = json.dumps(["ask_answer", {"askId": str(uuid.uuid4()), "answer": {"output": "x"}}])
        await socket_phase(ws, answer, 1, "no open ask")  # spends the budget
        results.append(
            ("ask_answer, refused", await cpu.per_item(socket_phase(ws, answer, count, "error"), count))
        )
        await ws.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-refusals-") as tmp:
        workdir = Path(tmp)
        env = bench_env(
            "sessions_app.default_app",
            workdir=workdir,
            FEEDBACK_THROTTLE_RATE="1/min",
            ASK_ANSWERS_THROTTLE_RATE="1/min",
            PASSWORD_HASHERS="django.contrib.auth.hashers.MD5PasswordHasher",
        )
        _created, token = prepare_bench(env, "bench-refusals")
        profile = workdir / "daphne.prof" if args.profile else None
        server = Daphne(env, workdir / "daphne.log", profile_to=profile)
        try:
            server.wait_ready()
            results = asyncio.run(measure(server.url, token, server.process.pid, args.count))
        finally:
            server.stop()
        print(
            f"\ndaphne's CPU beyond idle, {args.count} of each, one after another ({os.cpu_count()} cores):"
        )
        for what, seconds in results:
            print(f"  {what:<42} {seconds * 1e6:7.0f} us")
        if profile is not None:
            print_profile(profile, 30)


if __name__ == "__main__":
    main()
