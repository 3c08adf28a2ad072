"""The bubblewrap backend: each run in fresh Linux namespaces made by ``bwrap``. No daemon needed.

What a run sees and may do:

* Namespaces: ``--unshare-all`` (user, pid, network, ipc, uts, cgroup) and ``--disable-userns``: no
  user namespace can be made inside (so no nested namespace with full capabilities). The network
  namespace has only a loopback device that is down, so no connection goes anywhere, 127.0.0.1
  included.
* File system: a new root holding read-only binds of ``/usr`` (and the ``/bin``, ``/lib``... links or
  directories at the top), the interpreter's prefix when it lies outside ``/usr``, and
  ``/etc/ld.so.cache``; fresh ``/proc`` and ``/dev``; the work dir ``/work`` (the current directory,
  holding ``main.py`` and the files, copied in by bwrap) and ``/tmp``, each a tmpfs of
  ``max(64, 4 * max_file_mb)`` MB. The root itself is read-only. Nothing of the host can be written
  and nothing else of it exists inside: not ``/root``, not ``/home``, not the repository.
* Processes: ``--die-with-parent`` and ``--new-session``; the program is pid 2 of its own pid
  namespace, whose pid 1 is this backend's init (:data:`INIT`, started with ``--as-pid-1`` in place of
  bwrap's own): it reaps orphans, reports the program's exit as bwrap's init did (128 + N for signal
  N) and, first of all, makes itself non-dumpable. bwrap's init was dumpable and ran as the program's
  user, so the program could trace it and read its ``/proc/1/environ``, ``/proc/1/mem`` and
  descriptors; a non-dumpable process is open to those only with ``CAP_SYS_PTRACE``, which the program
  lacks. When the program exits, or the run ends (bwrap killed with its process group by the
  supervisor), init exits and the kernel kills every process left in the namespace.
* System calls: a seccomp filter (:mod:`sandbox.seccomp`, passed as ``--seccomp FD`` and applied by
  bwrap just before it runs the program) refuses with ``EPERM`` the calls that reach other processes
  (``ptrace``, ``process_vm_readv``/``writev``, ``pidfd_getfd``...) and the kernel's large attack
  surfaces (``bpf``, ``perf_event_open``, ``io_uring``, key rings, mounts, namespaces...).
* Exit codes: bwrap reports a program killed by signal N as exit code 128 + N, so an exit code in
  129..192 is read as that signal (``exit_code`` None, status by signal).
* Limits: rlimits set inside the namespace with util-linux ``prlimit`` (RLIMIT_AS, RLIMIT_CPU,
  RLIMIT_FSIZE, RLIMIT_NPROC), the wall time and output caps by the supervisor, and, when this
  process is root on cgroup v1 (:mod:`sandbox.cgroups`), a cgroup per run: total memory of all its
  processes, tmpfs and memfd pages included (``memory_mb`` + the tmpfs size + 32 MB for bwrap
  itself), the process count (``max_processes`` + 2 for bwrap), the CPU time of all processes
  (a CPU-time kill is a ``timeout``), OOM kills (``memory``), and a final SIGKILL to every process
  of the cgroup, which nothing in the sandbox can leave (a process that escaped the namespace's
  clean-up, e.g. by tracing the sandbox's init, dies there).

Root: the kernel ignores ``RLIMIT_NPROC`` for real uid 0, so as root bwrap is started as an
unprivileged user (``run_as_uid``, default 65534 "nobody"), after joining the run's cgroups
(``setpriv``). Without per-run cgroups (not root, or cgroup v2 only) the total memory of many
processes and the CPU time of children are bounded per process only; the sandbox logs this once
(``BubblewrapSandbox.cgroup_reason``).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from sandbox._supervise import supervise
from sandbox.base import ExecResult, Limits, RawOutcome, SandboxBase, SandboxError, check_files, classify
from sandbox.cgroups import RunCgroup, cgroup_support
from sandbox.process import PROGRAM_NAME, prlimit_command, raw_outcome
from sandbox.seccomp import UnsupportedArchitecture, build_filter

logger = logging.getLogger(__name__)

__all__ = ["BubblewrapSandbox", "bubblewrap_works"]

WORKDIR = "/work"
NOBODY = 65534
_TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_INSTALL_HINT = "install bubblewrap (`apt-get install -y bubblewrap`)"
_BWRAP_OVERHEAD_MB = 32  # bwrap and the init
# Join the run's cgroups ("$@" up to "--" are cgroup.procs files), then run the rest of the command.
_JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
# The sandbox's pid 1: non-dumpable (PR_SET_DUMPABLE = 4), so nothing without CAP_SYS_PTRACE can trace
# it or open its /proc/1/{mem,environ,fd}; Python's own SIGINT/SIGPIPE/SIGXFSZ handling is undone so
# the program starts with default signal actions; then it runs the command and reaps until the command
# ends, and exits as bwrap's init would (128 + N for a program killed by signal N).
INIT = """
import ctypes, os, signal, sys
for number in (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ):
    signal.signal(number, signal.SIG_DFL)
if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:
    sys.exit("sandbox init: prctl(PR_SET_DUMPABLE, 0) failed: " + os.strerror(ctypes.get_errno()))
child = os.fork()
if child == 0:
    try:
        os.execv(sys.argv[1], sys.argv[1:])
    finally:
        os._exit(127)
while True:
    pid, status = os.wait()
    if pid == child:
        code = os.waitstatus_to_exitcode(status)
        os._exit(128 - code if code < 0 else code)
"""


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
        try:
            self.seccomp_filter = build_filter()
        except UnsupportedArchitecture as error:
            raise SandboxError(str(error)) from error
        self.setpriv = shutil.which("setpriv")
        parents, self.cgroup_reason = cgroup_support()
        self.uses_cgroups = parents is not None and self.run_as_uid is not None and self.setpriv is not None
        if not self.uses_cgroups:
            self.cgroup_reason = self.cgroup_reason if parents is None else "util-linux `setpriv` is missing"
            _warn_once(self.cgroup_reason)
        self._probe()

    def _probe(self) -> None:
        # A program's own stderr could imitate bwrap's messages, so set-up failures are caught once,
        # here, with a program that cannot fail.
        try:
            result = self._supervised(Limits(wall_time_s=30), {}, python_args=["-c", "pass"])
        except OSError as error:
            raise SandboxError(f"bwrap did not run: {error}; {_INSTALL_HINT}") from error
        if result.returncode != 0:
            message = result.stderr.decode(errors="replace").strip()
            raise SandboxError(
                f"bwrap cannot create the sandbox ({message}). It needs unprivileged user namespaces "
                "(sysctl kernel.unprivileged_userns_clone=1 / user.max_user_namespaces > 0)."
            )

    def command(
        self, limits: Limits, files: Mapping[str, int], seccomp_fd: int, python_args: list[str] | None = None
    ) -> list[str]:
        """The full ``bwrap ... -- python3 -c INIT prlimit ... -- python3 main.py`` command line for one run.

        ``files``: path in the work dir -> a readable descriptor holding its content (copied by bwrap).
        ``seccomp_fd``: a readable descriptor holding :attr:`seccomp_filter`.
        """
        tmpfs_bytes = str(_tmpfs_mb(limits) * 2**20)
        copies: list[str] = []
        for directory in sorted({str(Path(path).parent) for path in files} - {"."}):
            copies += ["--dir", f"{WORKDIR}/{directory}"]
        for path, fd in files.items():
            copies += ["--file", str(fd), f"{WORKDIR}/{path}"]
        return [
            self.bwrap,
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--as-pid-1",
            *("--seccomp", str(seccomp_fd)),
            *self._binds,
            *("--proc", "/proc", "--dev", "/dev"),
            *("--size", tmpfs_bytes, "--tmpfs", "/tmp", "--size", tmpfs_bytes, "--tmpfs", WORKDIR),
            *copies,
            "--chdir",
            WORKDIR,
            *("--remount-ro", "/"),  # the new root itself (a tmpfs holding the mount points) read-only
            *("--hostname", "sandbox", "--clearenv"),
            *("--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", WORKDIR),
            *("--setenv", "LANG", "C.UTF-8"),
            "--",
            *(self.python, "-E", "-s", "-S", "-B", "-c", INIT),  # -S: no site import, a faster start
            *prlimit_command(limits, prlimit=self.prlimit),
            self.python,
            "-E",
            "-s",
            "-B",
            *(python_args or [PROGRAM_NAME]),
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
        contents = {PROGRAM_NAME: program.encode("utf-8"), **check_files(files)}
        try:
            raw = self._supervised(limits, contents, stdin=stdin.encode("utf-8"))
        except OSError as error:
            raise SandboxError(f"could not start bwrap: {error}; {_INSTALL_HINT}") from error
        return classify(_signal_from_exit_code(raw), limits)

    def _supervised(
        self,
        limits: Limits,
        contents: Mapping[str, bytes],
        *,
        stdin: bytes = b"",
        python_args: list[str] | None = None,
    ) -> RawOutcome:
        """Run bwrap under the supervisor (in a cgroup of its own where possible); the raw outcome."""
        descriptors = {path: _memfd(data) for path, data in contents.items()}
        seccomp_fd = _memfd(self.seccomp_filter)
        cgroup = None
        try:
            argv = self.command(limits, descriptors, seccomp_fd, python_args)
            user: dict = {}
            if self.uses_cgroups:
                memory_bytes = (limits.memory_mb + _tmpfs_mb(limits) + _BWRAP_OVERHEAD_MB) * 2**20
                cgroup = RunCgroup.create(memory_bytes=memory_bytes, max_processes=limits.max_processes + 2)
                uid = str(self.run_as_uid)
                drop = [self.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
                argv = ["/bin/sh", "-c", _JOIN, "sh", *cgroup.procs_files(), "--", *drop, *argv]
            elif self.run_as_uid is not None:
                user = {"user": self.run_as_uid, "group": self.run_as_uid, "extra_groups": []}
            outcome = supervise(
                argv,
                cwd="/",
                env={"PATH": "/usr/bin:/bin"},
                stdin=stdin,
                wall_time_s=limits.wall_time_s,
                max_output_bytes=limits.max_output_bytes,
                pass_fds=(*descriptors.values(), seccomp_fd),
                **user,
            )
            if cgroup is not None:
                cgroup.kill_all()
                outcome["cpu_time_s"] = max(outcome["cpu_time_s"], cgroup.cpu_time_s())
                outcome["oom_killed"] = cgroup.oom_killed()
        finally:
            if cgroup is not None:
                cgroup.close()
            for fd in (*descriptors.values(), seccomp_fd):
                os.close(fd)
        return raw_outcome(outcome)


def _tmpfs_mb(limits: Limits) -> int:
    return max(64, 4 * limits.max_file_mb)


def _memfd(data: bytes) -> int:
    fd = os.memfd_create("sandbox-file", 0)  # without MFD_CLOEXEC: bwrap inherits it
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


@functools.cache
def _warn_once(reason: str) -> None:
    logger.warning(
        "bubblewrap sandbox without per-run cgroups (%s): memory and CPU time are limited per process only, "
        "not for all the processes of a run together",
        reason,
    )


def _signal_from_exit_code(raw: RawOutcome) -> RawOutcome:
    # bwrap reports a program killed by signal N as exit code 128 + N (as shells do), so a program that
    # itself exits with 129..192 reads as killed by a signal too.
    if raw.term_signal is None and raw.returncode is not None and 128 < raw.returncode <= 128 + 64:
        return dataclasses.replace(raw, returncode=None, term_signal=raw.returncode - 128)
    return raw


@functools.lru_cache(maxsize=1)
def bubblewrap_works() -> bool:
    """``bwrap`` is installed and can create the namespaces this backend needs (checked once)."""
    try:
        BubblewrapSandbox()
    except SandboxError:
        return False
    return True
