"""The bubblewrap backend: each run in fresh Linux namespaces made by ``bwrap``. No daemon needed.

What a run sees and may do:

* Namespaces: ``--unshare-all`` (user, pid, network, ipc, uts, cgroup). The network namespace has
  only a loopback device that is down, so no connection goes anywhere, 127.0.0.1 included.
* File system: a new root holding read-only binds of ``/usr`` (and the ``/bin``, ``/lib``... links or
  directories at the top), the interpreter's prefix when it lies outside ``/usr``, and
  ``/etc/ld.so.cache``; fresh ``/proc``, ``/dev`` and a private ``/tmp``; the work dir at ``/work``
  (read-write, the current directory). The root itself is read-only: only ``/work`` and ``/tmp``
  (gone with the run) can be written. Nothing else of the host exists inside: not ``/root``, not
  ``/home``, not ``/etc/shadow``, not the repository.
* Processes: ``--die-with-parent`` and ``--new-session``; the program is pid 2 of its own pid
  namespace, so when the run ends (bwrap killed with its process group by the supervisor) the kernel
  kills every process left in the namespace, daemons included.
* Exit codes: bwrap reports a program killed by signal N as exit code 128 + N, so an exit code in
  129..192 is read as that signal (``exit_code`` None, status by signal).
* Limits: rlimits set inside the namespace with util-linux ``prlimit`` (RLIMIT_AS, RLIMIT_CPU,
  RLIMIT_FSIZE, RLIMIT_NPROC), the wall time and output caps by the supervisor.

Fork bombs. The kernel ignores ``RLIMIT_NPROC`` for processes whose real user is root. When this
library runs as root it therefore starts ``bwrap`` as an unprivileged user (``run_as_uid``, default
65534 "nobody"), whose user namespace it creates unprivileged; ``RLIMIT_NPROC`` is applied inside
that namespace, where the kernel counts the processes of this run only (per-user-namespace counts,
Linux 5.14 and later), so concurrent runs do not share the budget. The work dir is chowned to that
user. When not root, bwrap runs as the caller, with the same counting.

Not contained here (use the Docker backend where it matters): total memory of many processes (each
one is capped by RLIMIT_AS, so at most ``max_processes * memory_mb``) and the total size of the files
a run writes to its work dir (each file is capped by RLIMIT_FSIZE).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from sandbox._supervise import supervise
from sandbox.base import ExecResult, Limits, RawOutcome, SandboxBase, SandboxError, check_files, classify
from sandbox.process import PROGRAM_NAME, prlimit_command, raw_outcome, write_workdir

__all__ = ["BubblewrapSandbox", "bubblewrap_works"]

WORKDIR = "/work"
NOBODY = 65534
_TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_INSTALL_HINT = "install bubblewrap (`apt-get install -y bubblewrap`)"


def _default_python() -> str:
    # The system interpreter lives under /usr, which is bound anyway; fall back to the first python3.
    for candidate in ("/usr/bin/python3", shutil.which("python3")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise SandboxError("no python3 found for the bubblewrap sandbox: pass python='/path/to/python3'")


def _root_binds(python: str) -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for path in _TOP_LEVEL:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    prefix = Path(os.path.realpath(python)).parent.parent
    if not str(prefix).startswith("/usr"):
        args += ["--ro-bind", str(prefix), str(prefix)]
    return [*args, "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]


class BubblewrapSandbox(SandboxBase):
    """Runs Python 3 programs in ``bwrap`` namespaces; see the module docstring for what is isolated.

    ``python``: the interpreter inside (default ``/usr/bin/python3``; one outside ``/usr`` has its
    prefix bound read-only, and must be readable by ``run_as_uid``). ``run_as_uid``: the user bwrap
    runs as when this process is root (default 65534).
    """

    name = "bubblewrap"

    def __init__(
        self,
        *,
        python: str | None = None,
        run_as_uid: int = NOBODY,
        bwrap: str | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.bwrap = bwrap or shutil.which("bwrap")
        if self.bwrap is None:
            raise SandboxError(f"`bwrap` was not found: {_INSTALL_HINT}")
        self.prlimit = shutil.which("prlimit")
        if self.prlimit is None or not self.prlimit.startswith("/usr"):
            raise SandboxError("the bubblewrap sandbox needs /usr/bin/prlimit: apt-get install -y util-linux")
        self.python = python or _default_python()
        self.run_as_uid = run_as_uid if os.geteuid() == 0 else None
        self.default_limits = limits or Limits()
        self._binds = _root_binds(self.python)
        self._probe()

    def _probe(self) -> None:
        # A program's own stderr could imitate bwrap's messages, so set-up failures are caught once,
        # here, with a program that cannot fail.
        probe = self.command(Limits(), "/tmp")
        probe = [*probe[: probe.index("--") + 1], self.python, "-c", "pass"]
        user = {"user": self.run_as_uid, "group": self.run_as_uid} if self.run_as_uid is not None else {}
        try:
            result = subprocess.run(probe, capture_output=True, timeout=30, check=False, **user)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise SandboxError(f"bwrap did not run: {error}; {_INSTALL_HINT}") from error
        if result.returncode != 0:
            message = result.stderr.decode(errors="replace").strip()
            raise SandboxError(
                f"bwrap cannot create the sandbox ({message}). It needs unprivileged user namespaces "
                "(sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces > 0)."
            )

    def command(self, limits: Limits, workdir: str) -> list[str]:
        """The full ``bwrap ... -- prlimit ... -- python3 main.py`` command line for one run."""
        return [
            self.bwrap,
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            *self._binds,
            *("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"),
            *("--bind", workdir, WORKDIR, "--chdir", WORKDIR),
            *("--remount-ro", "/"),  # the new root itself (a tmpfs holding the mount points) read-only
            *("--hostname", "sandbox", "--clearenv"),
            *("--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", WORKDIR),
            *("--setenv", "LANG", "C.UTF-8"),
            "--",
            *prlimit_command(limits, prlimit=self.prlimit),
            self.python,
            "-E",
            "-s",
            "-B",
            PROGRAM_NAME,
        ]

    def run(
        self,
        program: str,
        *,
        stdin: str = "",
        files: Mapping[str, str | bytes] | None = None,
        limits: Limits | None = None,
    ) -> ExecResult:
        """Run ``program`` as ``python3 main.py`` inside bwrap; see :class:`sandbox.base.Sandbox`."""
        limits = limits or self.default_limits
        checked = check_files(files)
        with tempfile.TemporaryDirectory(prefix="turngym-bwrap-") as workdir:
            write_workdir(Path(workdir), program, checked)
            user = {}
            if self.run_as_uid is not None:
                _chown_tree(workdir, self.run_as_uid)
                user = {"user": self.run_as_uid, "group": self.run_as_uid, "extra_groups": []}
            try:
                outcome = supervise(
                    self.command(limits, workdir),
                    cwd="/",
                    env={"PATH": "/usr/bin:/bin"},
                    stdin=stdin.encode("utf-8"),
                    wall_time_s=limits.wall_time_s,
                    max_output_bytes=limits.max_output_bytes,
                    **user,
                )
            except OSError as error:
                raise SandboxError(f"could not start bwrap: {error}; {_INSTALL_HINT}") from error
        return classify(_signal_from_exit_code(raw_outcome(outcome)), limits)


def _signal_from_exit_code(raw: RawOutcome) -> RawOutcome:
    # bwrap reports a program killed by signal N as exit code 128 + N (as shells do), so a program that
    # itself exits with 129..192 reads as killed by a signal too.
    if raw.term_signal is None and raw.returncode is not None and 128 < raw.returncode <= 128 + 64:
        return dataclasses.replace(raw, returncode=None, term_signal=raw.returncode - 128)
    return raw


def _chown_tree(root: str, uid: int) -> None:
    os.chown(root, uid, uid)
    for directory, subdirs, names in os.walk(root):
        for name in subdirs + names:
            os.chown(os.path.join(directory, name), uid, uid, follow_symlinks=False)


@functools.lru_cache(maxsize=1)
def bubblewrap_works() -> bool:
    """``bwrap`` is installed and can create the namespaces this backend needs (checked once)."""
    try:
        BubblewrapSandbox()
    except SandboxError:
        return False
    return True
