"""The trusted side of assert-style judging: runs the TESTS (never the submission) with recorded results.

Standard library only; the judge prepends the source of :mod:`envs.code.plain` and runs it in the
``process`` backend (trusted code: the dataset's tests). The submitted program never runs here and
none of its objects exist here: every function it defines is a *proxy*. Calling a proxy looks up the
result the sandbox recorded for that call (same position, same function name, same arguments) and
returns it decoded by :func:`decode_plain`, that is as genuine built-in values, so an assert compares
plain data and never calls a method of the program's objects. A call with no recorded result yet is
noted (name and plain arguments) and answered with a placeholder, and the case is re-run later with
the results: judging an assert case takes rounds (tests, sandbox, tests, ...) until a round needs
no new call. In a round with placeholders, failing asserts are ignored (the round only collects calls).

Input (JSON on stdin)::

    {"case_timeout_s": float, "jobs": [{"setup": str, "entry_point": str | None, "names": [str],
      "cases": [{"statement": str, "known": [[name, args, kwargs, record], ...]}]}]}

Output: one line ``turngym-check <json>`` per case: ``job``, ``case``, ``status`` (``passed``,
``wrong_answer``, ``error``, ``need``), ``message`` and, for ``need``, ``calls`` (the case's whole call
sequence to run next).
"""

import ast
import builtins
import json
import random
import signal
import sys

CHECK_PREFIX = "turngym-check "
_MAX_CALLS = 10000


class _Placeholder:
    """The stand-in for a result not known yet: every operation gives another placeholder."""

    def _same(self, *args, **kwargs):
        return _Placeholder()

    __call__ = __getattr__ = __getitem__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _same
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = __neg__ = _same
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __abs__ = __and__ = __or__ = __xor__ = _same
    __hash__ = object.__hash__

    def __bool__(self):
        return True

    def __len__(self):
        return 0

    def __iter__(self):
        return iter(())

    def __float__(self):
        return 0.0

    def __int__(self):
        return 0

    __index__ = __int__


class SolutionError(Exception):
    """The submission raised an exception that is not a built-in one (its type name is the message)."""


class _Final(BaseException):
    """Ends the case whatever the test catches (``except Exception`` in a test cannot swallow it)."""


class _CaseEnded(_Final):
    pass


class _NotPlainResult(_Final):
    pass


class _TimeUp(BaseException):
    pass


class _Replay:
    """The recorded calls of one case, consumed in order by the proxies."""

    def __init__(self, known):
        self.known = known
        self.position = 0
        self.calls = []  # the sequence the sandbox should run next, if a new call came up
        self.speculating = False
        self.solution_error = None  # the message of the last exception a proxy re-raised

    def call(self, name, args, kwargs):
        try:
            encoded = [name, encode_plain(tuple(args)), encode_plain(dict(kwargs))]  # noqa: F821 (prepended)
        except Exception:
            encoded = None
        if not self.speculating and self.position < len(self.known):
            recorded = self.known[self.position]
            if encoded is not None and recorded[:3] == encoded:
                self.position += 1
                return self._answer(recorded[3])
        if not self.speculating:
            self.speculating = True
            self.calls = [call[:3] for call in self.known[: self.position]]
            self.unused = {}  # results not consumed in order, by call: a guess that gets the next round further
            for call in self.known[self.position :]:
                self.unused.setdefault(json.dumps(call[:3]), []).append(call[3])
        if encoded is None:
            return _Placeholder()
        self.calls.append(encoded)
        if len(self.calls) > _MAX_CALLS:
            raise _CaseEnded(f"the test made more than {_MAX_CALLS} calls")
        guesses = self.unused.get(json.dumps(encoded))
        if guesses:
            return self._answer(guesses.pop(0))
        return _Placeholder()

    def _answer(self, record):
        if "value" in record:
            return decode_plain(record["value"])  # noqa: F821
        if "not_plain" in record:
            raise _NotPlainResult(f"returned a {record['not_plain']}, which is not plain data")
        self.solution_error = record.get("message") or record.get("raised", "")
        if record.get("base"):
            raise _CaseEnded(f"the solution raised {record.get('raised')}, which ends the test")
        kind = getattr(builtins, str(record.get("raised")), None)
        if isinstance(kind, type) and issubclass(kind, Exception) and kind.__module__ == "builtins":
            raise kind(self.solution_error)
        raise SolutionError(self.solution_error)


def _proxy(replay, name):
    def proxy(*args, **kwargs):
        return replay.call(name, args, kwargs)

    proxy.__name__ = proxy.__qualname__ = name
    return proxy


class _SoftAsserts(ast.NodeTransformer):
    """``assert test, msg`` becomes ``__turngym_assert__(lambda: test, lambda: msg)``."""

    def visit_Assert(self, node):
        self.generic_visit(node)
        args = [ast.Lambda(_no_args(), node.test)]
        if node.msg is not None:
            args.append(ast.Lambda(_no_args(), node.msg))
        call = ast.Call(ast.Name("__turngym_assert__", ast.Load()), args, [])
        return ast.copy_location(ast.Expr(call), node)


def _no_args():
    return ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])


def _compile(source, filename):
    tree = ast.fix_missing_locations(_SoftAsserts().visit(ast.parse(source, filename)))
    return compile(tree, filename, "exec")


def check_case(job, case, timeout_s):
    replay = _Replay(case["known"])

    def assert_(test, message=None):
        try:
            passed = test()
        except Exception:
            if replay.speculating:  # a round with placeholders only collects calls
                return
            raise
        if not passed and not replay.speculating:
            raise AssertionError(message() if message is not None else None)

    namespace = {"__name__": "__main__", "__builtins__": builtins, "__turngym_assert__": assert_}
    for name in job["names"]:
        namespace[name] = _proxy(replay, name)
    if job["entry_point"]:
        namespace["candidate"] = namespace.setdefault(job["entry_point"], _proxy(replay, job["entry_point"]))
    random.seed(0)  # tests that draw random inputs draw the same ones in every round
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        if job["setup"]:
            exec(_compile(job["setup"], "test_setup.py"), namespace)
        exec(_compile(case["statement"], "test.py"), namespace)
        error = None
    except (Exception, _Final) as caught:
        error = caught
    except _TimeUp:
        error = _TimeUp()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if replay.speculating and not isinstance(error, _Final):
        if replay.calls and replay.calls != [call[:3] for call in case["known"]]:
            return {"status": "need", "calls": replay.calls}
        return {"status": "error", "message": "the test passes arguments that are not plain data to the solution"}
    return _verdict(case["statement"], error, replay)


def _verdict(statement, error, replay):
    if error is None:
        return {"status": "passed", "message": ""}
    if isinstance(error, _TimeUp):
        return {"status": "timeout", "message": "the test did not finish in time"}
    if isinstance(error, AssertionError) and replay.solution_error is None:
        text = "AssertionError" + (f": {error}" if error.args and error.args[0] is not None else "")
        return {"status": "wrong_answer", "message": f"test: {statement}\n{text}"}
    if isinstance(error, _NotPlainResult):
        return {"status": "wrong_answer", "message": f"test: {statement}\n{error}"}
    if isinstance(error, _CaseEnded):
        return {"status": "error", "message": str(error)}
    if replay.solution_error is not None:
        return {"status": "error", "message": replay.solution_error}
    return {"status": "error", "message": f"test: {statement}\n{type(error).__name__}: {error}"}


def _time_up(signum, frame):
    raise _TimeUp()


def main():
    payload = json.loads(sys.stdin.read())
    signal.signal(signal.SIGALRM, _time_up)
    for job_index, job in enumerate(payload["jobs"]):
        for case_index, case in enumerate(job["cases"]):
            verdict = check_case(job, case, float(payload["case_timeout_s"]))
            verdict["job"], verdict["case"] = job_index, case_index
            sys.stdout.write(CHECK_PREFIX + json.dumps(verdict) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
