"""What the commands (``agents.play``, ``agents.eval``, ``trainer.run``, ``trainer.sft``) share on the console.

:func:`run_command` is the preamble every one of them runs: ``--help``, ``--cfg``, unknown flags, and the
exit codes below. A mistake the user can fix (a :class:`UsageError`) prints one line on standard error and
exits with :data:`USAGE_EXIT`:

    turngym: error: environment 'sokoban' does not accept 'dimm' (did you mean 'dim'?); ...

A run that started and then could not go on (every group failing, a model that does not load)
prints the same kind of line and exits with :data:`FAILURE_EXIT`. A command stopped by SIGTERM (``kill``, a
scheduler ending the job) or Ctrl-C closes what it started and exits with ``128 +`` the signal number (143,
130) after one line:

    turngym: error: stopped by SIGTERM

Warnings read ``turngym: warning: ...``. Messages spread over several lines are joined into one.

This module imports nothing heavy, so ``--help`` is instant: each command composes its config (Hydra) only
after the arguments are read.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omegaconf import DictConfig

__all__ = [
    "ERROR_PREFIX",
    "FAILURE_EXIT",
    "USAGE_EXIT",
    "WARNING_PREFIX",
    "SignalStop",
    "UsageError",
    "one_line",
    "print_error",
    "run_command",
    "sigterm_interrupts",
    "sigterm_reclaimed",
    "stopped_line",
]

ERROR_PREFIX = "turngym: error: "
WARNING_PREFIX = "turngym: warning: "
USAGE_EXIT = 2  # a usage or configuration error, found before the work started
FAILURE_EXIT = 1  # the work started and failed
CONFIG_FLAG = "--cfg"  # print the composed config and exit
SIGNAL_EXIT_BASE = 128  # a command stopped by signal N exits with 128 + N, as a shell reports it


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


class SignalStop:
    """The SIGTERM handler of :func:`sigterm_interrupts`: raises ``KeyboardInterrupt(signum)`` and remembers
    ``signum``, so that a command whose work caught the interrupt (``agents.play`` ends its episode as ``:q``
    would) still exits as stopped."""

    def __init__(self) -> None:
        self.signum: int | None = None  # the signal that arrived, None until one did

    def __call__(self, signum: int, _frame: Any) -> None:
        for stop in {self, *_active_stops}:  # the enclosing blocks (the command's) see it too
            stop.signum = signum
        raise KeyboardInterrupt(signum)


_active_stops: list[SignalStop] = []  # the sigterm_interrupts blocks open in the main thread, innermost last


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[SignalStop]:
    """While open, SIGTERM raises ``KeyboardInterrupt(signal.SIGTERM)`` in the main thread, as Ctrl-C raises
    ``KeyboardInterrupt``: ``finally`` blocks and ``with`` statements close what was started on the way out.

    Without it SIGTERM ends Python at once (nothing closed), and once Ray is up in the process Ray's own handler
    aborts it with a stack dump (exit 134). Starting Ray replaces this handler: start it inside
    :func:`sigterm_reclaimed`, which installs it again. Python runs signal handlers in the main thread only, so
    elsewhere this does nothing.
    """
    stop = SignalStop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = signal.signal(signal.SIGTERM, stop)
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _stop_again_when_swallowed(previous_hook)
    _active_stops.append(stop)
    try:
        yield stop
    finally:
        _active_stops.remove(stop)
        sys.unraisablehook = previous_hook
        signal.signal(signal.SIGTERM, previous)


def _stop_again_when_swallowed(previous: Callable[[Any], None]) -> Callable[[Any], None]:
    """An unraisable-exception hook that sends the stop's signal again when Python swallowed its interrupt.

    The handler's ``KeyboardInterrupt`` can land in code that cannot raise (a ``__del__``, a weakref callback, the
    garbage collector): Python prints ``Exception ignored in ...`` and goes on, and the command would neither
    stop nor stay quiet. Sent again, the signal interrupts the next ordinary line instead. Every other
    unraisable exception goes to the ``previous`` hook.
    """

    def hook(unraisable: Any) -> None:
        signum = _swallowed_stop(unraisable.exc_value)
        if signum is not None:
            # From another thread, a moment later: sent from here, the handler would raise inside this hook.
            again = threading.Timer(0.01, os.kill, (os.getpid(), signum))
            again.daemon = True
            again.start()
            return
        previous(unraisable)

    return hook


def _swallowed_stop(exc: BaseException | None) -> int | None:
    """The signal that ``exc``, swallowed by Python, was stopping the command for, or ``None``: the stop's own
    ``KeyboardInterrupt``, or, inside :func:`sigterm_reclaimed`, the ``SystemExit(SIGTERM)`` of a library's handler
    (``ray.init``'s ``sys.exit(signum)``, raised in a fork handler of :mod:`logging` while Ray starts its
    processes)."""
    if isinstance(exc, KeyboardInterrupt) and _active_stops and _active_stops[-1].signum is not None:
        return _active_stops[-1].signum
    if isinstance(exc, SystemExit) and _reclaiming and exc.code == signal.SIGTERM:
        return signal.SIGTERM
    return None


_reclaiming: list[None] = []  # one entry per sigterm_reclaimed block open in the main thread within a command


@contextlib.contextmanager
def sigterm_reclaimed() -> Iterator[None]:
    """Around code that installs SIGTERM handlers of its own (starting Ray: one calls ``sys.exit(15)``, one kills
    Ray's processes and calls ``sys.exit(1)``, and Ray's C++ one aborts): the innermost open
    :func:`sigterm_interrupts` handler is installed again on the way out, and a ``SystemExit`` raised inside
    (such a handler stopping the process) becomes ``KeyboardInterrupt(signal.SIGTERM)``; where Python swallows that
    ``SystemExit`` (in a finalizer or a fork handler), the signal is sent again, as for the stop's own interrupt.
    Outside such a block, or off the main thread, it changes nothing."""
    reclaim = bool(_active_stops) and threading.current_thread() is threading.main_thread()
    if reclaim:
        _reclaiming.append(None)
    try:
        yield
    except SystemExit as exc:
        if not reclaim:
            raise
        _active_stops[-1].signum = signal.SIGTERM
        raise KeyboardInterrupt(signal.SIGTERM) from exc
    finally:
        if reclaim:
            _reclaiming.pop()
            signal.signal(signal.SIGTERM, _active_stops[-1])


def stopped_line(signum: int, hint: str = "") -> str:
    """``stopped by SIGTERM`` (the signal's name), with ``; <hint>`` when given."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    return f"stopped by {name}" + (f"; {hint}" if hint else "")


def run_command(
    usage: str,
    compose: Callable[[list[str]], DictConfig],
    work: Callable[[DictConfig], int],
    argv: Sequence[str] | None = None,
    *,
    usage_errors: tuple[type[Exception], ...] = (),
    failures: tuple[type[Exception], ...] = (),
    modes: Mapping[str, Callable[[list[str]], int]] | None = None,
    stopped_hint: str = "",
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
    Steps 4 and 5 run inside :func:`sigterm_interrupts`: SIGTERM or Ctrl-C (``KeyboardInterrupt``) prints
    ``stopped by SIGTERM`` (or ``SIGINT``; then ``; <stopped_hint>`` when given) and returns ``128 +`` the signal
    number, also when ``work`` caught the interrupt and returned, or raised another error after the signal
    came. Other exceptions propagate.
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
        with sigterm_interrupts() as stop:
            try:
                config = compose(overrides)
                if print_config:
                    from omegaconf import OmegaConf

                    sys.stdout.write(OmegaConf.to_yaml(config))
                    return 0
                code = work(config)
            except BaseException as exc:
                return _exit_code(exc, stop.signum, usage_errors, failures, stopped_hint)
    except KeyboardInterrupt as exc:  # it came while the handler was being installed or taken back
        return _exit_code(exc, None, usage_errors, failures, stopped_hint)
    if stop.signum is not None:  # the work caught the interrupt and finished early
        return _stopped(stop.signum, stopped_hint)
    return code


def _exit_code(
    exc: BaseException,
    signum: int | None,
    usage_errors: tuple[type[Exception], ...],
    failures: tuple[type[Exception], ...],
    stopped_hint: str,
) -> int:
    """What :func:`run_command` prints and returns for ``exc``, raised by the command with ``signum`` received
    (``None``: no signal); exceptions it does not know are raised again.

    Once a signal arrived, any exception is the stop: a library that the interrupt reached mid-call may raise
    an error of its own instead (Hydra composing a config does). Ray's blocking calls raise a
    ``KeyboardInterrupt`` of their own, without the signal: the handler saw it.
    """
    if isinstance(exc, KeyboardInterrupt) or signum is not None:
        if signum is None:
            signum = exc.args[0] if exc.args and isinstance(exc.args[0], int) else signal.SIGINT
        return _stopped(signum, stopped_hint)
    if isinstance(exc, (UsageError, *usage_errors)):
        return print_error(exc)
    if isinstance(exc, failures):
        return print_error(exc, FAILURE_EXIT)
    raise exc


def _stopped(signum: int, hint: str) -> int:
    """Print the stopped line; return ``128 + signum``, the code the process then exits with."""
    _forget_nested_interrupt()
    return print_error(stopped_line(signum, hint), SIGNAL_EXIT_BASE + signum)


def _forget_nested_interrupt() -> None:
    """Clear CPython's record of a ``KeyboardInterrupt`` that ended an ``exec`` of source text.

    CPython notes such an interrupt in a process-wide flag (bpo-1054041) and, when the flag is still set as
    ``python -m`` exits, kills the process with SIGINT instead of exiting with its code. ``exec`` of a string
    runs through ``PyRun_StringFlags``, which sets the flag when the interrupt leaves it, even when the
    command catches the interrupt further up: ``dataclasses`` and ``namedtuple`` build their methods that way
    while modules import, so a SIGTERM landing there in the first second ended the process with -2 instead
    of 143. Each such evaluation clears the flag when it starts, so an empty one clears it for good.
    """
    import ctypes

    pythonapi = getattr(ctypes, "pythonapi", None)  # CPython only
    if pythonapi is not None and hasattr(pythonapi, "PyRun_SimpleString"):
        pythonapi.PyRun_SimpleString(b"pass")


def _and_list(words: list[str]) -> str:
    """``a, b and c``."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
