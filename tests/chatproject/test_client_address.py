"""The client address the login lockout keys on (chatproject.client_address): behind
PROXY_COUNT proxies the entry they appended to X-Forwarded-For, never one the client wrote."""

import pytest
from django.test import RequestFactory

from chatproject.client_address import client_ip


def request_from(remote: str, forwarded: str | None = None):
    headers = {} if forwarded is None else {"X-Forwarded-For": forwarded}
    return RequestFactory().get("/accounts/login/", REMOTE_ADDR=remote, headers=headers)


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (0, "203.0.113.9", "127.0.0.1"),  # no proxy configured: the header is the client's own
        (1, "203.0.113.9", "203.0.113.9"),  # nginx replaced the header (chatproject/nginx)
        (1, "198.51.100.1, 203.0.113.9", "203.0.113.9"),  # a proxy that appends: the left is made up
        (2, "198.51.100.1, 203.0.113.9, 10.0.0.2", "203.0.113.9"),  # a balancer, then nginx
        (2, "203.0.113.9", "127.0.0.1"),  # fewer entries than proxies: not through them
        (1, None, "127.0.0.1"),
        (1, "not-an-address", "127.0.0.1"),
        (1, "2001:db8::1", "2001:db8::1"),
    ],
)
def test_the_client_is_the_entry_the_nearest_proxies_wrote(settings, proxies, forwarded, expected):
    settings.PROXY_COUNT = proxies
    assert client_ip(request_from("127.0.0.1", forwarded)) == expected
