"""Give freed heap memory back to the operating system, and measure a process's peak between two points.

glibc keeps the memory of freed tensors in its heap for the next allocation, so a process that ran
one large forward and backward stays at that peak while it waits. The learner's workers and the
engine wait most of the time (the roles take turns), and on one machine their resident memory adds
up: :func:`return_free_memory` after each large piece of work lets an idle process shrink back to
its weights and optimizer state. Elsewhere than glibc it does nothing.

Within a piece of work, glibc serves an allocation from its heap unless it is larger than its mmap threshold,
which it raises to the size of each large block freed (up to 32 MiB): after the first forward most activations
come from the heap, where they fragment it, and a process's peak then moves by hundreds of MiB from one run of
the same work to the next. :func:`map_large_allocations` fixes the threshold, so every tensor above it is its own
mapping, returned to the system when freed.

:func:`peak_resident_mib` reads the kernel's high-water mark of this process's resident memory (``VmHWM``)
and resets it, so successive calls give the peak of each piece of work in between (Linux; elsewhere ``None``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re
from pathlib import Path
from typing import Any

__all__ = ["map_large_allocations", "peak_resident_mib", "resident_mib", "return_free_memory"]

M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
MAX_MMAP_THRESHOLD_MIB = 32  # glibc's ceiling for it on 64-bit systems (HEAP_MAX_SIZE / 2)


@functools.cache
def _libc_function(name: str, argtypes: tuple[Any, ...] = (), restype: Any = ctypes.c_int) -> Any:
    """glibc's function ``name`` through ctypes, ``None`` where the C library is not glibc's or lacks it."""
    library = ctypes.util.find_library("c")
    try:
        function = getattr(ctypes.CDLL(library), name) if library else None
    except (OSError, AttributeError):  # not glibc
        return None
    if function is not None and argtypes:
        function.argtypes, function.restype = list(argtypes), restype
    return function


def map_large_allocations(threshold_mib: float) -> bool:
    """Serve every allocation of at least ``threshold_mib`` MiB from its own memory mapping, from now on in this
    process (glibc's ``M_MMAP_THRESHOLD``, no longer adjusted); ``True`` when glibc took it. ``0`` leaves glibc's
    adjusting threshold as it is and returns ``False``. Raises ``ValueError`` beyond glibc's ceiling (32 MiB)."""
    if threshold_mib < 0 or threshold_mib > MAX_MMAP_THRESHOLD_MIB:
        limit = MAX_MMAP_THRESHOLD_MIB
        raise ValueError(f"an mmap threshold must be 0 (glibc's own) to {limit} MiB, not {threshold_mib}")
    mallopt = _libc_function("mallopt", (ctypes.c_int, ctypes.c_int))
    if not threshold_mib or mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, int(threshold_mib * 1024**2)))


def return_free_memory() -> bool:
    """Release the free pages of the C heap (``malloc_trim(0)``); ``True`` when glibc did it."""
    trim = _libc_function("malloc_trim")
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
