"""The settings inputs on their own: their wire dicts (Chainlit's fields), the checks a change
goes through for each kind of input, and what a (re)declaration starts from."""

import uuid
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from sessions_app import chat, records
from sessions_app.chat_settings import (
    InvalidSetting,
    check_value,
    declared_inputs,
    validate_change,
    values_for,
    wire_payload,
)
from sessions_app.live import LiveSession
from sessions_app.models import SocketSession
from sessions_app.turns import stop_handlers

COMMON = {"tooltip": None, "description": None, "disabled": False}


def test_each_input_serialises_with_chainlits_fields() -> None:
    assert chat.Select(
        id="m", label="Model", items={"Small": "s", "Large": "l"}, initial_value="l"
    ).to_dict() == {
        "type": "select",
        "id": "m",
        "label": "Model",
        "initial": "l",
        "items": [{"label": "Small", "value": "s"}, {"label": "Large", "value": "l"}],
        **COMMON,
    }
    assert chat.Select(id="m", label="M", values=["a", "b"], initial_index=1).to_dict()["initial"] == "b"
    assert chat.Switch(id="s", label="S", initial=True, tooltip="tip").to_dict() == {
        "type": "switch",
        "id": "s",
        "label": "S",
        "initial": True,
        **COMMON,
        "tooltip": "tip",
    }
    assert chat.Checkbox(id="c", label="C").to_dict()["type"] == "checkbox"
    assert chat.Slider(id="t", label="T", initial=0.2, min=0, max=1, step=0.1).to_dict() == {
        "type": "slider",
        "id": "t",
        "label": "T",
        "initial": 0.2,
        "min": 0,
        "max": 1,
        "step": 0.1,
        **COMMON,
    }
    assert chat.TextInput(id="p", label="P", initial="x", placeholder="ph", multiline=True).to_dict() == {
        "type": "textinput",
        "id": "p",
        "label": "P",
        "initial": "x",
        "placeholder": "ph",
        "multiline": True,
        "max_length": None,
        **COMMON,
    }
    number = chat.NumberInput(id="n", label="N", initial=3, description="how many").to_dict()
    assert number == {
        "type": "numberinput",
        "id": "n",
        "label": "N",
        "initial": 3,
        "placeholder": None,
        "min": None,
        "max": None,
        "step": None,
        **COMMON,
        "description": "how many",
    }
    assert chat.Tags(id="g", label="G", initial=["a"], values=["a", "b"]).to_dict() == {
        "type": "tags",
        "id": "g",
        "label": "G",
        "initial": ["a"],
        "values": ["a", "b"],
        "max_tags": None,
        **COMMON,
    }
    assert chat.MultiSelect(id="d", label="D", items={"Mon": "mon"}, initial=["mon"]).to_dict() == {
        "type": "multiselect",
        "id": "d",
        "label": "D",
        "initial": ["mon"],
        "items": [{"label": "Mon", "value": "mon"}],
        **COMMON,
    }


@pytest.mark.parametrize(
    "make",
    [
        lambda: chat.Select(id="m", label="M"),  # neither values nor items
        lambda: chat.Select(id="m", label="M", values=["a"], items={"a": "a"}),
        lambda: chat.Select(id="m", label="M", items={"a": "a"}, initial_index=0),
        lambda: chat.Select(id="m", label="M", values=["a"], initial_value="z"),
        lambda: chat.Slider(id="t", label="T", initial=11),
        lambda: chat.Slider(id="t", label="T", initial=0.5, step=1),
        lambda: chat.Slider(id="t", label="T", min=2, max=1),
        lambda: chat.Slider(id="t", label="T", step=0),
        lambda: chat.Switch(id="s", label="S", initial="yes"),  # type: ignore[arg-type]
        lambda: chat.TextInput(id="p", label="P", initial="long", max_length=2),
        lambda: chat.NumberInput(id="n", label="N", initial=5, max=4),
        lambda: chat.NumberInput(id="n", label="N", step=-1),
        lambda: chat.NumberInput(id="n", label="N", step=float("nan")),
        lambda: chat.NumberInput(id="n", label="N", max=float("inf")),
        lambda: chat.Slider(id="t", label="T", max=float("inf")),
        lambda: chat.Tags(id="g", label="G", initial=["a", "a"]),
        lambda: chat.MultiSelect(id="d", label="D"),
        lambda: chat.MultiSelect(id="d", label="D", values=["a"], initial=["b"]),
        lambda: chat.Switch(id="", label="S"),
        lambda: chat.Switch(id="s", label=""),
    ],
)
def test_a_declaration_the_panel_could_not_submit_fails_in_the_app(make: Any) -> None:
    with pytest.raises(ValueError):
        make()


def test_inputs_after_the_label_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        chat.Slider("t", "T", 0.5)  # type: ignore[call-arg, arg-type]  # Chainlit's third field is not initial


def test_chat_settings_refuses_duplicate_ids_and_gives_the_initial_values() -> None:
    with pytest.raises(ValueError, match="unique"):
        chat.ChatSettings([chat.Switch(id="a", label="A"), chat.Switch(id="a", label="B")])
    settings = chat.ChatSettings([chat.Switch(id="a", label="A", initial=True), chat.Tags(id="b", label="B")])
    assert settings.settings() == {"a": True, "b": []}


DECLARED = [
    chat.Select(id="model", label="Model", values=["small", "large"], initial_index=0).to_dict(),
    chat.Switch(id="stream", label="Stream", initial=True).to_dict(),
    chat.Slider(id="t", label="T", initial=0.5, min=0, max=1, step=0.1).to_dict(),
    chat.TextInput(id="persona", label="Persona", initial="", max_length=5).to_dict(),
    chat.NumberInput(id="n", label="N", initial=1).to_dict(),
    chat.NumberInput(id="k", label="K", initial=2, min=2, max=10, step=2).to_dict(),
    chat.Tags(id="tags", label="Tags", max_tags=2).to_dict(),
    chat.Switch(id="locked", label="Locked", initial=False, disabled=True).to_dict(),
    chat.MultiSelect(id="days", label="Days", values=["mon", "tue"]).to_dict(),
]
CURRENT = values_for(DECLARED, {})


@pytest.mark.parametrize(
    "change",
    [
        {"model": "large"},
        {"stream": False},
        {"t": 0},
        {"t": 1},
        {"t": 0.7},
        {"t": 0.30000000000000004},  # 0.1 + 0.2
        {"persona": "abcde"},
        {"n": -1e9},
        {"n": 2.5},  # no min, max, step: any finite number
        {"k": 10},
        {"tags": []},
        {"tags": ["a", "b"]},
        {"locked": False},  # a disabled input may be sent with the value it has
        {"days": []},
        {"days": ["tue", "mon"]},
        {"model": "large", "stream": False, "t": 0.1},
    ],
)
def test_valid_changes_are_applied_over_the_current_values(change: dict[str, Any]) -> None:
    assert validate_change(DECLARED, CURRENT, change) == {**CURRENT, **change}


@pytest.mark.parametrize(
    ("change", "setting"),
    [
        ({"nope": 1}, "nope"),
        ({"model": "medium"}, "model"),
        ({"model": None}, "model"),
        ({"stream": 1}, "stream"),
        ({"stream": None}, "stream"),
        ({"t": "0.5"}, "t"),
        ({"t": float("nan")}, "t"),
        ({"t": 1.01}, "t"),
        ({"t": 0.25}, "t"),
        ({"persona": "abcdef"}, "persona"),
        ({"persona": 5}, "persona"),
        ({"persona": "\ud800"}, "persona"),
        ({"n": None}, "n"),
        ({"n": float("inf")}, "n"),
        ({"n": False}, "n"),
        ({"k": 3}, "k"),
        ({"k": 12}, "k"),
        ({"k": 0}, "k"),
        ({"tags": ["a", "b", "c"]}, "tags"),
        ({"tags": [" "]}, "tags"),
        ({"tags": [["a"]]}, "tags"),
        ({"tags": {"a": 1}}, "tags"),
        ({"locked": True}, "locked"),
        ({"days": ["sun"]}, "days"),
        ({"days": ["mon", "mon"]}, "days"),
        ({"days": "mon"}, "days"),
        ({"model": "large", "t": 7}, "t"),
    ],
)
def test_invalid_changes_are_refused_naming_the_input(change: dict[str, Any], setting: str) -> None:
    with pytest.raises(InvalidSetting) as refused:
        validate_change(DECLARED, CURRENT, change)
    assert refused.value.setting == setting


@pytest.mark.parametrize(
    ("spec", "value", "reason"),
    [
        (chat.NumberInput(id="n", label="N", step=0.5), 1e308, "is too large for a step of 0.5"),
        (chat.NumberInput(id="n", label="N", step=0.5), 10**400, "is too large"),
        (chat.NumberInput(id="n", label="N", step=5e-324), 1.0, "is too large for a step of 5e-324"),
        (chat.NumberInput(id="n", label="N", min=-1e308, step=1), 1e308, "is too large for a step of 1"),
        (chat.NumberInput(id="n", label="N", min=-(10**400), step=1), 1.0, "is too large for a step of 1"),
        (chat.NumberInput(id="n", label="N"), 10**400, "is too large"),
    ],
    ids=["1e308", "10**400", "tiny step", "from -1e308", "from -10**400", "10**400 unstepped"],
)
def test_numbers_too_large_for_a_float_are_refused(spec: Any, value: Any, reason: str) -> None:
    with pytest.raises(InvalidSetting) as refused:
        check_value(spec.to_dict(), value)
    assert (str(refused.value), refused.value.setting) == (f"N (n) {reason}", "n")


def test_an_unset_select_or_number_may_be_sent_back_unset_but_not_unset_again() -> None:
    """A client sends the whole form: a select or number input with no initial value comes
    back as null until the user sets it, and that is no change; null for a set one is refused."""
    declared = [
        chat.Select(id="model", label="Model", values=["a", "b"]).to_dict(),
        chat.NumberInput(id="n", label="N").to_dict(),
        chat.Switch(id="s", label="S").to_dict(),
    ]
    current = values_for(declared, {})
    assert current == {"model": None, "n": None, "s": False}
    assert validate_change(declared, current, {"model": None, "n": None, "s": True}) == {
        "model": None,
        "n": None,
        "s": True,
    }
    chosen = validate_change(declared, current, {"model": "b", "n": 3})
    for unset in ({"model": None}, {"n": None}):
        with pytest.raises(InvalidSetting):
            validate_change(declared, chosen, unset)
    with pytest.raises(InvalidSetting):  # 0 == False, but a number is not a switch's value
        validate_change(declared, current, {"s": 0})


def test_a_change_must_be_an_object() -> None:
    changes: list[Any] = [None, [], "model=large", 3]
    for change in changes:
        with pytest.raises(InvalidSetting, match="JSON object"):
            validate_change(DECLARED, CURRENT, change)


def test_a_redeclaration_keeps_valid_values_and_resets_the_rest() -> None:
    current = {"model": "large", "t": 3, "gone": "x"}
    values = values_for(DECLARED, current)
    assert values["model"] == "large"  # still valid: kept
    assert values["t"] == 0.5  # no longer valid: the initial value
    assert "gone" not in values  # not declared any more
    assert values["tags"] == []


def test_the_wire_payload_shows_the_current_values_as_initial() -> None:
    payload = wire_payload(DECLARED, {**CURRENT, "model": "large"})
    assert payload[0]["initial"] == "large"
    assert payload[0]["items"] == DECLARED[0]["items"]
    assert DECLARED[0]["initial"] == "small"  # the declaration itself is unchanged


def test_declared_inputs_read_back_only_what_chat_settings_writes() -> None:
    assert declared_inputs({"chat_settings_inputs": DECLARED}) == DECLARED
    assert declared_inputs({}) == []
    assert declared_inputs({"chat_settings_inputs": "x"}) == []
    assert declared_inputs({"chat_settings_inputs": [{"type": "weird", "id": "a", "label": "A"}]}) == []
    assert declared_inputs({"chat_settings_inputs": [{"type": "switch", "id": 1, "label": "A"}]}) == []


def test_check_value_prefixes_the_input() -> None:
    with pytest.raises(InvalidSetting, match=r"^Model \(model\) must be one of"):
        check_value(DECLARED[0], "x")


# --- ChatSettings.send() in a session -------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_send_declares_for_the_session_and_the_declaration_moves_with_its_record(user: Any) -> None:
    """What ``send()`` stores is in the session record, so a process that rebuilds the session
    from it (a reconnect that moved) validates against the same inputs; apps read the values
    (and the inputs) through ``chat.user_session`` and cannot set them."""
    record = records.open_session(
        uuid.uuid4(), user, channel="chan.test", new_fields={"thread_id": uuid.uuid4()}
    ).record
    live = LiveSession(record, user)
    token = live.activate()
    try:
        first = async_to_sync(chat.ChatSettings(DECLARED_WIDGETS).send)()
        assert first == {"model": "small", "t": 0.5}
        assert chat.user_session.get("chat_settings") == first
        assert [spec["id"] for spec in chat.user_session.get("chat_settings_inputs")] == ["model", "t"]
        with pytest.raises(KeyError):
            chat.user_session.set("chat_settings", {"model": "forged"})
        live.chat_settings = validate_change(
            live.chat_settings_inputs, live.chat_settings, {"model": "large"}
        )
        async_to_sync(live.persist)()

        moved = LiveSession(SocketSession.objects.get(pk=live.id), user)
        assert moved.chat_settings == {"model": "large", "t": 0.5}
        assert moved.chat_settings_inputs == live.chat_settings_inputs
        assert "chat_settings_inputs" not in moved.user_session
        with pytest.raises(InvalidSetting):
            validate_change(moved.chat_settings_inputs, moved.chat_settings, {"t": 9})

        # Declaring again keeps the user's valid choice; a new input starts at its initial value.
        again = async_to_sync(
            chat.ChatSettings([*DECLARED_WIDGETS, chat.Switch(id="extra", label="Extra", initial=True)]).send
        )()
        assert again == {"model": "large", "t": 0.5, "extra": True}
    finally:
        live.deactivate(token)
        stop_handlers.forget(live.id)


DECLARED_WIDGETS: list[chat.InputWidget] = [
    chat.Select(id="model", label="Model", values=["small", "large"], initial_index=0),
    chat.Slider(id="t", label="T", initial=0.5, min=0, max=1, step=0.1),
]


def test_send_outside_a_hook_says_so() -> None:
    with pytest.raises(RuntimeError, match="inside a hook"):
        async_to_sync(chat.ChatSettings(DECLARED_WIDGETS).send)()
