"""What a user's upload may be when it is not a photo: its content type is read from its
bytes (and its name only where the bytes cannot tell, e.g. which kind of text), then checked
against ``UPLOAD_ALLOWED_TYPES`` and ``UPLOAD_MAX_BYTES``. A client's claimed type is never
believed: a file named ``x.pdf`` that does not start like a PDF is not a PDF."""

import mimetypes
import re

from django.conf import settings

from media_app import images

# Binary formats told by their first bytes.
MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "application/pdf"),
    (b"\x1f\x8b", "application/gzip"),
    (b"PK\x03\x04", "application/zip"),
)
# Formats stored inside a zip (office documents): the name says which, the bytes that it is a zip.
ZIP_FAMILY = {
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "application/vnd.oasis.opendocument.text",
    "application/vnd.oasis.opendocument.spreadsheet",
}
# Text formats: the bytes must be UTF-8 text, the name says which kind.
TEXT_TYPES = {"text/plain", "text/csv", "text/markdown", "application/json", "text/x-python"}
# Never accepted, whatever the settings say: the browser would run them if they were opened.
NEVER = {"text/html", "image/svg+xml", "application/xhtml+xml", "application/javascript", "text/javascript"}


# How far into a file its markup is looked for (a leading comment longer than that, never
# closed within it, counts as HTML).
MARKUP_WINDOW = 65_536
BOMS = {b"\xef\xbb\xbf": "utf-8", b"\xff\xfe": "utf-16", b"\xfe\xff": "utf-16"}
# A first tag that makes a document HTML (the tags of WHATWG MIME sniffing's HTML signature,
# and the ones that run or load something); <svg> makes it SVG.
HTML_TAGS = frozenset(
    b"html head body script iframe style title div table font h1 p a b br img object embed "
    b"form meta link base frameset math".split()
)
FIRST_TAG = re.compile(rb"<(?:[a-z0-9]+:)?([a-z][a-z0-9]*)[\s/>]")


class FileRejected(images.ImageRejected):
    """An upload that may not be accepted; the message says why, for the client."""


def allowed_types() -> list[str]:
    return list(settings.UPLOAD_ALLOWED_TYPES)


def max_upload_bytes() -> int:
    return int(settings.UPLOAD_MAX_BYTES)


def is_allowed(content_type: str) -> bool:
    """Whether ``UPLOAD_ALLOWED_TYPES`` lets this type in (``text/*`` and ``*/*`` match a family)."""
    if content_type in NEVER:
        return False
    family = content_type.split("/")[0]
    return any(pattern in (content_type, "*/*", f"{family}/*") for pattern in allowed_types())


def only_images_allowed() -> bool:
    return all(pattern.startswith("image/") for pattern in allowed_types())


def _is_text(data: bytes) -> bool:
    if b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _markup_type(text: bytes) -> str | None:
    """``text/html`` or ``image/svg+xml`` when ``text`` (no BOM) starts as such a document
    does, past what may come before its first tag: white space, comments, an XML declaration
    or another processing instruction, a doctype. An XML document is SVG when it holds an
    ``<svg`` tag, else counted as HTML (a browser may run the script of XHTML in it)."""
    lowered = text[:MARKUP_WINDOW].lower()
    position, xml = 0, False
    while True:
        while position < len(lowered) and lowered[position] in b" \t\r\n\x0c":
            position += 1
        if lowered.startswith(b"<!doctype html", position):
            return "text/html"
        prolog = next(
            (
                (start, end)
                for start, end in ((b"<!--", b"-->"), (b"<?", b"?>"), (b"<!", b">"))
                if lowered.startswith(start, position)
            ),
            None,
        )
        if prolog is None:
            break
        xml = xml or lowered.startswith(b"<?xml", position)
        close = lowered.find(prolog[1], position + len(prolog[0]))
        if close == -1:
            return "text/html"  # a comment that does not end within the window
        position = close + len(prolog[1])
    tag = FIRST_TAG.match(lowered, position)
    if tag is not None and tag.group(1) == b"svg":
        return "image/svg+xml"
    if tag is not None and tag.group(1) in HTML_TAGS:
        return "text/html"
    if xml:
        return "image/svg+xml" if b"<svg" in lowered else "text/html"
    return None


def _without_bom(data: bytes) -> tuple[bytes, str | None]:
    """``data`` past its byte order mark, as UTF-8, and the encoding the mark said (None
    without one). UTF-16 is decoded here only so that its markup can be read."""
    for bom, encoding in BOMS.items():
        if data.startswith(bom):
            if encoding == "utf-8":
                return data[len(bom) :], encoding
            head = data[: MARKUP_WINDOW * 2].decode("utf-16", errors="replace")  # the BOM says the order
            return head.lstrip("\ufeff").encode("utf-8"), encoding
    return data, None


def sniff(data: bytes, name: str) -> str:
    """The content type of a file, from its bytes first; ``application/octet-stream`` when
    neither its bytes nor (for text and zip containers) its name tell."""
    photo = images.sniff(data[:16])
    if photo is not None:
        return photo
    guessed = (mimetypes.guess_type(name or "")[0] or "").lower()
    for magic, content_type in MAGIC:
        if data.startswith(magic):
            if content_type == "application/zip" and guessed in ZIP_FAMILY:
                return guessed
            return content_type
    text, encoding = _without_bom(data)
    markup = _markup_type(text)
    if markup is not None:
        return markup
    if encoding == "utf-16":
        return "application/octet-stream"  # text, but served as UTF-8 it would not read
    if data and _is_text(data):
        if guessed in TEXT_TYPES or (guessed.startswith("text/") and guessed not in NEVER):
            return guessed
        return "text/plain"
    return "application/octet-stream"


def check_upload(data: bytes, name: str) -> str:
    """The content type of an upload that may be kept, or ``FileRejected`` saying why not."""
    if not data:
        raise FileRejected("The file is empty.")
    if len(data) > max_upload_bytes():
        raise FileRejected(
            f"The file is {images.human_size(len(data))}; the limit is {images.human_size(max_upload_bytes())}."
        )
    content_type = sniff(data, name)
    if not is_allowed(content_type):
        if only_images_allowed():
            raise FileRejected(
                f"The file is not a {images.ALLOWED_TEXT} image (checked by its content, not its name)."
            )
        raise FileRejected(
            f"Files of type {content_type} are not accepted here (checked by the content, not the "
            f"name); accepted: {', '.join(allowed_types())}."
        )
    return content_type
