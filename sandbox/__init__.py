"""Running untrusted Python 3 programs under hard limits.

``make_sandbox("docker" | "bubblewrap" | "process" | "auto")`` returns a :class:`Sandbox`; its
``run(program, stdin=, files=, limits=)`` runs ``python3 main.py`` in a fresh work dir and returns an
:class:`ExecResult`. The contract (statuses and their precedence, what raises) is in
:mod:`sandbox.base`. Backends:

* ``docker`` (:mod:`sandbox.docker_backend`): a warm pool of locked-down containers built from a
  local image (``python -m sandbox.image build``). The strongest isolation; needs a Docker daemon
  and ``pip install docker``.
* ``bubblewrap`` (:mod:`sandbox.bubblewrap`): Linux namespaces with ``bwrap`` and, as root, a cgroup
  per run; no daemon needed.
* ``process`` (:mod:`sandbox.process`): a plain subprocess with rlimits, for trusted code only.

``auto`` picks docker when its daemon answers, else bubblewrap when ``bwrap`` works, and never the
process backend.
"""

from __future__ import annotations

import logging
from typing import Any

from sandbox.base import ExecResult, Limits, Sandbox, SandboxError, Status

__all__ = [
    "BACKENDS",
    "ExecResult",
    "Limits",
    "Sandbox",
    "SandboxError",
    "Status",
    "available_backends",
    "choose_backend",
    "make_sandbox",
]

BACKENDS = ("docker", "bubblewrap", "process")
logger = logging.getLogger(__name__)


def make_sandbox(backend: str = "auto", **options: Any) -> Sandbox:
    """Build the named backend with ``options`` (its constructor's keyword arguments).

    ``"auto"`` chooses docker if its daemon answers, else bubblewrap if ``bwrap`` works, else raises
    :class:`SandboxError` (one line) saying how to get either. It never chooses ``"process"``, which
    does not isolate anything. The choice and its reason are logged once per process (a warning when
    an isolating backend was passed over, e.g. a running Docker daemon without the ``docker`` package).
    """
    if backend == "auto":
        backend, reason = choose_backend()
        _log_choice(backend, reason)
    if backend == "docker":
        from sandbox.docker_backend import DockerSandbox

        return DockerSandbox(**options)
    if backend == "bubblewrap":
        from sandbox.bubblewrap import BubblewrapSandbox

        return BubblewrapSandbox(**options)
    if backend == "process":
        from sandbox.process import ProcessSandbox

        return ProcessSandbox(**options)
    raise ValueError(f"unknown sandbox backend {backend!r}; choose one of {', '.join(BACKENDS)} or 'auto'")


def available_backends() -> list[str]:
    """The backends that work on this machine right now, most isolating first."""
    from sandbox.bubblewrap import bubblewrap_works
    from sandbox.docker_backend import docker_daemon_answers

    found = []
    if docker_daemon_answers():
        found.append("docker")
    if bubblewrap_works():
        found.append("bubblewrap")
    found.append("process")
    return found


def choose_backend() -> tuple[str, str]:
    """What ``"auto"`` picks and why; SandboxError (one line, with the fixes) when nothing isolating works."""
    usable = [name for name in available_backends() if name != "process"]
    docker_note = _docker_note()
    if usable == ["bubblewrap"]:
        return "bubblewrap", f"Docker is not usable ({docker_note})"
    if usable:
        return usable[0], "its daemon answers"
    raise SandboxError(
        f"no isolating sandbox backend is available (Docker: {docker_note}; bubblewrap: bwrap is missing or cannot "
        "create namespaces): install bubblewrap (`apt-get install -y bubblewrap`), or start a Docker daemon and "
        "`pip install 'docker>=7'` (then `python -m sandbox.image build`)"
    )


def _docker_note() -> str:
    """Why the Docker backend is not usable (or ``"usable"``)."""
    from sandbox.docker_backend import docker_daemon_answers, docker_socket_answers

    if docker_daemon_answers():
        return "usable"
    try:
        import docker  # noqa: F401
    except ImportError:
        if docker_socket_answers():
            return "a Docker daemon is running but the `docker` Python package is missing: pip install 'docker>=7'"
        return "no daemon answers and the `docker` Python package is missing"
    return "no Docker daemon answers"


_LOGGED: set[tuple[str, str]] = set()


def _log_choice(backend: str, reason: str) -> None:
    if (backend, reason) in _LOGGED:
        return
    _LOGGED.add((backend, reason))
    if backend == "docker":
        logger.info("sandbox=auto chose the docker backend: %s", reason)
    else:
        logger.warning("sandbox=auto chose the %s backend: %s", backend, reason)
