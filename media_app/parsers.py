"""A JSON parser for request bodies that carry photos as base64.

DRF's ``JSONParser`` reads the body through ``request.body``, which Django caps at
``DATA_UPLOAD_MAX_MEMORY_SIZE`` (2.5 MB by default): a send with one 2 MB photo would be
refused with an HTML 400. Raising that cap would raise it for every form of the site, so the
send endpoint uses this parser instead: its own cap is ``SEND_MAX_BODY_BYTES`` when set, else
what a message's photos may need (``MAX_IMAGES_PER_MESSAGE`` photos of ``MAX_IMAGE_BYTES``, as
base64) plus room for the text, and a bigger body is a JSON 400 that says so. The body's shape
is bounded like every JSON body of the API (``threads_app.parsers``): a send is a handful of
objects, however big its photos are.
"""

from django.conf import settings

from media_app import images
from threads_app.parsers import BoundedJSONParser

# Room for the message text (100,000 characters, up to 4 bytes each when escaped) and fields.
TEXT_ROOM = 1_000_000


def max_body_bytes() -> int:
    configured = getattr(settings, "SEND_MAX_BODY_BYTES", None)
    if configured:
        return int(configured)
    per_image = (images.max_image_bytes() + 2) // 3 * 4 + 512
    return images.max_images() * per_image + TEXT_ROOM


class PhotoJSONParser(BoundedJSONParser):
    """``application/json`` read straight from the request stream up to ``max_body_bytes``."""

    def max_body_bytes(self) -> int:
        return max_body_bytes()

    def too_big(self, limit: int) -> str:
        return (
            f"The request body is over {images.human_size(limit)}, more than a message with "
            f"{images.max_images()} photos of {images.human_size(images.max_image_bytes())} needs."
        )
