"""The files prometheus-client's multiprocess mode keeps, one set per process.

Each process writes its values to ``<type>_<pid>.db`` files in ``PROMETHEUS_MULTIPROC_DIR``.
A process that exits says so (``process_exited``, from the graceful shutdown): its live
gauges leave the directory and its counters stay counted. One killed with SIGKILL cannot, so
every process, when it starts serving, does it for the pids whose files are there and whose
process is gone (``forget_dead_processes``). Without the variable (one process, or metrics
off) there is nothing to do.
"""

import logging
import os
import re
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)

_PID_FILE = re.compile(r"^[a-z_]+_(\d+)\.db$")


def directory() -> Path | None:
    """The shared directory of multiprocess mode, when metrics are on and it is configured."""
    if not settings.METRICS_ENABLED:
        return None
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    return Path(path) if path else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def forget_dead_processes() -> list[int]:
    """Mark the pids of the directory whose process is gone as dead; returns them."""
    path = directory()
    if path is None or not path.is_dir():
        return []
    from prometheus_client import multiprocess

    pids = {int(m.group(1)) for name in os.listdir(path) if (m := _PID_FILE.match(name))}
    dead = sorted(pid for pid in pids if pid != os.getpid() and not _alive(pid))
    for pid in dead:
        multiprocess.mark_process_dead(pid, str(path))  # type: ignore[no-untyped-call]
    if dead:
        logger.info("metrics: forgot the live gauges of %d process(es) that are gone", len(dead))
    return dead


def process_exited() -> None:
    """This process is about to exit: its live gauges no longer count."""
    path = directory()
    if path is None:
        return
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(os.getpid(), str(path))  # type: ignore[no-untyped-call]
