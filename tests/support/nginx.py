"""nginx for the tests of ``make cluster`` (``chatproject.cluster``): where it is, or the test
is skipped, except under CI (``CI`` set, .ci/run installs it), where a missing nginx fails."""

import os

import pytest

from chatproject.cluster import ClusterRefused, find_nginx


def require_nginx() -> str:
    """The nginx binary ``make cluster`` would run."""
    try:
        return find_nginx(os.environ)
    except ClusterRefused as missing:
        if os.environ.get("CI"):
            pytest.fail(f"{missing}; .ci/run installs Debian's nginx-light package")
        pytest.skip(str(missing))
