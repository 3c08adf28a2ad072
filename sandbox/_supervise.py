"""Supervise one child process: feed stdin, capture capped output, enforce the wall time, kill the group.

Standard library only and free of package imports: the Docker backend ships this file's source into
its containers, where it runs under the image's bare interpreter.

:func:`supervise` starts ``argv`` in a new session (so its process group id is its pid), writes
``stdin``, reads stdout and stderr up to ``max_output_bytes`` each, and kills the whole process group
with SIGKILL when the wall time passes, when a stream goes past its cap, and always once the main
process has exited (leftover children die with the run). It returns a plain dict (JSON-friendly)
that :class:`sandbox.base.RawOutcome` mirrors.
"""

import contextlib
import os
import selectors
import signal
import subprocess
import time

_CHUNK = 65536
_DRAIN_AFTER_EXIT_S = 0.2  # how long to keep reading pipes held open by a process outside the group


def _kill_group(pgid):
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is already gone
        os.killpg(pgid, signal.SIGKILL)


class _Capture:
    def __init__(self, cap):
        self.cap = cap
        self.data = bytearray()
        self.truncated = False

    def add(self, chunk):
        room = self.cap - len(self.data)
        if len(chunk) > room:
            self.data += chunk[: max(room, 0)]
            self.truncated = True
        else:
            self.data += chunk


def _open_pidfd(pid):
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # before Linux 5.3 / Python 3.9: fall back to polling
        return None


def _has_exited(pid):
    # WNOWAIT leaves the zombie for _reap, which needs its resource usage.
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _reap(pid):
    """Wait for ``pid``; returns (returncode, term_signal, cpu_time_s)."""
    _, status, usage = os.wait4(pid, 0)
    cpu_time_s = usage.ru_utime + usage.ru_stime
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status), cpu_time_s
    return os.WEXITSTATUS(status), None, cpu_time_s


def supervise(argv, *, cwd, stdin, wall_time_s, max_output_bytes, env=None, preexec_fn=None, **popen_kwargs):
    """Run ``argv`` to completion under the wall-time and output limits; returns the outcome dict."""
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=preexec_fn,
        close_fds=True,
        **popen_kwargs,
    )
    outcome = {"timed_out": False, "output_limited": False}
    out, err = _Capture(max_output_bytes), _Capture(max_output_bytes)
    captures = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    try:
        _pump(proc, stdin, captures, start + wall_time_s, outcome)
    finally:
        _kill_group(proc.pid)
        returncode, term_signal, cpu_time_s = _reap(proc.pid)
        proc.returncode = -1 if returncode is None else returncode  # reaped here, not by Popen
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
    outcome.update(
        returncode=returncode,
        term_signal=term_signal,
        cpu_time_s=cpu_time_s,
        wall_time_s=time.monotonic() - start,
        stdout=bytes(out.data),
        stderr=bytes(err.data),
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
    )
    return outcome


def _pump(proc, stdin, captures, deadline, outcome):
    """Move bytes until the streams close, the child exits (plus a short drain) or a limit is hit."""
    selector = selectors.DefaultSelector()
    for fd in captures:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    pending = memoryview(stdin)
    stdin_fd = proc.stdin.fileno()
    if pending:
        os.set_blocking(stdin_fd, False)
        selector.register(stdin_fd, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    pidfd = _open_pidfd(proc.pid)
    if pidfd is not None:
        selector.register(pidfd, selectors.EVENT_READ)
    exited_at = None
    try:
        while selector.get_map() or exited_at is None:
            now = time.monotonic()
            if now >= deadline:
                outcome["timed_out"] = True
                return
            if exited_at is not None and now - exited_at > _DRAIN_AFTER_EXIT_S:
                return
            timeout = deadline - now if pidfd is not None and exited_at is None else 0.05
            for key, _ in selector.select(timeout):
                fd = key.fd
                if fd == pidfd:
                    selector.unregister(pidfd)
                    exited_at = time.monotonic()
                    _kill_group(proc.pid)  # the run is over: its leftover children go with it
                elif fd == stdin_fd:
                    pending = _write_some(selector, proc, pending)
                elif not _read_some(selector, fd, captures[fd]):
                    outcome["output_limited"] = True
                    return
            if pidfd is None and exited_at is None and _has_exited(proc.pid):
                exited_at = time.monotonic()
                _kill_group(proc.pid)
    finally:
        selector.close()
        if pidfd is not None:
            os.close(pidfd)


def _write_some(selector, proc, pending):
    try:
        written = os.write(proc.stdin.fileno(), pending[:_CHUNK])
    except BlockingIOError:
        return pending
    except (BrokenPipeError, OSError):  # the program stopped reading: not an error
        written = len(pending)
    pending = pending[written:]
    if not pending:
        selector.unregister(proc.stdin.fileno())
        proc.stdin.close()
    return pending


def _read_some(selector, fd, capture):
    """Read what is there; returns False once the stream went past its cap."""
    try:
        chunk = os.read(fd, _CHUNK)
    except BlockingIOError:
        return True
    if not chunk:
        selector.unregister(fd)
        return True
    capture.add(chunk)
    return not capture.truncated
