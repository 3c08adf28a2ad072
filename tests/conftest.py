"""Test-session set-up: install the example plugin package for real, before collection; the code environment's
default sandbox, made ready on demand (``code_sandbox_ready``).

The plugin (tests/plugins/turngym_example_plugin) is pip-installed into a temporary directory that
goes onto ``sys.path`` and ``PYTHONPATH``, so that this process, fresh subprocesses and Ray workers
all discover it through the ``turngym.envs`` entry-point group exactly as they would a package a
user installed, and the user's own environment is left untouched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sandbox.bubblewrap import bubblewrap_works
from sandbox.docker_backend import docker_daemon_answers

IN_CI = os.environ.get("CI", "").lower() == "true"
REPO_ROOT = Path(__file__).resolve().parents[1]
PLUGIN_SOURCE = REPO_ROOT / "tests" / "plugins" / "turngym_example_plugin"

_plugin_dir: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _plugin_dir
    _plugin_dir = tempfile.mkdtemp(prefix="turngym-plugin-")
    build_dir = tempfile.mkdtemp(prefix="turngym-plugin-src-")
    # Build from a copy: setuptools writes build/ and *.egg-info next to the sources otherwise.
    source = shutil.copytree(PLUGIN_SOURCE, Path(build_dir) / "src", dirs_exist_ok=True)
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    command += ["--target", _plugin_dir, str(source)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    shutil.rmtree(build_dir, ignore_errors=True)
    if result.returncode != 0:
        raise pytest.UsageError(f"could not install the example plugin package:\n{result.stderr}")
    sys.path.insert(0, _plugin_dir)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_plugin_dir, os.environ.get("PYTHONPATH")]))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _plugin_dir:
        shutil.rmtree(_plugin_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def code_sandbox_ready() -> None:
    """The code environment's default sandbox (``"auto"``: Docker when a daemon answers, else bubblewrap),
    ready: the Docker image is built (a no-op when it is up to date). With neither backend usable, the test
    skips locally with the fix and fails under CI (``CI=true``), as the sandbox tests do. Any test that
    builds a code environment with its defaults takes it, whatever order the tests run in."""
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
