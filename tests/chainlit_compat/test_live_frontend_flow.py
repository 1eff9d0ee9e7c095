"""Chainlit's frontend's calls against a real daphne, in its order: the login page (auth
config, the login form), the user, the sticky-cookie call, the socket at ``<prefix>/ws/socket.io``
with Chainlit's auth payload and default transports (polling, then the upgrade), a message, a
click over HTTP, the sidebar's thread list, a thread's read, an upload and its preview,
feedback, logout. Every request carries what a browser's fetch carries: the cookies its login
set and its Origin, no CSRF token."""

import uuid
from typing import Any

import aiohttp
import pytest
from django.conf import settings

from tests.media_app.photos import photo
from tests.support.client import ChatClient

pytestmark = pytest.mark.django_db(transaction=True)

P = settings.CHAINLIT_PATH_PREFIX


@pytest.fixture(scope="module")
def asks_server(server_factory):
    return server_factory.start(CHAT_APP="tests.apps.asks_app")


def cookie_header(http: aiohttp.ClientSession) -> str:
    return "; ".join(f"{c.key}={c.value}" for c in http.cookie_jar)


async def call(http: aiohttp.ClientSession, method: str, url: str, **kwargs: Any) -> tuple[int, Any]:
    async with http.request(method, url, **kwargs) as response:
        body = await response.json() if response.content_type == "application/json" else await response.read()
        return response.status, body


async def test_chainlits_frontend_calls_from_login_to_logout(asks_server: Any, make_user: Any) -> None:
    user = make_user()
    base = f"{asks_server.url}{P}"
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar, headers={"Origin": asks_server.url}) as http:
        status, config = await call(http, "GET", f"{base}/auth/config")
        assert status == 200 and config["requireLogin"] and config["passwordAuth"], config
        assert (await call(http, "GET", f"{base}/user"))[0] == 401

        form = aiohttp.FormData(
            {"username": user.username, "password": user.raw_password}, default_to_multipart=True
        )
        assert await call(http, "POST", f"{base}/login", data=form) == (200, {"success": True})
        status, me = await call(http, "GET", f"{base}/user")
        assert status == 200 and me["identifier"] == user.username, me

        session_id = str(uuid.uuid4())
        assert await call(http, "POST", f"{base}/set-session-cookie", json={"session_id": session_id}) == (
            200,
            {"message": "Session cookie set"},
        )
        status, project = await call(http, "GET", f"{base}/project/settings", params={"language": "en-US"})
        assert status == 200 and "features" in project, project

        # The socket as Chainlit's frontend opens it: under its root, the login's cookie, its
        # auth payload, python-socketio's default transports (long-polling, then the upgrade).
        tab = ChatClient(
            asks_server.url,
            cookie_header(http),
            session_id=session_id,
            transports=None,
            socketio_path=f"{P}/ws/socket.io",
        )
        await tab.start(headers={"Origin": asks_server.url}, threadId="", chatProfile="")
        try:
            thread_id = str((await tab.send("buttons"))["threadId"])
            await tab.wait_text("Pick a colour", timeout=20)
            message = next(m for m in tab.named("new_message") if m["output"] == "Pick a colour")
            red = message["metadata"]["actions"][0]

            status, clicked = await call(
                http, "POST", f"{base}/project/action", json={"sessionId": session_id, "action": red}
            )
            assert (status, clicked) == (200, {"success": True, "response": None}), clicked
            await tab.wait_text("Colour: red", timeout=20)

            status, listed = await call(
                http,
                "POST",
                f"{base}/project/threads",
                json={"pagination": {"first": 20, "cursor": None}, "filter": {"search": None}},
            )
            assert status == 200, listed
            assert [t["id"] for t in listed["data"]] == [thread_id]
            assert listed["pageInfo"] == {
                "hasNextPage": False,
                "startCursor": thread_id,
                "endCursor": thread_id,
            }

            status, thread = await call(http, "GET", f"{base}/project/thread/{thread_id}")
            assert status == 200, thread
            outputs = [s["output"] for s in thread["steps"]]
            assert "Pick a colour" in outputs and "Colour: red" in outputs, outputs

            form = aiohttp.FormData()
            data = photo()
            form.add_field("file", data, filename="cat.jpg", content_type="image/jpeg")
            status, uploaded = await call(
                http, "POST", f"{base}/project/file?session_id={session_id}", data=form
            )
            assert status == 200, uploaded
            status, read = await call(
                http, "GET", f"{base}/project/file/{uploaded['id']}?session_id={session_id}"
            )
            assert status == 200 and read == data

            answer = next(s for s in thread["steps"] if s["output"] == "Colour: red")
            status, given = await call(
                http,
                "PUT",
                f"{base}/feedback",
                json={
                    "feedback": {"forId": answer["id"], "value": 1, "comment": None},
                    "sessionId": session_id,
                },
            )
            assert status == 200 and given["success"], given

            status, renamed = await call(
                http, "PUT", f"{base}/project/thread", json={"threadId": thread_id, "name": "colours"}
            )
            assert (status, renamed) == (200, {"success": True})
        finally:
            await tab.disconnect()

        assert await call(http, "POST", f"{base}/logout", json={}) == (200, {"success": True})
        assert (await call(http, "GET", f"{base}/user"))[0] == 401


async def test_another_sites_page_is_refused_though_the_cookie_rides_along(
    asks_server: Any, make_user: Any
) -> None:
    user = make_user()
    base = f"{asks_server.url}{P}"
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        form = aiohttp.FormData({"username": user.username, "password": user.raw_password})
        assert (await call(http, "POST", f"{base}/login", data=form))[0] == 200
        evil = {"Origin": "http://evil.example"}
        body = {"pagination": {"first": 20}, "filter": {}}
        assert (await call(http, "POST", f"{base}/project/threads", json=body, headers=evil))[0] == 403
        assert (await call(http, "POST", f"{base}/logout", json={}, headers=evil))[0] == 403
        assert (await call(http, "GET", f"{base}/user"))[0] == 200
