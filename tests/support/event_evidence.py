"""What a client received against what it should have: the evidence a storm or fault test
prints when it fails (every event with its offset, the first gap or repeat marked, the replies
got against the replies expected), instead of the last few events."""

from collections import Counter
from typing import Any


def _summary(event: str, data: Any) -> str:
    if isinstance(data, dict):
        if event == "stream_token":
            return f"id={str(data.get('id'))[:8]} token={data.get('token')!r}"
        keys = ("id", "type", "output", "threadId")
        shown = {k: (str(data[k])[:40]) for k in keys if k in data}
        return " ".join(f"{k}={v!r}" for k, v in shown.items()) or str(data)[:80]
    return str(data)[:80]


def first_gap_or_repeat(offsets: list[int]) -> str:
    """The first offset missing or received twice (in order of receipt), or "" if none."""
    seen: set[int] = set()
    expected = 1
    for offset in offsets:
        if offset in seen:
            return f"offset {offset} received twice"
        if offset > expected:
            return f"offsets {expected}..{offset - 1} missing (got {offset} after {expected - 1})"
        seen.add(offset)
        expected = max(expected, offset + 1)
    return ""


def describe(
    name: str,
    events: list[tuple[str, Any, int | None]],
    *,
    got: list[str],
    expected: list[str],
    reason: str = "",
) -> str:
    """A client's whole story: why it failed, replies got vs expected, offsets' first gap or
    repeat, then every event ``(name, data, offset)`` it received, the faulty ones marked."""
    offsets = [o for _, _, o in events if o is not None]
    counts = Counter(offsets)
    lines = [f"--- client {name}: {reason or 'wrong events'}"]
    gap = first_gap_or_repeat(offsets)
    lines.append(
        f"offsets: {gap or 'no gap, no repeat'} ({len(offsets)} offsets, max {max(offsets, default=0)})"
    )
    for n, (want, have) in enumerate(zip(expected, got + [""] * (len(expected) - len(got)), strict=False), 1):
        mark = "  " if want == have else "!!"
        lines.append(f"{mark} reply {n}: expected {want!r} got {have!r}")
    for extra in got[len(expected) :]:
        lines.append(f"!! unexpected reply {extra!r}")
    lines.append(f"events ({len(events)}):")
    for event, data, offset in events:
        mark = "!!" if offset is not None and counts[offset] > 1 else "  "
        lines.append(f"{mark} {offset if offset is not None else '-':>5} {event} {_summary(event, data)}")
    return "\n".join(lines)
