"""The session record: a chat session's state kept in the database, keyed by ``sessionId``.

Keeping it here rather than in process memory is what lets a reconnect that lands on another
server process restore the session. The boolean flags are claimed with conditional UPDATEs
(see ``sessions_app.store``) so that start, resume and end each happen once across processes.
"""

from django.conf import settings
from django.db import models


class SocketSession(models.Model):
    id = models.UUIDField(primary_key=True, editable=False, help_text="The client's sessionId.")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_sessions")
    thread_id = models.UUIDField(
        help_text="The thread this session writes to (created on first interaction)."
    )
    thread_id_to_resume = models.UUIDField(null=True, blank=True)
    client_type = models.CharField(max_length=32, default="webapp")
    chat_profile = models.CharField(max_length=255, blank=True, default="")
    chat_settings = models.JSONField(default=dict, blank=True)
    user_env = models.JSONField(default=dict, blank=True)
    # The persistable user session, saved at the end of each turn and on disconnect.
    user_session = models.JSONField(default=dict, blank=True)
    # Steps sent before the thread exists (an on_chat_start greeting); written on first interaction.
    deferred_steps = models.JSONField(default=list, blank=True)

    has_first_interaction = models.BooleanField(default=False)
    chat_started = models.BooleanField(default=False)
    resumed = models.BooleanField(default=False)
    ended = models.BooleanField(default=False, help_text="on_chat_end has been claimed.")

    # The channel name of the consumer holding the socket, empty while disconnected, and the
    # process holding it (its mailbox address): a socket of a dead process is no socket.
    socket_channel = models.CharField(max_length=200, blank=True, default="")
    socket_owner = models.CharField(max_length=200, blank=True, default="")
    disconnected_at = models.DateTimeField(null=True, blank=True)
    # Bumped on every connect; a process whose in-memory copy is older rebuilds it.
    generation = models.PositiveIntegerField(default=0)

    # The running turn's owner (a process token) and its heartbeat; see sessions_app.turns.
    turn_owner = models.CharField(max_length=200, blank=True, default="")
    turn_heartbeat = models.DateTimeField(null=True, blank=True)
    # The fencing token of the turn claim, bumped by every claim (``threads_app.fencing``).
    turn_epoch = models.BigIntegerField(default=0, db_default=0)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["ended", "disconnected_at"], name="session_expiry")]

    def __str__(self) -> str:
        return str(self.id)

    @property
    def is_connected(self) -> bool:
        return bool(self.socket_channel)


class ServerProcess(models.Model):
    """A running server process and its heartbeat: the liveness every claim is judged by.

    Claims (a box's runtime, a session's turn, a socket, an accepted send) name the process
    that holds them by its mailbox address. A process whose heartbeat lapsed is dead: what
    it held is free, and the recovery loop of a live process takes it over. A process that
    shuts down gracefully deletes its row after releasing its claims.
    """

    address = models.CharField(max_length=200, primary_key=True, help_text="Its mailbox channel.")
    pid = models.PositiveIntegerField()
    hostname = models.CharField(max_length=255, blank=True, default="")
    app = models.CharField(max_length=255, blank=True, default="", help_text="CHAT_APP it runs.")
    started_at = models.DateTimeField(auto_now_add=True)
    # The lease every claim is judged by: renewed by the process's own beat, or by another
    # process that saw this one's database connections still open while its beats stopped
    # (a stall, not a death: ``sessions_app.processes.vouch_for_stalled``).
    heartbeat_at = models.DateTimeField()
    # The process's own last beat: how long it has been stalled, whoever renewed its lease.
    beat_at = models.DateTimeField(null=True, blank=True)
    # Its database connections' ``application_name`` (PostgreSQL), by which another process
    # tells a stalled process (connections open) from a dead one (the server closed them).
    db_application = models.CharField(max_length=63, blank=True, default="")
    # Set by a graceful shutdown: the process takes no new work while it finishes what it has.
    draining = models.BooleanField(default=False)
    # Which channel layer it is reachable on (a fingerprint of its configuration): only a
    # process on the same one can reach what it held, so only such a process takes it over.
    layer = models.CharField(max_length=64, blank=True, default="")

    def __str__(self) -> str:
        return f"{self.hostname}:{self.pid}"


class ProcessSamples(models.Model):
    """What one server process last published for the admin's dashboard: its live gauges
    now and its per-minute samples of the last hour (``sessions_app.dashboard_samples``).

    A table rather than the multiprocess metric files: those exist only with
    ``PROMETHEUS_MULTIPROC_DIR`` set and only for the processes of one host, while every
    process, wherever it runs, reaches the database. One small UPDATE per process every
    ``DASHBOARD_PUBLISH_EVERY`` seconds, from a thread of its own; nothing per turn.
    """

    address = models.CharField(max_length=200, primary_key=True, help_text="Its mailbox channel.")
    updated_at = models.DateTimeField()
    # {"sockets": n, "sessions": n, "running": {kind: n}, "queued": {kind: n}, "engine_runs": n}
    current = models.JSONField(default=dict)
    # [{"t": minute start (epoch seconds), "turns": n, "errors": n, "layer_errors": n,
    #   "first_token": [bucket counts], "task_end": [bucket counts]}], oldest first.
    minutes = models.JSONField(default=list)

    def __str__(self) -> str:
        return self.address
