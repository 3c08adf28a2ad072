"""Sandbox fixtures: one sandbox per backend for the whole session, the Docker image built on demand.

Docker tests carry ``@pytest.mark.docker``. Locally they skip, with the reason, when no Docker daemon
answers; under CI (``CI=true``) a missing daemon is a failure, never a skip. The session builds the
sandbox image itself (``sandbox.image.build_image``, a no-op when it is up to date), so the test
command needs no separate build step.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox import Sandbox
from sandbox.bubblewrap import BubblewrapSandbox, bubblewrap_works
from sandbox.docker_backend import docker_daemon_answers
from sandbox.process import ProcessSandbox

IN_CI = os.environ.get("CI", "").lower() == "true"
REPO_ROOT = Path(__file__).resolve().parents[2]


def _unavailable(what: str, fix: str) -> None:
    if IN_CI:
        pytest.fail(f"{what} in CI: {fix}")
    pytest.skip(f"{what}: {fix}")


@pytest.fixture(scope="session")
def docker_sandbox() -> Iterator[Sandbox]:
    if not docker_daemon_answers():
        _unavailable("no Docker daemon answers", "start one with `dockerd --bridge=none --iptables=false &` (root)")
    from sandbox.docker_backend import DockerSandbox
    from sandbox.image import build_image

    build_image()
    with DockerSandbox(pool_size=2, prewarm=2) as sandbox:
        yield sandbox


@pytest.fixture(scope="session")
def bubblewrap_sandbox() -> Iterator[Sandbox]:
    if not bubblewrap_works():
        _unavailable("bubblewrap cannot create a sandbox here", "apt-get install -y bubblewrap")
    with BubblewrapSandbox() as sandbox:
        yield sandbox


@pytest.fixture(scope="session")
def process_sandbox() -> Iterator[Sandbox]:
    with ProcessSandbox() as sandbox:
        yield sandbox


@pytest.fixture
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    """The session sandbox of the backend named by the test's indirect ``sandbox`` parameter."""
    return request.getfixturevalue(f"{request.param}_sandbox")


@pytest.fixture
def processes_with():
    """``processes_with(marker)``: pids of host processes whose command line contains ``marker``."""
    return _processes_with


def _processes_with(marker: str) -> list[int]:
    """Pids of host processes whose command line contains ``marker`` (containers' included)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found
