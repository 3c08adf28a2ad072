"""The sandbox contract: run one Python 3 program under hard limits and report what happened.

A :class:`Sandbox` runs ``python3 main.py`` where ``main.py`` holds ``program`` (Python 3 source), in a
fresh private work directory that also holds ``files``, with ``stdin`` on standard input, under
:class:`Limits`. It returns an :class:`ExecResult`. Guarantees every backend keeps:

* A program is never a reason to raise. A crash, a hang, a memory or fork bomb, a flood of output:
  each is a result with a :class:`Status`. :class:`SandboxError` is raised only when the sandbox
  itself cannot work (the Docker daemon is gone, ``bwrap`` is missing, the image is not built), and
  its message says what to do.
* Each run starts from a clean work directory; nothing of one run is visible to the next, and no
  process of a run outlives it (the backends differ in how strongly, see each one).
* Output is captured as UTF-8 text (invalid bytes replaced), at most ``max_output_bytes`` per stream.

Status precedence. Once a supervisor has killed a program its exit code says nothing, so the status
names the first limit that applies, in this order:

1. ``OUTPUT_LIMIT``: stdout or stderr went past ``max_output_bytes`` (the run is killed at once).
2. ``TIMEOUT``: the wall-time limit passed, or the CPU-time limit did (SIGXCPU / SIGKILL from the CPU
   rlimit).
3. ``MEMORY``: the program died of ``MemoryError`` (the address-space rlimit) or was OOM-killed.
4. ``KILLED``: a signal ended the program that none of the above explains.
5. ``RUNTIME_ERROR``: the program exited with a non-zero code (an uncaught exception included).
6. ``OK``: exit code 0.
"""

from __future__ import annotations

import asyncio
import enum
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "ExecResult",
    "Limits",
    "RawOutcome",
    "Sandbox",
    "SandboxBase",
    "SandboxError",
    "Status",
    "classify",
]


class SandboxError(RuntimeError):
    """The sandbox infrastructure failed (not the program): the message says how to fix it."""


class Status(str, enum.Enum):
    """How a run ended; see the module docstring for the precedence between them."""

    OK = "ok"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    OUTPUT_LIMIT = "output_limit"
    KILLED = "killed"  # ended by a signal that no limit explains


@dataclass(frozen=True)
class Limits:
    """Hard limits for one run.

    ``wall_time_s``: elapsed time before the whole run is killed. ``cpu_time_s``: CPU seconds of the
    program (RLIMIT_CPU, per process). ``memory_mb``: address space per process (RLIMIT_AS); the Docker
    backend and the bubblewrap backend with per-run cgroups also cap the memory of all the run's
    processes together, files in its tmpfs included, at ``memory_mb`` + the tmpfs size + a small
    overhead. ``max_processes``: processes and threads the program may have at once.
    ``max_output_bytes``: captured bytes per stream (stdout, stderr). ``max_file_mb``: largest file the
    program may write (RLIMIT_FSIZE); the isolating backends give the run a tmpfs of
    ``max(64, 4 * max_file_mb)`` MB to write in, which bounds the total.
    """

    wall_time_s: float = 10.0
    cpu_time_s: float = 10.0
    memory_mb: int = 512
    max_processes: int = 64
    max_output_bytes: int = 1_000_000
    max_file_mb: int = 16

    def __post_init__(self) -> None:
        for name in ("wall_time_s", "cpu_time_s", "memory_mb", "max_processes", "max_output_bytes", "max_file_mb"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Limits.{name} must be positive, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class ExecResult:
    """What one run produced. ``exit_code`` is ``None`` when a signal ended the program."""

    status: Status
    exit_code: int | None
    stdout: str
    stderr: str
    wall_time_s: float
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @property
    def ok(self) -> bool:
        """The program exited with code 0 within every limit."""
        return self.status is Status.OK


@runtime_checkable
class Sandbox(Protocol):
    """Runs untrusted Python 3 programs; see the module docstring for the guarantees."""

    name: str

    def run(
        self,
        program: str,
        *,
        stdin: str = "",
        files: Mapping[str, str | bytes] | None = None,
        limits: Limits | None = None,
    ) -> ExecResult:
        """Run ``python3 main.py`` (``main.py`` = ``program``) in a fresh work dir holding ``files``.

        ``files`` maps relative paths (subdirectories allowed, no ``..``, not ``main.py``) to text or
        bytes. Never raises because of the program; raises :class:`SandboxError` only on
        infrastructure failure and :class:`ValueError` on malformed arguments.
        """
        ...

    async def arun(
        self,
        program: str,
        *,
        stdin: str = "",
        files: Mapping[str, str | bytes] | None = None,
        limits: Limits | None = None,
    ) -> ExecResult:
        """:meth:`run` without blocking the event loop."""
        ...

    def close(self) -> None:
        """Release every resource (processes, containers); idempotent."""
        ...


class SandboxBase:
    """Shared plumbing: ``arun`` on a worker thread, context manager, argument checks."""

    name: str = "base"

    def run(
        self,
        program: str,
        *,
        stdin: str = "",
        files: Mapping[str, str | bytes] | None = None,
        limits: Limits | None = None,
    ) -> ExecResult:
        raise NotImplementedError

    async def arun(
        self,
        program: str,
        *,
        stdin: str = "",
        files: Mapping[str, str | bytes] | None = None,
        limits: Limits | None = None,
    ) -> ExecResult:
        return await asyncio.to_thread(self.run, program, stdin=stdin, files=files, limits=limits)

    def close(self) -> None:
        """Nothing to release by default."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def check_files(files: Mapping[str, str | bytes] | None) -> dict[str, bytes]:
    """Validate ``files`` and encode text as UTF-8; raises ValueError on a path that could escape."""
    checked: dict[str, bytes] = {}
    for path, content in (files or {}).items():
        parts = path.split("/")
        if not path or path.startswith("/") or any(part in ("", ".", "..") for part in parts) or "\x00" in path:
            raise ValueError(f"file path {path!r} must be relative, without '.', '..' or empty parts")
        if path == "main.py":
            raise ValueError("'main.py' is the program itself: pass it as `program`, not in `files`")
        if isinstance(content, str):
            content = content.encode("utf-8")
        if not isinstance(content, bytes):
            raise ValueError(f"file {path!r} must be str or bytes, got {type(content).__name__}")
        checked[path] = content
    return checked


@dataclass(frozen=True)
class RawOutcome:
    """What a supervisor observed, before classification (shared by every backend)."""

    returncode: int | None  # the exit code, or None when a signal ended the process
    term_signal: int | None  # the signal that ended the process, if one did
    stdout: bytes
    stderr: bytes
    wall_time_s: float
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False  # the supervisor killed the run at the wall-time limit
    output_limited: bool = False  # the supervisor killed the run for too much output
    oom_killed: bool = False  # the kernel's OOM killer acted on the run (cgroup memory limit)
    cpu_time_s: float = 0.0  # user + system CPU seconds of the program's main process


_MEMORY_MARKERS = ("MemoryError",)


def _died_of_memory_error(stderr: bytes) -> bool:
    lines = stderr.rstrip().splitlines()
    return bool(lines) and lines[-1].decode("utf-8", "replace").startswith(_MEMORY_MARKERS)


def classify(raw: RawOutcome, limits: Limits) -> ExecResult:
    """Turn a supervisor's observation into an :class:`ExecResult` (precedence: module docstring)."""
    if raw.output_limited:
        status = Status.OUTPUT_LIMIT
    elif raw.timed_out or _hit_cpu_limit(raw, limits):
        status = Status.TIMEOUT
    elif raw.oom_killed or (raw.returncode not in (None, 0) and _died_of_memory_error(raw.stderr)):
        status = Status.MEMORY
    elif raw.term_signal is not None:
        status = Status.KILLED
    elif raw.returncode != 0:
        status = Status.RUNTIME_ERROR
    else:
        status = Status.OK
    return ExecResult(
        status=status,
        exit_code=raw.returncode,
        stdout=raw.stdout.decode("utf-8", "replace"),
        stderr=raw.stderr.decode("utf-8", "replace"),
        wall_time_s=raw.wall_time_s,
        stdout_truncated=raw.stdout_truncated,
        stderr_truncated=raw.stderr_truncated,
    )


def _hit_cpu_limit(raw: RawOutcome, limits: Limits) -> bool:
    # RLIMIT_CPU sends SIGXCPU at the soft limit and SIGKILL at the hard one (soft + 1 s) to a program
    # that ignores SIGXCPU; a SIGKILL after the CPU budget was spent is the rlimit's.
    if raw.term_signal == signal.SIGXCPU:
        return True
    return raw.term_signal == signal.SIGKILL and raw.cpu_time_s >= limits.cpu_time_s
