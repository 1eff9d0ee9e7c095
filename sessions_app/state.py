"""The one owner of this server process's in-memory state.

Everything a process keeps besides the database and Redis lives in these registries, and
this is the one place that knows them all: it wires them together when Django starts
(``SessionsAppConfig.ready`` calls ``install``), and ``reset`` empties them (the tests use it
between runs of in-process code; a server never needs to).

| registry | what it holds | bounded by |
|---|---|---|
| ``mailbox`` | this process's mailbox channel, its handlers, requests awaiting answers | requests in flight |
| ``heartbeat`` | the liveness row's heartbeat thread | one thread |
| ``local_sockets`` | the sockets this process holds, by session | open sockets |
| ``live_sessions`` | working copies of the sessions whose sockets are or were here | sessions not yet ended |
| ``stop_handlers`` | how to stop a session's running hook from another process | live sessions |
| ``pools`` | one ``BoxPool`` per box with sessions in this process | boxes served; sessions per pool capped |
| ``audiences`` | the web sessions watching each thread's ChatSession | watched threads (empty ones dropped) |
| ``known_owners`` | box and thread owners learned recently | boxes and threads served (entries expire when read) |
| ``integration_turns`` | integration turns in flight and per-box locks | turns in flight (idle locks dropped) |
| ``heartbeats`` | the sockets to ping and when | open sockets |
| ``stall_reattachment`` | the heartbeat's lapses its sockets' records were last reattached for | one number |
| ``recovery_loop``, ``expiry_sweeper``, ``idle_run_closer`` | the periodic tasks | one task each |
| ``graceful_shutdown`` | the SIGTERM drain | one task |
| ``sample_publisher`` | the dashboard's per-minute samples of this process, and the thread publishing them | an hour of minutes, one thread |
"""

from sessions_app.dashboard_samples import sample_publisher
from sessions_app.emitter import local_sockets
from sessions_app.heartbeats import heartbeats
from sessions_app.lifecycle import expiry_sweeper
from sessions_app.live import live_sessions
from sessions_app.mailbox import mailbox
from sessions_app.processes import heartbeat
from sessions_app.recovery import recovery_loop
from sessions_app.runtime.chats import audiences
from sessions_app.runtime.idle_runs import idle_run_closer
from sessions_app.runtime.integration_turns import integration_turns
from sessions_app.runtime.owner_handlers import OWNER_HANDLERS
from sessions_app.runtime.ownership import known_owners
from sessions_app.runtime.pool import pools
from sessions_app.shutdown import graceful_shutdown
from sessions_app.stall_reattach import stall_reattachment
from sessions_app.turns import stop_handlers


class ProcessState:
    def __init__(self) -> None:
        self.mailbox = mailbox
        self.heartbeat = heartbeat
        self.local_sockets = local_sockets
        self.live_sessions = live_sessions
        self.stop_handlers = stop_handlers
        self.pools = pools
        self.audiences = audiences
        self.known_owners = known_owners
        self.integration_turns = integration_turns
        self.recovery_loop = recovery_loop
        self.expiry_sweeper = expiry_sweeper
        self.idle_run_closer = idle_run_closer
        self.heartbeats = heartbeats
        self.graceful_shutdown = graceful_shutdown
        self.sample_publisher = sample_publisher
        self.stall_reattachment = stall_reattachment

    def install(self) -> None:
        """Wire the registries: what the mailbox answers, what starts with it."""
        self.mailbox.register("turn.stop", self.stop_handlers)
        for kind, handler in OWNER_HANDLERS.items():
            self.mailbox.register(kind, handler)
        self.mailbox.on_start(self.recovery_loop.start)
        self.mailbox.on_start(self.idle_run_closer.start)
        self.mailbox.on_start(self.sample_publisher.start)
        self.mailbox.on_start(lambda _address: self.expiry_sweeper.ensure_running())

    def reset(self) -> None:
        """Forget everything held in memory (tests); the wiring stays."""
        self.recovery_loop.stop()
        self.expiry_sweeper.stop()
        self.idle_run_closer.stop()
        self.heartbeat.stop()
        self.sample_publisher.stop()
        self.mailbox.reset()
        for registry in (
            self.local_sockets,
            self.live_sessions,
            self.stop_handlers,
            self.pools,
            self.audiences,
            self.known_owners,
            self.integration_turns,
            self.heartbeats,
            self.stall_reattachment,
        ):
            registry.clear()


process_state = ProcessState()
