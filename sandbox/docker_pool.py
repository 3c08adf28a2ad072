"""A warm pool of locked-down sandbox containers, and the clean-up that keeps none of them behind.

Every container runs ``--network none``, a read-only root, a tmpfs ``/tmp`` (the only writable place
besides the private ``/dev/shm`` and ``/dev/mqueue``), ``--ipc private``, all capabilities dropped but
the few the in-container runner needs to reset the container (:data:`RUNNER_CAPABILITIES`; the
program itself runs as uid 65534 with none), ``--security-opt no-new-privileges``, and memory, swap,
CPU and pids limits. Its pid 1 is a tiny Python loop, owned by root so that no program can signal or
replace it, that ignores SIGCHLD, so that processes orphaned and killed by a run are reaped at once
(zombies would count against the pids limit).

Containers are created for a :class:`ContainerShape` (the limits fixed at creation) on first need, kept
idle after a run, and at most ``size`` of one shape exist at a time. A container whose run failed is
removed and replaced by the next :meth:`ContainerPool.acquire`.

Nothing is left behind even when the caller crashes:

* every container carries the label ``turngym.sandbox.owner=<host>:<pid>:<nonce>``;
* on start, containers of owners whose process no longer exists on this host are removed;
* ``atexit`` and :meth:`ContainerPool.close` remove this pool's containers;
* a reaper process (``python -m sandbox.reaper``, in its own session) watches a pipe from this process;
  when the pipe closes, because this process exited or was killed with SIGKILL, it removes every
  container with this owner label.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from sandbox._runner import PID1_MARKER
from sandbox.base import Limits, SandboxError

__all__ = ["OWNER_LABEL", "SANDBOX_LABEL", "ContainerPool", "ContainerShape", "remove_stale_containers"]

logger = logging.getLogger(__name__)

SANDBOX_LABEL = "turngym.sandbox"
OWNER_LABEL = "turngym.sandbox.owner"
_PID1 = (
    f"{PID1_MARKER}\nimport signal\nsignal.signal(signal.SIGCHLD, signal.SIG_IGN)\nwhile True:\n    signal.pause()\n"
)
_RUNNER_OVERHEAD_MB = 64  # the in-container runner's own memory, on top of the program's limit
# What the root runner needs to reset a container: chown the work dir, kill the program's processes,
# drop to the program's user, and remove whatever the program left in /tmp, /dev/shm, /dev/mqueue.
RUNNER_CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID"]


@dataclass(frozen=True)
class ContainerShape:
    """The limits a container is created with; runs whose limits map to the same shape share containers."""

    memory_mb: int
    max_processes: int
    tmpfs_mb: int
    cpus: float

    @classmethod
    def for_limits(cls, limits: Limits, cpus: float) -> ContainerShape:
        return cls(limits.memory_mb, limits.max_processes, max(64, 4 * limits.max_file_mb), cpus)

    def create_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``client.containers.run`` for this shape (labels added by the pool)."""
        memory = f"{self.memory_mb + self.tmpfs_mb + _RUNNER_OVERHEAD_MB}m"
        return {
            "network_mode": "none",
            "read_only": True,
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={self.tmpfs_mb}m,mode=1777"},
            "user": "0:0",
            "mem_limit": memory,
            "memswap_limit": memory,  # no swap beyond the memory limit
            "pids_limit": self.max_processes + 2,  # the program's own, plus pid 1 and the runner
            "nano_cpus": int(self.cpus * 1e9),
            "cap_drop": ["ALL"],
            "cap_add": RUNNER_CAPABILITIES,
            "security_opt": ["no-new-privileges"],
            "ipc_mode": "private",
            "working_dir": "/tmp",
            "environment": {"PATH": "/usr/bin", "LANG": "C.UTF-8"},
        }


def owner_is_alive(owner: str) -> bool:
    """Whether the process named in an owner label (``host:pid:nonce``) still runs on this host."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's containers are not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_containers(client: Any) -> int:
    """Remove sandbox containers whose owner process is gone; returns how many were removed."""
    removed = 0
    for container in client.containers.list(all=True, filters={"label": SANDBOX_LABEL}):
        if not owner_is_alive(container.labels.get(OWNER_LABEL, "")):
            _remove(container)
            removed += 1
    return removed


def _remove(container: Any) -> None:
    import docker.errors

    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as error:
        if "already in progress" not in str(error):
            raise


class ContainerPool:
    """Warm containers of ``image``, at most ``size`` per shape; thread-safe."""

    def __init__(self, client: Any, image: str, *, size: int, cpus: float, start_reaper: bool = True) -> None:
        self.client, self.image, self.size, self.cpus = client, image, size, cpus
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._idle: dict[ContainerShape, list[Any]] = {}
        self._slots: dict[ContainerShape, threading.BoundedSemaphore] = {}
        self._lock = threading.Lock()
        self._closed = False
        remove_stale_containers(client)
        self._reaper = _start_reaper(self.owner) if start_reaper else None
        atexit.register(self.close)

    def shape(self, limits: Limits) -> ContainerShape:
        return ContainerShape.for_limits(limits, self.cpus)

    def acquire(self, shape: ContainerShape) -> Any:
        """A running container of ``shape`` for one run; blocks while ``size`` are busy."""
        with self._lock:
            if self._closed:
                raise SandboxError("this docker sandbox is closed; make a new one")
            slots = self._slots.setdefault(shape, threading.BoundedSemaphore(self.size))
        slots.acquire()
        try:
            with self._lock:
                idle = self._idle.setdefault(shape, [])
                container = idle.pop() if idle else None
            return container if container is not None else self._create(shape)
        except BaseException:
            slots.release()
            raise

    def release(self, shape: ContainerShape, container: Any, *, healthy: bool) -> None:
        """Give ``container`` back after a run; an unhealthy one is removed instead of reused."""
        with self._lock:
            keep = healthy and not self._closed
            if keep:
                self._idle.setdefault(shape, []).append(container)
        if not keep:
            _remove(container)
        self._slots[shape].release()

    def drop_dead(self) -> int:
        """Forget idle containers the daemon no longer runs (after a failure); returns how many."""
        running = {c.id for c in self.client.containers.list(filters={"label": f"{OWNER_LABEL}={self.owner}"})}
        dropped = []
        with self._lock:
            for idle in self._idle.values():
                dropped += [c for c in idle if c.id not in running]
                idle[:] = [c for c in idle if c.id in running]
        for container in dropped:
            _remove(container)
        return len(dropped)

    def prewarm(self, shape: ContainerShape, count: int) -> None:
        """Start ``count`` idle containers of ``shape`` now (at most ``size``)."""
        taken = [self.acquire(shape) for _ in range(min(count, self.size))]
        for container in taken:
            self.release(shape, container, healthy=True)

    def _create(self, shape: ContainerShape) -> Any:
        import docker.errors

        try:
            return self.client.containers.run(
                self.image,
                command=["/usr/bin/python3", "-E", "-s", "-c", _PID1],
                detach=True,
                labels={SANDBOX_LABEL: "1", OWNER_LABEL: self.owner},
                **shape.create_kwargs(),
            )
        except docker.errors.ImageNotFound as error:
            raise SandboxError(
                f"the sandbox image {self.image!r} does not exist: build it with `python -m sandbox.image build`"
            ) from error
        except docker.errors.DockerException as error:
            raise SandboxError(f"could not start a sandbox container from {self.image!r}: {error}") from error

    def containers(self) -> list[Any]:
        """This pool's containers as the daemon lists them (running or not)."""
        return self.client.containers.list(all=True, filters={"label": f"{OWNER_LABEL}={self.owner}"})

    def close(self) -> None:
        """Remove every container of this pool and stop the reaper; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._idle.clear()
        atexit.unregister(self.close)
        import docker.errors

        try:
            for container in self.containers():
                _remove(container)
        except docker.errors.DockerException as error:  # the daemon may be gone; the reaper retries
            logger.warning("could not remove sandbox containers of %s: %s", self.owner, error)
        if self._reaper is not None:
            self._reaper.stdin.close()  # the reaper removes leftovers and exits
            self._reaper.wait(timeout=30)


def _start_reaper(owner: str) -> subprocess.Popen:
    # A separate session: a SIGKILL to this process group does not reach the reaper.
    return subprocess.Popen(
        [sys.executable, "-m", "sandbox.reaper", owner],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [_package_root(), os.environ.get("PYTHONPATH")])),
        },
    )


def _package_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
