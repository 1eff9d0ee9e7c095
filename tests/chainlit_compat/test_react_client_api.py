"""Chainlit's own HTTP client, ``ChainlitAPI`` of ``@chainlit/react-client`` from npm, against
Chainlit's API on a live Tether (``tests/support/chainlit_api_client.cjs``): every call it
makes answers as Chainlit's server would, its socket opens where the client opens it, under
the API's path, with its default transports."""

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.sessions_app.test_chainlit_react_client import client_dir  # noqa: F401  # the npm install

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

DRIVER = Path(__file__).resolve().parents[1] / "support" / "chainlit_api_client.cjs"


@pytest.fixture(scope="module")
def asks_server(server_factory):
    return server_factory.start(CHAT_APP="tests.apps.asks_app")


async def test_chainlits_api_client_from_login_to_logout(
    asks_server: Any,
    client_dir: Path,  # noqa: F811  # the fixture imported above
    make_user: Any,
) -> None:
    user = make_user()
    node = await asyncio.create_subprocess_exec(
        "node",
        str(DRIVER),
        env={
            **os.environ,
            "TETHER_URL": asks_server.url,
            "PREFIX": settings.CHAINLIT_PATH_PREFIX,
            "USERNAME": user.username,
            "PASSWORD": user.raw_password,
            "CLIENT_DIR": str(client_dir),
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(node.communicate(), 120)
    stdout, stderr = out.decode(), err.decode()
    assert node.returncode == 0, (node.returncode, stdout[-4000:], stderr[-4000:])
    got = json.loads(stdout)
    assert got["errors"] == [], got
    assert got["userBefore"] == 401 and got["login"] == {"success": True}, got
    assert got["user"]["identifier"] == user.username, got
    assert got["sticky"] == {"message": "Session cookie set"}
    assert got["transport"] == "websocket", got  # long-polling first, then the upgrade
    assert got["action"] == {"success": True, "response": None}
    assert "Colour: red" in got["texts"], got
    [listed] = got["threads"]["data"]
    assert got["threads"]["pageInfo"] == {
        "hasNextPage": False,
        "startCursor": listed["id"],
        "endCursor": listed["id"],
    }
    assert got["renamed"] == {"success": True}
    assert [t["name"] for t in got["threadsAfterRename"]["data"]] == ["colours"]
    assert got["feedback"]["success"] is True and got["feedbackDeleted"] == {"success": True}
    assert got["deleted"] == {"success": True} and got["threadsAfterDelete"]["data"] == []
    assert got["logout"] == {"success": True} and got["userAfter"] == 401, got
