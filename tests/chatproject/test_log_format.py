"""JSON log lines (chatproject.log_format) and the ids bound to them (chatproject.log_context),
in process. A real turn's lines are read from a daphne's log in
tests/sessions_app/test_metrics_live.py."""

import asyncio
import io
import json
import logging

from chatproject import log_context
from chatproject.log_format import JsonLines


def capture() -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(log_context.ConversationIds())
    handler.setFormatter(JsonLines())
    logger = logging.getLogger(f"tests.log_format.{id(stream)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    return logger, stream


def lines(stream: io.StringIO) -> list[dict[str, str]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_line_outside_any_conversation_has_no_ids_and_parses():
    logger, stream = capture()

    logger.info("plain %s", "words", extra={})

    (line,) = lines(stream)
    assert line["message"] == "plain words" and line["level"] == "INFO"
    assert line["process"] and line["time"].endswith("+00:00")
    assert not {"session", "thread", "turn", "send"} & set(line)


def test_bound_ids_reach_the_tasks_and_threads_the_work_starts_and_no_one_else():
    logger, stream = capture()

    async def turn() -> None:
        log_context.bind(session="s-1", thread="t-1")
        log_context.bind(turn="u-1", send="m-1")
        logger.warning("in the turn")
        await asyncio.create_task(asyncio.to_thread(logger.warning, "on a thread of the turn"))

    async def other() -> None:
        await asyncio.sleep(0)
        logger.warning("elsewhere")

    async def both() -> None:
        await asyncio.gather(turn(), other())

    asyncio.run(both())

    by_message = {line["message"]: line for line in lines(stream)}
    for message in ("in the turn", "on a thread of the turn"):
        line = by_message[message]
        assert (line["session"], line["thread"], line["turn"], line["send"]) == ("s-1", "t-1", "u-1", "m-1")
    assert "session" not in by_message["elsewhere"]


def test_a_traceback_stays_inside_its_json_line():
    logger, stream = capture()
    try:
        raise ValueError("broken\nacross lines")
    except ValueError:
        logger.exception("it failed")

    (line,) = lines(stream)
    assert "ValueError: broken" in line["exception"] and "Traceback" in line["exception"]
