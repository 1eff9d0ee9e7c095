"""Relayed frames are put back in the order they were numbered (in process)."""

from sessions_app.polling.forwarding import InOrder


def test_frames_arriving_out_of_order_come_out_in_order_once():
    order = InOrder()
    assert order.arrived({"seq": 2, "text": "b"}) == []
    assert order.arrived({"seq": 3, "text": "c"}) == []
    assert [m["text"] for m in order.arrived({"seq": 1, "text": "a"})] == ["a", "b", "c"]
    assert [m["text"] for m in order.arrived({"seq": 4, "text": "d"})] == ["d"]
