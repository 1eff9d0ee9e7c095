"""Loaded by a daphne that ``bench/idle_sockets.py --tracemalloc`` starts (this directory is
put first on its ``PYTHONPATH``): tracemalloc runs from the start, and each SIGUSR1 writes a
snapshot to ``$MEMORY_PROBE_DIR/<n>.snapshot`` for the script to compare."""

import itertools
import os
import signal
import tracemalloc

_DIR = os.environ.get("MEMORY_PROBE_DIR", "")
if _DIR:
    tracemalloc.start(int(os.environ.get("MEMORY_PROBE_FRAMES", "8")))
    _count = itertools.count()

    def _dump(*_: object) -> None:
        tracemalloc.take_snapshot().dump(os.path.join(_DIR, f"{next(_count)}.snapshot"))

    signal.signal(signal.SIGUSR1, _dump)
