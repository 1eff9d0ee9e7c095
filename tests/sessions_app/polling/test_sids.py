"""A polling sid names its owner's channel and cannot be forged; credentials are compared
as a keyed hash (in process, no server)."""

from sessions_app.polling.sids import credential_of, may_use, owner_channel, sid_for


def scope(**headers: str) -> dict[str, object]:
    return {"headers": [(name.encode(), value.encode()) for name, value in headers.items()]}


def test_a_sid_says_its_owners_channel_and_a_changed_one_says_nothing():
    channel = "specific.abc123!def456"
    sid = sid_for(channel)
    assert owner_channel(sid) == channel
    # Another channel under this sid's timestamp and signature (flipping one character could
    # land on a signature's padding bits and change nothing).
    _payload, _, signed = sid.partition(":")
    assert owner_channel(sid_for("specific.abc123!def457").partition(":")[0] + ":" + signed) is None
    assert owner_channel(sid_for("specific.other!1")[:-2] + sid[-2:]) is None
    assert owner_channel("nope") is None


def test_requests_with_other_credentials_may_not_use_a_session():
    owner = credential_of(scope(cookie="sessionid=aaa; other=1"))
    assert owner and "aaa" not in owner
    assert may_use(credential_of(scope(cookie="sessionid=aaa")), owner)
    assert not may_use(credential_of(scope(cookie="sessionid=bbb")), owner)
    assert not may_use(credential_of(scope(authorization="Token aaa")), owner)
    # No credentials at all: the sid alone, Engine.IO's contract (python-socketio's polls).
    assert credential_of(scope(cookie="other=1")) == ""
    assert may_use("", owner)
