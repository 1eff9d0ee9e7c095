"""Chainlit's own client, ``@chainlit/react-client`` from npm, against a live Tether of each
app kind: its state logic (the package's message functions, applied as its
``useChatSession`` applies them; ``tests/support/chainlit_react_client.cjs``) holds the user's
message once, under the id it chose, and the streamed reply's text while it streams (its
tokens land in ``output``, not in a ``content`` key), with no ``error`` and no favorites."""

import asyncio
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.client import user_cookie

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

# The release on npm (Chainlit 2.x's client); pinned, so a new release is a deliberate update.
REACT_CLIENT = "@chainlit/react-client@0.3.0"
DRIVER = Path(__file__).resolve().parents[1] / "support" / "chainlit_react_client.cjs"
# What each app streams for the text "stream 3" (see test_chainlit_client_fidelity).
STREAMED = {"hooks": "t0 t1 t2", "engine": "Echo #1: stream 3"}


@pytest.fixture(scope="module")
def client_dir(tmp_path_factory) -> Path:
    """An npm install of the client (and its peers, react and recoil, which it imports)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        if os.environ.get("CI"):
            pytest.fail("node and npm are missing (Debian's nodejs and npm packages)")
        pytest.skip("node or npm is not installed")
    where: Path = tmp_path_factory.mktemp("react-client")
    (where / "package.json").write_text('{"private": true}')
    installed = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", REACT_CLIENT],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if installed.returncode != 0:
        pytest.skip(f"npm could not install {REACT_CLIENT}: {installed.stderr[-2000:]}")
    return where


@pytest.fixture(params=["hooks", "engine"])
def app(request: pytest.FixtureRequest) -> tuple[str, Any]:
    return request.param, request.getfixturevalue("server" if request.param == "hooks" else "engine_server")


async def test_chainlits_client_holds_the_message_once_and_the_reply_as_it_streams(
    app, client_dir, make_user
):
    kind, server = app
    cookie = await user_cookie(server.url, make_user())
    node = await asyncio.create_subprocess_exec(
        "node",
        str(DRIVER),
        env={
            **os.environ,
            "TETHER_URL": server.url,
            "TETHER_COOKIE": cookie,
            "TEXT": "stream 3",
            "CLIENT_DIR": str(client_dir),
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(node.communicate(), 120)
    stdout, stderr = out.decode(), err.decode()
    assert node.returncode == 0, (node.returncode, stdout[-4000:], stderr[-4000:])
    held = json.loads(stdout)
    messages = held["messages"]
    users = [m for m in messages if m["type"] == "user_message"]
    assert [(m["id"], m["output"]) for m in users] == [(held["sentId"], "stream 3")], messages
    assert uuid.UUID(users[0]["threadId"]), users  # the server's copy merged into the client's
    (reply,) = [
        m for m in messages if m["type"] == "assistant_message" and m["output"].strip() == STREAMED[kind]
    ]
    # Just before its final update, the client already showed the streamed text.
    streamed = held["beforeUpdate"][reply["id"]]
    assert streamed["output"].strip() == STREAMED[kind] and "content" not in streamed, streamed
    assert held["errors"] == [] and held["toasts"] == [], held
    assert held["favorites"] == [[]], held
