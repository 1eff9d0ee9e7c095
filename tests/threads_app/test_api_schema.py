"""The OpenAPI schema, its Swagger UI (served without internet), and schemathesis against the
project's own schema: no 5xx, and every response documented and matching it."""

import os
import re
import urllib.request
import uuid
from typing import Any, TypeVar

import pytest
import schemathesis
from django.contrib.staticfiles import finders
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from drf_spectacular.validation import validate_schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Err, Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from threads_app.models import AcceptedMessage
from threads_app.services import accept_message, ensure_thread, upsert_step

pytestmark = pytest.mark.django_db

THREAD_PATHS = {
    "/api/threads/",
    "/api/threads/{id}/",
    "/api/threads/{id}/history/",
    "/api/threads/{id}/bootstrap/",
}


def test_schema_is_valid_openapi_3_json(client):
    response = client.get("/api/schema/", {"format": "json"})

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.oai.openapi+json")
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "Tether API"
    validate_schema(schema)  # type: ignore[no-untyped-call]  # drf-spectacular leaves it unannotated; raises on a schema that is not valid OpenAPI 3
    assert set(schema["paths"]) >= THREAD_PATHS
    detail = schema["paths"]["/api/threads/{id}/"]
    assert set(detail) - {"parameters"} == {"get", "patch", "delete"}
    for path in THREAD_PATHS - {"/api/threads/"}:
        for operation in schema["paths"][path].values():
            assert "404" in operation["responses"], path
    # Request bodies are JSON only, and the rename body allows nothing but the name.
    rename = detail["patch"]["requestBody"]["content"]
    assert list(rename) == ["application/json"]
    body_ref = rename["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(schema["components"]["schemas"][body_ref]["properties"]) == {"name"}
    # Bootstrap lists the failed sends a client can offer to send again.
    components = schema["components"]["schemas"]
    assert set(components["Bootstrap"]["required"]) == {
        "thread",
        "entries",
        "omittedBeforeSeq",
        "pending",
        "failed",
        "asks",
        "elements",
    }
    failed = components["Bootstrap"]["properties"]["failed"]["items"]["$ref"].rsplit("/", 1)[1]
    assert set(components[failed]["required"]) == {"messageId", "text", "reason", "acceptedAt", "imageCount"}


def test_schema_is_public_but_the_api_is_not(client):
    assert client.get("/api/schema/").status_code == 200
    assert client.get("/api/threads/").status_code == 401


def test_swagger_ui_loads_only_local_assets(client):
    response = client.get("/api/docs/")

    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="swagger-ui"' in html
    assert not re.search(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}", html, re.IGNORECASE), "an off-site URL"
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert any(a.endswith("swagger-ui-bundle.js") for a in assets)
    assert any(a.endswith("swagger-ui.css") for a in assets)
    for asset in assets:
        assert asset.startswith("/static/"), asset
        assert finders.find(asset.removeprefix("/static/")), f"{asset} is not a local static file"
    assert '"validatorUrl": null' in html  # no badge fetched from swagger.io
    assert "/api/schema/" in html


def test_the_live_server_serves_the_docs_and_their_assets(engine_server):
    """The ASGI app serves Swagger UI's files itself: the page works with no network."""
    with urllib.request.urlopen(f"{engine_server.url}/api/docs/", timeout=10) as response:
        html = response.read().decode()
    assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', html)
    assert len(assets) >= 3
    for asset in assets:
        with urllib.request.urlopen(f"{engine_server.url}{asset}", timeout=10) as response:
            assert response.status == 200, asset
            assert len(response.read()) > 0, asset


# --- schemathesis ---------------------------------------------------------------------


class ApiData:
    """A user with a token and real threads (with transcripts and pending sends) so that the
    generated requests reach the 200 paths, not only 404s."""

    def __init__(self, user) -> None:
        self.user = user
        self.token = Token.objects.create(user=user).key
        self.thread_ids: list[str] = []
        for n in range(3):
            thread, _ = ensure_thread(user, uuid.uuid4(), name=f"thread {n}")
            for i in range(4):
                upsert_step(
                    thread.pk,
                    uuid.uuid4(),
                    type="user_message" if i % 2 == 0 else "assistant_message",
                    output=f"{n}-{i}",
                )
            accept_message(message_id=uuid.uuid4(), thread=thread, author=user, text="waiting", images=[])
            done, _ = accept_message(message_id=uuid.uuid4(), thread=thread, author=user, text="done")
            AcceptedMessage.objects.filter(pk=done.pk).update(state=AcceptedMessage.State.TRANSCRIBED)
            dropped, _ = accept_message(message_id=uuid.uuid4(), thread=thread, author=user, text="dropped")
            AcceptedMessage.objects.filter(pk=dropped.pk).update(
                state=AcceptedMessage.State.FAILED, failure=AcceptedMessage.Failure.STOPPED
            )
            self.thread_ids.append(str(thread.pk))

    def disposable_thread_id(self) -> str:
        """A fresh thread for a DELETE, so the shared ones stay readable for the others."""
        thread, _ = ensure_thread(self.user, uuid.uuid4(), name="to delete")
        return str(thread.pk)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Token {self.token}"}


@pytest.fixture
def api_data(django_user_model) -> ApiData:
    return ApiData(django_user_model.objects.create_user(username="fuzz", password="pw-for-tests-1"))


@pytest.fixture(autouse=True)
def _keep_the_test_connection_open():
    """The generated requests go through Django's WSGI handler on this thread, inside the
    test's transaction (so they see the fixtures' rows); like Django's test client, the
    handler must then not close the connection at the start and end of each request."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


# The schema as the app serves it, loaded in-process through Django's WSGI handler; the
# generated requests for the threads API are sent to the same handler. The other operations
# (sends: /api/chat/send, the integration endpoint) hand the message to the chat runtime on
# the server's event loop and its threads, which need committed rows and a running server
# rather than this test's transaction: they are fuzzed against a live daphne server below.
IN_PROCESS = "^/api/threads/"
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", WSGIHandler())
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
T = TypeVar("T")


def ok(result: Ok[T] | Err[Any]) -> T:
    """An operation schemathesis loaded; one it could not load raises its schema error."""
    if isinstance(result, Err):
        raise result.err()
    return result.ok()


# Bounded so the whole file runs in seconds; random locally (new inputs every run), fixed
# under CI so that a submission's result does not depend on the draw.
EXAMPLES = settings(
    max_examples=25,
    deadline=None,
    database=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=list(HealthCheck),
)
THREAD_PARAMS = ("id", "thread_id")


def use_real_ids(case, data, api_data: ApiData) -> None:
    """Swap most generated thread ids for the user's real threads, so that the 200s and 400s
    are reached (the others stay random or malformed and must be 404s matching the schema)."""
    for name in THREAD_PARAMS:
        if name in (case.path_parameters or {}) and data.draw(st.integers(0, 3), label=f"real {name}") > 0:
            if case.method.upper() == "DELETE":
                case.path_parameters[name] = api_data.disposable_thread_id()
            else:
                case.path_parameters[name] = data.draw(st.sampled_from(api_data.thread_ids), label=name)
    if isinstance(case.body, dict) and "threadId" in case.body and data.draw(st.booleans(), label="real"):
        case.body["threadId"] = data.draw(st.sampled_from(api_data.thread_ids), label="threadId")


@schema.include(path_regex=IN_PROCESS).parametrize()
@schema.given(data=st.data())
@EXAMPLES
def test_threads_api_conforms_to_its_schema(case, data, api_data):
    use_real_ids(case, data, api_data)
    case.call_and_validate(headers=api_data.headers, checks=CHECKS)


def test_the_in_process_run_covers_every_threads_operation():
    in_process = {ok(result).label for result in schema.include(path_regex=IN_PROCESS).get_all_operations()}
    assert in_process == {
        "GET /api/threads/",
        "GET /api/threads/{id}/",
        "PATCH /api/threads/{id}/",
        "DELETE /api/threads/{id}/",
        "GET /api/threads/{id}/history/",
        "GET /api/threads/{id}/bootstrap/",
    }


LIVE_OPERATIONS = sorted(
    ok(result).label for result in schema.exclude(path_regex=IN_PROCESS).get_all_operations()
)


def test_the_live_run_covers_every_other_operation():
    """The live run below is parametrized by the schema: an operation that went missing from
    it would quietly not be fuzzed, so the list is pinned here."""
    assert LIVE_OPERATIONS == [
        "DELETE /api/feedback",
        "GET /api/elements/{element_id}",
        "GET /api/project/settings",
        "GET /api/session-media/{thread_id}/{step_id}/{index}",
        "POST /api/chat/send",
        "POST /api/integrations/threads/{thread_id}/messages/",
        "POST /api/project/action",
        "POST /api/uploads/",
        "PUT /api/feedback",
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("label", LIVE_OPERATIONS)
def test_other_operations_conform_to_the_schema_on_a_live_server(engine_server, api_data, label):
    method, path = label.split(" ", 1)
    live = schemathesis.openapi.from_url(f"{engine_server.url}/api/schema/?format=json")
    operation = live[path][method]
    for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):

        @given(case=operation.as_strategy(generation_mode=mode), data=st.data())
        @settings(EXAMPLES, max_examples=10)
        def run(case, data):
            use_real_ids(case, data, api_data)
            case.call_and_validate(headers=api_data.headers, checks=CHECKS, timeout=30)

        run()


@pytest.mark.parametrize("path", ["/api/threads/a%2Fb/", "/api/threads/a.b/history/", "/api/nothing-here/"])
def test_unrouted_api_paths_answer_json_404s(client, api_data, path):
    response = client.get(path, headers=api_data.headers)

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert "detail" in response.json()


def test_other_unrouted_paths_keep_the_html_404(client):
    response = client.get("/no-such-page/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
