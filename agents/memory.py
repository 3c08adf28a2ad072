"""Give freed heap memory back to the operating system, and measure a process's peak between two points.

glibc keeps the memory of freed tensors in its heap for the next allocation, so a process that ran
one large forward and backward stays at that peak while it waits. The learner's workers and the
engine wait most of the time (the roles take turns), and on one machine their resident memory adds
up: :func:`return_free_memory` after each large piece of work lets an idle process shrink back to
its weights and optimizer state. Elsewhere than glibc it does nothing.

:func:`peak_resident_mib` reads the kernel's high-water mark of this process's resident memory (``VmHWM``)
and resets it, so successive calls give the peak of each piece of work in between (Linux; elsewhere ``None``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re
from pathlib import Path

__all__ = ["peak_resident_mib", "resident_mib", "return_free_memory"]


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


def resident_mib() -> float | None:
    """This process's resident memory now (MiB, ``VmRSS``); ``None`` where ``/proc`` does not say (not Linux)."""
    return _status_mib("VmRSS")


def peak_resident_mib(reset: bool = True) -> float | None:
    """This process's peak resident memory (MiB) since it started or since the last reset, then (``reset``)
    start a new peak from the current resident memory: writing ``5`` to ``/proc/self/clear_refs`` sets
    ``VmHWM`` back to ``VmRSS``. ``None`` where ``/proc`` does not say (not Linux)."""
    peak = _status_mib("VmHWM")
    if peak is not None and reset:
        try:
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            return None
    return peak


def _status_mib(field: str) -> float | None:
    try:
        found = re.search(rf"{field}:\s+(\d+) kB", Path("/proc/self/status").read_text())
    except OSError:
        return None
    return int(found.group(1)) / 1024 if found else None
