"""Fixtures for the environment tests: the code environment's default sandbox, made ready on demand.

The code environment's default sandbox (``"auto"``) is Docker when a daemon answers, else bubblewrap.
Tests that build it with its defaults take ``code_sandbox_ready``: it builds the Docker image (a no-op
when it is up to date), and, with neither backend usable, skips locally with the fix, or fails under
CI (``CI=true``), as the sandbox tests do.
"""

from __future__ import annotations

import os

import pytest

from sandbox.bubblewrap import bubblewrap_works
from sandbox.docker_backend import docker_daemon_answers

IN_CI = os.environ.get("CI", "").lower() == "true"


@pytest.fixture(scope="session")
def code_sandbox_ready() -> None:
    if docker_daemon_answers():
        from sandbox.image import build_image

        build_image()
        return
    if bubblewrap_works():
        return
    fix = "start Docker (`dockerd --bridge=none --iptables=false &`, root) or `apt-get install -y bubblewrap`"
    if IN_CI:
        pytest.fail(f"no sandbox backend for the code environment in CI: {fix}")
    pytest.skip(f"no sandbox backend for the code environment: {fix}")
