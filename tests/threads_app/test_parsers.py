"""JSON bodies of the API are bounded in size, depth and number of arrays and objects, and a
refusal is a JSON 400 (never an HTML 500), on every JSON endpoint."""

import json
import uuid

import pytest
from rest_framework.exceptions import ParseError
from rest_framework.test import APIClient

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
    assert "arrays and objects" in response.json()["detail"]


def test_a_nested_send_is_refused_before_validation(api, settings):
    settings.JSON_MAX_DEPTH = 8
    nested = {"messageId": str(uuid.uuid4()), "message": "hi", "extra": [[[[[[[[[]]]]]]]]]}
    response = api.post("/api/chat/send", nested, format="json")
    assert response.status_code == 400
    assert response.json() == {"detail": "The JSON body is nested deeper than 8 levels."}
