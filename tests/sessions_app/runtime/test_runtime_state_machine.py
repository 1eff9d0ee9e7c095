"""A hypothesis state machine driving the REAL chat runtime through random lifecycles.

One ``ChatSession`` (interactive, with a queue) and one ``BoxPool`` holding two
integration threads (``ChatThreadSession``s, one active at a time) run against the echo
engine subprocess and the test database. The rules are what callers and the world do to
them: send (or, refused, enqueue), enqueue, wait for the turn to finish, stop, restart,
reset the session, kill the engine (SIGKILL, or a ``!crash`` message), two of those at once,
and integration sends that park one thread for the other.

Checked after every step (and, for the phase moves and run counts, at every single move):

- every phase move is legal (``LEGAL_MOVES``), and no ``InvariantError`` or any other
  exception escaped anywhere: not in the pump's callbacks, not in a background task;
- a session never has two runs open; the pool never has two thread runs open;
- once settled, the interactive session holds no stranded queue, a parked thread session has
  no run, and every accepted message id is either in exactly one user step's
  ``metadata.acceptedIds`` or in ``session.dropped`` (stop() dropped it), never both or twice;
  an integration message refused with ``SessionBusy`` is never transcribed;
- at teardown every engine subprocess the example started has exited.

Each example gets its own event loop; the rules run on it with ``run_until_complete`` and the
ORM is reached through ``sync_to_async`` as the runtime does, against a ``transactional_db``.
"""

import asyncio
import contextlib
import gc
import logging
import os
import signal
import uuid
from collections import Counter
from typing import Any, cast

import hypothesis
from asgiref.sync import sync_to_async
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from sessions_app.runtime.chat_session import ChatSession
from sessions_app.runtime.engines.base import EngineError, UserTurn
from sessions_app.runtime.engines.echo import EchoEngine, EchoRun
from sessions_app.runtime.phases import Phase, is_legal
from sessions_app.runtime.pool import BoxPool
from sessions_app.runtime.thread_session import ChatThreadSession, SessionBusy, TurnResponse
from tests.sessions_app.runtime.conftest import Sink, accepted_turn
from threads_app.models import AcceptedMessage, Step

TEXTS = st.sampled_from(
    [
        "hello there",
        "!slow 0.01\none two three four",
        "!slow 0.03\na slower answer that streams",
        "!fail\nthis turn fails",
        "!tool\nuse the tool",
        "!crash\nthis turn crashes the engine",
    ]
)
PAUSES = st.sampled_from([0.0, 0.0, 0.005, 0.02, 0.06])
SETTLE_TIMEOUT = 20.0
# Timing is real (a subprocess, a database), so a failing sequence may not replay exactly;
# RUNTIME_SM_SHRINK=0 reports the first failing sequence instead of shrinking it.
PHASES = (
    list(hypothesis.Phase)
    if os.environ.get("RUNTIME_SM_SHRINK", "1") == "1"
    else [hypothesis.Phase.explicit, hypothesis.Phase.reuse, hypothesis.Phase.generate]
)


class TrackingEcho(EchoEngine):
    """The echo engine, remembering every run it started so teardown can prove none leaked."""

    def __init__(self, state_dir: str, runs: list[EchoRun]) -> None:
        super().__init__({"state_dir": state_dir})
        self.runs = runs

    async def start(self, *, resume: str | None = None) -> EchoRun:
        run = await super().start(resume=resume)
        self.runs.append(run)
        return run


class ErrorLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(
            f"{record.name}: {record.getMessage()} {record.exc_info and record.exc_info[1]!r}"
        )


class RuntimeMachine(RuleBasedStateMachine):
    # Bound per test by ``bound_machine``.
    make_thread: Any = None
    state_dir: str = ""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(self._loop_exception)
        self.violations: list[str] = []
        # The first failure is kept and raised at teardown: with real timing a replay may fail a
        # step earlier or later, and every example must draw the same data to be replayed.
        self.failure: BaseException | None = None
        self.runs: list[EchoRun] = []
        self.inflight: Counter[str] = Counter()
        self.killed: set[int] = set()
        self.errors = ErrorLog()
        logging.getLogger("sessions_app").addHandler(self.errors)

        self.chat_thread = self.loop.run_until_complete(self.make_thread("chat"))
        self.sink = Sink()
        self.session = ChatSession(
            thread_id=self.chat_thread.id,
            engine=TrackingEcho(self.state_dir, self.runs),
            emit=self.sink,
        )
        self._instrument(self.session, "chat")
        self.chat_ids: list[uuid.UUID] = []
        self.forgotten: set[str] = set()  # engine conversations reset_session() forgot

        self.pool_threads = [
            self.loop.run_until_complete(self.make_thread(f"integration-{i}")) for i in range(2)
        ]
        pool_engine = TrackingEcho(self.state_dir, self.runs)
        self.pool = BoxPool(self.chat_thread.box_id, lambda: pool_engine)
        for thread in self.pool_threads:
            # What activate() would create; made here so it can be instrumented.
            session = ChatThreadSession(thread_id=thread.id, engine=pool_engine)
            self.pool.thread_sessions[thread.id] = session
            self._instrument(session, f"thread-{thread.name}")
        self.pool_tasks: list[tuple[asyncio.Task[TurnResponse], uuid.UUID, uuid.UUID]] = []
        self.pool_expect: dict[uuid.UUID, tuple[uuid.UUID, str]] = {}  # id -> (thread, expectation)
        self.engine_ids: dict[uuid.UUID, str] = {}

    # --- plumbing --------------------------------------------------------------------------

    def do(self, coro: Any) -> None:
        """Run one step on the loop; after a failure the remaining steps are skipped."""
        if self.failure is not None:
            coro.close()
            return
        try:
            self.loop.run_until_complete(coro)
        except Exception as exc:
            self._fail(exc, coro.__qualname__)

    def _fail(self, exc: BaseException, where: str) -> None:
        if self.failure is None:
            exc.add_note(f"first failure, in {where}")
            self.failure = exc

    def check(self, where: str, *problems: object) -> None:
        """Record the first problem found by an invariant (a falsy value is none)."""
        for problem in problems:
            if problem and self.failure is None:
                self._fail(AssertionError(problem), where)

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        self.violations.append(f"event loop: {context.get('message')} {context.get('exception')!r}")

    def _instrument(self, session: ChatSession | ChatThreadSession, label: str) -> None:
        """Watch every phase move and every pump callback of ``session`` (instance attributes
        shadow the callbacks; the pump looks them up through ``self`` at call time). An
        illegal move raises ``InvariantError`` inside the session: the callbacks record it."""

        def checked_move(previous: Phase, target: Phase) -> None:
            if not is_legal(previous, target):
                self.violations.append(f"{label}: illegal move {previous} -> {target}")
            if not 0 <= session.runs_open <= 1:
                self.violations.append(f"{label}: runs_open={session.runs_open} after {previous}->{target}")
            if self.pool.runs_open() > 1:
                self.violations.append(f"pool: {self.pool.runs_open()} thread runs open ({label} {target})")

        session.on_move = checked_move
        for name in ("on_message", "on_close"):
            self._wrap_callback(session, name, label)

    def _wrap_callback(self, session: object, name: str, label: str) -> None:
        original = getattr(session, name)

        async def wrapped(*args: Any) -> Any:
            self.inflight[label] += 1
            try:
                return await original(*args)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                self.violations.append(f"{label}.{name} raised {exc!r}")
                raise
            finally:
                self.inflight[label] -= 1

        setattr(session, name, wrapped)

    async def new_turn(self, thread: Any, text: str) -> UserTurn:
        return await accepted_turn(thread, text)

    def refuses_sends(self) -> bool:
        return self.session.refuses_sends()

    def chat_quiet(self) -> bool:
        """Nothing will happen to the interactive session without a new call."""
        s = self.session
        if s.phase not in (Phase.IDLE, Phase.READY) or s.has_work_in_flight():
            return False
        if self.inflight["chat"]:
            return False
        if s.run is not None and cast(EchoRun, s.run).pid in self.killed:
            return False  # the kill has not reached the close handler yet
        return not (s.phase is Phase.IDLE and s.pump_running())

    async def settle_chat(self) -> None:
        stable = 0
        deadline = self.loop.time() + SETTLE_TIMEOUT
        while stable < 3:
            if self.loop.time() > deadline:
                raise AssertionError(
                    f"chat session never settled: phase={self.session.phase} queue={self.session.queue}"
                )
            stable = stable + 1 if self.chat_quiet() else 0
            await asyncio.sleep(0.005)

    async def settle_pool(self) -> None:
        pending = [task for task, _, _ in self.pool_tasks if not task.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=SETTLE_TIMEOUT)
            assert not still, f"{len(still)} integration sends never finished"
        for _ in range(200):
            if not any(self.inflight[f"thread-{t.name}"] for t in self.pool_threads):
                break
            await asyncio.sleep(0.005)

    @sync_to_async
    def user_step_ids(self, thread_id: uuid.UUID) -> tuple[Counter[str], set[str]]:
        counts: Counter[str] = Counter()
        for metadata in Step.objects.filter(thread_id=thread_id, type="user_message").values_list(
            "metadata", flat=True
        ):
            # A step lists its sends by their clients' ids; the runtime knows them by key.
            client_ids = (metadata or {}).get("acceptedIds", [])
            counts.update(str(AcceptedMessage.key(thread_id, uuid.UUID(i))) for i in client_ids)
        transcribed = set(
            AcceptedMessage.objects.filter(
                thread_id=thread_id, state=AcceptedMessage.State.TRANSCRIBED
            ).values_list("id", flat=True)
        )
        return counts, {str(i) for i in transcribed}

    async def check_chat_accounting(self) -> None:
        """On a settled session: each accepted id transcribed exactly once XOR dropped once."""
        assert self.session.queue == [], f"a settled session holds a stranded queue: {self.session.queue}"
        counts, marked = await self.user_step_ids(self.chat_thread.id)
        dropped = Counter(str(i) for i in self.session.dropped)
        for accepted in map(str, self.chat_ids):
            pair = (counts[accepted], dropped[accepted])
            assert pair in ((1, 0), (0, 1)), f"accepted id {accepted}: (transcribed, dropped) = {pair}"
            assert (accepted in marked) == (counts[accepted] == 1), f"{accepted}: acceptance state disagrees"
        assert set(counts) <= set(map(str, self.chat_ids)), "a user step carries an id nobody sent"

    async def check_pool_accounting(self) -> None:
        """On a settled pool: a send refused with SessionBusy was never transcribed, every
        other integration send was, exactly once."""
        for task, _, accepted in self.pool_tasks:
            exc = task.exception()
            if isinstance(exc, SessionBusy):
                self.pool_expect[accepted] = (self.pool_expect[accepted][0], "refused")
            elif exc is not None and not isinstance(exc, EngineError):
                raise AssertionError(f"integration send raised {exc!r}")
        for thread in self.pool_threads:
            counts, marked = await self.user_step_ids(thread.id)
            for accepted, (thread_id, expect) in self.pool_expect.items():
                if thread_id != thread.id:
                    continue
                key = str(accepted)
                if expect == "transcribed":
                    assert counts[key] == 1 and key in marked, (
                        f"integration id {key} transcribed {counts[key]}x"
                    )
                else:
                    assert counts[key] == 0 and key not in marked, f"{expect} id {key} was transcribed"
        # Parking: only the active thread may hold a run once everything settled.
        for thread_id, session in self.pool.thread_sessions.items():
            if thread_id != self.pool.active_thread:
                assert session.phase is Phase.IDLE and session.run is None, (
                    f"a parked thread session is {session.phase}"
                )

    # --- interactive session rules -------------------------------------------------------------

    @rule(text=TEXTS, pause=PAUSES)
    def send(self, text: str, pause: float) -> None:
        """send(), or enqueue when it refuses: what the send path does (submit)."""

        async def go() -> None:
            turn = await self.new_turn(self.chat_thread, text)
            self.chat_ids.extend(turn.accepted_ids)
            await self.session.submit(turn)
            await asyncio.sleep(pause)

        self.do(go())

    @rule(text=TEXTS)
    def enqueue(self, text: str) -> None:
        """A caller whose send() would be refused enqueues directly."""

        async def go() -> None:
            turn = await self.new_turn(self.chat_thread, text)
            if self.refuses_sends():
                self.chat_ids.extend(turn.accepted_ids)
                self.session.enqueue(turn)

        self.do(go())

    @rule(text=TEXTS, pause=PAUSES)
    def submit_soon(self, text: str, pause: float) -> None:
        async def go() -> None:
            turn = await self.new_turn(self.chat_thread, text)
            self.chat_ids.extend(turn.accepted_ids)
            self.session.submit_soon(turn)
            await asyncio.sleep(pause)

        self.do(go())

    @rule()
    def wait_for_result(self) -> None:
        async def go() -> None:
            await self.settle_chat()
            await self.check_chat_accounting()

        self.do(go())

    @rule()
    def stop(self) -> None:
        async def go() -> None:
            run, phase = self.session.run, self.session.phase
            await self.session.stop()
            if run is not None and phase in (Phase.READY, Phase.STREAMING):
                assert run.closed.is_set(), "stop() returned with its run still open"

        self.do(go())

    @rule()
    def restart(self) -> None:
        self.do(self.session.restart())

    @rule()
    def reset_session(self) -> None:
        if self.session.engine_session_id:
            self.forgotten.add(self.session.engine_session_id)
        self.do(self.session.reset_session())

    @rule(pause=PAUSES)
    def kill_run(self, pause: float) -> None:
        self._kill(self.session)
        self.do(asyncio.sleep(pause))

    @rule(
        first=st.sampled_from(["send", "stop", "restart", "reset", "kill", "submit_soon"]),
        second=st.sampled_from(["send", "stop", "restart", "reset", "kill", "submit_soon"]),
        text=TEXTS,
    )
    def race(self, first: str, second: str, text: str) -> None:
        """Two things at once: e.g. a stop while a send is still starting the engine."""
        self.do(self._race([first, second], text))

    @rule(text=TEXTS)
    def stop_as_a_send_arrives(self, text: str) -> None:
        """The user presses stop and sends at the same moment."""
        self.do(self._race(["stop", "send"], text))

    async def _race(self, ops: list[str], text: str) -> None:
        # The acceptance records exist first, so the ops themselves only touch the session.
        turns = {
            index: await self.new_turn(self.chat_thread, text)
            for index, name in enumerate(ops)
            if name in ("send", "submit_soon")
        }
        refused_while_stopping: list[uuid.UUID] = []

        async def op(index: int, name: str) -> None:
            if name == "send":
                self.chat_ids.extend(turns[index].accepted_ids)
                stopping = self.session.phase is Phase.STOPPING
                if await self.session.submit(turns[index]) and stopping:
                    refused_while_stopping.extend(turns[index].accepted_ids)
            elif name == "submit_soon":
                self.chat_ids.extend(turns[index].accepted_ids)
                self.session.submit_soon(turns[index])
            elif name == "stop":
                await self.session.stop()
            elif name == "restart":
                await self.session.restart()
            elif name == "reset":
                if self.session.engine_session_id:
                    self.forgotten.add(self.session.engine_session_id)
                await self.session.reset_session()
            elif name == "kill":
                self._kill(self.session)

        await asyncio.gather(*(op(index, name) for index, name in enumerate(ops)))
        # The stop was awaited: a send it refused (and the caller queued) is dropped with it,
        # never answered by a run the stop did not want.
        for accepted in refused_while_stopping:
            assert accepted in self.session.dropped, "a send refused while stopping was not dropped"

    @rule(seconds=st.sampled_from([0.005, 0.03, 0.1]))
    def settle(self, seconds: float) -> None:
        self.do(asyncio.sleep(seconds))

    def _kill(self, session: ChatSession | ChatThreadSession) -> None:
        run = session.run
        if isinstance(run, EchoRun) and run.process.returncode is None and run.pid not in self.killed:
            self.killed.add(run.pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(run.pid, signal.SIGKILL)

    # --- integration (pool) rules ------------------------------------------------------------

    @rule(which=st.integers(0, 1), text=TEXTS, pause=PAUSES)
    def pool_send(self, which: int, text: str, pause: float) -> None:
        thread = self.pool_threads[which]

        async def go() -> None:
            turn = await self.new_turn(thread, text)
            (accepted,) = turn.accepted_ids
            self.pool_expect[accepted] = (thread.id, "transcribed")
            task = asyncio.create_task(self.pool.send_to_thread(thread.id, turn))
            self.pool_tasks.append((task, thread.id, accepted))
            await asyncio.sleep(pause)

        self.do(go())

    @rule(order=st.lists(st.integers(0, 1), min_size=2, max_size=4), pause=PAUSES)
    def pool_burst(self, order: list[int], pause: float) -> None:
        """Messages for both integration threads arriving together: each parks the other."""

        async def go() -> None:
            threads = [self.pool_threads[which] for which in order]
            turns = [await self.new_turn(thread, "!slow 0.005\nburst") for thread in threads]
            for thread, turn in zip(threads, turns, strict=True):
                (accepted,) = turn.accepted_ids
                self.pool_expect[accepted] = (thread.id, "transcribed")
                task = asyncio.create_task(self.pool.send_to_thread(thread.id, turn))
                self.pool_tasks.append((task, thread.id, accepted))
            await asyncio.sleep(pause)

        self.do(go())

    @rule(text=TEXTS)
    def pool_send_while_busy(self, text: str) -> None:
        """A send straight to the active thread: refused with SessionBusy iff it is busy."""
        session = self.active_thread_session()
        if session is None:
            return

        async def go() -> None:
            if not session.is_busy():
                return
            turn = await self.new_turn(self.pool_thread(session.thread_id), text)
            (accepted,) = turn.accepted_ids
            if not session.is_busy():
                return
            self.pool_expect[accepted] = (session.thread_id, "refused")
            try:
                await session.send(turn)
            except SessionBusy:
                return
            raise AssertionError("a send to a busy thread session was not refused with SessionBusy")

        self.do(go())

    @rule(pause=PAUSES)
    def pool_kill_run(self, pause: float) -> None:
        session = self.active_thread_session()
        if session is not None:
            self._kill(session)
        self.do(asyncio.sleep(pause))

    @rule()
    def pool_wait(self) -> None:
        async def go() -> None:
            await self.settle_pool()
            await self.check_pool_accounting()

        self.do(go())

    def active_thread_session(self) -> ChatThreadSession | None:
        if self.pool.active_thread is None:
            return None
        return self.pool.thread_sessions[self.pool.active_thread]

    def pool_thread(self, thread_id: uuid.UUID) -> Any:
        return next(t for t in self.pool_threads if t.id == thread_id)

    # --- invariants ----------------------------------------------------------------------------

    @invariant()
    def nothing_went_wrong(self) -> None:
        self.do(asyncio.sleep(0))  # let callbacks the last step scheduled run
        self.check(
            "nothing_went_wrong",
            self.violations and f"violations: {self.violations}",
            self.errors.records and f"errors logged: {self.errors.records}",
            *(f"illegal phase move {a} -> {b}" for a, b in self.session.phase_log if not is_legal(a, b)),
        )

    @invariant()
    def at_most_one_run(self) -> None:
        s = self.session
        self.check(
            "at_most_one_run",
            s.runs_open != (0 if s.run is None else 1) and f"chat runs_open={s.runs_open} run={s.run}",
            self.pool.runs_open() > 1 and f"{self.pool.runs_open()} thread runs open",
            *(
                f"thread runs_open={t.runs_open} run={t.run}"
                for t in self.pool.thread_sessions.values()
                if t.runs_open != (0 if t.run is None else 1)
            ),
        )

    @invariant()
    def a_reset_conversation_never_comes_back(self) -> None:
        self.check(
            "a_reset_conversation_never_comes_back",
            self.session.engine_session_id in self.forgotten and "reset_session() did not forget",
        )

    @invariant()
    def parked_sessions_keep_their_conversation(self) -> None:
        for thread_id, session in self.pool.thread_sessions.items():
            known = self.engine_ids.setdefault(thread_id, session.engine_session_id or "")
            if not known and session.engine_session_id:
                self.engine_ids[thread_id] = session.engine_session_id
            self.check(
                "parked_sessions_keep_their_conversation",
                bool(known and session.engine_session_id != known)
                and "a thread session lost its engine conversation",
            )

    # --- teardown ------------------------------------------------------------------------------

    def teardown(self) -> None:
        run = self.loop.run_until_complete
        failure = self.failure
        try:
            if failure is None:
                run(self.settle_pool())
                run(self.check_pool_accounting())
                run(self.settle_chat())
                run(self.check_chat_accounting())
        except BaseException as exc:
            failure = exc
        try:
            run(self.session.stop())
            run(self.session.wait_idle(SETTLE_TIMEOUT))
            run(self.settle_pool())
            run(self.pool.close())
            run(self.settle_chat())
            if failure is None:
                run(self.check_chat_accounting())
                assert self.session.runs_open == 0 and self.pool.runs_open() == 0
            leaked = [r.pid for r in self.runs if r.process.returncode is None]
            for r in self.runs:
                if r.process.returncode is None:
                    r.process.kill()
                    run(r.process.wait())
            assert failure is not None or not leaked, f"engine processes outlived stop()/close(): {leaked}"
        except BaseException as exc:
            failure = failure or exc
        finally:
            for task in asyncio.all_tasks(self.loop):
                task.cancel()
            with contextlib.suppress(BaseException):
                run(asyncio.sleep(0.01))
            gc.collect()  # a task whose exception nobody retrieved reports it now
            self.loop.close()
            logging.getLogger("sessions_app").removeHandler(self.errors)
        if failure is not None:
            raise failure
        assert not self.violations, self.violations
        assert not self.errors.records, self.errors.records


def bound_machine(make_thread: Any, state_dir: str) -> type[RuntimeMachine]:
    return type(
        "BoundRuntimeMachine",
        (RuntimeMachine,),
        {"make_thread": staticmethod(make_thread), "state_dir": state_dir},
    )


def test_random_lifecycles_keep_the_runtime_invariants(make_thread, echo):
    run_state_machine_as_test(
        bound_machine(make_thread, str(echo.state_dir)),
        settings=settings(
            max_examples=int(os.environ.get("RUNTIME_SM_EXAMPLES", "30")),
            stateful_step_count=int(os.environ.get("RUNTIME_SM_STEPS", "15")),
            deadline=None,
            derandomize=os.environ.get("RUNTIME_SM_RANDOM") != "1",
            database=None,
            suppress_health_check=list(HealthCheck),
            phases=PHASES,
        ),
    )
