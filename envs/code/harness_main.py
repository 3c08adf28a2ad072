"""The harness that runs ONE submission in the sandbox as ``main.py``: inputs in, raw outputs out.

Standard library only; the judge prepends the source of :mod:`envs.code.plain` to it. It holds no
expected output, no verdict and no secret: a program that takes it over can only choose what it
outputs, which it could do anyway. Every verdict is computed outside the sandbox
(:mod:`envs.code.runners`).

It reads one JSON payload from standard input::

    {"mode": "stdio" | "calls", "solution": str, "imports": str, "entry_point": str | None,
     "case_timeout_s": float, "total_timeout_s": float, "max_output_bytes": int,
     "cases": [{"input": str} | {"calls": [[name, args, kwargs], ...]}, ...]}

(``args`` and ``kwargs`` encoded by :func:`encode_plain`; ``imports``: the import statements of the
problem's setup, run after the solution as MBPP expects) and runs every case in a forked child of its
own (fresh interpreter state; the case's standard input on fd 0; pipes on fds 1 and 2 and a result
pipe). A ``"calls"`` case executes the solution, then each call in order (``entry_point`` may be a
method of a class ``Solution``), and writes one JSON line per call to the result pipe: ``{"value":
<plain>}``, ``{"not_plain": type name}`` or ``{"raised": type name, "base": bool, "message": ...}``.
For each case the harness prints one line ``turngym-case <json>``: ``case``, ``status`` (``ok``,
``timeout``, ``output_limit``, ``not_run``), ``exit_code``, ``stdout``, ``stderr`` (its tail),
``results`` and ``error`` (the exception that ended the solution's top-level code, if any).
"""

import json
import linecache
import os
import select
import signal
import sys
import time
import traceback

CASE_PREFIX = "turngym-case "
_PIPE_CHUNK = 65536
_STDERR_TAIL = 4000
_USER_FILES = ("solution.py",)


def main():
    payload = json.loads(sys.stdin.read())
    deadline = time.monotonic() + float(payload["total_timeout_s"])
    for index, case in enumerate(payload.pop("cases")):
        if time.monotonic() >= deadline:
            record = {"status": "not_run"}
        else:
            timeout_s = min(float(payload["case_timeout_s"]), deadline - time.monotonic())
            record = run_case(payload, case, timeout_s)
        record["case"] = index
        sys.stdout.write(CASE_PREFIX + json.dumps(record) + "\n")
        sys.stdout.flush()


def run_case(payload, case, timeout_s):
    """Fork a child for one case; return its raw outputs."""
    stdin_fd = os.memfd_create("case-stdin")
    os.write(stdin_fd, case.get("input", "").encode("utf-8", "surrogateescape"))
    os.lseek(stdin_fd, 0, os.SEEK_SET)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    res_r, res_w = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        for fd in (out_r, err_r, res_r):
            os.close(fd)
        _child(payload, case, stdin_fd, out_w, err_w, res_w)
    for fd in (stdin_fd, out_w, err_w, res_w):
        os.close(fd)
    limit = int(payload["max_output_bytes"])
    streams, status, outcome = _collect(pid, {"out": out_r, "err": err_r, "res": res_r}, limit, timeout_s)
    exit_code = os.waitstatus_to_exitcode(status) if status is not None else None
    record = {"status": outcome, "exit_code": exit_code, "results": [], "error": None}
    record["stdout"] = streams["out"][:limit].decode("utf-8", "replace")
    record["stderr"] = streams["err"][-_STDERR_TAIL:].decode("utf-8", "replace")
    for line in streams["res"].decode("utf-8", "replace").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if "error" in item:
            record["error"] = item["error"]
        else:
            record["results"].append(item)
    return record


def _collect(pid, fds, limit, timeout_s):
    """Read the child's pipes until they close and it exits, within the time and output limits."""
    data = {name: bytearray() for name in fds}
    names = {fd: name for name, fd in fds.items()}
    open_fds = set(names)
    end = time.monotonic() + max(timeout_s, 0.0)
    status = exited_at = None
    outcome = "ok"
    while open_fds or status is None:
        now = time.monotonic()
        if status is None:
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done:
                status, exited_at = wait_status, now
        if status is not None and (not open_fds or now - exited_at > 0.2):
            break  # exited; pipes still open after 0.2 s belong to its own children
        if now >= end:
            outcome = "timeout"
            break
        wait = min(end - now, 0.01)
        if not open_fds:
            time.sleep(min(wait, 0.0005))
            continue
        ready, _, _ = select.select(list(open_fds), [], [], wait)
        for fd in ready:
            chunk = os.read(fd, _PIPE_CHUNK)
            if not chunk:
                open_fds.discard(fd)
            data[names[fd]] += chunk
        if len(data["out"]) > limit or len(data["res"]) > limit:
            outcome = "output_limit"
            break
        if len(data["err"]) > limit:
            del data["err"][:-_STDERR_TAIL]
    _kill_group(pid)
    if status is None:
        _, status = os.waitpid(pid, 0)
    for fd in names:
        os.close(fd)
    return {name: bytes(value) for name, value in data.items()}, status, outcome


def _kill_group(pid):
    for kill in (os.killpg, os.kill):
        try:  # noqa: SIM105
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _child(payload, case, stdin_fd, out_w, err_w, res_w):
    """Run the solution for one case in this forked process; never returns."""
    code = 1
    try:
        os.setpgid(0, 0)
        os.dup2(stdin_fd, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        for fd in (stdin_fd, out_w, err_w):
            os.close(fd)
        sys.stdin = open(0, encoding="utf-8", errors="surrogateescape", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        calls = case.get("calls")
        namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        try:
            exec(_compile(payload["solution"], "solution.py"), namespace)
            if payload.get("imports"):
                exec(compile(payload["imports"], "test_setup.py", "exec"), namespace)
        except BaseException as error:
            _write(res_w, {"error": _describe(error)})
            raise
        code = 0 if calls is None else _run_calls(calls, payload.get("entry_point"), namespace, res_w)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if not isinstance(stop.code, (int, type(None))):
            print(stop.code, file=sys.stderr)
    except BaseException as error:
        _print_error(error)
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:  # noqa: SIM105
                stream.flush()
            except BaseException:
                pass
        os._exit(code)


def _run_calls(calls, entry_point, namespace, res_w):
    for name, args, kwargs in calls:
        try:
            function = _find_callable(namespace, name, name == entry_point)
            value = function(*decode_plain(args), **decode_plain(kwargs))  # noqa: F821 (plain.py is prepended)
        except Exception as error:
            _write(res_w, {"raised": type(error).__name__, "base": False, "message": _solution_traceback(error)})
            continue
        except BaseException as error:  # SystemExit, KeyboardInterrupt and their like end the case
            _write(res_w, {"raised": type(error).__name__, "base": True, "message": _solution_traceback(error)})
            raise
        try:
            _write(res_w, {"value": encode_plain(value)})  # noqa: F821
        except Exception:  # NotPlain, RecursionError, or a program that broke the codec: not plain
            _write(res_w, {"not_plain": _type_name(value)})
    return 0


def _type_name(value):
    try:
        return str(type(value).__name__)[:100]
    except BaseException:
        return "object"


def _write(fd, item):
    data = (json.dumps(item) + "\n").encode("utf-8")
    while data:
        data = data[os.write(fd, data) :]


def _describe(error):
    return {"type": _type_name(error), "base": not isinstance(error, Exception), "message": _solution_traceback(error)}


def _find_callable(namespace, name, is_entry_point):
    """``name``: a module-level function, or (the entry point) a method of a LeetCode-style class ``Solution``."""
    if callable(namespace.get(name)):
        return namespace[name]
    holder = namespace.get("Solution")
    if is_entry_point and isinstance(holder, type) and callable(getattr(holder, name, None)):
        return getattr(holder(), name)
    raise NameError(f"the solution defines no function {name!r}")


def _solution_traceback(error):
    """A traceback of the solution's frames only (the harness's own are noise to a model)."""
    try:
        frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename in _USER_FILES]
        lines = traceback.format_list(frames) + traceback.format_exception_only(type(error), error)
        return ("Traceback (most recent call last):\n" if frames else "") + "".join(lines)[-2000:]
    except BaseException:
        return _type_name(error)


def _print_error(error):
    sys.stderr.write(_solution_traceback(error))


def _compile(source, filename):
    # Registered with linecache so that tracebacks quote the offending lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return compile(source, filename, "exec")


if __name__ == "__main__":
    main()
