"""Uploaded photos waiting to be attached to a message.

A photo sent in chat is stored where the conversation stores it: inline, as a base64 image
block, in the user step's content (and the send's acceptance record). An ``Upload`` is only
the way in for the socket, whose frames are too small for photos: the client uploads over
HTTP, then names the upload in ``client_message``'s ``fileReferences``. The bytes live in the
database so that every server process can read them.
"""

import uuid

from django.conf import settings
from django.db import models


class Upload(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # Sniffed from the bytes (one of media_app.images.ALLOWED_TYPES), never the client's word.
    content_type = models.CharField(max_length=32)
    size = models.PositiveIntegerField()
    data = models.BinaryField()
    name = models.CharField(max_length=255, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "created_at"], name="upload_owner_created")]

    def __str__(self) -> str:
        return f"{self.id} ({self.content_type}, {self.size} bytes)"
