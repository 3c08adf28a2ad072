"""Attacks on the sandboxes themselves: state carried into later runs, the runner, and every limit.

Each test is an attack a program tried (or could try) against the docker and bubblewrap backends;
the process backend claims no isolation and is not tested here.
"""

from __future__ import annotations

import json
import textwrap
import time
import uuid

import pytest

from sandbox import Limits, Status

BACKENDS = [
    pytest.param("bubblewrap", id="bubblewrap"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]
pytestmark = pytest.mark.parametrize("sandbox", BACKENDS, indirect=True)
QUICK = Limits(wall_time_s=10.0, cpu_time_s=10.0)


def needs_total_limits(sandbox) -> None:
    if sandbox.name == "bubblewrap" and not sandbox.uses_cgroups:
        pytest.skip(f"the bubblewrap sandbox has no per-run cgroups here: {sandbox.cgroup_reason}")


LEAVE_STATE = textwrap.dedent(
    """
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    os.makedirs("/tmp/locked/inner")
    open("/tmp/locked/inner/f", "w").write("x")
    os.chmod("/tmp/locked/inner", 0)
    os.chmod("/tmp/locked", 0)
    os.symlink("/", "/tmp/to-root")
    os.symlink("/usr", "/tmp/to-usr")
    for path in ("/dev/shm/left", "/dev/mqueue/left"):
        try:
            open(path, "w").write("x")
        except OSError:
            pass
    libc.mq_open(b"/leftq", 0o100 | 0o2, 0o666, None)  # O_CREAT | O_RDWR
    segment = libc.shmget(0x7A11, 200 * 2**20, 0o1000 | 0o666)  # IPC_CREAT
    libc.shmat.restype = ctypes.c_void_p
    address = libc.shmat(segment, None, 0)
    ctypes.memset(address, 1, 200 * 2**20)  # resident: it would weigh on the next run's memory
    libc.semget(0x7A12, 1, 0o1000 | 0o666)
    libc.msgget(0x7A13, 0o1000 | 0o666)
    print("left")
    """
)

FIND_STATE = textwrap.dedent(
    """
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    found = [p for p in ("/tmp/locked", "/tmp/to-root", "/dev/shm/left", "/dev/mqueue/left") if os.path.lexists(p)]
    found += [name for name, key in (("shm", 0x7A11),) if libc.shmget(key, 0, 0) >= 0]
    found += [name for name, key in (("sem", 0x7A12),) if libc.semget(key, 0, 0) >= 0]
    found += [name for name, key in (("msg", 0x7A13),) if libc.msgget(key, 0) >= 0]
    print(found, os.path.isdir("/usr/lib"))
    block = bytearray(300 * 2**20)  # an honest program that needs memory
    for i in range(0, len(block), 4096):
        block[i] = 1
    print("fine")
    """
)


def test_nothing_a_run_leaves_reaches_the_next(sandbox):
    # Files under permission-locked directories and symlinks in /tmp, files in /dev/shm and /dev/mqueue,
    # System V shared memory (200 MB resident), semaphores and message queues: the next run (the same
    # warm container for docker, taken last-in first-out) sees none of them and has its full memory.
    limits = Limits(wall_time_s=10.0, memory_mb=384)
    assert sandbox.run(LEAVE_STATE, limits=limits).stdout == "left\n"
    for _ in range(2):
        after = sandbox.run(FIND_STATE, limits=limits)
        assert (after.status, after.stdout) == (Status.OK, "[] True\nfine\n"), after


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_signalling_pid_1_is_a_result_and_the_next_run_works(sandbox, signal_name):
    program = f"import os, signal, time\ntry:\n    os.kill(1, signal.{signal_name})\nexcept OSError as e:\n"
    program += "    print(type(e).__name__)\ntime.sleep(0.5)\nprint('after')"
    result = sandbox.run(program, limits=QUICK)
    assert result.status in set(Status)  # returned, not raised
    assert sandbox.run("print('next')", limits=QUICK).stdout == "next\n"


MEMORY_OVER_PROCESSES = textwrap.dedent(
    """
    import os, time
    read, write = os.pipe()
    for _ in range(5):
        if os.fork() == 0:
            block = bytearray(400 * 2**20)
            for i in range(0, len(block), 4096):
                block[i] = 1
            os.write(write, b"%d\\n" % os.getpid())
            time.sleep(6)
            os._exit(0)
    os.close(write)
    deadline, reported = time.time() + 5, b""
    os.set_blocking(read, False)
    while time.time() < deadline:
        try:
            reported += os.read(read, 64)
        except BlockingIOError:
            time.sleep(0.05)
    # Children that touched their 400 MB and are still alive now: the OOM killer may have taken some after
    # they reported (so several may report one after another), but never may two hold their blocks at once.
    held = sum(os.waitpid(int(pid), os.WNOHANG) == (0, 0) for pid in reported.split())
    print(held, flush=True)
    """
)


def test_memory_limit_holds_for_all_processes_together(sandbox):
    # Five processes of 400 MB each stay under RLIMIT_AS (512 MB) one by one: 2 GB together. The
    # run's limit (512 MB + tmpfs + runner overhead, under 700 MB) lets at most one of them hold at a time.
    needs_total_limits(sandbox)
    result = sandbox.run(MEMORY_OVER_PROCESSES, limits=Limits(memory_mb=512, wall_time_s=15))
    held = int(result.stdout or 0)
    assert held <= 1 and result.status is Status.MEMORY, result


@pytest.mark.parametrize("where", ["memfd", "/dev/shm", "/tmp"])
def test_memory_in_files_counts_against_the_limit(sandbox, where):
    # 1.5 GB in 8 MB pieces (each under the 16 MB file limit) in memfds or tmpfs files, with 256 MB
    # of memory: the run is stopped (OOM, no space, or the file limit) well before.
    needs_total_limits(sandbox)
    program = textwrap.dedent(
        f"""
        import os, sys
        where, held, fds = {where!r}, 0, []
        for i in range(192):
            try:
                flags = os.O_CREAT | os.O_WRONLY
                fd = os.memfd_create("x") if where == "memfd" else os.open(f"{{where}}/f{{i}}", flags)
                fds.append(fd)
                os.write(fd, b"x" * (8 * 2**20))
            except OSError as error:
                print("stopped", type(error).__name__, flush=True)
                break
            held += 8
            print(held, flush=True)
        """
    )
    result = sandbox.run(program, limits=Limits(memory_mb=256, wall_time_s=20))
    numbers = [int(line) for line in result.stdout.split() if line.isdigit()]
    assert max(numbers, default=0) <= 256 + 64 + 64, (result.status, result.stdout[-200:])


def test_disk_writes_are_bounded_in_total_not_only_per_file(sandbox):
    # 30 files of 15 MB (under the 16 MB file limit): 450 MB. The work dir is a 64 MB tmpfs.
    program = textwrap.dedent(
        """
        written = 0
        for i in range(30):
            try:
                with open(f"f{i}", "wb") as out:
                    out.write(b"x" * (15 * 2**20))
            except OSError as error:
                print("stopped", type(error).__name__)
                break
            written += 15
        print(written)
        """
    )
    result = sandbox.run(program, limits=Limits(max_file_mb=16, wall_time_s=20))
    assert result.stdout.splitlines()[0] == "stopped OSError" and int(result.stdout.split()[-1]) <= 64, result


def test_tracing_the_sandbox_init_does_not_let_a_process_outlive_the_run(sandbox, processes_with):
    # Attach to pid 1 (the sandbox's init) with ptrace and leave a daemon in its own session: the run
    # times out, and nothing of it may still run on the host.
    marker = f"turngym-traced-{uuid.uuid4().hex}"
    program = textwrap.dedent(
        f"""
        import ctypes, os, sys, time
        libc = ctypes.CDLL(None, use_errno=True)
        print(libc.ptrace(16, 1, None, None), flush=True)  # PTRACE_ATTACH to init
        if os.fork() == 0:
            os.setsid()
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", {marker!r}])
        time.sleep(60)
        """
    )
    result = sandbox.run(program, limits=Limits(wall_time_s=2.0))
    assert result.status is Status.TIMEOUT and result.stdout.splitlines()[:1] == ["-1"], result
    time.sleep(0.5)
    assert processes_with(marker) == []


REACH_OTHERS = textwrap.dedent(
    """
    import ctypes, errno, json, os
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    NR = {"x86_64": (101, 310, 434, 438), "aarch64": (117, 270, 434, 438)}[os.uname().machine]
    PTRACE, VM_READV, PIDFD_OPEN, PIDFD_GETFD = NR
    REFUSED = {errno.EPERM, errno.EACCES, errno.ESRCH}
    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]
    buffer = ctypes.create_string_buffer(8)
    local, remote = IoVec(ctypes.cast(buffer, ctypes.c_void_p), 8), IoVec(0x10000, 8)

    def reached(pid):
        found = []
        for name in ("environ", "mem", "fd/1", "maps"):
            try:
                with open(f"/proc/{pid}/{name}", "rb", 0) as handle:
                    handle.read(1)
                found.append(name)
            except OSError as error:
                if error.errno not in REFUSED:  # e.g. EIO: mem opened, address unmapped
                    found.append(f"{name}:{error.errno}")
        calls = {
            "ptrace": (PTRACE, 16, pid, 0, 0),  # PTRACE_ATTACH
            "process_vm_readv": (VM_READV, pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0),
        }
        pidfd = libc.syscall(PIDFD_OPEN, pid, 0)
        if pidfd >= 0:
            calls["pidfd_getfd"] = (PIDFD_GETFD, pidfd, 1, 0)
        for name, args in calls.items():
            ctypes.set_errno(0)
            if libc.syscall(*args) >= 0 or ctypes.get_errno() not in REFUSED:
                found.append(f"{name}:{ctypes.get_errno()}")
        return found

    others = sorted({int(p) for p in os.listdir("/proc") if p.isdigit()} - {os.getpid()})
    targets = sorted(set(others) | {1} | ({os.getppid()} - {0}))
    print(json.dumps({"pid1_is_other": 1 in others, "reached": {p: r for p in targets if (r := reached(p))}}))
    """
)


def test_a_program_reaches_no_process_it_did_not_start(sandbox):
    # Every other process in the program's view (pid 1 and its parent included): its environment,
    # memory, descriptors and maps through /proc, PTRACE_ATTACH, process_vm_readv, and pidfd_getfd of
    # its stdout. Each must be refused (EPERM, EACCES or ESRCH), never opened, read or attached.
    result = sandbox.run(REACH_OTHERS, limits=QUICK)
    assert result.status is Status.OK, result
    assert json.loads(result.stdout) == {"pid1_is_other": True, "reached": {}}, result.stdout


def test_no_user_namespace_can_be_made_inside(sandbox):
    program = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.unshare(0x10000000), libc.unshare(0x10000000 | 0x20000))"  # CLONE_NEWUSER, + CLONE_NEWNS
    )
    result = sandbox.run(program, limits=QUICK)
    assert result.stdout == "-1 -1\n", result


def test_cpu_time_kill_is_a_timeout(sandbox):
    program = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass"
    result = sandbox.run(program, limits=Limits(cpu_time_s=1.0, wall_time_s=30.0))
    # 2 CPU seconds (SIGXCPU ignored, SIGKILL at the hard limit) end it long before the wall time would.
    assert result.status is Status.TIMEOUT and result.wall_time_s < 25, result


def test_a_file_channel_between_runs_is_closed(sandbox):
    # One run writes where the next could look (its home, /tmp, the work dir's parent); the next finds nothing.
    writer = "import os\nfor d in (os.environ['HOME'], '/tmp', '..'):\n    try:\n"
    writer += "        open(os.path.join(d, 'channel'), 'w').write('secret')\n    except OSError:\n        pass"
    reader = "import os\nplaces = (os.environ['HOME'], '/tmp', '..')\n"
    reader += "print([d for d in places if os.path.exists(os.path.join(d, 'channel'))])"
    sandbox.run(writer, limits=QUICK)
    assert sandbox.run(reader, limits=QUICK).stdout == "[]\n"
