"""The test harness that runs inside the sandbox as ``main.py`` (standard library only).

It reads one JSON payload from standard input::

    {"nonce": str, "case_timeout_s": float, "total_timeout_s": float, "max_output_bytes": int,
     "message_chars": int,
     "jobs": [{"kind": "stdio" | "call" | "assert", "solution": str, "setup": str,
               "entry_point": str | None, "cases": [...], "float_tol": float | None,
               "accept_singleton_list": bool}, ...]}

(a job is one solution to judge on one problem's cases; ``total_timeout_s`` is per job) and runs
every case in a forked child of its own: the child gets the case's standard input on fd 0
(an in-memory file), pipes on fds 1 and 2, and a result pipe; the parent reads those pipes with
per-case caps, kills the child's process group at the case's time limit, and compares the result.
For each case the parent writes one line ``<nonce> <json verdict>`` to its standard output, where the
verdict is ``{"job": j, "case": i, "status": ..., "message": str}`` with status ``passed``, ``wrong_answer``,
``error`` (an exception, a non-zero exit), ``timeout``, ``output_limit`` or ``not_run`` (the total
time budget was spent). Before the solution runs, the child drops the payload (every job, expected
outputs, the nonce), so a solution cannot print a verdict line or read the answers from its own
memory without deliberate effort. This is robustness, not security: the sandbox around the harness
is the security boundary.
"""

import json
import linecache
import math
import os
import select
import signal
import sys
import time
import traceback

_PIPE_CHUNK = 65536
_USER_FILES = ("solution.py", "test_setup.py", "test.py")


# The payload's secrets (the nonce, every job with its cases and expected outputs) live only here, so
# that a forked child can drop them all before the solution runs.
_SECRETS = {}


def main():
    payload = json.loads(sys.stdin.read())
    _SECRETS["nonce"] = payload.pop("nonce")
    _SECRETS["jobs"] = payload.pop("jobs")
    for job_index in range(len(_SECRETS["jobs"])):
        settings = {key: value for key, value in _SECRETS["jobs"][job_index].items() if key != "cases"}
        settings.update(payload)
        run_job(settings, job_index)


def run_job(settings, job_index):
    deadline = time.monotonic() + float(settings["total_timeout_s"])
    for index in range(len(_SECRETS["jobs"][job_index]["cases"])):
        if time.monotonic() >= deadline:
            verdict = {"status": "not_run", "message": "the total time budget was spent before this case"}
        else:
            timeout_s = min(float(settings["case_timeout_s"]), deadline - time.monotonic())
            verdict = run_case(settings, job_index, index, timeout_s)
        verdict["job"], verdict["case"] = job_index, index
        sys.stdout.write(_SECRETS["nonce"] + " " + json.dumps(verdict) + "\n")
        sys.stdout.flush()


def run_case(payload, job_index, index, timeout_s):
    """Fork a child for one case, collect its output and exit status, and judge it."""
    case = _SECRETS["jobs"][job_index]["cases"][index]
    stdin_fd = os.memfd_create("case-stdin")
    os.write(stdin_fd, case.get("input", "").encode("utf-8", "surrogateescape"))
    os.lseek(stdin_fd, 0, os.SEEK_SET)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    res_r, res_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        for fd in (out_r, err_r, res_r):
            os.close(fd)
        _child(payload, case, stdin_fd, out_w, err_w, res_w)
    for fd in (stdin_fd, out_w, err_w, res_w):
        os.close(fd)
    limit = int(payload["max_output_bytes"])
    streams, status, outcome = _collect(pid, {"out": out_r, "err": err_r, "res": res_r}, limit, timeout_s)
    if outcome == "timeout":
        return {"status": "timeout", "message": f"no result within {timeout_s:.1f} s"}
    if outcome == "output_limit":
        return {"status": "output_limit", "message": f"the output exceeded {limit} bytes"}
    return _judge(payload, case, streams, status)


def _collect(pid, fds, limit, timeout_s):
    """Read the child's pipes until they close and it exits, within the time and output limits.

    Returns the bytes read per pipe, the child's wait status and ``"ok"``, ``"timeout"`` or
    ``"output_limit"``. The child's process group is killed in every case (lingering grandchildren).
    """
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
            time.sleep(min(wait, 0.0005))  # the pipes closed: the child is exiting
            continue
        ready, _, _ = select.select(list(open_fds), [], [], wait)
        for fd in ready:
            chunk = os.read(fd, _PIPE_CHUNK)
            if not chunk:
                open_fds.discard(fd)
            data[names[fd]] += chunk
        if any(len(value) > limit for value in data.values()):
            outcome = "output_limit"
            break
    _kill_group(pid)
    if status is None:
        _, status = os.waitpid(pid, 0)
    for fd in names:
        os.close(fd)
    return {name: bytes(value) for name, value in data.items()}, status, outcome


def _kill_group(pid):
    for kill in (os.killpg, os.kill):
        try:  # noqa: SIM105 (no contextlib import in the hot path of every case)
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
        kind, solution = payload["kind"], payload["solution"]
        setup, entry_point = payload["setup"], payload["entry_point"]
        args, statement = case.get("args"), case.get("statement")
        payload.clear()
        for job in _SECRETS["jobs"]:
            job.clear()
        _SECRETS.clear()
        case.clear()
        namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        code = _run_solution(kind, solution, setup, entry_point, args, statement, namespace, res_w)
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


def _print_error(error):
    """A traceback of the solution's and the tests' frames only (the harness's own are noise to a model)."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename in _USER_FILES]
    lines = traceback.format_list(frames) + traceback.format_exception_only(type(error), error)
    sys.stderr.write("Traceback (most recent call last):\n" + "".join(lines))


def _compile(source, filename):
    # Registered with linecache so that tracebacks quote the offending lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return compile(source, filename, "exec")


def _run_solution(kind, solution, setup, entry_point, args, statement, namespace, res_w):
    exec(_compile(solution, "solution.py"), namespace)
    if kind == "stdio":
        return 0
    if kind == "call":
        function = _find_callable(namespace, entry_point)
        result = function(*args)
        os.write(res_w, _encode_result(result))
        return 0
    if setup:
        exec(_compile(setup, "test_setup.py"), namespace)
    if entry_point and entry_point in namespace:
        namespace["candidate"] = namespace[entry_point]
    exec(_compile(statement, "test.py"), namespace)
    os.write(res_w, b"ok")
    return 0


def _find_callable(namespace, entry_point):
    """The entry point, as a module-level function or as a method of a LeetCode-style class ``Solution``."""
    if callable(namespace.get(entry_point)):
        return namespace[entry_point]
    holder = namespace.get("Solution")
    if isinstance(holder, type) and callable(getattr(holder, entry_point, None)):
        return getattr(holder(), entry_point)
    raise NameError(f"the solution defines no function {entry_point!r}")


def _encode_result(value):
    try:
        return b"J" + json.dumps(value, allow_nan=True).encode("utf-8")
    except (TypeError, ValueError):
        return b"R" + repr(value)[:2000].encode("utf-8", "replace")


def _judge(payload, case, streams, status):
    out = streams["out"].decode("utf-8", "replace")
    err = streams["err"].decode("utf-8", "replace")
    chars = int(payload["message_chars"])
    exit_code = os.waitstatus_to_exitcode(status)
    kind = payload["kind"]
    if kind == "assert" and streams["res"] == b"ok":
        return {"status": "passed", "message": ""}
    if kind == "call" and streams["res"]:
        return _judge_call(payload, case, streams["res"], chars)
    if exit_code != 0 or kind != "stdio":
        verdict = _judge_failure(kind, exit_code, err, chars)
        if kind == "assert":
            verdict["message"] = "test: " + _clip(case["statement"], chars) + "\n" + verdict["message"]
        return verdict
    if _same_output(out, case["output"], payload["float_tol"]):
        return {"status": "passed", "message": ""}
    return {
        "status": "wrong_answer",
        "message": "expected:\n" + _clip(case["output"], chars) + "\ngot:\n" + _clip(out, chars),
    }


def _judge_failure(kind, exit_code, err, chars):
    last = [line for line in err.strip().splitlines() if line.strip()]
    summary = last[-1] if last else ""
    if kind == "assert" and summary.startswith("AssertionError"):
        return {"status": "wrong_answer", "message": _clip(summary, chars)}
    if exit_code == 0:
        return {"status": "error", "message": "the program ended without running the test (sys.exit or os._exit)"}
    if err.strip():
        message = _traceback_tail(err)
    elif exit_code < 0:
        message = f"killed by signal {-exit_code}"
    else:
        message = f"exit code {exit_code}"
    return {"status": "error", "message": _clip(message, chars)}


def _judge_call(payload, case, raw, chars):
    if raw[:1] == b"R":
        got_text = raw[1:].decode("utf-8", "replace")
        return {"status": "wrong_answer", "message": "returned a value that is not JSON: " + _clip(got_text, chars)}
    got = json.loads(raw[1:].decode("utf-8"))
    expected, tol = case["expected"], payload["float_tol"]
    passed = _same_value(got, expected, tol)
    if not passed and payload["accept_singleton_list"] and isinstance(expected, list) and len(expected) == 1:
        passed = _same_value(got, expected[0], tol)
    if passed:
        return {"status": "passed", "message": ""}
    return {
        "status": "wrong_answer",
        "message": "expected " + _clip(json.dumps(expected), chars) + ", got " + _clip(json.dumps(got), chars),
    }


def _same_output(got, expected, tol):
    got_lines, expected_lines = _lines(got), _lines(expected)
    if got_lines == expected_lines:
        return True
    if tol is None or len(got_lines) != len(expected_lines):
        return False
    for got_line, expected_line in zip(got_lines, expected_lines, strict=False):
        got_tokens, expected_tokens = got_line.split(), expected_line.split()
        if len(got_tokens) != len(expected_tokens):
            return False
        for a, b in zip(got_tokens, expected_tokens, strict=False):
            if a != b and not _close_numbers(a, b, tol):
                return False
    return True


def _lines(text):
    lines = [line.strip() for line in text.strip().splitlines()]
    return lines


def _close_numbers(a, b, tol):
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return math.isclose(x, y, rel_tol=tol, abs_tol=tol)


def _same_value(got, expected, tol):
    if isinstance(got, bool) or isinstance(expected, bool):
        return got is expected if isinstance(got, bool) and isinstance(expected, bool) else False
    if isinstance(got, (int, float)) and isinstance(expected, (int, float)):
        if tol is None or (isinstance(got, int) and isinstance(expected, int)):
            return got == expected
        return math.isclose(got, expected, rel_tol=tol, abs_tol=tol)
    if isinstance(got, list) and isinstance(expected, list):
        return len(got) == len(expected) and all(_same_value(a, b, tol) for a, b in zip(got, expected, strict=False))
    if isinstance(got, dict) and isinstance(expected, dict):
        return got.keys() == expected.keys() and all(_same_value(got[k], expected[k], tol) for k in got)
    return got == expected


def _traceback_tail(err, lines=8):
    return "\n".join(err.strip().splitlines()[-lines:])


def _clip(text, chars):
    return text if len(text) <= chars else text[:chars] + f"... [{len(text) - chars} more characters]"


if __name__ == "__main__":
    main()
