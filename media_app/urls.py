"""The media API under ``/api/``."""

from django.urls import path

from media_app.api import MalformedMediaRefView, SessionMediaView, UploadView
from media_app.element_api import ElementView

urlpatterns = [
    path("api/uploads/", UploadView.as_view(), name="upload"),
    path("api/elements/<uuid:element_id>", ElementView.as_view(), name="element"),
    path(
        "api/session-media/<str:thread_id>/<str:step_id>/<str:index>",
        SessionMediaView.as_view(),
        name="session-media",
    ),
    # Whatever else follows /api/session-media/ is a malformed reference: a 400, not a 404.
    path("api/session-media/<path:ref>", MalformedMediaRefView.as_view(), name="session-media-malformed"),
]
