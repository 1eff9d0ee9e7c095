"""``GET /metrics`` (chatproject.metrics_endpoint), in process: who may read it. What a turn
moves is read back from real daphnes in tests/sessions_app/test_metrics_live.py."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


async def test_loopback_reads_the_metrics_by_default(async_client):
    response = await async_client.get("/metrics")

    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    assert b"# TYPE tether_sockets_connected gauge" in response.content
    assert b"# TYPE tether_accept_to_task_end_seconds histogram" in response.content
    assert "no-store" in response["Cache-Control"]
    assert not response.cookies


async def test_an_address_outside_the_networks_is_refused_403(async_client, settings):
    settings.METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8"]

    response = await async_client.get("/metrics")

    assert response.status_code == 403, response.content
    assert b"tether_" not in response.content


async def test_behind_the_proxy_the_client_address_counts_not_the_proxys(async_client, settings):
    # nginx relays from loopback: a request from outside must not pass as loopback.
    settings.PROXY_COUNT = 1

    outside = await async_client.get("/metrics", headers={"x-forwarded-for": "203.0.113.9"})
    local = await async_client.get("/metrics", headers={"x-forwarded-for": "127.0.0.1"})

    assert outside.status_code == 403, outside.content
    assert local.status_code == 200


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", "Basic c2NyYXBlcg==", "Bearer"])
async def test_with_a_token_set_a_request_without_it_is_refused_401(async_client, settings, authorization):
    settings.METRICS_TOKEN = "s3cret-scrape-token"
    settings.METRICS_ALLOWED_NETWORKS = []
    headers = {"authorization": authorization} if authorization else {}

    response = await async_client.get("/metrics", headers=headers)

    assert response.status_code == 401, response.content
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"tether_" not in response.content


async def test_the_bearer_token_reads_the_metrics_from_any_address(async_client, settings):
    settings.METRICS_TOKEN = "s3cret-scrape-token"
    settings.METRICS_ALLOWED_NETWORKS = []

    response = await async_client.get("/metrics", headers={"authorization": "Bearer s3cret-scrape-token"})

    assert response.status_code == 200, response.content
    assert b"tether_turns_running" in response.content


async def test_no_token_and_no_network_refuses_everyone_403(async_client, settings):
    settings.METRICS_ALLOWED_NETWORKS = []

    assert (await async_client.get("/metrics")).status_code == 403


async def test_metrics_off_answer_404(async_client, settings):
    settings.METRICS_ENABLED = False

    assert (await async_client.get("/metrics")).status_code == 404


async def test_only_reads_are_answered(async_client):
    assert (await async_client.post("/metrics")).status_code == 405


async def test_the_grafana_dashboard_draws_only_metrics_tether_exports(async_client):
    """deploy/grafana/tether-dashboard.json: a renamed metric would leave its panel empty."""
    exported = (await async_client.get("/metrics")).content.decode()
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "tether-dashboard.json").read_text())
    names = {
        re.sub(r"_(bucket|sum|count)$", "", name)
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"tether_[a-z_]+", target["expr"])
    }
    assert len(names) >= 14
    missing = sorted(n for n in names if f"# TYPE {n} " not in exported)
    assert missing == [], exported
