"""Chainlit's file endpoints on Tether's uploads (``media_app``):

- ``POST /project/file?session_id=<id>[&ask_parent_id=<id>]`` (multipart ``file``): the upload
  of ``POST /api/uploads/`` (its checks, quota and budget), for a session of the caller's
  (another user's, an ended or unknown one: 404). Answered 200 (Chainlit's frontend reads no
  other status as a success) with ``{id, ...}``: the ``fileReferences`` id of the message or
  the ask answer that sends it, as Chainlit's ``{id}``. ``ask_parent_id`` is accepted and not
  read here: an ask's answer is checked against its spec when it comes.
- ``GET /project/file/<id>?session_id=<id>``: the bytes of one of the caller's uploads (the
  preview of an attachment), with the headers of ``GET /api/elements/<id>``.
"""

import uuid
from typing import cast

from django.contrib.auth.models import User
from django.http import HttpResponse
from django.utils.http import content_disposition_header
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from chainlit_compat.origin_check import CHAINLIT_AUTHENTICATION, NOT_IN_SCHEMA
from media_app import services
from media_app.api import UploadView
from media_app.element_api import INLINE_TYPES, ElementView, served_type
from sessions_app import records

SESSION_NOT_FOUND = "Session not found"


def _uuid(value: str | None, missing: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise NotFound(missing) from None


def check_session(request: Request) -> None:
    """404 unless ``?session_id=`` names a live session of the caller's."""
    session_id = _uuid(request.query_params.get("session_id"), SESSION_NOT_FOUND)
    if not records.is_live_session_of(cast(User, request.user).pk, session_id):
        raise NotFound(SESSION_NOT_FOUND)


@NOT_IN_SCHEMA
class ChainlitUploadView(UploadView):
    authentication_classes = CHAINLIT_AUTHENTICATION

    def post(self, request: Request) -> Response:
        check_session(request)
        response = super().post(request)
        response.status_code = status.HTTP_200_OK
        return response


@NOT_IN_SCHEMA
class ChainlitFileView(ElementView):
    authentication_classes = CHAINLIT_AUTHENTICATION

    def get(self, request: Request, file_id: str) -> HttpResponse:  # type: ignore[override]  # Chainlit's path
        check_session(request)
        found = services.uploads_of(
            cast(User, request.user), [_uuid(file_id, "File not found")], with_data=True
        )
        if not found:
            raise NotFound("File not found")
        upload = found[0]
        data = services.upload_bytes(upload)
        response = HttpResponse(data, content_type=served_type(upload.content_type))
        response["Content-Length"] = str(len(data))
        response["Content-Disposition"] = (
            content_disposition_header(
                as_attachment=upload.content_type not in INLINE_TYPES, filename=upload.name or "file"
            )
            or "attachment"
        )
        response["X-Content-Type-Options"] = "nosniff"
        response["Content-Security-Policy"] = "sandbox"
        response["Cache-Control"] = "private, no-cache"
        return response
