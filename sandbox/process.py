"""The process backend: a plain subprocess under rlimits. For TRUSTED code only.

It isolates nothing: the program runs as the calling user with the caller's view of the file system
and the network. What it does give: a fresh temporary work directory (removed afterwards), rlimits
(address space, CPU time, file size, processes; applied with util-linux ``prlimit``), the wall-time
limit, capped output, and a SIGKILL to the whole process group when the run ends, so that children
the program left in its group die with it (a child that starts its own session escapes that).
``RLIMIT_NPROC`` counts every process of the user and is not enforced for root, so it does not stop a
fork bomb here. Use ``docker`` or ``bubblewrap`` for anything a model wrote.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from sandbox._supervise import supervise
from sandbox.base import ExecResult, Limits, RawOutcome, SandboxBase, SandboxError, check_files, classify

__all__ = ["ProcessSandbox", "prlimit_command", "write_workdir"]

PROGRAM_NAME = "main.py"


def prlimit_command(limits: Limits, *, max_processes: bool = True, prlimit: str = "prlimit") -> list[str]:
    """The ``prlimit ... --`` prefix that applies ``limits`` to the command after it.

    The CPU limit is soft at ``cpu_time_s`` (SIGXCPU) and hard one second later (SIGKILL) for programs
    that ignore SIGXCPU. Core dumps are off.
    """
    cpu_s = max(1, round(limits.cpu_time_s))
    command = [
        prlimit,
        f"--as={limits.memory_mb * 2**20}",
        f"--cpu={cpu_s}:{cpu_s + 1}",
        f"--fsize={limits.max_file_mb * 2**20}",
        "--core=0",
    ]
    if max_processes:
        command.append(f"--nproc={limits.max_processes}")
    return [*command, "--"]


def write_workdir(workdir: Path, program: str, files: Mapping[str, bytes]) -> None:
    """Write ``main.py`` and ``files`` (already checked by :func:`sandbox.base.check_files`) into ``workdir``."""
    (workdir / PROGRAM_NAME).write_text(program, encoding="utf-8")
    for relative, content in files.items():
        target = workdir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def program_env(home: str) -> dict[str, str]:
    """A minimal environment (UTF-8 locale), nothing inherited from the caller (``-E`` ignores ``PYTHON*``)."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"}


def raw_outcome(outcome: dict) -> RawOutcome:
    """A :func:`sandbox._supervise.supervise` dict as a :class:`RawOutcome`."""
    return RawOutcome(**{name: outcome[name] for name in RawOutcome.__dataclass_fields__ if name in outcome})


class ProcessSandbox(SandboxBase):
    """Runs Python 3 programs as plain subprocesses of this interpreter. TRUSTED code only (no isolation).

    ``python``: the interpreter to run (default: this one). It runs with ``-E -s`` (no ``PYTHON*``
    variables, no user site-packages) and a minimal environment; the work dir is ``sys.path[0]``.
    """

    name = "process"

    def __init__(self, *, python: str | None = None, limits: Limits | None = None) -> None:
        self.python = python or sys.executable
        self.default_limits = limits or Limits()
        self._prlimit = shutil.which("prlimit")
        if self._prlimit is None:
            raise SandboxError("the process sandbox needs `prlimit` (util-linux): apt-get install -y util-linux")

    def run(
        self,
        program: str,
        *,
        stdin: str = "",
        files: Mapping[str, str | bytes] | None = None,
        limits: Limits | None = None,
    ) -> ExecResult:
        """Run ``program`` as ``python3 main.py``; see :class:`sandbox.base.Sandbox`."""
        limits = limits or self.default_limits
        checked = check_files(files)
        with tempfile.TemporaryDirectory(prefix="turngym-run-") as workdir:
            write_workdir(Path(workdir), program, checked)
            argv = [*prlimit_command(limits, prlimit=self._prlimit), self.python, "-E", "-s", "-B", PROGRAM_NAME]
            try:
                outcome = supervise(
                    argv,
                    cwd=workdir,
                    env=program_env(workdir),
                    stdin=stdin.encode("utf-8"),
                    wall_time_s=limits.wall_time_s,
                    max_output_bytes=limits.max_output_bytes,
                )
            except OSError as error:
                raise SandboxError(f"could not start {self.python!r}: {error}") from error
        return classify(raw_outcome(outcome), limits)
