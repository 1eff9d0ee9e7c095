"""socket.io-client 4.8 in node, with its default options (long-polling first, then the
upgrade to WebSocket), against a real daphne server, for both kinds of app. Its packages
are installed from ``node_client/package-lock.json`` (``npm ci``) the first time."""

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.client import user_cookie

pytestmark = pytest.mark.django_db(transaction=True)

CLIENT = Path(__file__).resolve().parent / "node_client"


@pytest.fixture(scope="module")
def node() -> str:
    node = shutil.which("node")
    npm = shutil.which("npm")
    if node is None or npm is None:
        if os.environ.get("CI"):
            pytest.fail("node and npm are missing (Debian's nodejs and npm packages)")
        pytest.skip("node is not installed")
    if not (CLIENT / "node_modules" / "socket.io-client").is_dir():
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=CLIENT, check=True, timeout=300, capture_output=True
        )
    return node


@pytest.fixture(params=["hooks", "engine"])
def app_server(request, server, engine_server):
    return server if request.param == "hooks" else engine_server


async def test_socket_io_client_with_defaults_polls_upgrades_and_chats(node, app_server, make_user):
    cookie = await user_cookie(app_server.url, make_user())
    process = await asyncio.create_subprocess_exec(
        node,
        str(CLIENT / "chat.mjs"),
        app_server.url,
        cookie,
        "hello from node",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, (out.decode(), err.decode())
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result["transports"] == ["polling", "websocket"], result
    assert "error" not in json.dumps(result["ack"]), result
    replies = [r for r in result["replies"].values() if r.endswith("hello from node")]
    assert len(replies) == 1, result
