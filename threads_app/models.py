"""The durable records of a conversation: boxes, threads, transcript steps, accepted sends."""

import secrets
import uuid

from django.conf import settings
from django.db import models


def new_webhook_secret() -> str:
    """A random key for signing a box's webhook deliveries (``sessions_app.webhooks``)."""
    return secrets.token_hex(32)


# The box a user's chats go to (``services.default_box_for``), made on first use.
DEFAULT_BOX_NAME = "default"


class Box(models.Model):
    """An agent workspace owned by one user; it names the engine that answers."""

    class Engine(models.TextChoices):
        """The engines a box can name; the runtime maps each to its class
        (``sessions_app.runtime.engines.ENGINES``, checked equal by a test)."""

        ECHO = "echo"
        OPENAI = "openai"
        CLAUDE = "claude"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="boxes")
    name = models.CharField(max_length=100, default="default")
    engine = models.CharField(max_length=50, default=Engine.ECHO, choices=Engine.choices)
    engine_options = models.JSONField(default=dict, blank=True)
    webhook_url = models.URLField(blank=True, default="")
    # The HMAC-SHA256 key of the ``X-Tether-Signature`` header on deliveries to webhook_url.
    webhook_secret = models.CharField(max_length=128, blank=True, default=new_webhook_secret)
    # The process whose pool runs this box's integration sessions (its mailbox channel) and
    # when it claimed them; see sessions_app.runtime.ownership.
    runtime_owner = models.CharField(max_length=200, blank=True, default="")
    runtime_heartbeat = models.DateTimeField(null=True, blank=True)
    # The fencing token of that claim: bumped by every claim that changes hands, so writes
    # made under an older one are refused (``threads_app.fencing``).
    runtime_epoch = models.BigIntegerField(default=0, db_default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "boxes"
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="box_owner_name_unique")]

    def __str__(self) -> str:
        return f"{self.owner} / {self.name}"


class Thread(models.Model):
    """A conversation; ``metadata`` holds the persisted user session of its chat."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="threads")
    box = models.ForeignKey(Box, on_delete=models.CASCADE, related_name="threads")
    name = models.CharField(max_length=255, blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    chat_profile = models.CharField(max_length=255, blank=True, default="")
    chat_settings = models.JSONField(default=dict, blank=True)
    engine_session_id = models.CharField(max_length=255, blank=True, default="", db_index=True)
    # The process running this thread's interactive ChatSession (its mailbox channel); see
    # sessions_app.runtime.ownership.
    runtime_owner = models.CharField(max_length=200, blank=True, default="")
    # The fencing token of that claim (``threads_app.fencing``), as on ``Box``.
    runtime_epoch = models.BigIntegerField(default=0, db_default=0)
    # The highest ``Step.seq`` handed out; bumped under a row lock so seqs never collide.
    last_seq = models.BigIntegerField(default=0)
    # UTF-8 bytes of its steps' input and output, against ``THREAD_MAX_BYTES``
    # (``threads_app.step_budgets``); kept by the statements that write steps.
    text_bytes = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "-updated_at"], name="thread_owner_updated")]

    def __str__(self) -> str:
        return self.name or str(self.id)


class StepType(models.TextChoices):
    USER_MESSAGE = "user_message"
    ASSISTANT_MESSAGE = "assistant_message"
    SYSTEM_MESSAGE = "system_message"
    RUN = "run"
    TOOL = "tool"
    LLM = "llm"
    EMBEDDING = "embedding"
    RETRIEVAL = "retrieval"
    RERANK = "rerank"
    UNDEFINED = "undefined"


class Step(models.Model):
    """One transcript entry. The id is the idempotency key: a second write is an upsert."""

    id = models.UUIDField(primary_key=True, editable=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="steps")
    seq = models.BigIntegerField()
    type = models.CharField(max_length=32, choices=StepType.choices)
    name = models.CharField(max_length=255, blank=True, default="")
    parent_id = models.UUIDField(null=True, blank=True)
    # What a step (a tool call, a retrieval...) was given; messages leave it empty.
    input = models.TextField(blank=True, default="")
    output = models.TextField(blank=True, default="")
    content = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    is_error = models.BooleanField(default=False)
    created_at = models.DateTimeField()
    start = models.DateTimeField(null=True, blank=True)
    end = models.DateTimeField(null=True, blank=True)
    # Who wrote the step under which claim (``threads_app.fencing``): the process's mailbox
    # address and the claim's token; blank for writes made under no claim (the API, a greeting).
    writer = models.CharField(max_length=200, blank=True, default="", db_default="")
    writer_epoch = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["thread", "seq"]
        constraints = [models.UniqueConstraint(fields=["thread", "seq"], name="step_thread_seq_unique")]

    def __str__(self) -> str:
        return f"{self.type} #{self.seq}"

    @property
    def is_message(self) -> bool:
        return "message" in self.type


# Namespace of the stored keys of sends (``AcceptedMessage.key``).
SEND_KEY_NAMESPACE = uuid.UUID("2b0f7c8e-51a4-4c1e-9d6a-7c3e0f5b8a21")


class AcceptedMessage(models.Model):
    """The acceptance record of a user send.

    The client proposes the message id (``client_id``, its idempotency key); the row's key is
    that id scoped by the thread (``key``), so that an id one user chose first can never
    block, or be confused with, the same id of another user's send. The transcript step of
    the send takes the same key; the wire shows the client's id.
    """

    class State(models.TextChoices):
        PENDING = "pending"
        TRANSCRIBED = "transcribed"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, editable=False)
    # The message id the client chose (unique within the thread, by the key).
    client_id = models.UUIDField(editable=False)
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="accepted_messages")
    box = models.ForeignKey(Box, on_delete=models.CASCADE, related_name="accepted_messages")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    text = models.TextField(blank=True, default="")
    images = models.JSONField(default=list, blank=True)
    accepted_at = models.DateTimeField(auto_now_add=True)

    class Source(models.TextChoices):
        CHAT = "chat"  # engine-runtime apps: the thread's ChatSession queues and drains it
        HOOK = "hook"  # hooks-API apps: the sending session's on_message answers it
        INTEGRATION = "integration"  # integration threads: one turn at a time, no queue

    class Outcome(models.TextChoices):
        """How the turn that transcribed the send ended (blank while it runs)."""

        NONE = "", "not finished"
        REPLIED = "replied"
        INTERRUPTED = "interrupted"  # stopped by the user; the partial reply is kept
        ERROR = "error"  # the engine or the hook failed, or the server died mid-turn

    class Failure(models.TextChoices):
        """Why a send was never transcribed (state ``failed``); the UI shows it."""

        NONE = "", "none"
        STOPPED = "stopped"  # a stop dropped it from the queue
        LIMIT = "limit"  # refused by a limit
        ENGINE = "engine"  # the engine could not take it
        SERVER = "server"  # the server could not run it (its session ended first)

    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.CHAT)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, blank=True, default="")
    failure = models.CharField(max_length=16, choices=Failure.choices, blank=True, default="")
    # The socket session that sent it (hooks-API sends run in that session).
    session_id = models.UUIDField(null=True, blank=True)
    # The server process (its mailbox address) that holds the send, queued or running; a
    # holder whose process stopped beating leaves it to the recovery loop.
    holder = models.CharField(max_length=200, blank=True, default="")
    # Whether the send had to wait behind a running turn, as first answered; repeats of the
    # same message id (also concurrent ones) get this same answer.
    queued = models.BooleanField(null=True, blank=True)
    step = models.ForeignKey(Step, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        indexes = [
            models.Index(fields=["thread", "state"], name="accepted_thread_state"),
            # The recovery loop's scan: sends not settled yet (pending, or transcribed with no outcome).
            models.Index(fields=["state", "outcome"], name="accepted_open"),
        ]

    def __str__(self) -> str:
        return f"{self.client_id} ({self.state})"

    @staticmethod
    def key(thread_id: uuid.UUID, client_id: uuid.UUID) -> uuid.UUID:
        """The stored id of the send the client calls ``client_id`` in this thread."""
        return uuid.uuid5(SEND_KEY_NAMESPACE, f"{thread_id}:{client_id}")


# The longest comment a feedback may carry, in characters (the API refuses longer ones).
FEEDBACK_COMMENT_MAX = 2000


class Feedback(models.Model):
    """A user's verdict on one assistant message: thumbs up or down and an optional comment.

    One per (step, user), which the database enforces, so concurrent clicks end in one row
    that the last write wins. ``thread`` repeats the step's thread for the admin's links and
    for reads that want a thread's feedback without going through its steps.
    """

    class Value(models.IntegerChoices):
        """Chainlit's numbering, so its clients' payloads carry over unchanged."""

        DOWN = 0, "thumbs down"
        UP = 1, "thumbs up"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="feedbacks")
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="feedbacks")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    value = models.PositiveSmallIntegerField(choices=Value.choices)
    comment = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["step", "user"], name="feedback_step_user_unique"),
            models.CheckConstraint(condition=models.Q(value__in=[0, 1]), name="feedback_value_0_or_1"),
        ]

    def __str__(self) -> str:
        return f"{self.get_value_display()} on {self.step_id}"


class Ask(models.Model):
    """A question an app asked (``chat.AskUserMessage`` and friends) and waits for.

    Kept here rather than in a socket's memory so that it outlives the socket it was sent to:
    a reconnect or a reload shows it again, any tab of the thread (any process) can answer it,
    and the answer is claimed with one conditional UPDATE (``state='open'``), so two tabs that
    answer at once make one answer. ``thread_id`` and ``session_id`` are plain ids: an app may
    ask in ``on_chat_start``, before the thread row exists.
    """

    class State(models.TextChoices):
        OPEN = "open"
        ANSWERED = "answered"
        TIMED_OUT = "timed_out"
        CANCELLED = "cancelled"  # a stop, the session's end, or a "New chat"

    class Kind(models.TextChoices):
        TEXT = "text"
        ACTION = "action"
        FILE = "file"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    thread_id = models.UUIDField(db_index=True)
    session_id = models.UUIDField(db_index=True)
    # The question's message step (Chainlit's ``spec.step_id``).
    step_id = models.UUIDField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # Chainlit's spec without its timeout (``keys``, ``accept``, ``max_size_mb``, ``max_files``).
    spec = models.JSONField(default=dict, blank=True)
    # The question's StepDict as sent (what a reconnecting tab is shown again).
    message = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN)
    answer = models.JSONField(null=True, blank=True)
    deadline = models.DateTimeField()
    # The server process whose hook waits for the answer (its mailbox address): an ask whose
    # process died has nobody to take its answer, so it is closed, not answered.
    asker = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["thread_id", "state"], name="ask_thread_state")]

    def __str__(self) -> str:
        return f"{self.kind} ask {self.id} ({self.state})"
