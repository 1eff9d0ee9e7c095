"""Serializers of the threads API.

The response bodies are built by ``threads_app.wire`` (Chainlit's ThreadDict / StepDict field
names); the response serializers here pass those dictionaries through and exist to describe
them in the OpenAPI schema. The request and query serializers validate input.
"""

from typing import Any

from rest_framework import serializers
from rest_framework.settings import api_settings
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from threads_app.models import Feedback, StepType, Thread
from threads_app.pagination import SeqPagination
from threads_app.selectors import FAILED_LIMIT, thread_summary
from threads_app.services import THREAD_NAME_MAX

# The largest value a BigIntegerField (``Step.seq``) holds; bigger query values are rejected
# as invalid rather than overflowing in the database.
MAX_SEQ = 2**63 - 1


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and booleans instead of turning them into text."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class TextField(serializers.CharField):
    """A CharField for text that may be long (a message, a photo's base64). Its length is
    checked before anything reads the characters, and lone surrogates are found in C (a
    string without them is one PostgreSQL can store as UTF-8) instead of by DRF's validator,
    a loop in Python over every character that runs even on text already too long: 0.34 s,
    holding the GIL, for one 10 MB photo, 0.5 s for a 10 MB message refused for its length."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [
            v for v in self.validators if not isinstance(v, ProhibitSurrogateCharactersValidator)
        ]

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, str) and self.max_length is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        value: str = super().to_internal_value(data)
        if not value.isascii():  # an ASCII string holds no surrogate (and says so in O(1))
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise serializers.ValidationError(
                    f"Surrogate characters are not allowed: U+{ord(value[exc.start]):X}.",
                    code="surrogate_characters_not_allowed",
                ) from None
        return value


# --- Responses ------------------------------------------------------------------------


class FeedbackSerializer(serializers.Serializer[Any]):
    """Chainlit's FeedbackDict: the reading user's feedback on an assistant message."""

    id = serializers.UUIDField(read_only=True)
    forId = serializers.UUIDField(read_only=True, help_text="The step (assistant message) it rates.")
    value = serializers.ChoiceField(
        choices=Feedback.Value.choices, read_only=True, help_text="0: thumbs down, 1: thumbs up."
    )
    comment = serializers.CharField(read_only=True, allow_null=True)

    def to_representation(self, instance: dict[str, Any]) -> dict[str, Any]:
        return instance


class StepSerializer(serializers.Serializer[Any]):
    """A transcript entry, Chainlit's StepDict (plus ``seq``)."""

    id = serializers.UUIDField(read_only=True)
    threadId = serializers.UUIDField(read_only=True)
    parentId = serializers.UUIDField(read_only=True, allow_null=True)
    seq = serializers.IntegerField(read_only=True, help_text="Position in the thread's transcript.")
    type = serializers.CharField(read_only=True, help_text=f"One of {', '.join(StepType.values)}.")
    name = serializers.CharField(read_only=True)
    input = serializers.CharField(read_only=True, help_text="What a step was given (empty for messages).")
    output = serializers.CharField(read_only=True)
    # Not read-only like its neighbours: drf-spectacular lists every read-only field of a
    # response as required, and this one is absent when the step holds no blocks.
    content = serializers.JSONField(
        required=False,
        help_text="Content blocks (images, a user step's text); absent when the step has none, as in Chainlit's StepDict.",
    )
    metadata = serializers.JSONField(read_only=True)
    isError = serializers.BooleanField(read_only=True)
    streaming = serializers.BooleanField(read_only=True)
    createdAt = serializers.DateTimeField(read_only=True)
    start = serializers.DateTimeField(read_only=True, allow_null=True)
    end = serializers.DateTimeField(read_only=True, allow_null=True, help_text="Null while a step runs.")
    showInput = serializers.JSONField(
        read_only=True, help_text='Whether the UI shows the input: false, true or a language ("json").'
    )
    language = serializers.CharField(
        read_only=True, allow_null=True, help_text="The language of the output, for highlighting."
    )
    # Not read-only, so the schema does not mark it required: only rated steps carry it.
    feedback = FeedbackSerializer(
        required=False, help_text="The reading user's feedback; absent when they gave none."
    )

    def to_representation(self, instance: dict[str, Any]) -> dict[str, Any]:
        return instance


class ElementSerializer(serializers.Serializer[Any]):
    """A file attached to a step (Chainlit's ElementDict); ``url`` serves its bytes to its owner."""

    id = serializers.UUIDField(read_only=True)
    threadId = serializers.UUIDField(read_only=True)
    type = serializers.ChoiceField(choices=["image", "file", "pdf", "text", "plotly"], read_only=True)
    url = serializers.CharField(read_only=True, help_text="GET it with the same credentials.")
    name = serializers.CharField(read_only=True)
    display = serializers.ChoiceField(choices=["inline", "side", "page"], read_only=True)
    size = serializers.CharField(
        read_only=True, allow_null=True, help_text="An image's size: small, medium, large."
    )
    language = serializers.CharField(read_only=True, allow_null=True)
    page = serializers.IntegerField(read_only=True, allow_null=True)
    forId = serializers.UUIDField(read_only=True, allow_null=True, help_text="The step it is attached to.")
    mime = serializers.CharField(read_only=True, allow_null=True)
    props = serializers.JSONField(read_only=True)
    bytes = serializers.IntegerField(read_only=True, help_text="Size in bytes.")

    def to_representation(self, instance: dict[str, Any]) -> dict[str, Any]:
        return instance


class ThreadSerializer(serializers.Serializer[Any]):
    """A thread, Chainlit's ThreadDict without its transcript (``steps`` is empty: read the
    transcript with ``history`` or ``bootstrap``)."""

    id = serializers.UUIDField(read_only=True)
    createdAt = serializers.DateTimeField(read_only=True)
    updatedAt = serializers.DateTimeField(read_only=True)
    name = serializers.CharField(read_only=True)
    userId = serializers.CharField(read_only=True)
    userIdentifier = serializers.CharField(read_only=True)
    tags = serializers.ListField(child=serializers.CharField(), read_only=True)
    metadata = serializers.JSONField(read_only=True, help_text="The persisted user session of the chat.")
    steps = StepSerializer(many=True, read_only=True)
    elements = serializers.ListField(
        child=serializers.JSONField(),
        read_only=True,
        help_text="Empty here; resume_thread's ThreadDict lists the thread's elements.",
    )

    def to_representation(self, instance: Thread) -> dict[str, Any]:
        return thread_summary(instance)


class HistorySerializer(serializers.Serializer[Any]):
    """A page of the transcript."""

    next = serializers.URLField(
        read_only=True,
        allow_null=True,
        help_text="The next page, or null when nothing follows yet (always null for a before_seq page).",
    )
    previous = serializers.URLField(
        read_only=True,
        allow_null=True,
        help_text="For a before_seq page: the older steps before it, or null at the thread's start.",
    )
    results = StepSerializer(many=True, read_only=True)
    elements = ElementSerializer(
        many=True, read_only=True, help_text="The elements attached to this page's steps (by forId)."
    )

    def to_representation(self, instance: dict[str, Any]) -> dict[str, Any]:
        return instance


class PendingMessageSerializer(serializers.Serializer[Any]):
    """A send accepted but not yet in the transcript."""

    id = serializers.UUIDField(read_only=True, help_text="The client's message id.")
    text = serializers.CharField(read_only=True)
    acceptedAt = serializers.DateTimeField(read_only=True)
    images = serializers.ListField(child=serializers.JSONField(), read_only=True)

    def to_representation(self, instance: dict[str, Any]) -> dict[str, Any]:
        return instance


class FailedMessageSerializer(serializers.Serializer[Any]):
    """A send accepted but never transcribed, and why; the client can send it again (the same
    message id with ``retry: true``)."""

    messageId = serializers.UUIDField(read_only=True, help_text="The client's message id.")
    text = serializers.CharField(read_only=True)
    reason = serializers.CharField(
        read_only=True,
        help_text=(
            "Why it was not answered: stopped (a stop dropped it from the queue), limit, "
            "engine or server; empty when no reason was recorded."
        ),
    )
    acceptedAt = serializers.DateTimeField(read_only=True)
    imageCount = serializers.IntegerField(read_only=True, min_value=0, help_text="Photos it carries.")

    def to_representation(self, instance: dict[str, Any]) -> dict[str, Any]:
        return instance


class BootstrapSerializer(serializers.Serializer[Any]):
    """What a client needs to show a thread. The client retires a ``pending`` entry when a
    transcript user step carries its id; the server never compares the lists."""

    thread = ThreadSerializer(read_only=True)
    entries = StepSerializer(many=True, read_only=True)
    omittedBeforeSeq = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text=(
            "Null when entries is the whole transcript; else older steps (a limit, or the "
            "READ_PAGE_MAX_BYTES budget) are left out: read them with history?before_seq=this."
        ),
    )
    pending = PendingMessageSerializer(many=True, read_only=True)
    failed = FailedMessageSerializer(
        many=True,
        read_only=True,
        help_text=f"The latest {FAILED_LIMIT} sends that were never transcribed, oldest first.",
    )
    asks = serializers.ListField(
        child=serializers.DictField(),
        read_only=True,
        help_text="The app's open questions, as the socket's ``ask`` event: {msg, spec}.",
    )
    elements = ElementSerializer(
        many=True,
        read_only=True,
        help_text="Files attached to the entries (by forId), oldest first; all of the thread's without a limit.",
    )

    def to_representation(self, instance: dict[str, Any]) -> dict[str, Any]:
        return instance


# Error bodies: optional fields are not read-only, so the schema does not mark them required.


class ErrorSerializer(serializers.Serializer[Any]):
    detail = serializers.CharField(read_only=True)


class RenameErrorSerializer(serializers.Serializer[Any]):
    """DRF's 400 body: messages by field (or ``detail`` for a body that is not JSON)."""

    name = serializers.ListField(child=serializers.CharField(), required=False)
    non_field_errors = serializers.ListField(child=serializers.CharField(), required=False)
    detail = serializers.CharField(required=False)


class HistoryErrorSerializer(serializers.Serializer[Any]):
    after_seq = serializers.ListField(child=serializers.CharField(), required=False)
    before_seq = serializers.ListField(child=serializers.CharField(), required=False)
    limit = serializers.ListField(child=serializers.CharField(), required=False)


class BootstrapErrorSerializer(serializers.Serializer[Any]):
    limit = serializers.ListField(child=serializers.CharField(), required=False)


class SearchErrorSerializer(serializers.Serializer[Any]):
    search = serializers.ListField(child=serializers.CharField(), required=False)


# --- Requests and query parameters ----------------------------------------------------


class ThreadRenameSerializer(serializers.Serializer[Any]):
    """The only change a client makes to a thread: its name."""

    name = StrictCharField(max_length=THREAD_NAME_MAX, allow_blank=False)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value: dict[str, Any] = super().to_internal_value(data)
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            # Under non_field_errors, not under each key: a client's key may be "detail" or
            # any other name the error body already uses.
            raise serializers.ValidationError(
                {
                    api_settings.NON_FIELD_ERRORS_KEY: [
                        f"Unknown fields: {', '.join(unknown)}. Only the name of a thread can be changed."
                    ]
                }
            )
        return value


class HistoryQuerySerializer(serializers.Serializer[Any]):
    after_seq = serializers.IntegerField(
        min_value=0, max_value=MAX_SEQ, default=0, help_text="Return the steps after this seq."
    )
    before_seq = serializers.IntegerField(
        min_value=1,
        max_value=MAX_SEQ,
        required=False,
        help_text="Instead: the newest steps before this seq (older history, scrolling up).",
    )
    limit = serializers.IntegerField(
        min_value=1,
        max_value=SeqPagination.max_limit,
        default=SeqPagination.default_limit,
        help_text="At most this many steps.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "before_seq" in attrs and "after_seq" in self.initial_data:
            raise serializers.ValidationError({"before_seq": ["Give after_seq or before_seq, not both."]})
        return attrs


class BootstrapQuerySerializer(serializers.Serializer[Any]):
    limit = serializers.IntegerField(
        min_value=1,
        max_value=1000,
        required=False,
        help_text="Only the last this many transcript entries (default: the whole transcript).",
    )
