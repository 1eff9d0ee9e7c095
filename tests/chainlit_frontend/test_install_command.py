"""``manage.py install_chainlit_frontend`` with a given wheel or directory: it takes the
frontend and the copilot out of the places Chainlit ships them, replaces an older build
whole, refuses a wheel member that leaves its directory and a source without a build."""

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

INDEX = "<!doctype html><html><head><!-- TAG INJECTION PLACEHOLDER --></head><body></body></html>"


def _wheel(path: Path, members: dict[str, str], version: str = "9.9.9") -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"chainlit-{version}.dist-info/METADATA", f"Name: chainlit\nVersion: {version}\n")
        for name, text in members.items():
            archive.writestr(name, text)
        archive.writestr("chainlit/server.py", "# not part of the build\n")
    return path


def _install(*args: str) -> str:
    out = io.StringIO()
    call_command("install_chainlit_frontend", *args, stdout=out)
    return out.getvalue()


def test_a_wheel_gives_the_frontend_and_the_copilot(tmp_path):
    wheel = _wheel(
        tmp_path / "chainlit-9.9.9-py3-none-any.whl",
        {
            "chainlit/frontend/dist/index.html": INDEX,
            "chainlit/frontend/dist/assets/index-abc.js": "app()",
            "chainlit/copilot/dist/index.js": "copilot()",
            "chainlit/translations/en-US.json": '{"common": {}}',
            "chainlit/translations.py": "# not part of the build\n",
        },
    )
    dest = tmp_path / "build"
    said = _install("--wheel", str(wheel), "--dest", str(dest))
    assert (dest / "frontend" / "index.html").read_text() == INDEX
    assert (dest / "frontend" / "assets" / "index-abc.js").read_text() == "app()"
    assert (dest / "copilot" / "index.js").read_text() == "copilot()"
    assert (dest / "translations" / "en-US.json").read_text() == '{"common": {}}'
    assert not list(dest.rglob("*.py")), list(dest.rglob("*"))
    assert json.loads((dest / "SOURCE.json").read_text())["chainlit_version"] == "9.9.9"
    assert f"CHAINLIT_FRONTEND_DIR={dest}" in said and "9.9.9" in said, said


def test_a_new_build_replaces_the_old_one_whole(tmp_path):
    dest = tmp_path / "build"
    old = {"chainlit/frontend/dist/index.html": INDEX, "chainlit/copilot/dist/index.js": "1"}
    _install(
        "--wheel",
        str(_wheel(tmp_path / "a.whl", {**old, "chainlit/frontend/dist/assets/old.js": "x"})),
        "--dest",
        str(dest),
    )
    _install(
        "--wheel",
        str(_wheel(tmp_path / "b.whl", {**old, "chainlit/copilot/dist/index.js": "2"})),
        "--dest",
        str(dest),
    )
    assert (dest / "copilot" / "index.js").read_text() == "2"
    assert not (dest / "frontend" / "assets" / "old.js").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.whl", "b.whl", "build"]  # no staging left


def test_a_directory_in_chainlits_repository_layout(tmp_path):
    source = tmp_path / "chainlit-checkout"
    (source / "frontend" / "dist").mkdir(parents=True)
    (source / "frontend" / "dist" / "index.html").write_text(INDEX)
    (source / "libs" / "copilot" / "dist").mkdir(parents=True)
    (source / "libs" / "copilot" / "dist" / "index.js").write_text("copilot()")
    dest = tmp_path / "build"
    _install("--from-dir", str(source), "--dest", str(dest))
    assert (dest / "copilot" / "index.js").read_text() == "copilot()"
    assert (dest / "frontend" / "index.html").read_text() == INDEX


@pytest.mark.parametrize(
    ("members", "reason"),
    [
        ({"chainlit/frontend/dist/index.html": INDEX}, "no copilot build"),
        ({"chainlit/copilot/dist/index.js": "c"}, "no frontend build"),
        (
            {
                "chainlit/frontend/dist/index.html": INDEX,
                "chainlit/copilot/dist/index.js": "c",
                "chainlit/frontend/dist/../../../escaped.txt": "x",
            },
            "leaves",
        ),
    ],
)
def test_a_source_without_a_whole_build_is_refused_and_the_old_build_stays(tmp_path, members, reason):
    dest = tmp_path / "build"
    good = {"chainlit/frontend/dist/index.html": INDEX, "chainlit/copilot/dist/index.js": "good"}
    _install("--wheel", str(_wheel(tmp_path / "good.whl", good)), "--dest", str(dest))
    with pytest.raises(CommandError, match=reason):
        _install("--wheel", str(_wheel(tmp_path / "bad.whl", members)), "--dest", str(dest))
    assert (dest / "copilot" / "index.js").read_text() == "good"
    assert not list(tmp_path.rglob("escaped.txt"))
