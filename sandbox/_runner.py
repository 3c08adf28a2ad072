"""The in-container side of the Docker backend: requests in on stdin, JSON results out on stdout.

Standard library only. The Docker backend starts ``python3 -c <source of _supervise.py + this file>``
once per warm container (a ``docker exec`` whose connection it keeps) and then sends one request per
run, each framed as a 4-byte big-endian length and that many bytes of JSON; replies are framed the
same way. A request holds: ``program``, ``stdin``, ``files`` (path -> base64), ``limits`` (the
:class:`sandbox.base.Limits` fields).

Privileges. The container's pid 1 and this runner run as root *inside the container* with only the
capabilities the reset needs (chown, kill, setuid/setgid, and overriding file permissions to empty
``/tmp``); the program runs as uid/gid 65534 with no capability at all (dropped by ``setuid``) and no
new privileges. So the program cannot signal, trace or replace pid 1 or the runner, nor read their
memory or descriptors: a takeover of the runner by one run, to forge the results of later runs,
is out of its reach. The runner

1. makes itself non-dumpable;
2. creates a fresh work dir under ``/tmp`` (a tmpfs) holding ``main.py`` and the files, owned by 65534;
3. runs ``python3 -E -s main.py`` there as 65534 under rlimits (address space, CPU, file size, no core
   dumps; the process count is the container's pids limit), via :func:`supervise`;
4. reads the cgroup's OOM-kill counter before and after, to tell an OOM kill from other SIGKILLs;
5. resets the container: kills every process but pid 1 and itself, empties ``/tmp``, ``/dev/shm`` and
   ``/dev/mqueue``; then checks that nothing is left (no process, no file there, no System V
   shared memory, semaphore or message queue). A container that is not clean is reported
   ``reusable: false`` and the host replaces it. Because of step 5 the runner refuses to start unless
   pid 1 is the pool's marked idle loop (:func:`inside_sandbox_container`);
6. replies with the outcome as one JSON object (output bytes in base64).
"""

import base64
import contextlib
import json
import os
import resource
import shutil
import signal
import struct
import sys
import tempfile
import time

if "supervise" not in globals():  # imported on the host (tests); in a container the source is prepended
    from sandbox._supervise import supervise

PID1_MARKER = "# turngym-sandbox-pid1"  # the pool's pid 1 program carries this comment
PROGRAM_UID = 65534
_WRITABLE = ("/tmp", "/dev/shm", "/dev/mqueue")
_SYSV_IPC = ("/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg")
_PR_SET_DUMPABLE = 4
_OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")


def _make_undumpable():
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        pass  # the image always has ctypes; a bare interpreter without it runs, less protected


def _oom_kills():
    for path in _OOM_COUNTERS:
        try:
            with open(path) as handle:
                for line in handle:
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        except OSError:
            continue
    return 0


def _limit(limits):
    cpu_s = max(1, round(limits["cpu_time_s"]))
    settings = [
        (resource.RLIMIT_AS, limits["memory_mb"] * 2**20),
        (resource.RLIMIT_FSIZE, limits["max_file_mb"] * 2**20),
        (resource.RLIMIT_CORE, 0),
    ]

    def apply():
        for which, value in settings:
            resource.setrlimit(which, (value, value))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        if os.getuid() == 0:  # drop to the program's user: every capability goes with uid 0
            os.setgroups([])
            os.setgid(PROGRAM_UID)
            os.setuid(PROGRAM_UID)

    return apply


def _write_workdir(request):
    workdir = tempfile.mkdtemp(prefix="run-", dir="/tmp")
    with open(os.path.join(workdir, "main.py"), "w", encoding="utf-8") as handle:
        handle.write(request["program"])
    for relative, encoded in request["files"].items():
        target = os.path.join(workdir, relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(base64.b64decode(encoded))
    if os.getuid() == 0:
        for directory, subdirs, names in os.walk(workdir):
            for name in [directory, *(os.path.join(directory, n) for n in subdirs + names)]:
                os.chown(name, PROGRAM_UID, PROGRAM_UID, follow_symlinks=False)
    return workdir


def _other_processes():
    mine = {1, os.getpid()}
    return [int(name) for name in os.listdir("/proc") if name.isdigit() and int(name) not in mine]


def _empty(directory):
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _clean_up():
    """Reset the container after a run; returns whether it is clean (safe to reuse)."""
    for _ in range(500):  # kill(-1) reaches every process but pid 1 and this one, whatever its session
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        if not _other_processes():
            break
        time.sleep(0.002)
    for directory in _WRITABLE:
        _empty(directory)
    return not _other_processes() and not any(_listdir(d) for d in _WRITABLE) and not _sysv_objects()


def _listdir(directory):
    try:
        return os.listdir(directory)
    except OSError:
        return []


def _sysv_objects():
    count = 0
    for path in _SYSV_IPC:
        try:
            with open(path) as handle:
                count += max(0, len(handle.read().strip().splitlines()) - 1)  # a header line, then one per object
        except OSError:
            continue
    return count


def run_request(request):
    """Execute one request; returns the outcome dict (bytes base64-encoded)."""
    limits = request["limits"]
    workdir = _write_workdir(request)
    env = {"PATH": "/usr/bin", "HOME": workdir, "LANG": "C.UTF-8"}  # -E ignores PYTHON* variables anyway
    oom_before = _oom_kills()
    try:
        outcome = supervise(
            [sys.executable, "-E", "-s", "-B", "main.py"],
            cwd=workdir,
            env=env,
            stdin=request["stdin"].encode("utf-8"),
            wall_time_s=limits["wall_time_s"],
            max_output_bytes=limits["max_output_bytes"],
            preexec_fn=_limit(limits),
        )
    finally:
        reusable = _clean_up()
    outcome["reusable"] = reusable
    outcome["oom_killed"] = _oom_kills() > oom_before
    for stream in ("stdout", "stderr"):
        outcome[stream] = base64.b64encode(outcome[stream]).decode("ascii")
    return outcome


def inside_sandbox_container():
    """Whether this is a sandbox container: pid 1 is the pool's marked idle loop and this is not pid 1.

    ``kill(-1, SIGKILL)`` outside such a container would kill every process the user may signal (all
    of them, for root), so the runner refuses to start anywhere else.
    """
    try:
        with open("/proc/1/cmdline", "rb") as handle:
            pid1 = handle.read()
    except OSError:
        return False
    return os.getpid() != 1 and PID1_MARKER.encode() in pid1


def _read_exact(stream, size):
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def main():
    """Serve requests until stdin closes: each a 4-byte big-endian length and that much JSON."""
    if not inside_sandbox_container():
        sys.exit("this runner only runs inside a turngym sandbox container (it kills every process of its user)")
    _make_undumpable()
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    while True:
        header = _read_exact(requests, 4)
        if header is None:
            return
        request = json.loads(_read_exact(requests, struct.unpack(">I", header)[0]))
        body = json.dumps(run_request(request)).encode("utf-8")
        replies.write(struct.pack(">I", len(body)) + body)
        replies.flush()


if __name__ == "__main__":
    main()
