"""A hooks-API app that sends elements: on "elements" one reply with an image, a file and a
text inline, a PDF and a text in the side panel, and a plot; one more file attached with
``send(for_id=...)``; on "remove" it removes that file. A user message that carries files is
answered with what ``on_message`` saw of them (name, type, size, first bytes)."""

import struct
import zlib
from typing import Any

from sessions_app import chat

# The elements sent per thread (for "remove", from any session of the thread).
SENT: dict[str, list[chat.Element]] = {}


def png(width: int = 160, height: int = 96, rgb: tuple[int, int, int] = (45, 91, 227)) -> bytes:
    """A small solid PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def pdf() -> bytes:
    """A one-page PDF saying "Tether PDF"."""
    stream = b"BT /F1 24 Tf 72 720 Td (Tether PDF) Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return out


class Figure:
    """Stands in for a plotly figure: anything with ``to_json()``."""

    def to_json(self) -> str:
        import json

        return json.dumps(
            {
                "data": [{"type": "bar", "x": ["a", "b", "c"], "y": [3, 1, 2], "name": "counts"}],
                "layout": {"title": {"text": "Counts"}, "height": 320},
            }
        )


CODE = 'def hello():\n    return "world"  # ``` fences inside\n'


@chat.on_chat_start
async def start() -> None:
    """With ``{"greet": true}`` in the user env: a welcome with a text element, sent before
    the first message (before the thread exists)."""
    if (chat.user_session.get("env") or {}).get("greet"):
        await chat.Message("Welcome!", elements=[chat.Text(name="welcome.txt", content="hi there")]).send()


@chat.on_message
async def answer(message: chat.Message) -> None:
    session = chat.current_session.get()
    session_id = str(session.thread_id if session else "")
    if message.elements:
        seen = [
            f"{e.name}|{e.mime}|{e.size_bytes}|{e.content[:12] if isinstance(e.content, bytes) else b''!r}|{bool(e.path)}"
            for e in message.elements
        ]
        await chat.Message("on_message saw: " + "; ".join(seen)).send()
        return
    if message.content == "elements":
        reply = chat.Message(
            "Here are your elements.",
            elements=[
                chat.Image(name="square.png", content=png(), display="inline", size="small"),
                chat.File(name="notes.csv", content="a,b\n1,2\n", display="inline"),
                chat.Text(name="hello.py", content=CODE, language="python", display="inline"),
                chat.Pdf(name="report.pdf", content=pdf(), display="side", page=1),
                chat.Text(name="side-notes.txt", content="Side panel text", display="side"),
                chat.Plotly(name="counts", figure=Figure(), display="inline"),
            ],
        )
        await reply.send()
        extra = chat.File(name="extra.bin", content=b"\x00\x01binary", mime="application/octet-stream")
        await extra.send(for_id=reply.id)
        SENT[session_id] = [*reply.elements, extra]
        await chat.Message("Elements sent.").send()
        return
    if message.content == "remove":
        sent = SENT.get(session_id, [])
        if sent:
            await sent[-1].remove()
        await chat.Message("Removed.").send()
        return
    if message.content == "bad":
        await chat.Image(name="not-an-image.png", content=b"not a png").send()
        return
    await chat.Message(f"echo: {message.content}").send()


@chat.on_chat_resume
async def resume(thread: dict[str, Any]) -> None:
    """Reopened threads resume (Tether restores the history and its elements)."""
