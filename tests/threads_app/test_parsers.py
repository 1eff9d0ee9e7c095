"""JSON bodies of the API are bounded in size, depth and number of arrays and objects, and a
refusal is a JSON 400 (never an HTML 500), on every JSON endpoint."""

import itertools
import json
import time
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.exceptions import ParseError
from rest_framework.test import APIClient

from threads_app.json_shape import JsonShape, ShapeError
from threads_app.models import Thread
from threads_app.parsers import check_shape, load_bounded
from threads_app.services import default_box_for

pytestmark = pytest.mark.django_db

DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.fixture
def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_depth_and_container_limits(settings):
    settings.JSON_MAX_DEPTH = 4
    settings.JSON_MAX_CONTAINERS = 50
    assert load_bounded(b'{"a": [[{"b": 1}]]}') == {"a": [[{"b": 1}]]}
    with pytest.raises(ParseError, match="nested deeper than 4 levels"):
        check_shape(b"[[[[[1]]]]]")
    with pytest.raises(ParseError, match="more than 50 arrays and objects"):
        check_shape(b"[" + b"[]," * 60 + b"[]]")


def test_brackets_inside_strings_do_not_count(settings):
    settings.JSON_MAX_DEPTH = 2
    settings.JSON_MAX_CONTAINERS = 5
    body = json.dumps({"text": "[[[[{{{{" * 1000 + '\\" ]]] "'}).encode()
    assert load_bounded(body)["text"].startswith("[[[[{{{{")


def test_malformed_json_is_a_parse_error_not_a_crash():
    for raw in (b"[1, 2", b'{"a": "unterminated', b"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", b"NaN"):
        with pytest.raises(ParseError):
            load_bounded(raw)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/api/chat/send"),
        ("patch", "/api/threads/{thread}/"),
        ("post", "/api/integrations/threads/{thread}/messages/"),
    ],
)
def test_a_100k_deep_body_is_a_json_400_on_every_json_endpoint(api, user, method, path):
    thread = Thread.objects.create(owner=user, box=default_box_for(user), name="t")
    response = getattr(api, method)(path.format(thread=thread.pk), DEEP, content_type="application/json")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"] == "The JSON body is nested deeper than 32 levels."


@pytest.mark.parametrize("charset", ["utf-16", "shift_jis"])
def test_a_json_body_in_another_encoding_is_refused(api, user, charset):
    """Before: honoured, so a UTF-16 character holding a quote byte (U+225B) made the byte-level
    shape measure take what followed for a string, nesting and all."""
    thread = Thread.objects.create(owner=user, box=default_box_for(user), name="t")
    body = ('{"name": "\u225b", "x": ' + "[" * 40 + "]" * 40 + "}").encode("utf-16")
    response = api.patch(
        f"/api/threads/{thread.pk}/", body, content_type=f"application/json; charset={charset}"
    )
    assert response.status_code == 400
    assert response.json() == {"detail": f"JSON bodies must be UTF-8, not {charset}."}
    ok = api.patch(f"/api/threads/{thread.pk}/", {"name": "renamed"}, format="json")
    assert ok.status_code == 200  # no charset, or utf-8: parsed as before


def test_a_nested_send_is_refused_before_validation(api, settings):
    settings.JSON_MAX_DEPTH = 8
    nested = {"messageId": str(uuid.uuid4()), "message": "hi", "extra": [[[[[[[[[]]]]]]]]]}
    response = api.post("/api/chat/send", nested, format="json")
    assert response.status_code == 400
    assert response.json() == {"detail": "The JSON body is nested deeper than 8 levels."}


def test_a_string_that_never_ends_costs_linear_time():
    """Before: a regular expression searching for whole strings retried at every escaped
    quote of one that never ends, quadratic with the GIL held: 40 KB froze a server for 5 s,
    and a 1 MB body (any endpoint's budget) would have held it for most of an hour."""
    body = b"[" * 40 + b'"' + b'\\"' * 500_000
    started = time.monotonic()
    with pytest.raises(ParseError, match="nested deeper than 32 levels"):
        check_shape(body)
    assert time.monotonic() - started < 1


def reference_shape(text: bytes, max_depth: int, max_containers: int) -> str | None:
    """The first budget ``text`` crosses, one byte at a time: the obvious, slow definition. An
    escaped backslash or quote is string content; other escapes cannot hide a quote."""
    depth = containers = 0
    in_string = False
    position = 0
    while position < len(text):
        byte, position = text[position], position + 1
        if byte == ord("\\") and text[position : position + 1] in (b"\\", b'"'):
            position += 1
        elif byte == ord('"'):
            in_string = not in_string
        elif in_string:
            continue
        elif byte in b"[{":
            depth, containers = depth + 1, containers + 1
            if containers > max_containers:
                return "containers"
            if depth > max_depth:
                return "depth"
        elif byte in b"]}":
            depth -= 1
            if depth < 0:
                return "unbalanced"
    return None


def fed_in_pieces(text: bytes, cuts: list[int], max_depth: int, max_containers: int) -> str | None:
    shape = JsonShape(max_depth, max_containers)
    edges = [0, *sorted(cuts), len(text)]
    try:
        for start, end in itertools.pairwise(edges):
            shape.feed(text[start:end])
    except ShapeError as exc:
        message = str(exc)
        return (
            "containers"
            if "arrays and objects" in message
            else "depth"
            if "deeper" in message
            else "unbalanced"
        )
    return None


@settings(max_examples=2000, deadline=None)
@given(
    text=st.lists(st.sampled_from([b"[", b"]", b"{", b"}", b'"', b"\\", b"a", b",", b'\\"', b"\\\\"])).map(
        b"".join
    ),
    cut_fractions=st.lists(st.floats(0, 1), max_size=5),
    max_depth=st.integers(1, 4),
    max_containers=st.integers(1, 6),
)
def test_pieces_give_the_answer_of_the_byte_by_byte_definition(
    text, cut_fractions, max_depth, max_containers
):
    cuts = [int(f * len(text)) for f in cut_fractions]
    assert fed_in_pieces(text, cuts, max_depth, max_containers) == reference_shape(
        text, max_depth, max_containers
    )
