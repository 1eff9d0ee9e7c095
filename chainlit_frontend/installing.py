"""Taking a Chainlit frontend build out of the ``chainlit`` wheel (or a directory), into the
layout ``chainlit_frontend.build`` serves: ``frontend/`` (the wheel's
``chainlit/frontend/dist``), ``copilot/`` (its ``chainlit/copilot/dist``) and
``translations/`` (its ``chainlit/translations``, the frontend's strings in each language).

A new build is written next to the old one and swapped in with one rename, so a running
server serves either the old build or the new one, never half of each.
"""

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

# The Chainlit release whose frontend Tether is tested with, and its wheel's digest on PyPI.
CHAINLIT_VERSION = "2.12.0"
CHAINLIT_WHEEL_SHA256 = "17cbd2c408f775a123892984bf9170674b5c81a01f7a8af278912e2786253ffc"
# Where each part of the build sits in the wheel, in an installed chainlit package, and in a
# checkout of Chainlit's repository.
PARTS = {
    "frontend": ["chainlit/frontend/dist", "frontend/dist"],
    "copilot": ["chainlit/copilot/dist", "copilot/dist", "libs/copilot/dist"],
    # The frontend's strings (chainlit_compat's /project/translations), optional in a directory.
    "translations": ["chainlit/translations", "translations", "backend/chainlit/translations"],
}
SOURCE_FILE = "SOURCE.json"


class InstallError(Exception):
    """The build could not be installed; the message says why."""


def download_wheel(into: Path, version: str = CHAINLIT_VERSION) -> Path:
    """``pip download chainlit==<version> --no-deps`` into ``into``; the pinned release is
    checked against its digest."""
    command = [sys.executable, "-m", "pip", "download", f"chainlit=={version}", "--no-deps"]
    done = subprocess.run(
        [*command, "--only-binary=:all:", "--disable-pip-version-check", "--quiet", "-d", str(into)],
        capture_output=True,
        text=True,
        check=False,
    )
    wheels = sorted(into.glob(f"chainlit-{version}-*.whl"))
    if done.returncode != 0 or not wheels:
        raise InstallError(f"pip could not download chainlit=={version}: {done.stderr.strip()[-2000:]}")
    if version == CHAINLIT_VERSION and _sha256(wheels[0]) != CHAINLIT_WHEEL_SHA256:
        raise InstallError(f"{wheels[0].name} does not have the digest of chainlit {version} on PyPI")
    return wheels[0]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def install(source: Path, dest: Path) -> dict[str, object]:
    """Install the build in ``source`` (a wheel or a directory) at ``dest``; what was
    installed is recorded in ``dest/SOURCE.json`` and returned."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        version = None
        if source.is_file() and source.suffix == ".whl":
            version = _extract_wheel(source, staging)
        elif source.is_dir():
            _copy_dir(source, staging)
        else:
            raise InstallError(f"{source} is neither a chainlit wheel nor a directory")
        if not (staging / "frontend" / "index.html").is_file():
            raise InstallError(f"{source} has no frontend build (frontend/dist/index.html)")
        if not (staging / "copilot" / "index.js").is_file():
            raise InstallError(f"{source} has no copilot build (copilot/dist/index.js)")
        files = sum(1 for p in staging.rglob("*") if p.is_file())
        record: dict[str, object] = {"source": str(source), "chainlit_version": version, "files": files}
        (staging / SOURCE_FILE).write_text(json.dumps(record, indent=1) + "\n")
        _swap(staging, dest)
        return record
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _extract_wheel(wheel: Path, into: Path) -> str | None:
    """Extract the build's parts; the wheel's chainlit version (from its METADATA)."""
    version = None
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            if member.filename.endswith(".dist-info/METADATA"):
                found = re.search(r"^Version: (\S+)$", archive.read(member).decode(), re.MULTILINE)
                version = found.group(1) if found else None
            if member.is_dir():
                continue
            target = _target(PurePosixPath(member.filename))
            if target is None:
                continue
            path = into / target
            path.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as src, path.open("wb") as out:
                shutil.copyfileobj(src, out)
    return version


def _target(name: PurePosixPath) -> PurePosixPath | None:
    """Where a wheel member goes in the build (``frontend/...``, ``copilot/...``), or None.
    A member whose path leaves its part (``..``, absolute) is refused."""
    for part, places in PARTS.items():
        prefix = PurePosixPath(places[0])
        if name.is_relative_to(prefix):
            rest = name.relative_to(prefix)
            if rest.is_absolute() or ".." in rest.parts:
                raise InstallError(f"the wheel's member {name} leaves {prefix}")
            return PurePosixPath(part) / rest
    return None


def _copy_dir(source: Path, into: Path) -> None:
    for part, places in PARTS.items():
        found = next((source / p for p in places if (source / p).is_dir()), None)
        if found is None and (source / part).is_dir():
            found = source / part  # already in this layout (a build installed before)
        if found is not None:
            shutil.copytree(found, into / part)


def _swap(staging: Path, dest: Path) -> None:
    """Put ``staging`` at ``dest``: the old build, if any, is renamed aside first, then removed."""
    old = dest.with_name(f".{dest.name}-old")
    shutil.rmtree(old, ignore_errors=True)
    if dest.exists():
        dest.rename(old)
    staging.rename(dest)
    shutil.rmtree(old, ignore_errors=True)
