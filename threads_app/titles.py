"""A thread's title from its first message: what the sidebar shows, so plain words only.

A first message is often markdown (``# Plan``, ``**bold**``, links) or starts with the echo
engine's directive lines (``!slow 0.2``); shown as typed, the list fills with syntax. The title
keeps the words, drops the syntax and the directives, and is cut at a word boundary.
"""

import re

# Long enough to tell threads apart in the sidebar, short enough to fit on one line there.
TITLE_MAX = 60
ELLIPSIS = "…"
FALLBACK = "New chat"

# The echo engine's directives (``sessions_app.runtime.engines.echo_process``).
DIRECTIVE = re.compile(r"^\s*!(?:slow|fail|crash|tool)\b.*$")

# Whole-line syntax, applied line by line in this order.
FENCE = re.compile(r"^\s*(?:```|~~~).*$")
RULE = re.compile(r"^\s*(?:[-*_=]\s*){3,}$")  # horizontal rules and setext underlines
BLOCK_QUOTE = re.compile(r"^\s*(?:>\s?)+")
HEADING = re.compile(r"^\s*#{1,6}(?:\s+|$)")
LIST_MARKER = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+(?:\[[ xX]\]\s+)?")

# Inline syntax, applied to the joined text in this order (images before links: ``![a](b)``
# contains ``[a](b)``).
INLINE = [
    (re.compile(r"!\[[^\]]*\]\([^)]*\)"), ""),  # images: their alt text is rarely a title
    (re.compile(r"!\[[^\]]*\]\[[^\]]*\]"), ""),  # reference images
    (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),  # links -> their text
    (re.compile(r"\[([^\]]*)\]\[[^\]]*\]"), r"\1"),  # reference links -> their text
    (re.compile(r"<((?:https?|mailto):[^>\s]+)>"), r"\1"),  # autolinks -> the address
    (re.compile(r"(`+)(.+?)\1"), r"\2"),  # inline code -> its text
    (re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1"), r"\2"),  # strong
    (re.compile(r"(?<![\w*])\*(?=\S)(.+?)(?<=\S)\*(?![\w*])"), r"\1"),  # emphasis with *
    (re.compile(r"(?<!\w)_(?=\S)(.+?)(?<=\S)_(?!\w)"), r"\1"),  # emphasis with _ (not snake_case)
    (re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"), r"\1"),  # strikethrough
]
WHITESPACE = re.compile(r"\s+")


def _strip_line(line: str) -> str:
    if FENCE.match(line) or RULE.match(line):
        return ""
    line = BLOCK_QUOTE.sub("", line)
    line = HEADING.sub("", line)
    return LIST_MARKER.sub("", line)


def _truncate(text: str, limit: int) -> str:
    """At most ``limit`` characters, the ellipsis included, cut at the last word boundary
    (mid-word only when the first word alone is too long)."""
    if len(text) <= limit:
        return text
    cut = text[: limit - len(ELLIPSIS) + 1]
    space = cut.rfind(" ")
    head = cut[:space] if space > 0 else cut[: limit - len(ELLIPSIS)]
    return head.rstrip(" .,;:-") + ELLIPSIS


def _collapse(text: str) -> str:
    return WHITESPACE.sub(" ", text).strip()


def thread_title(text: str, *, limit: int = TITLE_MAX) -> str:
    """The title of a thread whose first message is ``text``: markdown syntax and leading
    directive lines stripped, whitespace collapsed, at most ``limit`` characters.

    Never empty: a message that is only syntax keeps its raw text, a blank one gets
    ``FALLBACK``.
    """
    lines = text.splitlines()
    while lines and (DIRECTIVE.match(lines[0]) or not lines[0].strip()):
        lines.pop(0)
    body = "\n".join(_strip_line(line) for line in lines)
    for pattern, replacement in INLINE:
        body = pattern.sub(replacement, body)
    title = _collapse(body) or _collapse("\n".join(lines)) or _collapse(text)
    return _truncate(title, limit) if title else FALLBACK
