"""JSON request bodies with a bounded size and shape.

Python's ``json`` builds every array and object it reads, so a few megabytes of ``[],`` become
gigabytes of lists, and a deeply nested body overflows the parser's recursion (an HTML 500).
Before anything is parsed, the body's skeleton (the text outside strings) is measured
(``threads_app.json_shape``): at most ``JSON_MAX_CONTAINERS`` arrays and objects, nested at
most ``JSON_MAX_DEPTH`` deep, in time linear in the body; a refusal is DRF's JSON 400.

This is the API's default JSON parser (``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]``); an
endpoint with a bigger body budget subclasses it (``media_app.parsers.PhotoJSONParser``). The
ASGI layer (``chatproject.body_limits``) has already refused bodies over the endpoint's size
budget, and measured the shape of JSON bodies as they arrived, before this reads them; the
checks here also hold for in-process callers.
"""

import codecs
import json
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer
from rest_framework.settings import api_settings
from rest_framework.utils import json as drf_json

from threads_app import json_shape


def max_depth() -> int:
    return int(settings.JSON_MAX_DEPTH)


def max_containers() -> int:
    return int(settings.JSON_MAX_CONTAINERS)


def shape() -> json_shape.JsonShape:
    """A measure of one JSON text against the configured budgets, to feed piece by piece."""
    return json_shape.JsonShape(max_depth(), max_containers())


def check_shape(raw: bytes) -> None:
    """Raise ``ParseError`` when ``raw`` holds too many arrays and objects, or nests too deep."""
    try:
        json_shape.measure(raw, max_depth(), max_containers())
    except json_shape.ShapeError as exc:
        raise ParseError(str(exc)) from None


def check_utf8(encoding: str) -> None:
    """JSON is UTF-8 (RFC 8259). The shape is measured on the bytes, which in another encoding
    can say otherwise than the text: in UTF-16 a character can carry a quote byte, after
    which the measure takes the rest for a string and would let 10 MB of ``[],`` through."""
    try:
        utf8 = codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        utf8 = False
    if not utf8:
        raise ParseError(f"JSON bodies must be UTF-8, not {encoding}.")


def load_bounded(raw: bytes, encoding: str = "utf-8") -> Any:
    """``raw`` (in ``encoding``, the request's charset) parsed as JSON once it is UTF-8 and its
    shape passed ``check_shape``; a ``ParseError`` otherwise."""
    check_utf8(encoding)
    check_shape(raw)
    parse_constant = drf_json.strict_constant if api_settings.STRICT_JSON else None
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=parse_constant)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"JSON parse error - {exc}") from None


class BoundedJSONParser(BaseParser):
    """``application/json`` read from the stream up to ``max_body_bytes()``, shape-checked,
    then parsed. (Not a ``JSONParser`` subclass on purpose: DRF hands those ``request.body``,
    capped by Django's form limit instead of this endpoint's.)"""

    media_type = "application/json"
    renderer_class = JSONRenderer

    def max_body_bytes(self) -> int:
        return int(settings.MAX_REQUEST_BODY_BYTES)

    def too_big(self, limit: int) -> str:
        return f"The request body is over {limit} bytes, the limit of this endpoint."

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = self.max_body_bytes()
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise ParseError(self.too_big(limit))
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        return load_bounded(raw, encoding)
