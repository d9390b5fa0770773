"""``gc_paused``: Python's cyclic garbage collector held off during bulk work.

A 10,000-host submit (plan, record, fan-out) allocates tens of thousands of objects that live
until it ends, and the collector scans them again at every generation threshold it crosses: a
fifth of the submit's time (docs/benchmarks.md, "Submit"). Paused, memory is still freed by
reference counting as it goes; only reference cycles wait for the first collection after.

Process-wide, as the collector is: nested or concurrent pauses are fine, and the outermost one
that found the collector enabled enables it again.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold the cyclic collector off for the ``with`` block (or the decorated call)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
