"""A cgroup per sandboxed run: total memory (tmpfs and memfd pages included), process count, CPU time,
and a kill that reaches every process of the run, whatever session, group or parent it moved to.

Used by the bubblewrap backend when this process may create cgroups: as root, on the cgroup v1
controllers ``memory``, ``pids`` and ``cpuacct`` (one directory each, under this process's own
cgroup, ``.../turngym-sandbox/run-<id>``). A process joins the run's cgroup before it starts ``bwrap``
(:meth:`RunCgroup.procs_files`); its descendants stay in it: inside the sandbox no cgroup file system
is mounted, so none can leave.

Not supported: cgroup v2 (a delegated subtree would be needed; :func:`cgroup_support` says why it
cannot be used), and running without root. There the caller falls back to rlimits and must say so.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
import uuid
from pathlib import Path

__all__ = ["RunCgroup", "cgroup_support"]

_ROOT = Path("/sys/fs/cgroup")
_CONTROLLERS = ("memory", "pids", "cpuacct")
_GROUP = "turngym-sandbox"


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per v1 controller (``/proc/self/cgroup``)."""
    paths = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            paths[controller] = path
    return paths


@functools.lru_cache(maxsize=1)
def cgroup_support() -> tuple[dict[str, Path] | None, str]:
    """The parent directory per controller for run cgroups, or None and the reason they cannot be made."""
    if os.geteuid() != 0:
        return None, "not root (per-run cgroups need root or a delegated cgroup v2 subtree)"
    if (_ROOT / "cgroup.controllers").exists():
        return None, "cgroup v2 only (unified hierarchy): per-run cgroups are implemented for v1 controllers"
    own = _own_paths()
    parents = {}
    for controller in _CONTROLLERS:
        mount = _ROOT / controller
        if not (mount / "cgroup.procs").exists() or controller not in own:
            return None, f"the cgroup v1 controller {controller!r} is not mounted at {mount}"
        parent = mount / own[controller].lstrip("/") / _GROUP
        try:
            parent.mkdir(exist_ok=True)
        except OSError as error:
            return None, f"cannot create {parent}: {error}"
        parents[controller] = parent
    _remove_stale(parents)
    return parents, "ok"


def _remove_stale(parents: dict[str, Path]) -> None:
    # Run cgroups of owners that died before removing them: empty ones can go (rmdir refuses the others).
    for parent in parents.values():
        for child in parent.glob("run-*"):
            owner = child.name.split("-")[1]
            if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                with contextlib.suppress(OSError):
                    child.rmdir()


class RunCgroup:
    """The cgroups of one run: create with :meth:`create`, always :meth:`close` (kills and removes)."""

    def __init__(self, directories: dict[str, Path]) -> None:
        self.directories = directories

    @classmethod
    def create(cls, *, memory_bytes: int, max_processes: int) -> RunCgroup:
        parents, reason = cgroup_support()
        if parents is None:
            raise OSError(f"per-run cgroups are not available: {reason}")
        name = f"run-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        directories = {controller: parent / name for controller, parent in parents.items()}
        cgroup = cls(directories)
        try:
            for directory in directories.values():
                directory.mkdir()
            _write(directories["memory"] / "memory.limit_in_bytes", memory_bytes)
            with contextlib.suppress(OSError):  # only where swap accounting is on
                _write(directories["memory"] / "memory.memsw.limit_in_bytes", memory_bytes)
            _write(directories["pids"] / "pids.max", max_processes)
        except OSError:
            cgroup.close()
            raise
        return cgroup

    def procs_files(self) -> list[str]:
        """The files a process writes its pid into to join this run's cgroups."""
        return [str(directory / "cgroup.procs") for directory in self.directories.values()]

    def cpu_time_s(self) -> float:
        """CPU seconds used by every process of the run (``cpuacct.usage``)."""
        try:
            return int((self.directories["cpuacct"] / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            return 0.0

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer killed a process of the run (the memory limit was hit)."""
        try:
            for line in (self.directories["memory"] / "memory.oom_control").read_text().splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1]) > 0
        except (OSError, ValueError):
            pass
        return False

    def pids(self) -> list[int]:
        try:
            return [int(pid) for pid in (self.directories["pids"] / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def kill_all(self, timeout_s: float = 5.0) -> bool:
        """SIGKILL every process of the run until none is left; returns whether none is."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pids = self.pids()
            if not pids:
                return True
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.002)
        return not self.pids()

    def close(self) -> None:
        """Kill every process of the run and remove its cgroups (idempotent)."""
        self.kill_all()
        for directory in self.directories.values():
            for _ in range(100):  # rmdir fails while a killed process is still exiting
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.005)


def _write(path: Path, value: int) -> None:
    path.write_text(str(value))
