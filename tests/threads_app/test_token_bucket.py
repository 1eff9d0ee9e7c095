"""The send budget's token bucket: in memory (the embedded default) and in Redis (shared by
processes, by the API's throttle and the socket alike)."""

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

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
    # u1's refusal is remembered in this process until its wait is over (nothing can refill
    # the bucket sooner); anyone else's send is let through while Redis is down.
    assert bucket.take("u1", rate) is not None
    assert bucket.take("u2", rate) is None
    assert asyncio.run(bucket.atake("u2", rate)) is None
    assert "Redis is unavailable" in caplog.text
    private_redis.start()
    assert bucket.take("u3", rate) is None  # an empty Redis after the restart: a full bucket


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


def evals_run(url: str) -> int:
    """How many scripts the Redis server ran so far."""
    import redis

    stats = redis.Redis.from_url(url).info("commandstats")
    return sum(int(stats.get(name, {}).get("calls", 0)) for name in ("cmdstat_eval", "cmdstat_evalsha"))


def test_in_redis_a_process_takes_an_allowance_and_spends_it_without_redis(settings, private_redis):
    settings.BUDGET_ALLOWANCE = 10
    settings.REDIS_URL = private_redis.url
    rate = Rate(100, 100 / 60)
    assert rate.allowance == 10
    bucket = TokenBucket("allowance")
    before = evals_run(private_redis.url)
    assert [bucket.take("u1", rate) for _ in range(30)] == [None] * 30
    assert evals_run(private_redis.url) - before == 3, "one script per allowance of 10 tokens"

    async def from_the_socket() -> list[float | None]:
        return [await bucket.atake("u1", rate) for _ in range(20)]

    assert asyncio.run(from_the_socket()) == [None] * 20  # the same allowances
    assert evals_run(private_redis.url) - before == 5


def test_in_redis_processes_sharing_a_bucket_never_pass_its_burst(settings, private_redis):
    """Two processes alternate a user's sends: together they are let through at most the burst
    (tokens only leave the bucket), and at least the burst less one allowance per process
    but the first (the tokens the other took and has not spent)."""
    settings.BUDGET_ALLOWANCE = 10
    settings.REDIS_URL = private_redis.url
    rate = Rate(100, 1 / 3600)  # no refill to speak of during the test
    here, there = TokenBucket("shared-burst"), TokenBucket("shared-burst")
    allowed = 0
    for n in range(300):
        if (here if n % 2 else there).take("u1", rate) is None:
            allowed += 1
    assert 100 - (rate.allowance - 1) <= allowed <= 100, allowed
    wait = here.take("u1", rate)
    assert wait is not None and wait > 60  # refused, with when to try again


def test_in_redis_a_process_gives_back_what_it_did_not_spend(settings, private_redis):
    """A user whose socket moves from one process to the other at every send (a reconnect
    through a round-robin proxy): the process left gives its unspent allowance back, so the
    user gets the whole burst, not the burst less nine tokens per move."""
    settings.BUDGET_ALLOWANCE = 10
    settings.REDIS_URL = private_redis.url
    rate = Rate(100, 1 / 3600)
    processes = TokenBucket("moves"), TokenBucket("moves")

    async def alternate() -> int:
        allowed = 0
        for n in range(150):
            here = processes[n % 2]
            if await here.atake("u1", rate) is None:
                allowed += 1
            await here.agive_back("u1", rate)  # the socket leaves for the other process
        return allowed

    assert asyncio.run(alternate()) == 100
    before = evals_run(private_redis.url)
    asyncio.run(processes[0].agive_back("u1", rate))  # it holds nothing: no round trip
    assert evals_run(private_redis.url) == before


def test_in_redis_concurrent_takes_of_one_process_wait_for_one_lease_at_a_time(settings, private_redis):
    """24 request threads of one user at once (a burst of searches) against a bucket of 60 with
    an allowance of 6: one take goes to Redis at a time and the others spend what it brought,
    so none is refused and 24 tokens cost 4 scripts; the bucket's 60 are never passed."""
    settings.BUDGET_ALLOWANCE = 10
    settings.REDIS_URL = private_redis.url
    rate = Rate(60, 1 / 3600)
    assert rate.allowance == 6
    bucket = TokenBucket("concurrent")
    at_once = threading.Barrier(24)

    def search(_: int) -> float | None:
        at_once.wait()
        return bucket.take("u1", rate)

    before = evals_run(private_redis.url)
    with ThreadPoolExecutor(24) as threads:
        first = list(threads.map(search, range(24)))
        assert first == [None] * 24, first
        assert evals_run(private_redis.url) - before == 4
        rest = list(threads.map(lambda _: bucket.take("u1", rate), range(100)))
    assert sum(wait is None for wait in rest) == 36, rest


def test_in_redis_concurrent_takes_on_the_event_loop_share_a_lease_too(settings, private_redis):
    """Several sockets of one user in one process sending at once: the same, on the loop."""
    settings.BUDGET_ALLOWANCE = 10
    settings.REDIS_URL = private_redis.url
    rate = Rate(60, 1 / 3600)
    bucket = TokenBucket("concurrent-loop")

    wakeups: list[object] = []  # call_soon_threadsafe: a write to the loop's self-pipe each

    async def at_once(n: int) -> list[float | None]:
        loop = asyncio.get_running_loop()
        threadsafe = loop.call_soon_threadsafe

        def counted(*args: Any, **kwargs: Any) -> asyncio.Handle:
            wakeups.append(args[0])
            return threadsafe(*args, **kwargs)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign,assignment]
        return list(await asyncio.gather(*(bucket.atake("u1", rate) for _ in range(n))))

    before = evals_run(private_redis.url)
    assert asyncio.run(at_once(24)) == [None] * 24
    assert evals_run(private_redis.url) - before == 4
    # A take led on the loop wakes the loop's waiters with call_soon, without a self-pipe write.
    assert wakeups == [], wakeups
    rest = asyncio.run(at_once(100))
    assert sum(wait is None for wait in rest) == 36, rest
