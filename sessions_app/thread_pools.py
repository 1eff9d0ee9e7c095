"""A thread pool of the process, started on first use and sized by a setting read then (the
database's threads, the app's synchronous code's)."""

import threading
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings


class LazyThreadPool:
    def __init__(self, size_setting: str, thread_name_prefix: str) -> None:
        self._size_setting = size_setting
        self._prefix = thread_name_prefix
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def get(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=getattr(settings, self._size_setting), thread_name_prefix=self._prefix
                )
            return self._pool
