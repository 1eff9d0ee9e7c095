"""The browser client's unit tests (``tests/js/*.test.mjs``: reconcilePending, the transcript
model, photos) run under node's built-in test runner, so ``make test`` stays one runner."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def test_the_client_unit_tests_pass_under_node():
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):
            pytest.fail("node is missing (Debian's nodejs package)")
        pytest.skip("node is not installed")
    files = sorted(str(path) for path in HERE.glob("*.test.mjs"))
    assert files, "no JavaScript tests found"
    result = subprocess.run(
        [node, "--test", "--test-reporter=tap", *files],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=HERE.parents[1],
        check=False,
    )
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-4000:]
    assert "# fail 0" in result.stdout
