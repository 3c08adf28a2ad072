"""What untrusted code must not do, checked on every backend that claims isolation (bubblewrap, docker)."""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from sandbox import Limits, Status

BACKENDS = [
    pytest.param("bubblewrap", id="bubblewrap"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]
pytestmark = pytest.mark.parametrize("sandbox", BACKENDS, indirect=True)
QUICK = Limits(wall_time_s=5.0, cpu_time_s=5.0)
REPO_ROOT = Path(__file__).resolve().parents[2]

CONNECT = """
import socket
for address in [("127.0.0.1", {port}), ("1.1.1.1", 80), ("8.8.8.8", 53)]:
    try:
        socket.create_connection(address, timeout=2).close()
        print("connected", address)
    except OSError as error:
        print("refused", address, type(error).__name__)
"""


def test_no_network_loopback_or_outside(sandbox):
    # A server really listens on the host's loopback: a sandbox sharing the network would reach it.
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    try:
        result = sandbox.run(CONNECT.format(port=server.getsockname()[1]), limits=Limits(wall_time_s=15))
    finally:
        server.close()
    lines = result.stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("refused") for line in lines), result.stdout + result.stderr


def test_no_dns_resolution(sandbox):
    result = sandbox.run("import socket\nsocket.getaddrinfo('pypi.org', 443)", limits=QUICK)
    assert result.status is Status.RUNTIME_ERROR and "gaierror" in result.stderr


@pytest.mark.parametrize("path", ["/etc/shadow", "/root", str(REPO_ROOT / "pyproject.toml"), "/var/log"])
def test_host_files_are_out_of_reach(sandbox, path):
    program = f"import os\np = {path!r}\nprint(os.listdir(p) if os.path.isdir(p) else open(p, 'rb').read()[:20])"
    result = sandbox.run(program, limits=QUICK)
    assert result.status is Status.RUNTIME_ERROR
    assert result.stderr.rstrip().splitlines()[-1].startswith(("FileNotFoundError", "PermissionError")), result.stderr


def test_host_secrets_do_not_leak_through_the_environment(sandbox, monkeypatch):
    monkeypatch.setenv("TURNGYM_TEST_SECRET", "s3cret")
    result = sandbox.run("import os\nprint(sorted(k for k in os.environ if 'SECRET' in k))", limits=QUICK)
    assert result.stdout == "[]\n"


@pytest.mark.parametrize("target", ["/usr/evil.txt", "/etc/evil.txt", "/evil.txt", "/usr/lib/python3.11/os.py"])
def test_cannot_write_outside_the_work_dir(sandbox, target):
    result = sandbox.run(f"open({target!r}, 'a').write('x')", limits=QUICK)
    assert result.status is Status.RUNTIME_ERROR
    assert result.stderr.rstrip().splitlines()[-1].split(":")[0] in {"PermissionError", "OSError"}, result.stderr
    assert not Path(target).with_name("evil.txt").exists()


def test_time_limit_kills_children_that_left_the_process_group(sandbox, processes_with):
    marker = f"turngym-orphan-{uuid.uuid4().hex}"
    sleeper = f"[sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}]"
    spinner = f"[sys.executable, '-c', 'while True: pass', {marker!r}]"
    program = (
        "import os, subprocess, sys, time\n"
        f"subprocess.Popen({sleeper}, start_new_session=True)\n"
        f"if os.fork() == 0:\n    os.setsid()\n    os.execv(sys.executable, {spinner})\n"
        "print('spawned', flush=True)\n"
        "time.sleep(60)\n"
    )
    result = sandbox.run(program, limits=Limits(wall_time_s=2.0))
    assert (result.status, result.stdout) == (Status.TIMEOUT, "spawned\n")
    assert result.wall_time_s < 5.0
    time.sleep(0.5)  # SIGKILL is immediate, the kernel's clean-up of a namespace nearly so
    assert processes_with(marker) == []


def test_leftover_children_die_when_the_program_exits_normally(sandbox, processes_with):
    marker = f"turngym-daemon-{uuid.uuid4().hex}"
    sleeper = f"[sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}]"
    program = f"import subprocess, sys\nsubprocess.Popen({sleeper}, start_new_session=True)\nprint('bye')\n"
    result = sandbox.run(program, limits=QUICK)
    assert result.ok and result.stdout == "bye\n"
    time.sleep(0.5)
    assert processes_with(marker) == []


def test_memory_bomb_is_contained(sandbox):
    program = "chunks = []\nwhile True:\n    chunks.append(bytearray(50 * 2**20))"
    result = sandbox.run(program, limits=Limits(memory_mb=256, wall_time_s=10))
    assert result.status is Status.MEMORY and result.wall_time_s < 8


def test_process_count_is_capped(sandbox):
    # Children that just sleep, started until fork fails: at most max_processes exist at once, the
    # program itself included, so at most max_processes - 1 children (fewer if the runtime holds some).
    program = (
        "import os, time\n"
        "count = 0\n"
        "while count < 1000:\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(30)\n"
        "        os._exit(0)\n"
        "    count += 1\n"
        "print(count)\n"
    )
    result = sandbox.run(program, limits=Limits(max_processes=16, wall_time_s=10))
    assert result.ok, result.stderr
    assert 1 <= int(result.stdout) <= 15


def test_fork_bomb_is_contained_and_cleaned_up(sandbox, processes_with):
    marker = f"turngym-bomb-{uuid.uuid4().hex}"
    program = f"import os\n{marker!r}\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    start = time.monotonic()
    result = sandbox.run(program, limits=Limits(max_processes=32, wall_time_s=3.0))
    assert result.status in {Status.TIMEOUT, Status.RUNTIME_ERROR}
    assert time.monotonic() - start < 15
    time.sleep(0.5)
    assert processes_with("main.py") == [] or all(marker not in _cmdline(pid) for pid in processes_with("main.py"))
    after = sandbox.run("print('still fine')", limits=QUICK)
    assert after.ok and after.stdout == "still fine\n"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    except OSError:
        return ""


def test_stdout_flood_is_capped_at_the_byte(sandbox):
    result = sandbox.run(
        "import sys\nwhile True:\n    sys.stdout.write('z' * 65536)", limits=Limits(max_output_bytes=100_000)
    )
    assert (result.status, len(result.stdout), result.stdout_truncated) == (Status.OUTPUT_LIMIT, 100_000, True)


def _leak_check(sandbox, processes_with, runs):
    # Every run leaves a sleeping child behind (in its process group); none may survive the runs, and
    # the host keeps no work dirs and no extra containers.
    marker = f"turngym-leak-{uuid.uuid4().hex}"
    program = (
        "import os, sys\nif os.fork() == 0:\n"
        f"    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}])\nprint(1)"
    )
    workdirs_before = set(Path(tempfile.gettempdir()).glob("turngym-bwrap-*"))
    containers_before = _own_containers(sandbox)

    async def all_runs():
        return await asyncio.gather(*(sandbox.arun(program, limits=QUICK) for _ in range(runs)))

    results = asyncio.run(all_runs())
    assert [r.stdout for r in results] == ["1\n"] * runs
    time.sleep(0.5)
    assert processes_with(marker) == []
    assert set(Path(tempfile.gettempdir()).glob("turngym-bwrap-*")) <= workdirs_before
    assert len(_own_containers(sandbox)) <= max(len(containers_before), 2)  # the pool holds pool_size=2


def _own_containers(sandbox):
    return sandbox.pool.containers() if sandbox.name == "docker" else []


def test_no_leaks_after_a_few_hundred_runs(sandbox, processes_with):
    _leak_check(sandbox, processes_with, runs=200 if sandbox.name == "bubblewrap" else 100)


@pytest.mark.slow
def test_no_leaks_after_thousands_of_runs(sandbox, processes_with):
    _leak_check(sandbox, processes_with, runs=2000)
