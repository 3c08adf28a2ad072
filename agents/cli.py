"""What the three commands (``trainer.run``, ``agents.eval``, ``agents.play``) share on the console.

A mistake the user can fix prints one line on standard error and exits with :data:`USAGE_EXIT`:

    turngym: error: environment 'sokoban' does not accept 'dimm' (did you mean 'dim'?); ...

A run that started and then could not go on (every group failing, a model that does not load)
prints the same kind of line and exits with :data:`FAILURE_EXIT`. Warnings read
``turngym: warning: ...``. Messages spread over several lines are joined into one.
"""

from __future__ import annotations

import sys

__all__ = ["ERROR_PREFIX", "FAILURE_EXIT", "USAGE_EXIT", "WARNING_PREFIX", "one_line", "print_error"]

ERROR_PREFIX = "turngym: error: "
WARNING_PREFIX = "turngym: warning: "
USAGE_EXIT = 2  # a usage or configuration error, found before the work started
FAILURE_EXIT = 1  # the work started and failed


def one_line(message: object) -> str:
    """``message`` (an exception or text) on one line: its non-blank lines joined by spaces.

    An exception with no message reads as its class name.
    """
    text = " ".join(line.strip() for line in str(message).splitlines() if line.strip())
    if not text and isinstance(message, BaseException):
        return type(message).__name__
    return text


def print_error(message: object, exit_code: int = USAGE_EXIT) -> int:
    """Print ``turngym: error: <message>`` on standard error as one line; return ``exit_code``."""
    print(ERROR_PREFIX + one_line(message), file=sys.stderr)
    return exit_code
