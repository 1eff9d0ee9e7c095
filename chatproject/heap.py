"""The server process's heap, frozen out of the garbage collector once the app is loaded.

CPython's collector runs a full collection, over every tracked object, each time the objects
that survived younger collections pass a quarter of the older ones. A server's heap is
mostly what it loaded (Django, the apps, the server, the chat app: hundreds of thousands of
objects that live as long as the process), so a request that keeps many new objects alive
for a moment (a ``resume_thread`` of 5000 steps: their StepDicts and the chat context's
messages) paid for full collections that walked all of that: the read, the context and the
encoding of such a resume took 138 ms of CPU in process, 74 ms frozen, 60 ms with the collector
off. ``gc.freeze()`` moves what exists at startup into a
permanent generation the collector never walks (what it reclaims of it is nothing: those
objects are never freed), so a collection costs what the young objects cost.

``GC_FREEZE=0`` leaves the heap to the collector as before (to compare, or to debug a leak of
objects made at startup, which a frozen heap keeps).
"""

import gc
import logging

from django.conf import settings

logger = logging.getLogger(__name__)


def freeze_startup_heap() -> int:
    """Collect what startup left as garbage, then freeze the rest (when ``GC_FREEZE``);
    returns how many objects were frozen."""
    if not settings.GC_FREEZE:
        return 0
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    logger.info("froze %d objects of the startup heap out of the garbage collector", frozen)
    return frozen
