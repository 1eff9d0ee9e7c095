"""The frames the server writes decode, in the stock clients' reader, to what the standard
encoder's frames decoded to, whatever the values (``wire_json``, ``event_frames``); and the
event log keeps the format it had (``["event",[args]]``), so processes of the previous
release read each other's entries."""

import json
import math
from typing import Any

import pytest
from socketio import packet as sio

from sessions_app.event_frames import EncodedEvent, encode_event, from_message
from sessions_app.wire_json import dumps

VALUES: list[Any] = [
    {"text": 'café ☃ 😀 \u2028 \x00 "quoted" \\ </script>', "n": 1.5, "big": 1e300, "tiny": 5e-324},
    {"ints": [0, -1, 2**63 - 1, -(2**63), 2**64 - 1]},
    {"past64": 2**70, "negative": -(2**64)},  # orjson refuses: the standard encoder writes them
    {1: "an int key", None: "a None key"},  # orjson refuses non-string keys
    {"lone": "\ud800 surrogate"},  # orjson refuses: written as the escape it was
    [None, True, False, "", [], {}],
]


@pytest.mark.parametrize("value", VALUES)
def test_a_value_decodes_as_the_standard_encoders_frame_did(value):
    before = json.dumps(value, separators=(",", ":"))
    assert json.loads(dumps(value)) == json.loads(before)


def test_nan_becomes_null_which_javascript_can_read():
    assert json.loads(dumps({"x": math.nan}))["x"] is None


@pytest.mark.parametrize("event", ["new_message", 'we"ird\\name', "é", "\ud800"])
@pytest.mark.parametrize("args", [[], [None], [{"a": 1}, "two", 3]])
def test_an_events_frame_log_entry_offset_and_call_read_as_before(event, args):
    encoded = encode_event(event, args)
    before = sio.Packet(sio.EVENT, [event, *args], binary=False)
    assert sio.Packet(encoded_packet=encoded.frame[1:]).data == before.data
    assert json.loads(encoded.log_entry()) == [event, args]  # the event log's format, unchanged
    with_offset = encoded.with_offset(17)
    assert sio.Packet(encoded_packet=with_offset.frame[1:]).data == [event, *args, "17"]
    assert with_offset.args == [*args, "17"]
    call = sio.Packet(encoded_packet=encoded.with_ack_id(5)[1:])
    assert (call.id, call.data) == (5, [event, *args])
    carried = from_message({"type": "session.emit", "event": event, "frame": encoded.frame, "offset": 1})
    assert carried.frame is encoded.frame and carried.args == args  # decoded only when asked


def test_a_message_from_the_previous_release_carries_arguments():
    assert from_message({"type": "session.emit", "event": "e", "args": [1, 2]}).frame == '42["e",1,2]'
    assert from_message({"type": "thread.event", "event": "e", "data": {"a": 1}}).frame == '42["e",{"a":1}]'
    assert isinstance(from_message({"event": "e", "args": []}), EncodedEvent)
