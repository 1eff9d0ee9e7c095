"""The server process's startup heap frozen out of the garbage collector (``chatproject.heap``)."""

import gc
from collections.abc import Iterator

import pytest

from chatproject.heap import freeze_startup_heap


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """Give the test process's heap back to the collector after the test."""
    try:
        yield
    finally:
        gc.unfreeze()


def _walked(obj: object) -> bool:
    """Whether the collector's generations hold ``obj`` (a frozen object is in none)."""
    return any(each is obj for each in gc.get_objects())


def test_a_freeze_takes_what_was_loaded_out_of_the_collectors_walks(settings, unfrozen):
    settings.GC_FREEZE = True
    loaded = {"made": ["at startup"]}
    assert _walked(loaded)

    frozen = freeze_startup_heap()

    assert frozen > 0 and gc.get_freeze_count() == frozen
    assert not _walked(loaded), "an object made before the freeze is still walked by every collection"
    later: dict[str, list[str]] = {"made": ["after"]}
    assert _walked(later), "an object made after the freeze is not collected as usual"


def test_gc_freeze_off_leaves_the_heap_to_the_collector(settings, unfrozen):
    settings.GC_FREEZE = False
    loaded = {"made": ["at startup"]}

    assert freeze_startup_heap() == 0
    assert gc.get_freeze_count() == 0
    assert _walked(loaded)
