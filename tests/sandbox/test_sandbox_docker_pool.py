"""Docker backend infrastructure: the pool replaces broken containers, nothing outlives its owner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from sandbox import Limits, SandboxError, Status
from sandbox.docker_pool import OWNER_LABEL, SANDBOX_LABEL

pytestmark = pytest.mark.docker
QUICK = Limits(wall_time_s=5.0, cpu_time_s=5.0)


def _wait_until(condition, timeout_s=20.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def test_container_killed_mid_pool_is_replaced(docker_sandbox):
    assert docker_sandbox.run("print(1)", limits=QUICK).stdout == "1\n"
    for container in docker_sandbox.pool.containers():
        container.kill()  # every warm container dies between runs
    result = docker_sandbox.run("print(2)", limits=QUICK)
    assert result.ok and result.stdout == "2\n"
    running = [c for c in docker_sandbox.pool.containers() if c.status == "running"]
    assert running, "the pool started a fresh container"


def test_container_removed_during_a_run_is_retried_on_a_fresh_one(docker_sandbox):
    # The run removes its own container from outside (through the daemon, from a host thread).
    import threading

    def remove_busy_container():
        time.sleep(0.5)
        for container in docker_sandbox.pool.containers():
            container.reload()
            container.remove(force=True)

    remover = threading.Thread(target=remove_busy_container)
    remover.start()
    result = docker_sandbox.run("import time\ntime.sleep(2)\nprint('done')", limits=QUICK)
    remover.join()
    assert result.ok and result.stdout == "done\n"


def test_program_cannot_signal_its_supervisor_or_pid_1(docker_sandbox):
    # The runner and pid 1 are root in the container; the program (uid 65534, no capabilities) may not signal them.
    for target in ("os.getppid()", "1"):
        program = f"import os\nos.kill({target}, 9)"
        result = docker_sandbox.run(program, limits=QUICK)
        assert result.status is Status.RUNTIME_ERROR and "PermissionError" in result.stderr, result
    assert docker_sandbox.run("print('next')", limits=QUICK).stdout == "next\n"


def test_program_cannot_forge_a_result_through_proc(docker_sandbox):
    # Writing a fake reply to the runner's stdout would let a program report success; the runner is
    # not dumpable, so its /proc entries belong to root and cannot be opened.
    program = (
        "import os, struct\n"
        "fake = b'{}'\n"
        "try:\n"
        "    fd = os.open(f'/proc/{os.getppid()}/fd/1', os.O_WRONLY)\n"
        "    os.write(fd, struct.pack('>I', len(fake)) + fake)\n"
        "    print('forged')\n"
        "except OSError as error:\n"
        "    print(type(error).__name__)\n"
    )
    result = docker_sandbox.run(program, limits=QUICK)
    assert (result.status, result.stdout) == (Status.OK, "PermissionError\n")


def test_memory_spread_over_processes_hits_the_container_limit(docker_sandbox):
    # Four processes of 200 MB each stay under RLIMIT_AS (256 MB) but not under the container's memory
    # (256 + 64 tmpfs + 64 runner = 384 MB): the OOM killer acts and the status says so.
    program = textwrap.dedent(
        """
        import os, time
        for _ in range(3):
            if os.fork() == 0:
                break
        block = bytearray(200 * 2**20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(3)
        """
    )
    result = docker_sandbox.run(program, limits=Limits(memory_mb=256, wall_time_s=20))
    assert result.status is Status.MEMORY, result


def test_image_has_no_shell(docker_sandbox):
    result = docker_sandbox.run("import os\nprint(os.path.exists('/bin/sh'), os.getuid())", limits=QUICK)
    assert result.stdout == "False 65534\n"


def test_unreachable_daemon_raises_with_the_fix(monkeypatch):
    from sandbox.docker_backend import docker_client

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxError, match="dockerd --bridge=none"):
        docker_client()


def test_missing_image_raises_with_the_build_command(docker_sandbox):
    from sandbox.docker_backend import DockerSandbox

    with pytest.raises(SandboxError, match=r"python -m sandbox\.image build"):
        DockerSandbox(image="turngym-sandbox:does-not-exist")


def test_image_build_is_idempotent(docker_sandbox):
    from sandbox.image import build_image

    start = time.monotonic()
    tagged = build_image()
    assert build_image() == tagged  # same content key, nothing imported again
    assert time.monotonic() - start < 20
    assert docker_sandbox.client.images.get(tagged).id == docker_sandbox.client.images.get(docker_sandbox.image).id


OWNER_SCRIPT = """
import os, sys
from sandbox.docker_backend import DockerSandbox
sandbox = DockerSandbox(pool_size=1, prewarm=1)
print(sandbox.pool.owner, flush=True)
sys.stdin.read()
"""


def _start_owner():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(os.getcwd()), os.environ.get("PYTHONPATH", "")])}
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    return owner, owner.stdout.readline().strip()


def test_reaper_removes_containers_of_an_owner_killed_with_sigkill(docker_sandbox):
    owner, label = _start_owner()
    client = docker_sandbox.client
    labelled = {"label": f"{OWNER_LABEL}={label}"}
    assert len(client.containers.list(all=True, filters=labelled)) == 1
    owner.send_signal(signal.SIGKILL)  # no atexit, no close(): only the reaper can clean up
    owner.wait()
    # sparse: the list call alone; a full list inspects each container, and one the reaper removes in between is a 404
    assert _wait_until(lambda: not client.containers.list(all=True, sparse=True, filters=labelled))


def test_start_up_removes_containers_of_dead_owners(docker_sandbox):
    client = docker_sandbox.client
    dead_pid = 2**22 + 17  # above the default pid_max of 4194304, so no such process exists
    label = f"{os.uname().nodename}:{dead_pid}:deadbeef"
    client.containers.create(
        docker_sandbox.image,
        command=["/usr/bin/python3", "-c", "pass"],
        labels={SANDBOX_LABEL: "1", OWNER_LABEL: label},
    )
    from sandbox.docker_pool import remove_stale_containers

    assert remove_stale_containers(client) >= 1
    assert client.containers.list(all=True, sparse=True, filters={"label": f"{OWNER_LABEL}={label}"}) == []
