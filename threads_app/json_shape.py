"""The shape of a JSON text (how many arrays and objects, how deep), measured in pieces as it
arrives, in time linear in its length.

Python's ``json`` builds every array and object it reads, so a few megabytes of ``[],`` are
millions of lists; the shape is measured first, on the bytes. Brackets inside strings do not
count, so strings are skipped, and how matters: a regular expression *searching* for whole
strings retries at every quote of one that never ends (``"\\"\\"\\"...``), quadratic time
with the GIL held (40 KB froze a server for 5 s). Here nothing is searched for: escaped
backslashes and quotes are blanked out, after which every quote left opens or closes a
string, and a split on quotes gives the text between strings; each step is one C call over
the piece. The state (inside a string or not, a backslash waiting for the byte it escapes,
depth, count) carries from one piece to the next: a request body is measured chunk by chunk
as it streams in and refused at the first chunk over a budget, which is the answer measuring
it whole gives.
"""

_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_OPENERS = frozenset(b"[{")
# ``measure`` feeds a whole text in pieces of this size.
SLICE = 64 * 1024


class ShapeError(ValueError):
    """The text is over a budget, or closes a bracket it never opened."""


class JsonShape:
    """One JSON text's skeleton, fed in pieces (``feed``); raises ``ShapeError`` at the first
    piece that shows the text nested deeper than ``max_depth`` or holding more than
    ``max_containers`` arrays and objects. The first budget crossed in reading order is the
    one reported, so the answer does not depend on how the text was cut."""

    def __init__(self, max_depth: int, max_containers: int) -> None:
        self.max_depth = max_depth
        self.max_containers = max_containers
        self.depth = 0
        self.containers = 0
        self._in_string = False
        self._held = b""  # a backslash that ended the last piece

    def feed(self, piece: bytes) -> None:
        if self._held:
            piece, self._held = self._held + piece, b""
        if b"\\" in piece:
            # Backslashes pair up from the start of each run; one left over escapes the byte
            # after it, so it waits for the next piece when it is this one's last.
            piece = piece.replace(b"\\\\", b"__").replace(b'\\"', b"__")
            if piece.endswith(b"\\"):
                piece, self._held = piece[:-1], b"\\"
        parts = piece.split(b'"')
        outside = parts[1::2] if self._in_string else parts[0::2]
        if len(parts) % 2 == 0:
            self._in_string = not self._in_string
        self._walk(b"".join(outside).translate(None, _NOT_BRACKETS))

    def _walk(self, brackets: bytes) -> None:
        """Count and nest ``brackets`` in order. Bounded: it stops at the budget, so it
        visits at most about twice ``max_containers`` brackets over the whole text."""
        for byte in brackets:
            if byte in _OPENERS:
                self.depth += 1
                self.containers += 1
                if self.containers > self.max_containers:
                    raise ShapeError(
                        f"The JSON body holds more than {self.max_containers} arrays and objects."
                    )
                if self.depth > self.max_depth:
                    raise ShapeError(f"The JSON body is nested deeper than {self.max_depth} levels.")
            else:
                self.depth -= 1
                if self.depth < 0:
                    raise ShapeError("JSON parse error - unbalanced brackets.")


def measure(text: bytes, max_depth: int, max_containers: int) -> None:
    """``JsonShape`` on a whole text; raises ``ShapeError``. Fed in slices, so a text over a
    budget early on costs its first slices only."""
    shape = JsonShape(max_depth, max_containers)
    for start in range(0, len(text), SLICE):
        shape.feed(text[start : start + SLICE])
