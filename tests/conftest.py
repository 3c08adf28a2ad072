"""Test-session set-up: install the example plugin package for real, before collection.

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
