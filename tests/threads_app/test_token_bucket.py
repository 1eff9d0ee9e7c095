"""The send budget's token bucket: in memory (the embedded default) and in Redis (shared by
processes, by the API's throttle and the socket alike)."""

import asyncio
import time

import pytest

from threads_app.token_bucket import Rate, TokenBucket


def test_rates_parse_like_drf():
    assert Rate.parse("120/min") == Rate(120, 2.0)
    assert Rate.parse("10/s") == Rate(10, 10.0)
    assert Rate.parse("3600/hour") == Rate(3600, 1.0)
    for off in (None, "", "off", "None"):
        assert Rate.parse(off) is None


def test_in_memory_a_burst_then_the_refill_rate(settings):
    settings.REDIS_URL = ""
    bucket, rate = TokenBucket("test"), Rate(3, 20.0)
    assert [bucket.take("u1", rate) for _ in range(3)] == [None, None, None]
    wait = bucket.take("u1", rate)
    assert wait is not None and 0 < wait <= 0.05
    assert bucket.take("u2", rate) is None  # another user's bucket is full
    time.sleep(0.06)
    assert bucket.take("u1", rate) is None


def test_in_redis_the_sync_and_async_paths_share_one_bucket(settings, private_redis):
    settings.REDIS_URL = private_redis.url
    rate = Rate(4, 0.5)
    api, socket = TokenBucket("shared"), TokenBucket("shared")  # two processes' objects
    assert api.take("u1", rate) is None
    assert api.take("u1", rate) is None

    async def from_the_socket() -> list[float | None]:
        return [await socket.atake("u1", rate) for _ in range(3)]

    taken = asyncio.run(from_the_socket())
    assert taken[:2] == [None, None]
    assert taken[2] is not None and 1.0 < taken[2] <= 2.0  # a token every 2 s
    assert api.take("u1", rate) is not None


def test_redis_down_lets_sends_through(settings, private_redis, caplog):
    settings.REDIS_URL = private_redis.url
    bucket, rate = TokenBucket("down"), Rate(1, 0.01)
    assert bucket.take("u1", rate) is None
    assert bucket.take("u1", rate) is not None
    private_redis.stop()
    assert bucket.take("u1", rate) is None
    assert asyncio.run(bucket.atake("u1", rate)) is None
    assert "Redis is unavailable" in caplog.text
    private_redis.start()
    assert bucket.take("u1", rate) is None  # an empty Redis after the restart: a full bucket


@pytest.mark.parametrize("rate", ["2/s"])
def test_the_api_throttle_takes_from_the_bucket(settings, rate):
    from types import SimpleNamespace

    from threads_app.throttling import SendRateThrottle

    settings.REDIS_URL = ""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"sends": rate}}
    request = SimpleNamespace(user=SimpleNamespace(pk=f"api-{time.monotonic()}", is_authenticated=True))
    throttle = SendRateThrottle()
    assert throttle.allow_request(request, None) and throttle.allow_request(request, None)
    assert not throttle.allow_request(request, None)
    assert 0 < (throttle.wait() or 0) <= 0.5
