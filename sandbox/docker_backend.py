"""The Docker backend: every run in a warm, locked-down container. The strongest isolation here.

Needs a running Docker daemon, the SDK (``pip install 'docker>=7'``) and the image built locally with
``python -m sandbox.image build`` (see :mod:`sandbox.image`; the name comes from ``image=``, else
``$TURNGYM_SANDBOX_IMAGE``, else ``turngym-sandbox:latest``).

A run takes a container from the :class:`sandbox.docker_pool.ContainerPool` (no network, read-only
root, tmpfs ``/tmp``, private IPC, no new privileges, memory and pids limits) and hands the request to
the in-container runner (:mod:`sandbox._runner`, root in the container with a few capabilities): one
``docker exec`` per container, started on first use and kept, reading framed requests on its stdin
(``put_archive`` cannot write into a read-only root) and answering on its stdout, so a run costs no
API call. The runner makes a fresh work dir in ``/tmp``, runs ``python3 main.py`` as uid 65534 (no
capabilities) under rlimits with the wall-time and output limits, then resets the container: kills
every process the run left, empties ``/tmp``, ``/dev/shm`` and ``/dev/mqueue``, and checks that no
System V IPC object is left. A container that is not clean afterwards is removed, never reused.

Failures and what they become:

* the container died or vanished (killed, removed, daemon restarted): idle containers that died too
  are dropped and the run is retried once on a fresh or live one, then :class:`SandboxError`;
* no daemon answers: :class:`SandboxError` saying how to start one;
* the runner returned nothing while its container still runs: status ``KILLED``; the runner did not
  answer in ``wall_time_s`` + a grace period: status ``TIMEOUT``. Either way that container is
  discarded, not reused. (The program cannot cause either: it may not signal root's processes.)
"""

from __future__ import annotations

import base64
import functools
import json
import os
import socket
import struct
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sandbox.base import ExecResult, Limits, RawOutcome, SandboxBase, SandboxError, Status, check_files, classify
from sandbox.docker_pool import ContainerPool
from sandbox.image import default_image

__all__ = ["DockerSandbox", "docker_client", "docker_daemon_answers", "docker_socket_answers", "runner_source"]

_GRACE_S = 10.0  # the host waits this long past the wall time before giving up on a runner
_START_HINT = (
    "start one (as root: `dockerd --bridge=none --iptables=false &`, or `systemctl start docker`), "
    "or use make_sandbox('bubblewrap')"
)


class _ContainerGone(Exception):
    """The container stopped existing or running under a run: an infrastructure failure."""


def docker_client() -> Any:
    """A connected Docker SDK client; SandboxError if no daemon answers, ImportError without the SDK."""
    try:
        import docker
    except ImportError as error:
        raise ImportError("the docker sandbox needs the Docker SDK: pip install 'docker>=7'") from error
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except docker.errors.DockerException as error:
        raise SandboxError(f"no Docker daemon answers ({error}): {_START_HINT}") from error
    return client


def docker_daemon_answers() -> bool:
    """The SDK is installed and a daemon answers a ping."""
    try:
        docker_client()
    except (ImportError, SandboxError):
        return False
    return True


def docker_socket_answers(timeout_s: float = 2.0) -> bool:
    """Whether a Docker daemon answers a ping on its Unix socket (``$DOCKER_HOST`` or the default), SDK or not."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(timeout_s)
            connection.connect(host[len("unix://") :])
            connection.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return b" 200 " in connection.recv(1024)
    except OSError:
        return False


@functools.lru_cache(maxsize=1)
def runner_source() -> str:
    """The program each exec runs: the supervisor followed by the runner, standard library only."""
    here = Path(__file__).parent
    return (here / "_supervise.py").read_text() + "\n\n" + (here / "_runner.py").read_text()


class DockerSandbox(SandboxBase):
    """Runs Python 3 programs in pooled Docker containers; see the module docstring.

    ``image``: image name (default ``$TURNGYM_SANDBOX_IMAGE`` or ``turngym-sandbox:latest``).
    ``pool_size``: containers per limits shape, hence concurrent runs (default: CPU count).
    ``cpus``: CPU share of each container. ``prewarm``: containers started at once for the default
    limits. ``limits``: the limits of runs that pass none.
    """

    name = "docker"

    def __init__(
        self,
        *,
        image: str | None = None,
        pool_size: int | None = None,
        cpus: float = 1.0,
        prewarm: int = 1,
        limits: Limits | None = None,
        client: Any = None,
    ) -> None:
        self.client = client or docker_client()
        self.image = image or default_image()
        self.default_limits = limits or Limits()
        self._require_image()
        self._connections: dict[str, _RunnerConnection] = {}
        self.pool = ContainerPool(self.client, self.image, size=pool_size or os.cpu_count() or 1, cpus=cpus)
        if prewarm:
            self.pool.prewarm(self.pool.shape(self.default_limits), prewarm)

    def _require_image(self) -> None:
        import docker.errors

        try:
            self.client.images.get(self.image)
        except docker.errors.ImageNotFound as error:
            raise SandboxError(
                f"the sandbox image {self.image!r} does not exist: build it with `python -m sandbox.image build`"
            ) from error

    def run(
        self,
        program: str,
        *,
        stdin: str = "",
        files: Mapping[str, str | bytes] | None = None,
        limits: Limits | None = None,
    ) -> ExecResult:
        """Run ``program`` as ``python3 main.py`` in a pooled container; see :class:`sandbox.base.Sandbox`."""
        limits = limits or self.default_limits
        encoded = {path: base64.b64encode(data).decode("ascii") for path, data in check_files(files).items()}
        request = {"program": program, "stdin": stdin, "files": encoded, "limits": limits.__dict__}
        payload = json.dumps(request).encode("utf-8")
        shape = self.pool.shape(limits)
        for attempt in range(2):
            container = self.pool.acquire(shape)
            healthy = False
            try:
                result, healthy = self._run_in(container, payload, limits)
                return result
            except _ContainerGone as error:
                if attempt == 1:
                    raise SandboxError(
                        f"sandbox containers keep failing ({error}); is the Docker daemon healthy?"
                    ) from error
                self.pool.drop_dead()  # its idle siblings may have died with it
            finally:
                if not healthy:
                    self._forget(container)
                self.pool.release(shape, container, healthy=healthy)
        raise AssertionError("unreachable")

    def _run_in(self, container: Any, payload: bytes, limits: Limits) -> tuple[ExecResult, bool]:
        """One run in ``container``; returns the result and whether the container may be reused."""
        start = time.monotonic()
        connection = self._connections.get(container.id)
        if connection is None:
            connection = self._connections[container.id] = _RunnerConnection.open(self.client, container)
        reply = connection.request(payload, limits.wall_time_s + _GRACE_S)
        wall_time_s = time.monotonic() - start
        if reply is _TIMED_OUT:
            return _lost_runner(
                Status.TIMEOUT, wall_time_s, "the run did not finish: its supervisor was stopped"
            ), False
        if reply is None:
            if not self._is_running(container):
                raise _ContainerGone(f"container {container.short_id} stopped during a run")
            return _lost_runner(Status.KILLED, wall_time_s, "the run's supervisor was killed"), False
        outcome = json.loads(reply)
        for stream in ("stdout", "stderr"):
            outcome[stream] = base64.b64decode(outcome[stream])
        raw = RawOutcome(**{name: outcome[name] for name in RawOutcome.__dataclass_fields__})
        return classify(raw, limits), bool(outcome.get("reusable", False))

    def _forget(self, container: Any) -> None:
        connection = self._connections.pop(container.id, None)
        if connection is not None:
            connection.close()

    def _is_running(self, container: Any, settle_s: float = 1.0) -> bool:
        """Whether ``container`` still runs ``settle_s`` after its runner vanished.

        A container being killed or removed loses its processes before the daemon reports it stopped,
        so a container is judged alive only if it keeps running for a moment.
        """
        import docker.errors

        deadline = time.monotonic() + settle_s
        while True:
            try:
                container.reload()
            except docker.errors.NotFound:
                return False
            if container.status != "running":
                return False
            if time.monotonic() >= deadline:
                return True
            time.sleep(0.1)

    def close(self) -> None:
        """Remove this sandbox's containers (also done at exit, and by the reaper if this process dies)."""
        for connection in list(self._connections.values()):
            connection.close()
        self._connections.clear()
        self.pool.close()


_TIMED_OUT = object()


class _RunnerConnection:
    """The kept ``docker exec`` of one container's runner: framed requests in, framed replies out."""

    def __init__(self, raw_socket: socket.socket, response: Any) -> None:
        self.socket, self._response = raw_socket, response
        self._buffer = bytearray()  # Docker's multiplexed stream, not yet parsed
        self._stdout = bytearray()  # the runner's stdout, not yet consumed

    @classmethod
    def open(cls, client: Any, container: Any) -> _RunnerConnection:
        import docker.errors
        import requests.exceptions

        command = ["/usr/bin/python3", "-E", "-s", "-c", runner_source()]
        try:
            exec_id = client.api.exec_create(container.id, command, stdin=True, user="0:0", workdir="/tmp")
            response = client.api.exec_start(exec_id["Id"], socket=True)
        except docker.errors.NotFound as error:
            raise _ContainerGone(f"container {container.short_id} is gone") from error
        except docker.errors.APIError as error:
            if error.status_code == 409:  # "container ... is not running"
                raise _ContainerGone(str(error)) from error
            raise SandboxError(f"the Docker daemon refused an exec: {error}") from error
        except requests.exceptions.ConnectionError as error:
            raise SandboxError(f"lost the Docker daemon: {error}; {_START_HINT}") from error
        return cls(getattr(response, "_sock", response), response)

    def request(self, payload: bytes, timeout_s: float) -> bytes | object | None:
        """Send one request; the reply, ``_TIMED_OUT``, or None if the runner ended without one."""
        deadline = time.monotonic() + timeout_s
        try:
            self.socket.settimeout(timeout_s)
            self.socket.sendall(struct.pack(">I", len(payload)) + payload)
            while True:
                if len(self._stdout) >= 4:
                    size = struct.unpack(">I", self._stdout[:4])[0]
                    if len(self._stdout) >= 4 + size:
                        reply = bytes(self._stdout[4 : 4 + size])
                        del self._stdout[: 4 + size]
                        return reply
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return _TIMED_OUT
                self.socket.settimeout(remaining)
                chunk = self.socket.recv(1 << 20)
                if not chunk:
                    return None
                self._demultiplex(chunk)
        except TimeoutError:
            return _TIMED_OUT
        except OSError as error:
            raise _ContainerGone(f"the runner connection broke: {error}") from error

    def _demultiplex(self, chunk: bytes) -> None:
        # Docker frames an exec's streams: an 8-byte header (stream id, 3 zero bytes, big-endian
        # length) before each frame. Stream 1 is stdout; stderr (2) is the runner's own, dropped.
        self._buffer += chunk
        while len(self._buffer) >= 8:
            stream, length = struct.unpack(">BxxxL", self._buffer[:8])
            if len(self._buffer) < 8 + length:
                return
            if stream == 1:
                self._stdout += self._buffer[8 : 8 + length]
            del self._buffer[: 8 + length]

    def close(self) -> None:
        try:
            self.socket.close()
        finally:
            self._response.close()


def _lost_runner(status: Status, wall_time_s: float, message: str) -> ExecResult:
    return ExecResult(status=status, exit_code=None, stdout="", stderr=message, wall_time_s=wall_time_s)
