"""Running untrusted Python 3 programs under hard limits.

``make_sandbox("docker" | "bubblewrap" | "process" | "auto")`` returns a :class:`Sandbox`; its
``run(program, stdin=, files=, limits=)`` runs ``python3 main.py`` in a fresh work dir and returns an
:class:`ExecResult`. The contract (statuses and their precedence, what raises) is in
:mod:`sandbox.base`. Backends:

* ``docker`` (:mod:`sandbox.docker_backend`): a warm pool of locked-down containers built from a
  local image (``python -m sandbox.image build``). The strongest isolation; needs a Docker daemon
  and ``pip install docker``.
* ``bubblewrap`` (:mod:`sandbox.bubblewrap`): Linux namespaces with ``bwrap``; no daemon needed.
* ``process`` (:mod:`sandbox.process`): a plain subprocess with rlimits, for trusted code only.

``auto`` picks docker when its daemon answers, else bubblewrap when ``bwrap`` works, and never the
process backend.
"""

from __future__ import annotations

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
    "make_sandbox",
]

BACKENDS = ("docker", "bubblewrap", "process")


def make_sandbox(backend: str = "auto", **options: Any) -> Sandbox:
    """Build the named backend with ``options`` (its constructor's keyword arguments).

    ``"auto"`` chooses docker if its daemon answers, else bubblewrap if ``bwrap`` works, else raises
    :class:`SandboxError` saying how to get either. It never chooses ``"process"``, which does not
    isolate anything.
    """
    if backend == "auto":
        usable = [name for name in available_backends() if name != "process"]
        if not usable:
            raise SandboxError(
                "no isolating sandbox backend is available. Either start a Docker daemon and "
                "`pip install docker` (then `python -m sandbox.image build`), or install bubblewrap "
                "(`apt-get install -y bubblewrap`) on a kernel that allows user namespaces."
            )
        backend = usable[0]
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
