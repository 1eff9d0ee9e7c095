"""How many times one turn leaves the event loop for a worker thread, from the send to
``task_end``: a test that fails if a hop is added.

Each hop (asgiref's ``sync_to_async`` / ``database_sync_to_async``, ``asyncio.to_thread``,
``run_in_executor``) costs a thread switch each way and a queue wait behind other sessions'
calls (issue 22: 8.5% of the server's time under load). Steady state (the thread exists):

- hooks-API app (one ``Message.send()`` per message): 2: the send accepted with its turn
  claimed and its user step written (``hook_sends._accept_claiming``), then the reply written
  with the outcome and the claim's release (``turns._release``); 4 before issue 22 item 2.
- engine runtime: 3: the send accepted with the thread's box read, the user step (which also
  records the ``queued`` answer), the reply written with the sends' outcome (one statement,
  ``services.write_answering_step``; the assistant step and the settle were two hops); 6
  before issue 22.

The counts are the same on SQLite and PostgreSQL (a call runs on one thread or on the pool,
but it is one hop either way), and pinned exactly: a change in either direction updates them
here, with the reason.
"""

import pytest

from tests.sessions_app.test_statement_counts import engine_sock, one_turn, sock  # noqa: F401 - fixtures
from tests.support.thread_hops import counting_thread_hops

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_hooks_api_turn(sock):  # noqa: F811 - the fixture
    await one_turn(sock, "first", 1)  # creates the thread
    with counting_thread_hops() as hops:
        await one_turn(sock, "second", 2)
    assert len(hops) == 2, f"{len(hops)}:\n" + "\n".join(hops.names)


async def test_an_engine_runtime_turn(engine_sock):  # noqa: F811 - the fixture
    await one_turn(engine_sock, "first", 1)
    with counting_thread_hops() as hops:
        await one_turn(engine_sock, "second", 2)
    assert len(hops) == 3, f"{len(hops)}:\n" + "\n".join(hops.names)
