"""Automatic garbage collection held off while a simulation's event loop runs (``paused_gc``).

Why: CPython's cyclic collector runs whenever the container objects allocated since its last
run outnumber those freed by 700, and each run walks every tracked object of the generations it
collects. The event loop allocates containers at a high rate and keeps many of them for the
rest of the run (requests, records, cache entries), so the collector ran some 270 times in the
benchmark and walked an ever larger heap (about 4% of ``simulate``'s CPU at nominal and at 3×
load, ``bench/README.md``), yet found nothing: the loop makes no reference cycles (none in the
benchmark at either load, nor in any case of ``bench/sim_digest.py``, with collection off).
Reference counting still frees every acyclic object at once; a cycle made during a pause waits
for the first automatic collection after it.

Pauses nest and may overlap across threads: collection is turned off when the first one
begins and on again when the last one ends, and only if it was on when the first began (a
program that turned it off keeps it off).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused_gc"]


class _Pauses:
    """The pauses in progress (one per process; its lock orders them across threads)."""

    __slots__ = ("active", "lock", "resume")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = 0
        """Pauses begun and not yet ended."""
        self.resume = False
        """Whether collection was on when the first active pause began."""


_PAUSES = _Pauses()


@contextmanager
def paused_gc() -> Iterator[None]:
    """Hold off automatic cyclic garbage collection inside the ``with`` block (module
    docstring); ``gc.collect()`` still works there. Results never depend on it."""
    pauses = _PAUSES
    with pauses.lock:
        if not pauses.active:
            pauses.resume = gc.isenabled()
            gc.disable()
        pauses.active += 1
    try:
        yield
    finally:
        with pauses.lock:
            pauses.active -= 1
            if not pauses.active and pauses.resume:
                gc.enable()
