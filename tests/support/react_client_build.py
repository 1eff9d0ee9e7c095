"""The react-client app of the browser tests (``tests/support/react_client_app``), built in the
test run: ``npm ci`` from its package-lock (``@chainlit/react-client``, React, Recoil, esbuild,
all pinned), then esbuild bundles ``src/app.jsx`` for the browser. The build is kept under
``var/test-react-client-app/<digest of the sources>``, so a later run reuses it and a changed
source or pin builds again. Without node and npm, or when npm cannot install, a test that
needs the build is skipped with the reason, except under CI, where it fails."""

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

SOURCE = Path(__file__).resolve().parent / "react_client_app"
SOURCES = ("package.json", "package-lock.json", "index.html", "src/app.jsx")
CACHE = Path(settings.VAR_DIR) / "test-react-client-app"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def _digest() -> str:
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update(name.encode() + b"\0" + (SOURCE / name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _run(command: list[str], cwd: Path, what: str) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        _unavailable(f"{what} failed ({done.returncode}): {done.stdout[-1500:]} {done.stderr[-1500:]}")


def react_client_app_dir() -> Path:
    """A directory with the app's ``index.html`` and ``app.js``, built if needed."""
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        _unavailable("node and npm are missing (Debian's nodejs and npm packages)")
    assert npm is not None
    where = CACHE / _digest()
    dist = where / "dist"
    if (dist / "app.js").is_file() and (dist / "index.html").is_file():
        return dist
    shutil.rmtree(where, ignore_errors=True)
    for name in SOURCES:
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SOURCE / name, where / name)
    _run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], where, "npm ci of the react-client app")
    building = where / "dist.partial"
    building.mkdir()
    esbuild = [
        str(where / "node_modules" / ".bin" / "esbuild"),
        "src/app.jsx",
        "--bundle",
        "--jsx=automatic",
        "--format=iife",
        "--target=es2020",
        '--define:process.env.NODE_ENV="production"',
        f"--outfile={building / 'app.js'}",
        "--log-level=warning",
    ]
    _run(esbuild, where, "esbuild of the react-client app")
    shutil.copyfile(where / "index.html", building / "index.html")
    building.rename(dist)  # whole or absent: a run stopped halfway builds again
    return dist
