"""What a training run says while it runs: a line per start-up phase and per fault, on the console and in a file.

Every module of the trainer logs to a child of the ``trainer`` logger. For the length of a run,
:func:`run_console` shows those records on standard error, one line each:

    turngym: [0.9s] starting Ray (local, 8 logical CPUs)
    turngym: warning: step 3: 8 of 8 groups dropped: RuntimeError: ... (groups sokoban/16/0, ...)

Info lines (the start-up phases) only when ``trainer.progress=true``; warnings always.
:func:`open_run_log` also writes every record, with its time, to the run directory's ``train.log``
(dropped groups one per line there).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from agents.cli import WARNING_PREFIX, one_line

__all__ = ["LOGGER", "RUN_LOG", "open_run_log", "run_console"]

LOGGER = "trainer"
RUN_LOG = "train.log"


class _ConsoleFormatter(logging.Formatter):
    def __init__(self, started: float) -> None:
        super().__init__()
        self.started = started

    def format(self, record: logging.LogRecord) -> str:
        message = one_line(record.getMessage())
        if record.levelno >= logging.WARNING:
            return f"{WARNING_PREFIX}{message}"
        return f"turngym: [{record.created - self.started:.1f}s] {message}"


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record comes (a live progress bar redirects it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


@contextlib.contextmanager
def run_console(verbose: bool) -> Iterator[None]:
    """Show the ``trainer`` loggers' records on standard error inside the block (info too if ``verbose``)."""
    logger = logging.getLogger(LOGGER)
    handler = _StderrHandler()
    handler.setLevel(logging.INFO if verbose else logging.WARNING)
    handler.setFormatter(_ConsoleFormatter(time.time()))
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def open_run_log(run_dir: Path) -> Callable[[], None]:
    """Append every ``trainer`` record to ``run_dir/train.log``; returns the function that stops it."""
    logger = logging.getLogger(LOGGER)
    handler = logging.FileHandler(run_dir / RUN_LOG, encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.DEBUG:
        logger.setLevel(logging.DEBUG)

    def close() -> None:
        logger.removeHandler(handler)
        handler.close()

    return close
