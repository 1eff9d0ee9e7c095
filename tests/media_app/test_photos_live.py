"""Photos end to end on a live server: upload over HTTP, name the upload in the socket's
client_message (or send base64 in POST /api/chat/send), the echo engine acknowledges it, the
user step keeps it inline, and every read afterwards (the live new_message, resume_thread,
history, bootstrap) carries references that resolve to the very same bytes."""

import asyncio
import base64
import json
import uuid
from typing import Any

import aiohttp
import pytest
from asgiref.sync import sync_to_async

from tests.media_app.photos import assert_no_payload, b64, image_refs, photo
from tests.support.client import ChatClient, api_token, signed_in, user_cookie
from threads_app.models import AcceptedMessage, Step

pytestmark = pytest.mark.django_db(transaction=True)


async def http(server, token: str, method: str, path: str, **kwargs):
    """(status, headers, body bytes) of one request with the user's API token."""
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Token {token}"}) as session,
        session.request(method, f"{server.url}{path}", **kwargs) as response,
    ):
        return response.status, response.headers, await response.read()


async def upload(server, token: str, data: bytes, name: str = "photo.jpg") -> tuple[int, dict[str, Any]]:
    form = aiohttp.FormData()
    form.add_field("file", data, filename=name, content_type="application/octet-stream")
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Token {token}"}) as session,
        session.post(f"{server.url}/api/uploads/", data=form) as response,
    ):
        return response.status, await response.json()


@sync_to_async
def user_step(thread_id: str) -> Step | None:
    return Step.objects.filter(thread_id=thread_id, type="user_message").order_by("-seq").first()


async def assert_refs_resolve(
    server, token: str, refs: list[str], expected: list[bytes], types: list[str]
) -> None:
    assert len(refs) == len(expected)
    for ref, data, content_type in zip(refs, expected, types, strict=True):
        status, headers, body = await http(server, token, "GET", f"/api/session-media/{ref}")
        assert status == 200, body[:200]
        assert body == data
        assert headers["Content-Type"] == content_type
        assert headers["Cache-Control"] == "private, max-age=31536000, immutable"
        status, _, body = await http(
            server, token, "GET", f"/api/session-media/{ref}", headers={"If-None-Match": headers["ETag"]}
        )
        assert status == 304 and body == b""


async def test_an_uploaded_photo_goes_over_the_socket_to_the_engine_and_back_as_a_ref(
    engine_server, make_user
):
    user = make_user()
    token = await api_token(user)
    big = photo("image/jpeg", 1_000_000)  # bigger than a socket frame may be: it goes over HTTP
    small = photo("image/png", 20_000)
    status, first = await upload(engine_server, token, big)
    assert status == 201 and first["contentType"] == "image/jpeg" and first["size"] == len(big)
    status, second = await upload(engine_server, token, small, name="photo.jpg")  # the name lies
    assert status == 201 and second["contentType"] == "image/png"

    cookie = await user_cookie(engine_server.url, user)
    client = ChatClient(engine_server.url, cookie)
    await client.start()
    answer = await client.call(
        "client_message",
        {
            "message": {"id": str(uuid.uuid4()), "output": "what is this?"},
            "fileReferences": [{"id": first["id"]}, {"id": second["id"]}],
        },
    )
    assert "error" not in answer, answer
    await client.wait_for(lambda c: c.replies() == ["Echo #1: what is this? [2 images received]"], timeout=20)
    # The message took the uploads: another message naming them is refused (upload again).
    again = await client.call(
        "client_message",
        {
            "message": {"id": str(uuid.uuid4()), "output": "and again"},
            "fileReferences": [{"id": first["id"]}],
        },
    )
    assert "was sent in another message already" in again["error"], again

    # The transcript keeps the photos inline, as base64 image blocks, byte for byte.
    step = await user_step(answer["threadId"])
    assert step is not None
    assert step.metadata["acceptedIds"] == [answer["messageId"]]
    images = [b for b in step.content if b["type"] == "image"]
    assert [base64.b64decode(b["source"]["data"]) for b in images] == [big, small]
    assert [b["source"]["media_type"] for b in images] == ["image/jpeg", "image/png"]
    # What the socket was sent live is stripped already.
    user_messages = [m for m in client.named("new_message") if m["type"] == "user_message"]
    assert_no_payload(user_messages)
    key = AcceptedMessage.key(uuid.UUID(answer["threadId"]), uuid.UUID(answer["messageId"]))
    refs = [f"{answer['threadId']}/{key}/{i}" for i in range(2)]
    assert image_refs(user_messages[0]["content"]) == refs
    await client.disconnect()

    # Reopened later: resume_thread carries refs, not payloads, and they resolve.
    later = ChatClient(engine_server.url, cookie)
    await later.start(thread_id=answer["threadId"])
    (thread,) = await later.wait_event("resume_thread")
    assert_no_payload(thread)
    resumed_step = next(
        s for s in thread["steps"] if answer["messageId"] in s["metadata"].get("acceptedIds", [])
    )
    assert image_refs(resumed_step["content"]) == refs
    await assert_refs_resolve(engine_server, token, refs, [big, small], ["image/jpeg", "image/png"])
    await later.disconnect()

    # history and bootstrap too.
    for path in ("history/", "bootstrap/"):
        status, _, body = await http(engine_server, token, "GET", f"/api/threads/{answer['threadId']}/{path}")
        assert status == 200
        assert_no_payload(body.decode())
        assert refs[0] in body.decode() and refs[1] in body.decode()

    # Someone else can neither read the photos nor attach the uploads.
    stranger = make_user()
    stranger_token = await api_token(stranger)
    status, _, _ = await http(engine_server, stranger_token, "GET", f"/api/session-media/{refs[0]}")
    assert status == 404
    status, _, _ = await http(engine_server, token, "GET", f"/api/session-media/{refs[0]}0000")
    assert status == 400
    other = await signed_in(engine_server, stranger)
    await other.start()
    refused = await other.call(
        "client_message",
        {"message": {"id": str(uuid.uuid4()), "output": "mine now"}, "fileReferences": [{"id": first["id"]}]},
    )
    assert "no upload" in refused["error"]
    await other.disconnect()


async def test_bad_file_references_are_refused_before_anything_is_recorded(engine_server, make_user):
    user = make_user()
    client = await signed_in(engine_server, user)
    await client.start()
    for references, expected in (
        ([{"id": str(uuid.uuid4())}], "no upload"),
        ([{"id": "../etc/passwd"}], "not an upload id"),
        ("not a list", "must be a list"),
        ([{"id": str(uuid.uuid4())}] * 11, "At most 10 images per message"),
    ):
        message_id = str(uuid.uuid4())
        answer = await client.call(
            "client_message", {"message": {"id": message_id, "output": "hi"}, "fileReferences": references}
        )
        assert expected in answer["error"], answer
        assert not await AcceptedMessage.objects.filter(client_id=message_id).aexists()
    await client.disconnect()


async def test_base64_photos_in_an_http_send_reach_the_engine_and_read_back_as_refs(engine_server, make_user):
    user = make_user()
    token = await api_token(user)
    # The webp alone makes the JSON body bigger than Django's 2.5 MB DATA_UPLOAD_MAX_MEMORY_SIZE.
    gif, webp = photo("image/gif", 30_000), photo("image/webp", 2_000_000)
    body = {
        "messageId": str(uuid.uuid4()),
        "message": "two photos",
        "images": [{"mediaType": "image/gif", "data": b64(gif)}, {"data": b64(webp)}],
    }
    status, _, answer_bytes = await http(engine_server, token, "POST", "/api/chat/send", json=body)
    assert status == 200, answer_bytes
    answer = json.loads(answer_bytes)
    thread_id = answer["threadId"]

    async def transcribed() -> bool:
        step = await user_step(thread_id)
        if step is None:
            return False
        reply = await Step.objects.filter(thread_id=thread_id, type="assistant_message").afirst()
        return reply is not None

    async def poll() -> None:
        while not await transcribed():  # noqa: ASYNC110 - polling the database
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), 20)
    reply = await Step.objects.filter(thread_id=thread_id, type="assistant_message").afirst()
    assert reply is not None and reply.output == "Echo #1: two photos [2 images received]"
    step = await user_step(thread_id)
    assert step is not None
    assert [base64.b64decode(b["source"]["data"]) for b in step.content if b["type"] == "image"] == [
        gif,
        webp,
    ]

    status, _, history = await http(engine_server, token, "GET", f"/api/threads/{thread_id}/history/")
    assert status == 200
    assert_no_payload(history.decode())
    steps = json.loads(history)["results"]
    user_entry = next(s for s in steps if s["type"] == "user_message")
    refs = image_refs(user_entry["content"])
    key = AcceptedMessage.key(uuid.UUID(str(thread_id)), uuid.UUID(str(body["messageId"])))
    assert refs == [f"{thread_id}/{key}/{i}" for i in range(2)]
    await assert_refs_resolve(engine_server, token, refs, [gif, webp], ["image/gif", "image/webp"])

    # A photo-only message is fine; a wrong one is a 400 and records nothing.
    photo_only = {"messageId": str(uuid.uuid4()), "message": "", "images": [{"data": b64(gif)}]}
    status, _, _ = await http(engine_server, token, "POST", "/api/chat/send", json=photo_only)
    assert status == 200
    wrong: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "message": "x",
        "images": [{"mediaType": "image/png", "data": b64(gif)}],
    }
    status, _, errors = await http(engine_server, token, "POST", "/api/chat/send", json=wrong)
    assert status == 400 and b"The image is image/gif, not image/png." in errors
    assert not await AcceptedMessage.objects.filter(client_id=wrong["messageId"]).aexists()
