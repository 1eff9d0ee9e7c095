"""Serializers of the media API (and the ``images`` of ``POST /api/chat/send``)."""

from typing import Any

from rest_framework import serializers

from media_app import images
from threads_app.serializers import TextField


class UploadRequestSerializer(serializers.Serializer[Any]):
    file = serializers.FileField(
        help_text=(
            f"A {images.ALLOWED_TEXT} photo, or another file of a type UPLOAD_ALLOWED_TYPES accepts; "
            "its type is read from its content, not its name."
        )
    )


class UploadSerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField(
        read_only=True, help_text="Name it in client_message's fileReferences: [{id}]."
    )
    contentType = serializers.CharField(
        read_only=True,
        help_text="Read from the file's content: a photo type, or another type the server accepts.",
    )
    size = serializers.IntegerField(read_only=True, help_text="In bytes.")
    name = serializers.CharField(read_only=True, help_text="The file's name as uploaded.")


class UploadErrorSerializer(serializers.Serializer[Any]):
    """DRF's 400 body: messages by field (or ``detail`` for a body that cannot be parsed)."""

    file = serializers.ListField(child=serializers.CharField(), required=False)
    detail = serializers.CharField(required=False)


class MediaErrorSerializer(serializers.Serializer[Any]):
    detail = serializers.CharField(read_only=True)


class ImageInputSerializer(serializers.Serializer[Any]):
    """A photo sent inline: base64 of a JPEG, PNG, GIF or WebP file. Its validated form is the
    image block the engine receives and the transcript stores."""

    mediaType = serializers.ChoiceField(
        choices=images.ALLOWED_TYPES,
        required=False,
        help_text="Optional; when given it must match what the data is (read from its first bytes).",
    )
    # The metaclass takes declared fields off the class: ``.data`` is still the property.
    data = TextField(trim_whitespace=False, help_text="Standard base64, padded.")  # type: ignore[assignment]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        try:
            return images.block_from_base64(attrs["data"], attrs.get("mediaType"))
        except images.ImageRejected as exc:
            raise serializers.ValidationError({"data": [str(exc)]}) from None

    def to_representation(self, instance: Any) -> Any:
        return instance


class ImagesField(serializers.ListField):
    """``images`` of a send: at most ``MAX_IMAGES_PER_MESSAGE`` photos (counted before any is
    decoded), each checked by :class:`ImageInputSerializer`; errors come back by position."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", f"Photos, at most {images.max_images()} by default.")
        super().__init__(child=ImageInputSerializer(), **kwargs)

    def to_internal_value(self, data: Any) -> list[dict[str, Any]]:
        if isinstance(data, list):
            try:
                images.check_count(len(data))
            except images.ImageRejected as exc:
                raise serializers.ValidationError(str(exc)) from None
        return super().to_internal_value(data)
