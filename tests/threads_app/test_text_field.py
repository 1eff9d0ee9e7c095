"""``TextField``: DRF's CharField answers, for text that may be megabytes long."""

import uuid

import pytest
from rest_framework import serializers
from rest_framework.test import APIClient
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from threads_app.serializers import TextField


def test_the_answers_are_charfields_without_its_loop_over_every_character():
    field = TextField(max_length=5)
    assert not any(isinstance(v, ProhibitSurrogateCharactersValidator) for v in field.validators)
    assert field.run_validation("héllo") == "héllo"
    with pytest.raises(serializers.ValidationError) as too_long:
        field.run_validation("x" * 10_000_000)  # refused on its length, nothing else reads it
    assert too_long.value.detail == ["Ensure this field has no more than 5 characters."]
    with pytest.raises(serializers.ValidationError) as surrogate:
        field.run_validation("a\ud800b")
    assert surrogate.value.detail == ["Surrogate characters are not allowed: U+D800."]
    with pytest.raises(serializers.ValidationError, match="Null characters are not allowed"):
        field.run_validation("a\x00b")


@pytest.mark.django_db
def test_a_send_answers_as_before(user):
    api = APIClient()
    api.force_authenticate(user)
    for message, error in [
        ("x" * 100_001, "Ensure this field has no more than 100000 characters."),
        ("lone \\ud800", "Surrogate characters are not allowed: U+D800."),  # an escape in the JSON
    ]:
        body = f'{{"messageId": "{uuid.uuid4()}", "message": "{message}"}}'
        response = api.post("/api/chat/send", body, content_type="application/json")
        assert response.status_code == 400 and response.json() == {"message": [error]}
