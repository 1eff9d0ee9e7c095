"""The media API: ``POST /api/uploads/`` (photos for the socket's ``fileReferences``) and
``GET /api/session-media/<ref>`` (one photo of a conversation, by the reference a history
read left in its place)."""

from typing import Any, cast

from django.contrib.auth.models import User
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import MultiPartParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from media_app import files, images, services
from media_app.blocks import InvalidRef, parse_ref
from media_app.serializers import (
    MediaErrorSerializer,
    UploadErrorSerializer,
    UploadRequestSerializer,
    UploadSerializer,
)
from media_app.throttling import UploadRateThrottle

# Photos never change behind a reference: the browser may keep them for a year.
CACHE_CONTROL = "private, max-age=31536000, immutable"
# Room for the multipart envelope around the file.
MULTIPART_SLACK = 64 * 1024


def _error(description: str, serializer: Any = MediaErrorSerializer) -> OpenApiResponse:
    return OpenApiResponse(serializer, description=description)


class JSONErrors(BaseContentNegotiation):
    """Errors are JSON whatever the client accepts (an ``<img>`` asks for ``image/*``), and a
    photo is sent as itself; the Accept header never turns either into a 406."""

    # DRF passes the view's lists; the stubs' Iterable cannot be indexed.
    def select_parser(self, request: Request, parsers: list[Any]) -> Any:  # type: ignore[override]
        return parsers[0] if parsers else None

    def select_renderer(self, request: Request, renderers: list[Any], format_suffix: Any = None) -> Any:  # type: ignore[override]
        return renderers[0], renderers[0].media_type


class UploadView(APIView):
    parser_classes = [MultiPartParser]
    renderer_classes = [JSONRenderer]
    throttle_classes = [UploadRateThrottle]

    @extend_schema(
        operation_id="upload_create",
        summary="Upload a photo (or another file the app accepts) to attach to a socket message",
        request={"multipart/form-data": UploadRequestSerializer},
        responses={
            201: UploadSerializer,
            400: _error(
                "Not a JPEG, PNG, GIF or WebP image (nor another type UPLOAD_ALLOWED_TYPES "
                "accepts), too big (bytes or pixels), over the user's upload quota, or no file.",
                UploadErrorSerializer,
            ),
            401: _error("No valid credentials (a token or a session)."),
            403: _error("A session-authenticated request without a valid CSRF token."),
            413: _error("The body is over the upload budget (refused before it is read)."),
            415: _error("The body is not multipart/form-data."),
            429: _error("Too many uploads (see Retry-After)."),
        },
    )
    def post(self, request: Request) -> Response:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        limit = max(images.max_image_bytes(), files.max_upload_bytes())
        if length > limit + MULTIPART_SLACK:
            # Refused before the body is parsed.
            raise ValidationError(
                {
                    "file": [
                        f"The upload is {images.human_size(length)}; the limit is {images.human_size(limit)}."
                    ]
                }
            )
        body = UploadRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            upload = services.store_upload(cast(User, request.user), body.validated_data["file"])
        except images.ImageRejected as exc:
            raise ValidationError({"file": [str(exc)]}) from None
        return Response(
            {
                "id": str(upload.id),
                "contentType": upload.content_type,
                "size": upload.size,
                "name": upload.name,
            },
            status=status.HTTP_201_CREATED,
        )


def _etag_matches(header: str, etag: str) -> bool:
    tags = [tag.strip().removeprefix("W/") for tag in header.split(",")]
    return "*" in tags or etag in tags


ID_PATTERN = r"^[\w-]{1,64}$"


class SessionMediaView(APIView):
    """``GET /api/session-media/<threadId>/<stepId>/<index>``: the reference a history read
    left in a photo's place is the rest of the path."""

    renderer_classes = [JSONRenderer]
    content_negotiation_class = JSONErrors

    @extend_schema(
        operation_id="session_media_retrieve",
        summary="One photo of a conversation, by its reference",
        description=(
            "A history read (history, bootstrap, resume_thread) replaces each photo with "
            '`{"type": "image", "imageRef": "<threadId>/<stepId>/<index>"}`; this serves it '
            "at `/api/session-media/<imageRef>`, with an ETag and "
            "`Cache-Control: private, max-age=31536000, immutable`. A path that is not a "
            "reference is a 400."
        ),
        parameters=[
            OpenApiParameter("thread_id", OpenApiTypes.STR, OpenApiParameter.PATH, pattern=ID_PATTERN),
            OpenApiParameter("step_id", OpenApiTypes.STR, OpenApiParameter.PATH, pattern=ID_PATTERN),
            OpenApiParameter(
                "index",
                OpenApiTypes.STR,
                OpenApiParameter.PATH,
                pattern=r"^\d{1,3}$",
                description="The photo's position among the step's image blocks, 0 to 999.",
            ),
        ],
        responses={
            (200, "image/jpeg"): OpenApiTypes.BINARY,
            (200, "image/png"): OpenApiTypes.BINARY,
            (200, "image/gif"): OpenApiTypes.BINARY,
            (200, "image/webp"): OpenApiTypes.BINARY,
            304: OpenApiResponse(description="Not modified (If-None-Match matched the ETag)."),
            (400, "application/json"): _error("Not a reference: <threadId>/<stepId>/<index 0-999>."),
            (401, "application/json"): _error("No valid credentials (a token or a session)."),
            (404, "application/json"): _error("No such photo in a thread of the caller's."),
        },
    )
    def get(self, request: Request, thread_id: str, step_id: str, index: str) -> HttpResponse:
        return serve(request, f"{thread_id}/{step_id}/{index}")


class MalformedMediaRefView(APIView):
    """Any other path under ``/api/session-media/``: not a reference, a 400."""

    renderer_classes = [JSONRenderer]
    content_negotiation_class = JSONErrors

    @extend_schema(exclude=True)
    def get(self, request: Request, ref: str) -> HttpResponse:
        return serve(request, ref)


def serve(request: Request, ref: str) -> HttpResponse:
    try:
        parsed = parse_ref(ref)
    except InvalidRef as exc:
        return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
    try:
        photo = services.read_image(cast(User, request.user), parsed)
    except services.MediaNotFound:
        raise NotFound("No such image.") from None
    if _etag_matches(request.headers.get("If-None-Match", ""), photo.etag):
        response = HttpResponse(status=status.HTTP_304_NOT_MODIFIED)
    else:
        response = HttpResponse(photo.data, content_type=photo.content_type)
        response["Content-Length"] = str(len(photo.data))
    response["ETag"] = photo.etag
    response["Cache-Control"] = CACHE_CONTROL
    return response
