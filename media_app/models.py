"""Uploaded photos waiting to be attached to a message.

A photo sent in chat is stored where the conversation stores it: inline, as a base64 image
block, in the user step's content (and the send's acceptance record). An ``Upload`` is only
the way in for the socket, whose frames are too small for photos: the client uploads over
HTTP, then names the upload in ``client_message``'s ``fileReferences``. A photo's bytes live
in the database so that every server process can read them; any other file an app accepts
(``UPLOAD_ALLOWED_TYPES``) goes through the elements storage (``storage_key``).

An ``Element`` is a file an app (or a user's upload) attached to a message or step: an image,
a file, a PDF, a text, a plot. Its bytes are in Django's storage under the ``tether_elements``
alias (the filesystem by default, any django-storages backend by setting), never in a
transcript row; the row keeps what the wire's ElementDict needs and the storage key.
"""

import uuid

from django.conf import settings
from django.db import models


class Upload(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # Sniffed from the bytes (one of media_app.images.ALLOWED_TYPES), never the client's word.
    content_type = models.CharField(max_length=100)
    size = models.PositiveIntegerField()
    data = models.BinaryField(default=b"", blank=True)
    # Set for a file that is not a photo: its bytes are in the elements storage, not ``data``.
    storage_key = models.CharField(max_length=255, blank=True, default="")
    name = models.CharField(max_length=255, blank=True, default="")
    # The engine-app send (``AcceptedMessage.key``) that copied this photo into its message:
    # a photo upload goes into one such message (its resends included), so each copy an
    # engine-app transcript keeps was paid for by an upload within the quota.
    sent_in = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "created_at"], name="upload_owner_created")]

    def __str__(self) -> str:
        return f"{self.id} ({self.content_type}, {self.size} bytes)"


class Element(models.Model):
    """A file attached to a message or step (Chainlit's element)."""

    class Type(models.TextChoices):
        IMAGE = "image"
        FILE = "file"
        PDF = "pdf"
        TEXT = "text"
        PLOTLY = "plotly"
        # Chainlit's CustomElement: a component of the app's own; its props are its content.
        CUSTOM = "custom"

    class Display(models.TextChoices):
        INLINE = "inline"
        SIDE = "side"
        PAGE = "page"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No database constraint: an element sent before the first message (``on_chat_start``)
    # exists before its thread row does. Deleting the thread row still deletes its elements
    # (Django cascades in Python), and their files with them (``element_signals``).
    thread = models.ForeignKey(
        "threads_app.Thread", on_delete=models.CASCADE, db_constraint=False, related_name="+"
    )
    # The message or step it is attached to (Chainlit's ``forId``); null: the thread itself.
    for_id = models.UUIDField(null=True, blank=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    type = models.CharField(max_length=16, choices=Type.choices)
    name = models.CharField(max_length=255)
    display = models.CharField(max_length=8, choices=Display.choices, default=Display.INLINE)
    mime = models.CharField(max_length=100, blank=True, default="")
    size = models.PositiveBigIntegerField(default=0, help_text="Bytes stored.")
    storage_key = models.CharField(max_length=255, blank=True, default="")
    # An element the app gave by URL (``url=``): nothing is stored, the page links to it.
    url = models.URLField(max_length=2000, blank=True, default="")
    # Chainlit's per-type fields: an image's ``size`` (small, medium, large), a text's
    # ``language``, a PDF's ``page``, and the app's ``props``.
    image_size = models.CharField(max_length=8, blank=True, default="")
    language = models.CharField(max_length=40, blank=True, default="")
    page = models.PositiveIntegerField(null=True, blank=True)
    props = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["thread", "created_at"], name="element_thread_created"),
            models.Index(fields=["for_id"], name="element_for"),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.name!r} ({self.size} bytes)"
