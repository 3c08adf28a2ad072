"""Closing what garbage-collected environments leave open, from one background thread.

An adapter that holds a network session or an event loop must release it when its environment is
dropped without ``close()``. Garbage collection runs finalizers in whichever thread it interrupts,
possibly one that holds a lock (inside ``ThreadPoolExecutor.submit``, say) or a server's event loop:
a finalizer that waits, takes a lock or starts a thread there can deadlock that thread. So a
finalizer only calls :func:`close_later`, which puts the work on a ``queue.SimpleQueue`` (safe to
call from finalizers), and one daemon thread, started by :func:`start_cleanup_thread` from a
constructor, does it.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["close_later", "start_cleanup_thread"]

logger = logging.getLogger(__name__)

_pending: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]]] = queue.SimpleQueue()
_lock = threading.Lock()
_thread: threading.Thread | None = None


def start_cleanup_thread() -> None:
    """Start the cleanup thread once per process; call it from a constructor, never from a finalizer."""
    global _thread
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_work, name="turngym-cleanup", daemon=True)
            _thread.start()


def close_later(close: Callable[..., Any], *args: Any) -> None:
    """Run ``close(*args)`` on the cleanup thread: never blocks, never takes a lock; safe in finalizers."""
    _pending.put((close, args))


def _work() -> None:
    while True:
        close, args = _pending.get()
        try:
            close(*args)
        except Exception:  # a failed release must not stop the thread that does the others
            logger.warning("turngym: releasing %r failed", close, exc_info=True)
