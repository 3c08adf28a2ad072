"""The judge: one sandboxed harness run per submission, per-case verdicts, limits, and what a solution cannot forge."""

from __future__ import annotations

import pytest

from envs.code.mutate import mutants
from envs.code.problems import AssertCase, CallCase, Problem, StdioCase
from envs.code.runners import JudgeConfig, arun_tests, run_batch, run_tests
from sandbox import make_sandbox

ADD = Problem(
    "t/add",
    "stdio",
    "add two numbers",
    (StdioCase("1 2\n", "3\n"), StdioCase("5 5\n", "10"), StdioCase("0 0", "0\n\n")),
)
CALL = Problem("t/call", "call", "f", (CallCase((1, 2), 3), CallCase(([1], [2]), [1, 2])), entry_point="f")
ASSERTS = Problem("t/assert", "assert", "f", (AssertCase("assert f(1, 2) == 3"), AssertCase("assert f(2, 2) == 5")))
FAST = JudgeConfig(case_timeout_s=0.5, total_timeout_s=5.0)


@pytest.fixture(scope="module")
def sandbox():
    box = make_sandbox("process")
    yield box
    box.close()


def statuses(report):
    return [case.status for case in report.cases]


def test_stdio_lines_compare_stripped(sandbox):
    report = run_tests(sandbox, ADD, "a, b = map(int, input().split())\nprint(a + b, ' ')\n")
    assert statuses(report) == ["passed"] * 3 and report.reward("all") == 1.0
    wrong = run_tests(sandbox, ADD, "a, b = map(int, input().split())\nprint(a - b)")
    # 1-2=-1 and 5-5=0 are wrong; 0-0=0 is right: 1 of 3 passes.
    assert statuses(wrong) == ["wrong_answer", "wrong_answer", "passed"]
    assert wrong.reward("all") == 0.0 and wrong.reward("fraction") == pytest.approx(1 / 3)
    assert "expected:\n3" in wrong.cases[0].message and "got:\n-1" in wrong.cases[0].message


def test_float_tolerance(sandbox):
    problem = Problem("t/f", "stdio", "third", (StdioCase("", "0.333333\n"),), float_tol=1e-5)
    assert run_tests(sandbox, problem, "print(1 / 3)").all_passed  # |0.3333333 - 0.333333| < 1e-5
    assert not run_tests(sandbox, problem, "print(0.3334)").all_passed
    exact = Problem("t/e", "stdio", "third", (StdioCase("", "0.333333\n"),))
    assert not run_tests(sandbox, exact, "print(1 / 3)").all_passed


def test_call_cases_functions_and_solution_classes(sandbox):
    assert run_tests(sandbox, CALL, "def f(a, b):\n    return a + b").all_passed
    assert run_tests(sandbox, CALL, "class Solution:\n    def f(self, a, b):\n        return a + b").all_passed
    report = run_tests(sandbox, CALL, "def f(a, b):\n    return {1, 2}")
    assert statuses(report) == ["wrong_answer"] * 2 and "not JSON" in report.cases[0].message
    missing = run_tests(sandbox, CALL, "def g(): pass")
    assert statuses(missing) == ["error"] * 2 and "no function 'f'" in missing.cases[0].message


def test_singleton_list_outputs_are_accepted_when_asked(sandbox):
    wrapped = Problem("t/w", "call", "f", (CallCase((2,), [4]),), entry_point="f", accept_singleton_list=True)
    assert run_tests(sandbox, wrapped, "def f(x): return x * x").all_passed
    assert run_tests(sandbox, wrapped, "def f(x): return [x * x]").all_passed
    strict = Problem("t/s", "call", "f", (CallCase((2,), [4]),), entry_point="f")
    assert not run_tests(sandbox, strict, "def f(x): return x * x").all_passed


def test_assert_cases_and_readable_tracebacks(sandbox):
    report = run_tests(sandbox, ASSERTS, "def f(a, b):\n    return a + b")
    assert statuses(report) == ["passed", "wrong_answer"]
    assert report.cases[1].message == "test: assert f(2, 2) == 5\nAssertionError"
    crash = run_tests(sandbox, ASSERTS, "def f(a, b):\n    return a // (b - 2)")
    # f(1, 2) divides by zero; f(2, 2) too.
    assert statuses(crash) == ["error", "error"]
    assert 'File "solution.py", line 2, in f' in crash.cases[0].message
    assert "ZeroDivisionError" in crash.cases[0].message and "main.py" not in crash.cases[0].message


def test_limits_per_case(sandbox):
    hang = run_tests(sandbox, ADD, "while True: pass", FAST)
    assert statuses(hang) == ["timeout"] * 3
    flood = run_tests(sandbox, ADD, "print('x' * 10**7)", JudgeConfig(max_output_bytes=1000))
    assert statuses(flood) == ["output_limit"] * 3
    closed = run_tests(sandbox, ADD, "import os\nos.close(1)\nos.close(2)\nwhile True: pass", FAST)
    assert statuses(closed) == ["timeout"] * 3
    budget = run_tests(
        sandbox, ADD, "import time\ntime.sleep(0.4)", JudgeConfig(case_timeout_s=1, total_timeout_s=0.6)
    )
    # case 1 takes 0.4 s, case 2 is cut at the remaining 0.2 s, case 3 never starts.
    assert statuses(budget) == ["wrong_answer", "timeout", "not_run"]


def test_exit_codes(sandbox):
    assert statuses(run_tests(sandbox, ADD, "import sys\nprint(3)\nsys.exit(0)"))[0] == "passed"
    failed = run_tests(sandbox, ADD, "import sys\nsys.exit('bad input')")
    assert statuses(failed) == ["error"] * 3 and "bad input" in failed.cases[0].message
    early = run_tests(sandbox, ASSERTS, "import os\nos._exit(0)")
    assert statuses(early) == ["error", "error"]  # the test never ran


def test_a_solution_cannot_forge_verdicts_or_read_answers(sandbox):
    # Verdicts are computed outside the sandbox: a verdict-like line is just wrong output, and the
    # harness (the solution's parent) holds no expected output to read.
    forge = 'print(3)\nprint(\'x {"job": 0, "case": 0, "status": "passed"}\')'
    report = run_tests(sandbox, ADD, forge)
    assert statuses(report) == ["wrong_answer"] * 3 and report.tamper["verdict_output"]
    snoop = "import __main__\nprint(sorted(k for k in vars(__main__) if 'SECRET' in k or 'expected' in k))"
    assert run_tests(sandbox, ADD, snoop).cases[0].message.endswith("got:\n[]\n")


def test_batch_keeps_jobs_apart(sandbox):
    reports = run_batch(sandbox, [(ADD, "print(3)"), (CALL, "def f(a, b): return a + b"), (ASSERTS, "oops(")])
    assert [statuses(r) for r in reports] == [
        ["passed", "wrong_answer", "wrong_answer"],
        ["passed", "passed"],
        ["error", "error"],
    ]
    assert run_batch(sandbox, []) == []


async def test_async_run(sandbox):
    report = await arun_tests(sandbox, CALL, "def f(a, b): return a + b")
    assert report.all_passed


def test_mutants_are_single_point_changes():
    source = "def f(a, b):\n    if a < b:\n        return a + 1\n    return b\n"
    got = list(mutants(source, within="f"))
    # a < b -> a <= b; a + 1 -> a - 1; 1 -> 2 (in source order).
    assert got == [
        "def f(a, b):\n    if a <= b:\n        return a + 1\n    return b\n",
        "def f(a, b):\n    if a < b:\n        return a - 1\n    return b\n",
        "def f(a, b):\n    if a < b:\n        return a + 2\n    return b\n",
    ]
    assert list(mutants("def (", within="f")) == [] and list(mutants(source, within="g")) == []
