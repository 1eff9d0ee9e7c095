"""What a transcript step may hold, and what a thread may hold in all.

A step's text (``input`` and ``output``, each) is cut at ``STEP_MAX_BYTES`` of UTF-8 with a
marker saying so, instead of being refused: the text comes from the app or the engine (a
user's own message is refused far below this, at ``MAX_MESSAGE_CHARS``), mid-turn, and
refusing would lose the whole reply where a cut keeps the start of it and tells the reader
what happened, as mail and chat servers do with oversized bodies. The default is above what
the longest accepted user message can take (``MAX_MESSAGE_CHARS`` characters of 4 bytes), so
nothing a user sends is ever cut.

A thread keeps at most ``THREAD_MAX_BYTES`` of step text (``Thread.text_bytes`` counts it,
in the same statement that writes the step): past it, a new step keeps only the marker
``THREAD_FULL_TEXT``, so a thread grows by a few dozen bytes a step from then on, at the
send rate, and nobody can make one thread that every read of it has to wade through.

Photos (image blocks in ``content``) are not counted: their own limits bound them, and every
read strips them (``content_filters``).
"""

from typing import Any

from django.conf import settings

TRUNCATED_KEY = "truncated"  # set in a cut step's metadata, so a client can tell
# Bytes kept free for the marker at the end of a cut text: a cut text, marker included, is
# within the budget, so cutting it again (each layer that writes checks) changes nothing.
MARKER_RESERVE = 100
THREAD_FULL_TEXT = "[not kept: this conversation reached its size limit; start a new chat]"


def text_bytes(text: str) -> int:
    """The UTF-8 size of ``text`` (an ASCII string's length, without encoding it)."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def truncated_marker(limit: int, size: int | None = None) -> str:
    """What ends a cut text (``size``: how long it was, when known)."""
    what = f"{size} bytes" if size is not None else "the streamed text"
    return f"\n\n[truncated: {what}, over the limit of {limit} bytes a step]"


def cut_to(text: str, max_bytes: int) -> str:
    """The longest start of ``text`` within ``max_bytes`` of UTF-8 (never half a character)."""
    if text.isascii():
        return text[:max_bytes]
    return text.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")


def cap_text(text: str, limit: int | None = None) -> tuple[str, bool]:
    """``text`` cut at ``limit`` bytes (``STEP_MAX_BYTES``) with a marker, and whether it was."""
    limit = settings.STEP_MAX_BYTES if limit is None else limit
    size = text_bytes(text)
    if size <= limit:
        return text, False
    return cut_to(text, max(0, limit - MARKER_RESERVE)) + truncated_marker(limit, size), True


def step_text_bytes(fields: dict[str, Any]) -> int:
    """What a step's fields count against its thread's budget: its input and output."""
    return text_bytes(fields.get("input") or "") + text_bytes(fields.get("output") or "")


def fit_step(fields: dict[str, Any], room: int | None) -> dict[str, Any]:
    """The step's fields within the step budget, and within ``room`` bytes left in its
    thread (``None``: not checked here). Cut fields say so in ``metadata``; ``fields`` is not
    changed."""
    fitted = dict(fields)
    cut = False
    for name in ("input", "output"):
        if fitted.get(name):
            fitted[name], was_cut = cap_text(fitted[name])
            cut = cut or was_cut
    if room is not None and step_text_bytes(fitted) > room:
        fitted["input"], fitted["output"], cut = "", THREAD_FULL_TEXT, True
    if cut:
        fitted["metadata"] = {**(fitted.get("metadata") or {}), TRUNCATED_KEY: True}
    return fitted


class StreamAllowance:
    """The bytes a streamed text may still take before its step is full: tokens past it are
    not sent (the one that crosses it is cut and followed by the marker, once). Counted as
    tokens come, so a long stream costs nothing per token beyond its own length."""

    def __init__(self, text: str = "") -> None:
        # Tokens fill the budget less the marker's room, so the text as it ends is within it.
        self.limit = max(0, settings.STEP_MAX_BYTES - MARKER_RESERVE)
        self.used = text_bytes(text)
        self.exhausted = self.used > self.limit

    def fit(self, token: str, *, replace: bool = False) -> str:
        """What of ``token`` may be streamed ("" once the step is full); ``replace``: the
        token is the whole text from now on (``is_sequence``)."""
        if replace:
            text, self.exhausted = cap_text(token)
            self.used = min(text_bytes(token), self.limit)
            return text
        if self.exhausted:
            return ""
        size = text_bytes(token)
        if self.used + size <= self.limit:
            self.used += size
            return token
        self.exhausted = True
        kept = cut_to(token, self.limit - self.used)
        self.used = self.limit
        return kept + truncated_marker(self.limit + MARKER_RESERVE)
