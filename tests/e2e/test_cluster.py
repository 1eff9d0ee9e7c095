"""``make cluster`` for real: two daphne processes behind nginx (chatproject/cluster.py, with
the rendered chatproject/nginx/tether.conf), on the test database and Redis.

Clients reach Tether only through the proxy, which balances without sticky sessions: health
and readiness answer, a browser signs in and chats (the Host reaches Django as the browser
sent it, so the login form's and the socket's Origin checks see the page's own origin),
sockets land on both processes and chat with the default engine app (long-polling and
upgrading clients too), a session whose socket
moves to the other process is restored, a draining process is not ready and new sockets go
around it, and SIGTERM to the supervisor drains everything and leaves nothing running. Which
process holds a socket is read from the session record (``socket_owner``) and the liveness
rows (``ServerProcess.pid``). Skipped without PostgreSQL and Redis, and without nginx outside
CI (tests/support/nginx.py).
"""

import asyncio
import functools
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from chatproject.cluster import Cluster, Daphne, probe
from chatproject.servers import SERVER_MODULES, SERVERS
from sessions_app.models import ServerProcess, SocketSession
from tests.e2e.test_web_ui import _page_opener
from tests.support.client import ChatClient, user_cookie
from tests.support.hook_log import hook_calls
from tests.support.metrics import scrape
from tests.support.nginx import require_nginx
from tests.support.server import ROOT, database_env, free_port
from tests.support.waiting import wait_until
from threads_app.models import Thread

pytestmark = [
    pytest.mark.two_process,  # skipped without PostgreSQL and Redis (tests/conftest.py)
    pytest.mark.django_db(transaction=True),
]

TABS = 4


def free_ports(count: int) -> list[int]:
    ports: set[int] = set()
    while len(ports) < count:
        ports.add(free_port())
    return sorted(ports)


def cluster_env(workdir: Path, **extra: str) -> dict[str, str]:
    """What every daphne of a test cluster gets on top of the test run's environment: the test
    database, the test run's key (the login cookies are signed with it), and short timings."""
    return {
        **database_env(),
        "DJANGO_SETTINGS_MODULE": "chatproject.settings",
        "SECRET_KEY": settings.SECRET_KEY,
        "PYTHONPATH": str(ROOT),
        "ECHO_STATE_DIR": str(workdir / "echo"),
        "SHUTDOWN_GRACE": "8",
        "LOG_LEVEL": "INFO",
        **extra,
    }


def start_cluster(workdir: Path, server: str | None = None, **env: str) -> Cluster:
    require_nginx()
    port, *backends = free_ports(3)
    cluster = Cluster(
        port=port, backend_ports=backends, workdir=workdir, env=cluster_env(workdir, **env), server=server
    )
    return cluster.start()


@pytest.fixture(scope="module", params=SERVERS)
def engine_cluster(request, server_factory, tmp_path_factory) -> Iterator[Cluster]:
    """The default app: every message goes to the echo engine of the user's box; the module
    runs once with daphne processes behind nginx, once with uvicorn ones."""
    cluster = start_cluster(
        tmp_path_factory.mktemp("engine-cluster"), server=request.param, CHAT_APP="sessions_app.default_app"
    )
    yield cluster
    cluster.stop()


@sync_to_async
def socket_pids(session_ids: list[str]) -> dict[str, int | None]:
    """The pid of the process holding each session's socket, from the database."""
    owners = dict(SocketSession.objects.filter(id__in=session_ids).values_list("id", "socket_owner"))
    pids = dict(ServerProcess.objects.filter(address__in=owners.values()).values_list("address", "pid"))
    return {str(session): pids.get(owner) for session, owner in owners.items()}


async def socket_pid(tab: ChatClient) -> int | None:
    return (await socket_pids([tab.session_id]))[tab.session_id]


async def move_to_the_other_process(tab: ChatClient) -> tuple[int | None, int | None]:
    """Drop the socket and connect again with the same sessionId through the proxy, until the
    proxy puts it on the other process; (old pid, new pid)."""
    before = await socket_pid(tab)
    for _ in range(10):
        await tab.disconnect()
        tab.events.clear()
        await tab.start()
        after = await socket_pid(tab)
        if after != before:
            return before, after
    raise AssertionError("ten reconnects through the proxy all landed on the same process")


def has_reply(text: str) -> Any:
    return lambda client: text in client.replies()


async def test_health_and_readiness_through_the_proxy(engine_cluster):
    async with aiohttp.ClientSession() as http:
        for base in [engine_cluster.url] + [d.url for d in engine_cluster.daphnes]:
            async with http.get(f"{base}/healthz") as alive:
                assert alive.status == 200
                assert await alive.json() == {"status": "ok"}
                assert "Set-Cookie" not in alive.headers
            async with http.get(f"{base}/readyz") as ready:
                assert ready.status == 200
                assert await ready.json() == {"status": "ready", "checks": {"database": "ok", "redis": "ok"}}
                assert "Set-Cookie" not in ready.headers
        async with http.get(f"{engine_cluster.url}/healthz") as through_proxy:
            assert through_proxy.headers["Server"].startswith("nginx")


async def test_a_browser_signs_in_through_the_proxy(engine_cluster, make_user):
    """A browser sends Origin with the login form; Django's CSRF check compares it with the
    Host the proxy passed on, which must be the browser's own, port included."""
    user = make_user()
    origin = engine_cluster.url
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        async with http.get(f"{origin}/accounts/login/") as page:
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', await page.text())
        assert csrf
        async with http.post(
            f"{origin}/accounts/login/",
            data={"username": user.username, "password": user.raw_password, "csrfmiddlewaretoken": csrf[1]},
            headers={"Origin": origin, "Referer": f"{origin}/accounts/login/"},
            allow_redirects=False,
        ) as login:
            assert login.status == 302, await login.text()
        async with http.get(f"{origin}/", allow_redirects=False) as chat_page:
            assert chat_page.status == 200


async def test_the_socket_origin_check_sees_the_browsers_host_through_the_proxy(engine_cluster, make_user):
    """The proxy passes the browser's Host (port included) and scheme on, so a page of the
    proxy's own origin opens a socket on either process, and a page on another port of the
    host is refused: 403 from each process the proxy tries, then 403 to the browser."""
    cookie = await user_cookie(engine_cluster.url, make_user())
    url = engine_cluster.url.replace("http://", "ws://", 1) + "/ws/socket.io/?EIO=4&transport=websocket"
    async with aiohttp.ClientSession() as http:
        for _ in range(TABS):  # least_conn spreads them over both processes
            async with http.ws_connect(url, origin=engine_cluster.url, headers={"Cookie": cookie}) as ours:
                assert (await ours.receive_str(timeout=10)).startswith("0{")
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(url, origin=f"http://127.0.0.1:{free_port()}", headers={"Cookie": cookie})
        assert refused.value.status == 403


@pytest.mark.browser
async def test_the_chat_page_connects_and_chats_through_the_proxy(engine_cluster, browser, make_user):
    """Chromium on the proxy's address: its socket's Origin is the page's, which the process
    behind the proxy must see as its own."""
    async for open_page in _page_opener(browser, engine_cluster.url):
        chat = await open_page()
        await chat.sign_in(make_user())  # waits for the socket to connect
        await chat.send("through nginx")
        await chat.wait_reply("Echo #1: through nginx")
        await chat.assert_clean()


async def test_body_limits_through_the_proxy(engine_cluster):
    """A body within an endpoint's budget reaches Tether (nginx buffers it under the work
    directory), one just over it gets Tether's own 413, one far over it nginx's, unread."""
    upload = f"{engine_cluster.url}/api/uploads/"
    headers = {"Authorization": "Token not-a-token", "Content-Type": "application/octet-stream"}
    async with aiohttp.ClientSession() as http:
        async with http.post(upload, data=b"x" * 3_000_000, headers=headers) as within:
            assert within.status == 401  # Tether read it and wants a real token
        async with http.post(upload, data=b"x" * 10_300_000, headers=headers) as just_over:
            assert just_over.status == 413
            assert (await just_over.json())["detail"].startswith("The request body is over 10.1 MB")
        async with http.post(upload, data=b"x" * 12_000_000, headers=headers, expect100=True) as far_over:
            assert far_over.status == 413
            assert await far_over.json() == {"detail": "The request body is too large for this server."}
        async with http.post(
            f"{engine_cluster.url}/api/threads/", data=b"x" * 2_000_000, headers=headers, expect100=True
        ) as api:
            assert api.status == 413  # 1 MB for everything else
            assert await api.json() == {"detail": "The request body is too large for this server."}


async def login_from(address: str, base_url: str, username: str, password: str) -> int:
    """Sign in from the loopback ``address`` (the proxy sees it as the client); the status."""
    connector = aiohttp.TCPConnector(local_addr=(address, 0))
    async with aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        async with http.get(f"{base_url}/accounts/login/") as page:
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', await page.text())
        assert csrf
        async with http.post(
            f"{base_url}/accounts/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": csrf[1]},
            allow_redirects=False,
        ) as login:
            return login.status


async def test_the_lockout_keys_on_the_client_address_the_proxy_forwards(engine_cluster, make_user):
    """Every request reaches the processes from the proxy; X-Forwarded-For (PROXY_COUNT=1)
    tells them who sent it, so wrong passwords from one client lock out that client only."""
    victim = make_user()
    url = engine_cluster.url
    guesses = [await login_from("127.0.0.2", url, victim.username, f"guess-{i}") for i in range(6)]
    assert guesses[-1] == 429
    assert await login_from("127.0.0.2", url, victim.username, victim.raw_password) == 429
    assert await login_from("127.0.0.1", url, victim.username, victim.raw_password) == 302


async def chat_on_each(tabs: list[ChatClient], word: str) -> None:
    """Start every tab, send ``<word> <i>`` from tab i, and wait for each one's echo."""
    for tab in tabs:
        await tab.start()
    for i, tab in enumerate(tabs):
        await tab.send(f"{word} {i}")
    for i, tab in enumerate(tabs):
        await tab.wait_for(has_reply(f"Echo #1: {word} {i}"), timeout=30)


async def test_sockets_land_on_both_processes_and_chat(engine_cluster, make_user):
    cookie = await user_cookie(engine_cluster.url, make_user())
    tabs = [ChatClient(engine_cluster.url, cookie) for _ in range(TABS)]
    try:
        await chat_on_each(tabs, "hello")
        pids = await socket_pids([tab.session_id for tab in tabs])
        assert set(pids.values()) == {d.pid for d in engine_cluster.daphnes}
    finally:
        for tab in tabs:
            await tab.disconnect()


async def test_metrics_through_the_proxy_report_both_processes(engine_cluster, make_user):
    """Any process answers /metrics for both (the cluster's shared PROMETHEUS_MULTIPROC_DIR)."""
    before = await asyncio.to_thread(scrape, engine_cluster.url)
    cookie = await user_cookie(engine_cluster.url, make_user())
    tabs = [ChatClient(engine_cluster.url, cookie) for _ in range(TABS)]
    try:
        await chat_on_each(tabs, "counted")
        pids = await socket_pids([tab.session_id for tab in tabs])
        expected = Counter(str(pid) for pid in pids.values())

        def sockets(url: str) -> Counter[str]:
            both = scrape(url)
            return Counter(
                {labels["pid"]: int(n) for labels, n in both.series("tether_sockets_connected") if n}
            )

        # Each process's own port, and nginx's, say the same (earlier tests' sockets may still
        # be closing: a moment is allowed).
        for url in (engine_cluster.url, *(daphne.url for daphne in engine_cluster.daphnes)):
            try:
                await wait_until(functools.partial(lambda u: sockets(u) == expected, url), timeout=10)
            except TimeoutError:
                raise AssertionError((url, expected, scrape(url).text)) from None
        after = await asyncio.to_thread(scrape, engine_cluster.url)
        replied = {"kind": "engine", "outcome": "replied"}
        moved = after.value("tether_turns_total", **replied) - before.value("tether_turns_total", **replied)
        assert moved == TABS, after.text
        ends = after.value("tether_accept_to_task_end_seconds_count", kind="engine")
        assert ends - before.value("tether_accept_to_task_end_seconds_count", kind="engine") == TABS
    finally:
        for tab in tabs:
            await tab.disconnect()


async def test_polling_and_upgrading_clients_chat_through_the_proxy(engine_cluster, make_user):
    """Long-polling through nginx as configured (least_conn, no stickiness): each tab's
    requests land on either process, and the chat goes on; a default client upgrades."""
    cookie = await user_cookie(engine_cluster.url, make_user())
    tabs = [ChatClient(engine_cluster.url, cookie, transports=("polling",)) for _ in range(TABS)]
    upgrading = ChatClient(engine_cluster.url, cookie, transports=None)
    try:
        for tab in [*tabs, upgrading]:
            await tab.start()
        for i, tab in enumerate([*tabs, upgrading]):
            await tab.send(f"polled {i}")
        for i, tab in enumerate([*tabs, upgrading]):
            await tab.wait_for(has_reply(f"Echo #1: polled {i}"), timeout=30)
        assert upgrading.sio is not None and upgrading.sio.transport() == "websocket"
        assert all(tab.sio is not None and tab.sio.transport() == "polling" for tab in tabs)
        pids = await socket_pids([tab.session_id for tab in tabs])
        assert all(pid in {d.pid for d in engine_cluster.daphnes} for pid in pids.values()), pids
    finally:
        for tab in [*tabs, upgrading]:
            await tab.disconnect()


async def test_a_session_moved_to_the_other_process_is_restored(engine_cluster, make_user):
    tab = ChatClient(engine_cluster.url, await user_cookie(engine_cluster.url, make_user()))
    try:
        await tab.start()
        first = await tab.send("first")
        await tab.wait_for(has_reply("Echo #1: first"), timeout=30)

        old, new = await move_to_the_other_process(tab)

        assert {old, new} == {d.pid for d in engine_cluster.daphnes}
        await tab.wait_event("task_end")
        second = await tab.send("second")
        assert second["threadId"] == first["threadId"]
        # The same thread and engine conversation: its second turn.
        await tab.wait_for(has_reply("Echo #2: second"), timeout=30)
        # Restored, not started or resumed again.
        assert tab.named("first_interaction") == [] and tab.named("resume_thread") == []
    finally:
        await tab.disconnect()


async def test_a_moved_hooks_session_starts_once(server_factory, tmp_path, make_user):
    """The same with the hooks API, whose calls are logged: one on_chat_start, no resume, and
    the message after the move answered on the new process."""
    hook_log = tmp_path / "hooks.jsonl"
    cluster = await asyncio.to_thread(
        start_cluster, tmp_path / "cluster", CHAT_APP="tests.apps.lifecycle_app", HOOK_LOG=str(hook_log)
    )
    tab = ChatClient(cluster.url, await user_cookie(cluster.url, make_user()))
    try:
        await tab.start()
        await tab.wait_text("greeting")
        await tab.send("before")
        await tab.wait_text("echo: before")

        old, new = await move_to_the_other_process(tab)
        await tab.send("after")
        await tab.wait_text("echo: after")

        session = tab.session_id
        assert [c["pid"] for c in hook_calls(hook_log, session, "on_chat_start")] == [old]
        assert hook_calls(hook_log, session, "on_chat_resume") == []
        assert [(c["content"], c["pid"]) for c in hook_calls(hook_log, session, "on_message")] == [
            ("before", old),
            ("after", new),
        ]
        assert "greeting" not in tab.texts()
    finally:
        await tab.disconnect()
        await asyncio.to_thread(cluster.stop)


@sync_to_async
def thread_owner_pid(thread_id: str) -> int:
    owner = Thread.objects.get(pk=thread_id).runtime_owner
    return ServerProcess.objects.get(address=owner).pid


async def test_a_draining_process_is_not_ready_and_new_sockets_go_around_it(engine_cluster, make_user):
    user = make_user()
    cookie = await user_cookie(engine_cluster.url, user)
    tab = ChatClient(engine_cluster.url, cookie)
    newcomers = [ChatClient(engine_cluster.url, cookie) for _ in range(TABS)]
    try:
        await tab.start()
        sent = await tab.send("!slow 0.2\n" + " ".join(f"w{i}" for i in range(25)))  # about 5 s
        await tab.wait_event("stream_token")
        owner = await thread_owner_pid(sent["threadId"])
        (draining,) = [d for d in engine_cluster.daphnes if d.pid == owner]
        (other,) = [d for d in engine_cluster.daphnes if d is not draining]

        os.kill(owner, signal.SIGTERM)  # drains while the turn runs (SHUTDOWN_GRACE 8 s)

        await wait_until(lambda: probe(f"{draining.url}/readyz", engine_cluster.host_header)[0] == 503)
        status, body = probe(f"{draining.url}/readyz", engine_cluster.host_header)
        assert status == 503
        assert json.loads(body) == {"status": "draining", "checks": {}, "failed": ["shutdown"]}
        assert probe(f"{draining.url}/healthz", engine_cluster.host_header)[0] == 200
        # It refuses new sockets (403), and the proxy hands each to the other process.
        for newcomer in newcomers:
            await newcomer.start()
        assert set((await socket_pids([n.session_id for n in newcomers])).values()) == {other.pid}
        assert draining.alive()  # all of that happened while it drained
    finally:
        for client in [tab, *newcomers]:
            await client.disconnect()
    await restart_after_drain(engine_cluster, draining)


async def restart_after_drain(cluster: Cluster, daphne: Daphne) -> None:
    """Wait for the drained process to exit, and start it again as the supervisor would."""
    assert daphne.process is not None
    assert await asyncio.to_thread(daphne.process.wait, 30) == 0
    assert [d for d, _code in cluster.restart_exited()] == [daphne]
    await asyncio.to_thread(cluster.wait_ready, daphne)


# --- the supervisor -------------------------------------------------------------------------------


def children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = defaultdict(list)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children[int(fields[1])].append(int(stat.parent.name))
    return children


def descendants(pid: int) -> dict[int, str]:
    """Every process below ``pid``, with its command line."""
    tree, found, todo = children_by_parent(), {}, [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            try:
                found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            todo.append(child)
    return found


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in {"Z", "X"}


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def read_until(process: "subprocess.Popen[bytes]", marker: bytes, timeout: float) -> bytes:
    """What ``process`` printed up to and including ``marker``; fails if it exits or is slow."""
    assert process.stdout is not None
    fd, output = process.stdout.fileno(), b""
    deadline = time.monotonic() + timeout
    while marker not in output:
        left = deadline - time.monotonic()
        assert left > 0, f"not printed in time: {marker!r}\n{output.decode()}"
        if select.select([fd], [], [], min(left, 0.5))[0]:
            chunk = os.read(fd, 65536)
            assert chunk, f"exited with {process.wait()} before printing {marker!r}:\n{output.decode()}"
            output += chunk
    return output


@pytest.mark.parametrize("server", SERVERS)
def test_sigterm_to_the_supervisor_drains_its_processes_and_stops_nginx(server_factory, tmp_path, server):
    """``python -m chatproject.cluster`` (what `make cluster` runs) as a supervisor gets it."""
    require_nginx()
    port, *backends = free_ports(3)
    supervisor = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chatproject.cluster",
            "--port",
            str(port),
            "--backend-ports",
            ",".join(map(str, backends)),
            "--workdir",
            str(tmp_path / "cluster"),
            "--server",
            server,
        ],
        cwd=ROOT,
        env={**os.environ, **cluster_env(tmp_path, CHAT_APP="sessions_app.default_app")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    family: dict[int, str] = {}
    output = b""
    try:
        output = read_until(supervisor, b"Ctrl-C (or SIGTERM) drains", timeout=60)
        assert probe(f"http://127.0.0.1:{port}/readyz", f"127.0.0.1:{port}")[0] == 200
        family = descendants(supervisor.pid)
        commands = sorted(family.values())
        assert sum(f"-m {SERVER_MODULES[server]} " in c for c in commands) == 2, commands
        assert sum("nginx: master process" in c for c in commands) == 1, commands
        assert any("nginx: worker process" in c for c in commands), commands

        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(60) == 0
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()
        for pid in family:
            if running(pid):
                os.kill(pid, signal.SIGKILL)
    assert supervisor.stdout is not None
    text = (output + supervisor.stdout.read()).decode()
    assert f"2 {server} processes behind nginx" in text and text.endswith("stopped\n"), text
    assert [pid for pid in family if running(pid)] == []
    for backend in backends:  # drained (sessions_app.shutdown), not killed
        assert "shutdown complete" in (tmp_path / "cluster" / f"{server}-{backend}.log").read_text()
    assert [p for p in (port, *backends) if listening(p)] == []
