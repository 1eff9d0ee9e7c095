"""How much of a transcript one read may carry: a byte budget on the StepDicts it returns.

A read of a thread (a history page, a bootstrap, ``resume_thread``, a rebuilt chat context)
walks the steps from one end, one keyset page on ``seq`` at a time (``selectors._walk``: 16
rows, then as many as seem to fit what is left, up to ``CHUNK_ROWS``), and stops at the first
step that would take it past its budget: what it holds in memory is the budget plus about one
page, whatever the thread's size, and a read that stops early fetched little more than it
used. Reads for clients are measured as the JSON they become (the size
python-socketio's encoder gives, ``ensure_ascii`` included, which is the larger of the two
encoders: DRF's keeps non-ASCII text as it is), so a ``resume_thread`` within its budget is
within the WebSocket frame cap it is set under. A chat context is measured by its text.
"""

import json
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from threads_app.step_budgets import cap_text, text_bytes

# Rows fetched per database round trip by a budgeted read: the first page, and the most in
# one (the pages between are sized by what the steps seen so far weigh, ``selectors._walk``).
FIRST_CHUNK_ROWS = 16
CHUNK_ROWS = 1024
# What a StepDict's fields other than its text weigh, about (ids, times, names): the estimate
# that sizes the next page, not the measure of the budget.
STEP_OVERHEAD_BYTES = 500
# A step larger than a whole budget (written before the step budget existed) is shown with
# its text cut to this share of the budget, so a read always makes progress past it.
OVERSIZED_SHARE = 4


# The fallback measure: the encoder python-socketio's ``json.dumps`` amounts to.
_WIRE_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)
# orjson writes dataclasses and datetimes its own way; the socket's encoder calls ``str``.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
# ``ensure_ascii`` escapes DEL (0x7f) as ``\\u007f``; orjson leaves it raw.
_DEL = b"\x7f"


def _ensure_ascii_size(encoded: bytes) -> int:
    """The length of ``encoded`` (orjson's UTF-8 JSON) had it been written with
    ``ensure_ascii``: each non-ASCII character as ``\\uXXXX`` (6 bytes), one beyond the BMP as
    a surrogate pair (12). With ``a`` ASCII characters and ``u`` UTF-16 code units that is
    ``a + 6 (u - a)``, all counted in C."""
    size = len(encoded) + 5 * encoded.count(_DEL)
    if encoded.isascii():
        return size
    text = encoded.decode()
    ascii_chars = len(text.encode("ascii", "ignore"))
    units = len(text.encode("utf-16-le")) // 2
    return size - len(encoded) + ascii_chars + 6 * (units - ascii_chars)


def _encoded_size(value: Any) -> int:
    """The size of ``value`` as python-socketio's JSON (``ensure_ascii``), measured with
    orjson, about ten times faster than the standard encoder. What orjson refuses (integers
    past 64 bits, lone surrogates, keys that are not strings) is measured by the standard one.
    A float in exponent form or not finite may come out a byte or two off (``1e16``, not
    ``1e+16``; ``null``, not ``NaN``)."""
    try:
        return _ensure_ascii_size(orjson.dumps(value, default=str, option=_ORJSON_OPTIONS))
    except TypeError:
        return len(_WIRE_ENCODER.encode(value))


def wire_bytes(step: dict[str, Any]) -> int:
    """The size of a StepDict as a Socket.IO client receives it."""
    return _encoded_size(step)


def wire_bytes_of_page(steps: list[dict[str, Any]]) -> int:
    """``wire_bytes`` of each of ``steps``, summed, in one call of the encoder (the list's
    brackets and commas taken off): a page of small steps is measured without a Python call
    per step."""
    return _encoded_size(steps) - len(steps) - 1 if steps else 0


def context_bytes(step: dict[str, Any]) -> int:
    """What a step weighs in a chat context: its text."""
    return text_bytes(step.get("output") or "") + text_bytes(step.get("input") or "")


def _shrunk(step: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    limit = max(1, max_bytes // OVERSIZED_SHARE)
    return {
        **step,
        "output": cap_text(step.get("output") or "", limit)[0],
        "input": cap_text(step.get("input") or "", limit)[0],
    }


def take_within(
    steps: Iterator[dict[str, Any]],
    *,
    max_bytes: int,
    limit: int | None = None,
    measure: Callable[[dict[str, Any]], int] = wire_bytes,
) -> tuple[list[dict[str, Any]], bool, int]:
    """``take_pages_within`` of steps that come one by one."""
    return take_pages_within(([step] for step in steps), max_bytes=max_bytes, limit=limit, measure=measure)


def take_pages_within(
    pages: Iterator[list[dict[str, Any]]],
    *,
    max_bytes: int,
    limit: int | None = None,
    measure: Callable[[dict[str, Any]], int] = wire_bytes,
) -> tuple[list[dict[str, Any]], bool, int]:
    """The steps of ``pages``, in that order, until the next would pass ``max_bytes``
    (``measure`` of each, summed) or ``limit`` steps; whether any were left (the caller
    fetched one more than ``limit`` to tell); and the bytes taken. A page that fits whole is
    measured at once; the page where the read stops, step by step. The first step is always
    taken, cut to fit when it alone is over the budget. The iterator is closed when the read
    stops early."""
    measure_page = wire_bytes_of_page if measure is wire_bytes else (lambda page: sum(map(measure, page)))
    taken: list[dict[str, Any]] = []
    used = 0
    try:
        for page in pages:
            if limit is None or len(page) <= limit - len(taken):
                size = measure_page(page)
                if used + size <= max_bytes:
                    taken.extend(page)
                    used += size
                    continue
            for step in page:
                if limit is not None and len(taken) >= limit:
                    return taken, True, used
                size = measure(step)
                if size > max_bytes and not taken:
                    step = _shrunk(step, max_bytes)
                    size = measure(step)
                if used + size > max_bytes:
                    return taken, True, used
                taken.append(step)
                used += size
        return taken, False, used
    finally:
        close = getattr(pages, "close", None)
        if close is not None:
            close()
