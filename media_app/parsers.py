"""A JSON parser for request bodies that carry photos as base64.

DRF's ``JSONParser`` reads the body through ``request.body``, which Django caps at
``DATA_UPLOAD_MAX_MEMORY_SIZE`` (2.5 MB by default): a send with one 2 MB photo would be
refused with an HTML 400. Raising that cap would raise it for every form of the site, so the
send endpoint uses this parser instead: its own cap is what a message's photos may need
(``MAX_IMAGES_PER_MESSAGE`` photos of ``MAX_IMAGE_BYTES``, as base64) plus room for the
text, and a bigger body is a JSON 400 that says so.
"""

import io
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, JSONParser

from media_app import images

# Room for the message text (100,000 characters, up to 4 bytes each when escaped) and fields.
TEXT_ROOM = 1_000_000


def max_body_bytes() -> int:
    per_image = (images.max_image_bytes() + 2) // 3 * 4 + 512
    return images.max_images() * per_image + TEXT_ROOM


class PhotoJSONParser(BaseParser):
    """``application/json``, read straight from the request stream up to ``max_body_bytes``.
    (Not a ``JSONParser`` subclass on purpose: DRF hands those ``request.body``.)"""

    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = max_body_bytes()
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise ParseError(
                f"The request body is over {images.human_size(limit)}, more than a message with "
                f"{images.max_images()} photos of {images.human_size(images.max_image_bytes())} needs."
            )
        return JSONParser().parse(io.BytesIO(raw), media_type, parser_context)
