"""Per-run cgroups (bubblewrap's total limits): the final kill reaches a process that left every process tree."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest

from sandbox.bubblewrap import _JOIN
from sandbox.cgroups import RunCgroup, cgroup_support


@pytest.fixture
def run_cgroup():
    parents, reason = cgroup_support()
    if parents is None:
        pytest.skip(f"per-run cgroups are not available here: {reason}")
    cgroup = RunCgroup.create(memory_bytes=256 * 2**20, max_processes=8)
    yield cgroup
    cgroup.close()


def test_closing_kills_a_process_that_left_its_session_and_parent(run_cgroup, processes_with):
    # The process joins the run's cgroups as bwrap does, then double-forks into a session of its own: no
    # process group, parent or namespace ties it to the run any more; only the cgroup does.
    marker = f"turngym-escaped-{uuid.uuid4().hex}"
    escaped = "import os, sys, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
    escaped += "        sleep = [sys.executable, '-c', 'import time; time.sleep(60)', os.environ['MARKER']]\n"
    escaped += "        os.execv(sys.executable, sleep)\n"
    argv = ["/bin/sh", "-c", _JOIN, "sh", *run_cgroup.procs_files(), "--", sys.executable, "-c", escaped]
    # The marker travels in the environment: only the sleeper's command line holds it.
    subprocess.run(argv, check=True, timeout=10, env={**os.environ, "MARKER": marker})
    deadline = time.monotonic() + 5
    while not processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    [pid] = processes_with(marker)
    assert pid in run_cgroup.pids()
    run_cgroup.close()
    time.sleep(0.2)
    assert processes_with(marker) == [] and run_cgroup.pids() == []
    assert not any(directory.exists() for directory in run_cgroup.directories.values())


def test_the_process_count_holds_for_the_whole_cgroup(run_cgroup):
    # max_processes=8: the shell that joins, python, and at most 6 children of it.
    forks = (
        "import os, time\ncount = 0\nwhile count < 100:\n    try:\n        pid = os.fork()\n    except OSError:\n"
        "        break\n    if pid == 0:\n        time.sleep(5)\n        os._exit(0)\n    count += 1\nprint(count)"
    )
    argv = ["/bin/sh", "-c", _JOIN, "sh", *run_cgroup.procs_files(), "--", sys.executable, "-c", forks]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    assert int(result.stdout) == 7, result
