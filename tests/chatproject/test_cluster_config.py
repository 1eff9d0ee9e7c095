"""The production nginx file (chatproject/nginx/tether.conf) and what ``make cluster`` makes of
it, without starting anything but ``nginx -t``: the rendered copy differs only in its marked
lines, nginx accepts it, its body limits follow Tether's budgets, and the supervisor refuses
clearly without PostgreSQL, Redis or nginx. Running clusters are in tests/e2e/test_cluster.py."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from chatproject import cluster
from chatproject.body_limits import limit_for
from chatproject.servers import SERVER_ARGS
from tests.support.nginx import require_nginx

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = cluster.SITE_TEMPLATE.read_text()
SERVICES = {"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/x", "REDIS_URL": "redis://127.0.0.1:6379/0"}


def location_blocks(config: str) -> dict[str, str]:
    """Each ``location`` of the site by its match (``= /api/uploads/``, ``/ws/``, ...), and the
    server block's own directives under ``server``."""
    blocks = dict(re.findall(r"^\s*location\s+([^{]+?)\s*\{(.*?)^\s*\}", config, flags=re.M | re.S))
    server = re.sub(r"^\s*location\s+[^{]+\{.*?^\s*\}", "", config.split("server {", 1)[1], flags=re.M | re.S)
    return {**blocks, "server": server}


def directives(block: str, name: str) -> list[str]:
    """The values of ``name`` in ``block``, comments left out."""
    lines = [line.split("#", 1)[0] for line in block.splitlines()]
    return [m.group(1).strip() for line in lines if (m := re.match(rf"\s*{name}\s+([^;]+);", line))]


def mebibytes(size: str) -> int:
    assert size.endswith("m"), size
    return int(size[:-1]) * 1024 * 1024


def test_the_rendered_site_changes_only_the_marked_lines():
    rendered = cluster.render_site(
        TEMPLATE, listen="127.0.0.1:18000", backends=["127.0.0.1:18001", "127.0.0.1:18002", "127.0.0.1:18003"]
    )

    servers = re.findall(r"^\s*server\s+(\S+)\s+(.*?);", rendered, flags=re.M)
    assert servers == [(f"127.0.0.1:1800{i}", "max_fails=3 fail_timeout=10s") for i in (1, 2, 3)]
    assert directives(rendered, "listen") == ["127.0.0.1:18000"]
    unmarked = [line for line in TEMPLATE.splitlines() if "# cluster:" not in line]
    assert [line for line in rendered.splitlines() if "# cluster:" not in line] == unmarked


def test_a_template_without_its_marks_is_refused():
    with pytest.raises(ValueError, match="cluster:listen"):
        cluster.render_site(TEMPLATE.replace("# cluster:listen", ""), listen="x:1", backends=["y:2"])


def test_nginx_accepts_the_rendered_configuration(tmp_path):
    nginx = require_nginx()
    local = cluster.Cluster(port=18000, workdir=tmp_path, env=SERVICES)
    local.write_config()

    result = subprocess.run(
        local.nginx_command(nginx, "-t"), capture_output=True, text=True, timeout=30, check=False
    )

    assert result.returncode == 0, result.stderr
    assert "[warn]" not in result.stderr and "[emerg]" not in result.stderr
    # Everything nginx writes is under the work directory.
    main = local.config_path.read_text()
    for path in re.findall(r"(?:pid|error_log|access_log|_temp_path)\s+(\S+?)[;\s]", main):
        assert Path(path).is_relative_to(tmp_path), path


def test_sockets_are_upgraded_unbuffered_and_may_idle():
    blocks = location_blocks(TEMPLATE)
    server = blocks["server"]
    assert directives(server, "proxy_http_version") == ["1.1"]
    headers = dict(h.split(None, 1) for h in directives(server, "proxy_set_header"))
    assert headers["Upgrade"] == "$http_upgrade"
    assert headers["Connection"] == "$tether_upstream_connection"
    assert headers["Host"] == "$http_host"  # with the port: the CSRF Origin check compares it
    assert headers["X-Forwarded-For"] == "$remote_addr"
    assert headers["X-Forwarded-Proto"] == "$scheme"
    # No location sets headers of its own: that would drop every header set for the server.
    assert all(not directives(b, "proxy_set_header") for name, b in blocks.items() if name != "server")
    for path in ("/ws/", "/chainlit/ws/"):  # the endpoint, and its twin under CHAINLIT_PATH_PREFIX
        sockets = blocks[path]
        assert directives(sockets, "proxy_buffering") == ["off"], path
        assert directives(sockets, "proxy_read_timeout") == ["1h"], path
        assert "http_403" in directives(sockets, "proxy_next_upstream")[0], path


def test_no_request_that_reached_a_process_is_sent_to_another():
    for name, block in location_blocks(TEMPLATE).items():
        for value in directives(block, "proxy_next_upstream"):
            assert "non_idempotent" not in value, name
            assert "http_500" not in value and "http_503" not in value, name


@pytest.mark.parametrize(
    ("location", "path"),
    [
        ("server", "/api/threads/"),
        ("server", "/api/integrations/threads/x/messages/"),
        ("= /api/chat/send", "/api/chat/send"),
        ("= /api/uploads/", "/api/uploads/"),
    ],
)
def test_body_limits_are_a_little_above_tethers_budgets(location, path):
    """Tether answers a body just over its budget with its own JSON 413; nginx refuses what is
    far over it without reading it, and never what Tether would take."""
    (size,) = directives(location_blocks(TEMPLATE)[location], "client_max_body_size")
    budget = limit_for(path)
    assert budget <= mebibytes(size) <= budget + 1024 * 1024, (path, size, budget)


def test_every_location_proxies_to_the_processes():
    for name, block in location_blocks(TEMPLATE).items():
        if name in {"server"} or name.startswith("@"):
            continue
        assert directives(block, "proxy_pass") == ["http://tether"], name


# --- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({}, "DATABASE_URL and REDIS_URL not set"),
        ({"DATABASE_URL": SERVICES["DATABASE_URL"]}, "REDIS_URL not set"),
        ({**SERVICES, "DATABASE_URL": "sqlite:///var/db.sqlite3"}, "DATABASE_URL must name PostgreSQL"),
    ],
)
def test_the_cluster_needs_postgresql_and_redis(env, says):
    with pytest.raises(cluster.ClusterRefused, match=says):
        cluster.check_services(env)
    cluster.check_services(SERVICES)


def test_a_missing_nginx_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(cluster, "NGINX_CANDIDATES", ())
    with pytest.raises(cluster.ClusterRefused, match="apt-get install nginx-light"):
        cluster.find_nginx({"PATH": "/nonexistent"})
    with pytest.raises(cluster.ClusterRefused, match="NGINX=/no/nginx names no executable"):
        cluster.find_nginx({"NGINX": "/no/nginx"})


def test_the_command_refuses_without_the_shared_services(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    result = subprocess.run(
        [sys.executable, "-m", "chatproject.cluster", "--workdir", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "DATABASE_URL and REDIS_URL not set" in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing was started or written


@pytest.mark.parametrize(
    ("server", "module"), [("daphne", "chatproject.serve"), ("uvicorn", "chatproject.serve_uvicorn")]
)
def test_make_cluster_runs_the_chosen_server_with_make_runs_arguments(server, module):
    """`make cluster` hands the supervisor the server (``SERVER``) and the Makefile's
    DAPHNE_ARGS or UVICORN_ARGS, which are also the supervisor's own defaults for that server
    (what tests and benches get); `make run` serves with the same."""
    dry_run = subprocess.run(
        ["make", "-n", "run", "cluster", "PROCESSES=3", "PORT=9000", f"SERVER={server}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    (served,) = [line for line in dry_run if " chatproject.asgi:application" in line]
    (supervisor,) = [line for line in dry_run if "-m chatproject.cluster --server" in line]
    run_args = served.split(f"-m {module} ", 1)[1].split(" -b ")[0].split()
    assert supervisor.split(" -- ", 1)[1].split() == run_args
    assert f"--server {server} --processes 3 --host 127.0.0.1 --port 9000" in supervisor
    assert list(SERVER_ARGS[server]) == run_args
    local = cluster.Cluster(port=18000, env={**SERVICES, "SERVER": server})
    assert local.server == server and local.daphne_args == run_args


def test_an_unknown_server_is_refused_before_anything_runs(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "chatproject.cluster", "--server", "gunicorn", "--workdir", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, **SERVICES},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "Tether runs on daphne or uvicorn" in result.stderr
    assert list(tmp_path.iterdir()) == []
