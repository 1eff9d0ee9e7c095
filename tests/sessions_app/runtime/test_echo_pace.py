"""``ECHO_DEMO_PACE``: the echo engine streams a word per that many seconds, so a demo shows
streaming, stop and queueing at a pace people can watch. Only lower bounds are asserted: a
slow machine makes a turn longer, never shorter."""

import time

from sessions_app.runtime.engines.base import UserTurn
from sessions_app.runtime.engines.echo import EchoEngine

PACE = 0.15


async def streamed_words(engine: EchoEngine, text: str) -> tuple[list[str], float]:
    """The stream deltas of one turn, and the seconds from the send to the last of them."""
    run = await engine.start()
    try:
        sent = time.monotonic()
        await run.send(UserTurn(text=text))
        deltas: list[str] = []
        async for message in run.messages():
            if message["type"] == "stream_event":
                deltas.append(message["delta"])
                last = time.monotonic()
            elif message["type"] == "result":
                break
        return deltas, last - sent
    finally:
        await run.close()


async def test_the_demo_pace_spaces_the_streamed_words(tmp_path, settings):
    settings.ECHO_DEMO_PACE = PACE
    engine = EchoEngine({"state_dir": str(tmp_path), "coalesce": False})

    deltas, elapsed = await streamed_words(engine, "one two three")

    assert "".join(deltas) == "Echo #1: one two three"
    assert len(deltas) == 5
    # The engine waits PACE before each word, the first one included, once the turn is sent.
    assert elapsed >= len(deltas) * PACE


async def test_a_slow_directive_overrides_the_pace(tmp_path, settings):
    settings.ECHO_DEMO_PACE = 0.01
    engine = EchoEngine({"state_dir": str(tmp_path), "coalesce": False})

    deltas, elapsed = await streamed_words(engine, "!slow 0.2\nhi")

    assert len(deltas) == 3
    assert elapsed >= 3 * 0.2


def test_a_box_option_overrides_the_pace_and_no_pace_is_full_speed(tmp_path, settings):
    settings.ECHO_DEMO_PACE = PACE
    assert EchoEngine({"state_dir": str(tmp_path)}).slow == PACE
    assert EchoEngine({"state_dir": str(tmp_path), "slow": 0}).slow == 0
    settings.ECHO_DEMO_PACE = 0.0
    assert EchoEngine({"state_dir": str(tmp_path)}).slow == 0
