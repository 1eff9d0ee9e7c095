"""Thread and step dictionaries in Chainlit's ThreadDict / StepDict shape."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from threads_app.models import Step
from threads_app.selectors import owned_thread_dict, step_dicts
from threads_app.services import ensure_thread, upsert_step
from threads_app.wire import STEP_FIELDS, iso, parse_iso, step_fields, step_row_to_dict, step_to_dict

pytestmark = pytest.mark.django_db

STEP_KEYS = {
    "id",
    "threadId",
    "parentId",
    "type",
    "name",
    "input",
    "output",
    "createdAt",
    "start",
    "end",
    "isError",
    "metadata",
    "streaming",
}
THREAD_KEYS = {"id", "createdAt", "name", "userId", "userIdentifier", "tags", "metadata", "steps", "elements"}

CREATED = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="wire-user", password="pw-for-tests-1")


@pytest.fixture
def thread(user):
    thread, _ = ensure_thread(user, uuid.uuid4(), name="a chat")
    return thread


def write_pair(thread_id: uuid.UUID) -> tuple[Step, Step]:
    question = upsert_step(
        thread_id, uuid.uuid4(), type="user_message", name="User", output="hi", created_at=CREATED
    )
    answer = upsert_step(
        thread_id,
        uuid.uuid4(),
        type="assistant_message",
        name="Assistant",
        parent_id=question.id,
        output="hello",
        content=[{"type": "text", "text": "hello"}],
        metadata={"acceptedIds": ["a1"]},
        is_error=True,
        created_at=CREATED + timedelta(seconds=1),
        start=CREATED + timedelta(seconds=1),
        end=CREATED + timedelta(seconds=2),
    )
    return question, answer


def test_step_dicts_have_the_chainlit_keys_and_values(thread):
    question, answer = write_pair(thread.id)

    first, second = step_dicts(thread.id)

    for step in (first, second):
        assert set(step) >= STEP_KEYS
        assert step["streaming"] is False
        assert step["threadId"] == str(thread.id)
    assert first["id"] == str(question.id)
    assert first["parentId"] is None
    assert first["type"] == "user_message"
    assert first["isError"] is False
    assert first["start"] is None and first["end"] is None
    expected = {
        "id": str(answer.id),
        "parentId": str(question.id),
        "type": "assistant_message",
        "name": "Assistant",
        "output": "hello",
        "metadata": {"acceptedIds": ["a1"]},
        "isError": True,
        "seq": 2,
    }
    assert {key: second[key] for key in expected} == expected


def test_timestamps_are_iso_strings_ending_in_z(thread):
    _question, answer = write_pair(thread.id)

    step = step_dicts(thread.id)[1]
    for key in ("createdAt", "start", "end"):
        assert isinstance(step[key], str)
        assert step[key].endswith("Z")
        assert "+00:00" not in step[key]
    assert datetime.fromisoformat(step["createdAt"].replace("Z", "+00:00")) == CREATED + timedelta(seconds=1)
    assert parse_iso(step["end"]) == CREATED + timedelta(seconds=2)

    as_model = step_to_dict(Step.objects.get(pk=answer.id))
    assert as_model == step

    assert iso(None) is None
    assert iso(CREATED) == "2024-05-06T07:08:09.123456Z"


def test_thread_dict_has_the_chainlit_keys(user, thread):
    write_pair(thread.id)
    thread.chat_profile = "Researcher"
    thread.metadata = {"color": "blue"}
    thread.save()

    data = owned_thread_dict(user, thread.id)

    assert data is not None
    assert set(data) >= THREAD_KEYS
    assert data["id"] == str(thread.id)
    assert data["name"] == "a chat"
    assert data["userId"] == str(user.pk)
    assert data["userIdentifier"] == "wire-user"
    assert data["tags"] == ["Researcher"]
    assert data["metadata"] == {"color": "blue"}
    assert data["elements"] == []
    assert data["createdAt"].endswith("Z")
    assert [s["output"] for s in data["steps"]] == ["hi", "hello"]
    assert all(set(s) >= STEP_KEYS for s in data["steps"])


def test_thread_dict_is_refused_to_another_user(django_user_model, thread):
    stranger = django_user_model.objects.create_user(username="stranger", password="pw-for-tests-1")
    assert owned_thread_dict(stranger, thread.id) is None


def test_thread_without_profile_has_no_tags(user, thread):
    record = owned_thread_dict(user, thread.id)
    assert record is not None and record["tags"] == []


def test_step_fields_inverts_step_row_to_dict(thread):
    _question, answer = write_pair(thread.id)
    row = Step.objects.filter(pk=answer.id).values(*STEP_FIELDS).get()

    fields = step_fields(step_row_to_dict(row))

    assert fields == {
        "type": row["type"],
        "name": row["name"],
        "parent_id": str(row["parent_id"]),
        "input": row["input"],
        "output": row["output"],
        "content": row["content"],
        "metadata": row["metadata"],
        "is_error": row["is_error"],
        "created_at": row["created_at"],
        "start": row["start"],
        "end": row["end"],
    }


def test_a_step_written_back_from_its_dict_reads_the_same(user, thread):
    write_pair(thread.id)
    copy, _ = ensure_thread(user, uuid.uuid4())

    originals = step_dicts(thread.id)
    for step in originals:
        upsert_step(copy.id, uuid.uuid4(), **step_fields(step))

    copies = step_dicts(copy.id)
    ignore = {"id", "threadId"}
    assert [{k: v for k, v in s.items() if k not in ignore} for s in copies] == [
        {k: v for k, v in s.items() if k not in ignore} for s in originals
    ]


def test_step_fields_fills_defaults_and_truncates_the_name():
    fields = step_fields({"id": str(uuid.uuid4()), "name": "n" * 300})
    assert fields == {
        "type": "undefined",
        "name": "n" * 255,
        "parent_id": None,
        "input": "",
        "output": "",
        "content": [],
        "metadata": {},
        "is_error": False,
        "created_at": None,
        "start": None,
        "end": None,
    }
