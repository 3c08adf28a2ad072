"""Give freed heap memory back to the operating system.

glibc keeps the memory of freed tensors in its heap for the next allocation, so a process that ran
one large forward and backward stays at that peak while it waits. The learner's workers and the
engine wait most of the time (the roles take turns), and on one machine their resident memory adds
up: :func:`return_free_memory` after each large piece of work lets an idle process shrink back to
its weights and optimizer state. Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

__all__ = ["return_free_memory"]


@functools.cache
def _malloc_trim():
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc
        return None


def return_free_memory() -> bool:
    """Release the free pages of the C heap (``malloc_trim(0)``); ``True`` when glibc did it."""
    trim = _malloc_trim()
    return bool(trim is not None and trim(0) >= 0)
