"""What the commands (``agents.play``, ``agents.eval``, ``trainer.run``, ``trainer.sft``) share on the console.

:func:`run_command` is the preamble every one of them runs: ``--help``, ``--cfg``, unknown flags, and the
exit codes below. A mistake the user can fix (a :class:`UsageError`) prints one line on standard error and
exits with :data:`USAGE_EXIT`:

    turngym: error: environment 'sokoban' does not accept 'dimm' (did you mean 'dim'?); ...

A run that started and then could not go on (every group failing, a model that does not load)
prints the same kind of line and exits with :data:`FAILURE_EXIT`. Warnings read
``turngym: warning: ...``. Messages spread over several lines are joined into one.

This module imports nothing heavy, so ``--help`` is instant: each command composes its config (Hydra) only
after the arguments are read.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from omegaconf import DictConfig

__all__ = [
    "ERROR_PREFIX",
    "FAILURE_EXIT",
    "USAGE_EXIT",
    "WARNING_PREFIX",
    "UsageError",
    "one_line",
    "print_error",
    "run_command",
]

ERROR_PREFIX = "turngym: error: "
WARNING_PREFIX = "turngym: warning: "
USAGE_EXIT = 2  # a usage or configuration error, found before the work started
FAILURE_EXIT = 1  # the work started and failed
CONFIG_FLAG = "--cfg"  # print the composed config and exit


class UsageError(Exception):
    """A mistake on the command line or in a config; its message is one line that says how to fix it."""


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


def run_command(
    usage: str,
    compose: Callable[[list[str]], DictConfig],
    work: Callable[[DictConfig], int],
    argv: Sequence[str] | None = None,
    *,
    usage_errors: tuple[type[Exception], ...] = (),
    failures: tuple[type[Exception], ...] = (),
    modes: Mapping[str, Callable[[list[str]], int]] | None = None,
) -> int:
    """Run a command on ``argv`` (default ``sys.argv[1:]``) and return its exit code.

    In order:

    1. ``-h`` or ``--help`` anywhere: print ``usage`` on standard output; 0.
    2. A first argument that names one of ``modes`` (``agents.eval --summarize FILE``): that mode runs on the
       arguments after it and its result is the exit code.
    3. Any other argument starting with ``-`` except ``--cfg``: one error line naming the flags; 2.
    4. ``compose(overrides)`` builds the config from the remaining arguments; with ``--cfg`` it is printed
       as YAML on standard output; 0.
    5. ``work(config)`` does the command's work and returns the exit code.

    A :class:`UsageError` or one of ``usage_errors`` raised by ``compose`` or ``work`` prints one error line
    and returns :data:`USAGE_EXIT`; one of ``failures`` prints one line and returns :data:`FAILURE_EXIT`.
    Other exceptions propagate.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    modes = modes or {}
    if "-h" in args or "--help" in args:
        sys.stdout.write(usage)
        return 0
    if args[:1] and args[0] in modes:
        return modes[args[0]](args[1:])
    print_config = CONFIG_FLAG in args
    overrides = [a for a in args if a != CONFIG_FLAG]
    flags = [a for a in overrides if a.startswith("-")]
    if flags:
        return print_error(f"unknown flag {flags[0]!r}; flags are {_and_list(['--help', CONFIG_FLAG, *modes])}")
    try:
        config = compose(overrides)
        if print_config:
            from omegaconf import OmegaConf

            sys.stdout.write(OmegaConf.to_yaml(config))
            return 0
        return work(config)
    except (UsageError, *usage_errors) as exc:
        return print_error(exc)
    except failures as exc:
        return print_error(exc, FAILURE_EXIT)


def _and_list(words: list[str]) -> str:
    """``a, b and c``."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
