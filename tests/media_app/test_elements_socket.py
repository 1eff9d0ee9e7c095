"""Elements end to end on a live server (python-socketio client, daphne running
``tests.apps.elements_app``): the ``element`` events and their ElementDicts, the records, the
bytes in the elements storage (never in a Step row), served to their owner only with the
headers of the media endpoint, listed again by resume_thread, bootstrap and history; a removal
(``remove_element``); a deleted thread takes its files with it; a user's non-photo upload
reaches ``on_message`` as ``message.elements``."""

import json
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from asgiref.sync import sync_to_async

from media_app.models import Element
from tests.apps.elements_app import CODE, pdf, png
from tests.support.client import ChatClient, api_token, signed_in
from threads_app.models import Step

pytestmark = pytest.mark.django_db(transaction=True)

ELEMENT_FIELDS = {
    "id", "threadId", "type", "chainlitKey", "url", "objectKey", "name", "display", "size",
    "language", "page", "autoPlay", "playerConfig", "forId", "mime", "props", "bytes",
}  # fmt: skip


@pytest.fixture(scope="module")
def elements_dir(tmp_path_factory) -> Path:
    return Path(tmp_path_factory.mktemp("elements"))


@pytest.fixture(scope="module")
def elements_server(server_factory, elements_dir):
    return server_factory.start(
        CHAT_APP="tests.apps.elements_app",
        ELEMENTS_DIR=str(elements_dir),
        UPLOAD_ALLOWED_TYPES="image/*,application/pdf,text/plain,text/csv",
    )


async def http(server, token: str, method: str, path: str, **kwargs) -> tuple[int, Any, bytes]:
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Token {token}"}) as session,
        session.request(method, f"{server.url}{path}", **kwargs) as response,
    ):
        return response.status, response.headers, await response.read()


async def upload(server, token: str, data: bytes, name: str) -> tuple[int, dict[str, Any]]:
    form = aiohttp.FormData()
    form.add_field("file", data, filename=name, content_type="application/pdf")
    status, _, body = await http(server, token, "POST", "/api/uploads/", data=form)
    return status, json.loads(body)


@sync_to_async
def records(thread_id: str) -> list[Element]:
    return list(Element.objects.filter(thread_id=thread_id).order_by("created_at"))


@sync_to_async
def step_texts(thread_id: str) -> str:
    return json.dumps(list(Step.objects.filter(thread_id=thread_id).values("output", "content", "metadata")))


async def elements_turn(client: ChatClient) -> tuple[str, list[dict[str, Any]]]:
    answer = await client.send("elements")
    await client.wait_text("Elements sent.")
    return str(answer["threadId"]), client.named("element")


async def test_elements_are_sent_stored_served_and_listed_again(
    elements_server: Any, elements_dir: Path, make_user: Any
) -> None:
    user = make_user()
    token = await api_token(user)
    client = await signed_in(elements_server, user)
    await client.start()
    thread_id, sent = await elements_turn(client)

    # The events: Chainlit's ElementDict, attached to the reply, in the order sent.
    reply = next(m for m in client.named("new_message") if m["output"] == "Here are your elements.")
    assert [e["name"] for e in sent] == [
        "square.png", "notes.csv", "hello.py", "report.pdf", "side-notes.txt", "counts", "extra.bin",
    ]  # fmt: skip
    for element in sent:
        assert set(element) == ELEMENT_FIELDS
        assert element["forId"] == reply["id"] and element["threadId"] == thread_id
        assert element["url"] == f"/api/elements/{element['id']}"
        assert element["objectKey"] is None  # the storage key is never shown
    by_name = {e["name"]: e for e in sent}
    assert by_name["square.png"] | {} == by_name["square.png"]
    assert (by_name["square.png"]["type"], by_name["square.png"]["size"], by_name["square.png"]["mime"]) == (
        "image", "small", "image/png",
    )  # fmt: skip
    assert (by_name["report.pdf"]["type"], by_name["report.pdf"]["display"], by_name["report.pdf"]["page"]) == (
        "pdf", "side", 1,
    )  # fmt: skip
    assert (by_name["hello.py"]["type"], by_name["hello.py"]["language"]) == ("text", "python")
    assert (by_name["counts"]["type"], by_name["counts"]["mime"]) == ("plotly", "application/json")
    assert by_name["notes.csv"]["bytes"] == len(b"a,b\n1,2\n")

    # The records, and the bytes in the storage, not in the transcript rows.
    rows = await records(thread_id)
    assert [r.name for r in rows] == [e["name"] for e in sent]
    for row in rows:
        assert row.owner_id == user.pk and str(row.for_id) == reply["id"]
        assert (elements_dir / row.storage_key).is_file()
    assert (elements_dir / rows[0].storage_key).read_bytes() == png()
    transcript = await step_texts(thread_id)
    assert "Tether PDF" not in transcript and "Side panel text" not in transcript
    assert "return" not in transcript and "counts" not in transcript

    # Served to the owner with the media headers; inline only what is safe inline.
    status, headers, body = await http(elements_server, token, "GET", by_name["square.png"]["url"])
    assert status == 200 and body == png()
    assert headers["Content-Type"] == "image/png"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Cache-Control"] == "private, max-age=31536000, immutable"
    assert headers["Content-Disposition"].startswith("inline")
    status, _, again = await http(
        elements_server,
        token,
        "GET",
        by_name["square.png"]["url"],
        headers={"If-None-Match": headers["ETag"]},
    )
    assert status == 304 and again == b""
    status, headers, body = await http(elements_server, token, "GET", by_name["report.pdf"]["url"])
    assert status == 200 and body == pdf()
    assert headers["Content-Type"] == "application/pdf" and headers["Content-Disposition"].startswith(
        "inline"
    )
    assert headers["Content-Security-Policy"] == "sandbox" and headers["X-Frame-Options"] == "SAMEORIGIN"
    status, headers, body = await http(elements_server, token, "GET", by_name["hello.py"]["url"])
    assert status == 200 and body.decode() == CODE
    assert headers["Content-Disposition"] == 'attachment; filename="hello.py"'
    status, headers, body = await http(elements_server, token, "GET", by_name["counts"]["url"])
    assert json.loads(body)["data"][0]["type"] == "bar" and headers["Content-Disposition"].startswith(
        "attachment"
    )
    status, headers, body = await http(elements_server, token, "GET", by_name["extra.bin"]["url"])
    assert headers["Content-Type"] == "application/octet-stream" and body == b"\x00\x01binary"

    # Another user gets a 404, as for an id that does not exist.
    stranger = await api_token(make_user())
    status, _, body = await http(elements_server, stranger, "GET", by_name["square.png"]["url"])
    assert status == 404 and json.loads(body) == {"detail": "No such element."}
    status, _, _ = await http(elements_server, token, "GET", f"/api/elements/{uuid.uuid4()}")
    assert status == 404

    # Listed again: bootstrap, history, and resume_thread in a new session.
    status, _, body = await http(elements_server, token, "GET", f"/api/threads/{thread_id}/bootstrap/")
    assert [e["id"] for e in json.loads(body)["elements"]] == [e["id"] for e in sent]
    status, _, body = await http(elements_server, token, "GET", f"/api/threads/{thread_id}/history/")
    assert [e["id"] for e in json.loads(body)["elements"]] == [e["id"] for e in sent]
    seq = next(s["seq"] for s in json.loads(body)["results"] if s["id"] == reply["id"])
    status, _, body = await http(
        elements_server, token, "GET", f"/api/threads/{thread_id}/history/?after_seq={seq}"
    )
    assert json.loads(body)["elements"] == []  # only the page's steps' elements
    await client.disconnect()
    resumed = ChatClient(elements_server.url, client.cookie)
    await resumed.start(threadId=thread_id)
    (thread,) = await resumed.wait_event("resume_thread")
    assert thread["elements"] == sent

    # A removal: the event, the record and the file go.
    await resumed.send("remove")
    await resumed.wait_text("Removed.")
    (removed,) = resumed.named("remove_element")
    assert removed == {"id": by_name["extra.bin"]["id"], "forId": reply["id"]}
    assert [r.name for r in await records(thread_id)] == [e["name"] for e in sent[:-1]]
    assert not (elements_dir / rows[-1].storage_key).exists()
    await resumed.disconnect()

    # Deleting the thread deletes its elements and files: a 404 from then on.
    status, _, _ = await http(elements_server, token, "DELETE", f"/api/threads/{thread_id}/")
    assert status == 204
    status, _, _ = await http(elements_server, token, "GET", by_name["square.png"]["url"])
    assert status == 404
    assert await records(thread_id) == []
    assert not any((elements_dir / row.storage_key).exists() for row in rows)


async def test_a_bad_element_fails_the_turn_with_a_clear_error(elements_server: Any, make_user: Any) -> None:
    client = await signed_in(elements_server, make_user())
    await client.start()
    await client.send("bad")
    await client.wait_for(lambda c: any(m["isError"] for m in c.named("new_message")))
    error = next(m for m in client.named("new_message") if m["isError"])
    assert (
        "not-an-image.png" in error["output"] and "is not a JPEG, PNG, GIF or WebP image" in error["output"]
    )
    assert client.named("element") == []
    await client.disconnect()


async def test_a_users_file_reaches_on_message_and_the_thread(
    elements_server: Any, elements_dir: Path, make_user: Any
) -> None:
    user = make_user()
    token = await api_token(user)
    status, uploaded = await upload(elements_server, token, pdf(), "brief.pdf")
    assert status == 201, uploaded
    assert uploaded["contentType"] == "application/pdf" and uploaded["name"] == "brief.pdf"
    # A type the server does not accept (HTML, whatever the name) is a 400 that says why.
    status, refused = await upload(elements_server, token, b"<html><script>x</script></html>", "page.pdf")
    assert status == 400 and "not accepted here" in refused["file"][0]

    client = await signed_in(elements_server, user)
    await client.start()
    message_id = str(uuid.uuid4())
    answer = await client.call(
        "client_message",
        {"message": {"id": message_id, "output": "see attached"}, "fileReferences": [{"id": uploaded["id"]}]},
    )
    thread_id = answer["threadId"]
    await client.wait_for(lambda c: any("on_message saw" in t for t in c.texts()))
    seen = next(t for t in client.texts() if "on_message saw" in t)
    assert seen == f"on_message saw: brief.pdf|application/pdf|{len(pdf())}|{pdf()[:12]!r}|True"
    user_step = next(m for m in client.named("new_message") if m["type"] == "user_message")
    (element,) = client.named("element")
    assert element["forId"] == user_step["id"] and element["type"] == "pdf" and element["name"] == "brief.pdf"
    status, _, body = await http(elements_server, token, "GET", element["url"])
    assert status == 200 and body == pdf()
    status, _, body = await http(elements_server, token, "GET", f"/api/threads/{thread_id}/bootstrap/")
    assert [e["id"] for e in json.loads(body)["elements"]] == [element["id"]]

    # Someone else's upload cannot be named.
    other = await api_token(make_user())
    status, foreign = await upload(elements_server, other, pdf(), "theirs.pdf")
    answer = await client.call(
        "client_message",
        {"message": {"id": str(uuid.uuid4()), "output": "x"}, "fileReferences": [{"id": foreign["id"]}]},
    )
    assert "no upload" in answer["error"]
    await client.disconnect()


async def test_another_tab_on_the_thread_gets_the_elements_too(elements_server: Any, make_user: Any) -> None:
    user = make_user()
    first = await signed_in(elements_server, user)
    await first.start()
    thread_id = (await first.send("hello"))["threadId"]
    await first.wait_text("echo: hello")
    second = ChatClient(elements_server.url, first.cookie)
    await second.start(threadId=thread_id)
    await second.wait_event("resume_thread")
    await first.send("elements")
    await first.wait_text("Elements sent.")
    await second.wait_event("element", count=7)
    assert second.named("element") == first.named("element")
    await first.send("remove")
    await second.wait_event("remove_element")
    assert second.named("remove_element") == first.named("remove_element")
    await first.disconnect()
    await second.disconnect()


async def test_an_element_sent_before_the_thread_exists_is_kept_with_it(
    elements_server: Any, make_user: Any
) -> None:
    user = make_user()
    token = await api_token(user)
    client = await signed_in(elements_server, user)
    await client.start(userEnv=json.dumps({"greet": True}))
    (welcome,) = await client.wait_event("element")
    assert welcome["name"] == "welcome.txt" and welcome["type"] == "text"
    # Served before the thread row exists (the element is the caller's).
    status, _, body = await http(elements_server, token, "GET", welcome["url"])
    assert status == 200 and body == b"hi there"
    thread_id = (await client.send("hello"))["threadId"]
    assert thread_id == welcome["threadId"]
    await client.wait_text("echo: hello")
    status, _, body = await http(elements_server, token, "GET", f"/api/threads/{thread_id}/bootstrap/")
    read = json.loads(body)
    assert [e["id"] for e in read["elements"]] == [welcome["id"]]
    greeting = next(s for s in read["entries"] if s["output"] == "Welcome!")
    assert welcome["forId"] == greeting["id"]
    await client.disconnect()
