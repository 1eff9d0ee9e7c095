"""``GET /api/elements/<id>``: the bytes of an element, for its owner only.

The headers are those of the photos endpoint (``media_app.api``) and stricter: the content
type comes from an allow-list (anything else is ``application/octet-stream``), never sniffed
by the browser (``nosniff``), and only photos and PDFs are shown inline; every other file is
an attachment (an SVG or HTML file is never rendered on the site's origin). Every answer
carries ``Content-Security-Policy: sandbox``: a PDF shown in the page's side panel runs no
script with the site's origin.
"""

import uuid
from typing import cast

from django.contrib.auth.models import User
from django.http import HttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from media_app import elements, files, images
from media_app.api import CACHE_CONTROL, JSONErrors, _etag_matches
from media_app.serializers import MediaErrorSerializer

INLINE_TYPES = frozenset({*images.ALLOWED_TYPES, "application/pdf"})
TEXT_TYPES = frozenset(files.TEXT_TYPES)
SERVED_TYPES = frozenset(
    {*INLINE_TYPES, *TEXT_TYPES, "application/zip", "application/gzip", *files.ZIP_FAMILY}
)


def served_type(mime: str) -> str:
    if mime not in SERVED_TYPES:
        return "application/octet-stream"
    return f"{mime}; charset=utf-8" if mime in TEXT_TYPES else mime


class ElementView(APIView):
    renderer_classes = [JSONRenderer]
    content_negotiation_class = JSONErrors

    @extend_schema(
        operation_id="element_retrieve",
        summary="The bytes of an element (a file an app or the user attached to a message)",
        description=(
            "The `url` of an ElementDict (the `element` socket event, `resume_thread`, bootstrap "
            "and history reads). Photos and PDFs are served inline, anything else as an "
            "attachment; `X-Content-Type-Options: nosniff`, `Content-Security-Policy: sandbox`, "
            "an ETag and `Cache-Control: private, max-age=31536000, immutable`."
        ),
        parameters=[OpenApiParameter("element_id", OpenApiTypes.UUID, OpenApiParameter.PATH)],
        responses={
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
            304: OpenApiResponse(description="Not modified (If-None-Match matched the ETag)."),
            (401, "application/json"): OpenApiResponse(MediaErrorSerializer, description="No credentials."),
            (404, "application/json"): OpenApiResponse(
                MediaErrorSerializer,
                description="No such element of the caller's (another user's, or its thread was deleted).",
            ),
        },
    )
    def get(self, request: Request, element_id: uuid.UUID) -> HttpResponse:
        try:
            stored = elements.read_element(cast(User, request.user).pk, element_id)
        except elements.ElementNotFound:
            raise NotFound("No such element.") from None
        if _etag_matches(request.headers.get("If-None-Match", ""), stored.etag):
            response = HttpResponse(status=status.HTTP_304_NOT_MODIFIED)
        else:
            mime = stored.element.mime
            response = HttpResponse(stored.data, content_type=served_type(mime))
            response["Content-Length"] = str(len(stored.data))
            inline = mime in INLINE_TYPES
            response["Content-Disposition"] = (
                content_disposition_header(as_attachment=not inline, filename=stored.element.name)
                or "attachment"
            )
            if mime == "application/pdf":
                response["X-Frame-Options"] = "SAMEORIGIN"  # the page's side panel frames it
        response["ETag"] = stored.etag
        response["Cache-Control"] = CACHE_CONTROL
        response["X-Content-Type-Options"] = "nosniff"
        response["Content-Security-Policy"] = "sandbox"
        return response
