"""One submission being judged: what to ask the sandbox, what to ask the trusted test runner, the verdicts.

:class:`Job` is the state :func:`envs.code.runners.run_batch` drives round by round. Everything here
runs on the host and reads the sandbox's raw outputs as plain data (:mod:`envs.code.plain`): expected
outputs are compared here (:mod:`envs.code.compare`), assert statements run in the trusted checker.
"""

from __future__ import annotations

import ast
import json
from typing import TYPE_CHECKING, Any

from envs.code.compare import NotJson, as_json, same_output, same_value
from envs.code.plain import decode_plain, encode_plain
from envs.code.problems import AssertCase, CallCase, Problem, StdioCase
from envs.code.verdicts import CaseResult, JudgeConfig, TestReport

if TYPE_CHECKING:
    from sandbox import ExecResult

__all__ = ["CASE_PREFIX", "Job", "setup_imports", "solution_functions"]

CASE_PREFIX = "turngym-case "
_SLACK_S = 5.0  # interpreter start-up and container exec on top of the harness's own budget
_STDERR_ROOM = 4000


def solution_functions(solution: str) -> list[str]:
    """Names the solution binds to functions or classes at module level (parsed, never run)."""
    try:
        tree = ast.parse(solution)
    except (SyntaxError, ValueError):
        return []
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
            names += [target.id for target in node.targets if isinstance(target, ast.Name)]
    return names


def setup_imports(setup: str) -> str:
    """The module-level imports of a problem's setup code: run after the solution in the sandbox, as
    MBPP's programs expect (``test_imports``), while the rest of the setup (tests, expected values)
    stays outside."""
    try:
        tree = ast.parse(setup)
    except (SyntaxError, ValueError):
        return ""
    return "\n".join(ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)))


class Job:
    """The judging state of one (problem, solution) pair."""

    def __init__(self, problem: Problem, solution: str, config: JudgeConfig) -> None:
        self.problem, self.solution, self.config = problem, solution, config
        n = len(problem.tests)
        self.verdicts: list[CaseResult | None] = [None] * n
        self.known: list[list[list[Any]]] = [[] for _ in range(n)]  # assert: [name, args, kwargs, record]
        self.pending: dict[int, list[list[Any]]] = {}  # assert: the calls each case needs from the sandbox
        self.history: list[dict[str, Any]] = []  # every raw case record (tamper signals)
        self.statuses: list[str] = []
        self.wall_time_s = 0.0
        self._to_check = set(range(n)) if problem.kind == "assert" else set()
        self._sent: list[int] = [] if problem.kind == "assert" else list(range(n))

    # -- the trusted test runner (assert problems) ------------------------------------------------
    def needs_check(self) -> bool:
        return bool(self._to_check)

    def checking_cases(self) -> list[int]:
        return sorted(self._to_check)

    def check_request(self) -> dict[str, Any]:
        names = solution_functions(self.solution)
        cases = []
        for index in self.checking_cases():
            case = self.problem.tests[index]
            assert isinstance(case, AssertCase)
            cases.append({"statement": case.statement, "known": self.known[index]})
        return {"setup": self.problem.setup, "entry_point": self.problem.entry_point, "names": names, "cases": cases}

    def absorb_check(self, verdicts: dict[int, dict[str, Any] | None], failure: str) -> None:
        for index, verdict in verdicts.items():
            self._to_check.discard(index)
            if verdict is None:
                self.verdicts[index] = CaseResult("error", failure)
            elif verdict["status"] == "need":
                self.pending[index] = verdict["calls"]
            else:
                self.verdicts[index] = CaseResult(verdict["status"], verdict.get("message", ""))

    # -- the sandbox -------------------------------------------------------------------------------
    def needs_sandbox(self) -> bool:
        return bool(self.pending) if self.problem.kind == "assert" else not self.statuses

    def sandbox_request(self) -> dict[str, Any]:
        """``stdin`` and ``limits`` for one sandboxed run of the harness: inputs only, no expected output."""
        from sandbox import Limits

        problem, config = self.problem, self.config
        if problem.kind == "stdio":
            cases = [{"input": case.input} for case in problem.tests if isinstance(case, StdioCase)]
        elif problem.kind == "call":
            empty = encode_plain({})
            cases = [
                {"calls": [[problem.entry_point, encode_plain(tuple(case.args)), empty]]}
                for case in problem.tests
                if isinstance(case, CallCase)
            ]
        else:
            self._sent = sorted(self.pending)
            cases = [{"calls": self.pending[index]} for index in self._sent]
        payload = {
            "mode": "stdio" if problem.kind == "stdio" else "calls",
            "solution": self.solution,
            "imports": setup_imports(problem.setup) if problem.kind == "assert" else "",
            "entry_point": problem.entry_point,
            "case_timeout_s": config.case_timeout_s,
            "total_timeout_s": config.total_timeout_s,
            "max_output_bytes": config.max_output_bytes,
            "cases": cases,
        }
        wall = min(config.total_timeout_s, config.case_timeout_s * len(cases)) + _SLACK_S
        # a case record: stdout and results (each up to max_output_bytes, JSON-escaped) and a stderr tail
        room = len(cases) * (12 * config.max_output_bytes + 6 * _STDERR_ROOM + 1024)
        limits = Limits(wall_time_s=wall, cpu_time_s=wall, memory_mb=config.memory_mb, max_output_bytes=room)
        return {"stdin": json.dumps(payload), "limits": limits}

    def absorb(self, result: ExecResult) -> None:
        """Judge the cases of one sandboxed run from its raw output."""
        self.statuses.append(result.status.value)
        self.wall_time_s += result.wall_time_s
        records: dict[int, dict[str, Any]] = {}
        for line in result.stdout.splitlines():
            if line.startswith(CASE_PREFIX):
                try:
                    record = json.loads(line[len(CASE_PREFIX) :])
                    position = int(record["case"])
                except (ValueError, KeyError, TypeError):
                    continue
                if 0 <= position < len(self._sent) and position not in records and _well_formed(record):
                    records[position] = record
        tail = "\n".join(result.stderr.strip().splitlines()[-3:])
        missing = CaseResult(
            "sandbox",
            f"the test run ended without a result for this case (sandbox status: {result.status.value})"
            + (f"\n{tail}" if tail else ""),
        )
        for position, index in enumerate(self._sent):
            record = records.get(position)
            if record is None:
                self.pending.pop(index, None)
                self.verdicts[index] = missing
                continue
            self.history.append(record)
            self._judge(index, record)

    def _judge(self, index: int, record: dict[str, Any]) -> None:
        case = self.problem.tests[index]
        if isinstance(case, StdioCase):
            record["calls"] = 0
            self.verdicts[index] = self._stdio_verdict(case, record)
        elif isinstance(case, CallCase):
            record["calls"] = 1
            self.verdicts[index] = self._call_verdict(case, record)
        else:
            calls = self.pending.pop(index)
            record["calls"] = len(calls)
            verdict = self._ended_verdict(record, len(calls))
            if verdict is not None:
                self.verdicts[index] = verdict
            else:
                self.known[index] = [[*call, result] for call, result in zip(calls, record["results"], strict=False)]
                self._to_check.add(index)

    def _stdio_verdict(self, case: StdioCase, record: dict[str, Any]) -> CaseResult:
        verdict = self._ended_verdict(record, 0)
        if verdict is not None:
            return verdict
        if same_output(record["stdout"], case.output, self.problem.float_tol):
            return CaseResult("passed")
        chars = self.config.message_chars
        return CaseResult(
            "wrong_answer", "expected:\n" + _clip(case.output, chars) + "\ngot:\n" + _clip(record["stdout"], chars)
        )

    def _call_verdict(self, case: CallCase, record: dict[str, Any]) -> CaseResult:
        verdict = self._ended_verdict(record, 1)
        if verdict is not None:
            return verdict
        item, chars = record["results"][0], self.config.message_chars
        if "raised" in item:
            return CaseResult("error", _clip(str(item.get("message") or item["raised"]), chars))
        if "not_plain" in item:
            return CaseResult("wrong_answer", f"returned a {str(item['not_plain'])[:100]}, which is not plain data")
        try:
            got = as_json(decode_plain(item.get("value")))
        except (NotJson, ValueError, TypeError, RecursionError) as error:
            return CaseResult("wrong_answer", f"returned a value that is not JSON: {_clip(str(error), chars)}")
        expected, tol = case.expected, self.problem.float_tol
        passed = same_value(got, expected, tol)
        if not passed and self.problem.accept_singleton_list and isinstance(expected, list) and len(expected) == 1:
            passed = same_value(got, expected[0], tol)
        if passed:
            return CaseResult("passed")
        shown = "expected " + _clip(json.dumps(expected), chars) + ", got " + _clip(json.dumps(got), chars)
        return CaseResult("wrong_answer", shown)

    def _ended_verdict(self, record: dict[str, Any], calls: int) -> CaseResult | None:
        """The verdict when the case did not run to the end (limits, a crash, an early exit), else None."""
        status, chars = record["status"], self.config.message_chars
        if status == "timeout":
            return CaseResult("timeout", f"no result within {self.config.case_timeout_s:.1f} s")
        if status == "output_limit":
            return CaseResult("output_limit", f"the output exceeded {self.config.max_output_bytes} bytes")
        if status == "not_run":
            return CaseResult("not_run", "the total time budget was spent before this case")
        error = record.get("error")
        if isinstance(error, dict) and not (self.problem.kind == "stdio" and error.get("type") == "SystemExit"):
            return CaseResult("error", _clip(str(error.get("message") or error.get("type")), chars))
        exit_code = record.get("exit_code")
        if len(record["results"]) > calls:
            return CaseResult("error", "the program wrote into the judge's result channel")
        if len(record["results"]) == calls and exit_code == 0:
            return None
        if exit_code == 0:
            return CaseResult("error", "the program ended without running the test (sys.exit or os._exit)")
        if record["stderr"].strip():
            message = "\n".join(record["stderr"].strip().splitlines()[-8:])
        elif isinstance(exit_code, int) and exit_code < 0:
            message = f"killed by signal {-exit_code}"
        else:
            message = f"exit code {exit_code}"
        return CaseResult("error", _clip(message, chars))

    # -- the outcome ----------------------------------------------------------------------------------
    def all_records(self) -> list[dict[str, Any]]:
        return self.history

    def report(self, tamper: dict[str, bool]) -> TestReport:
        unfinished = CaseResult("error", "the test needed more rounds of calls than the judge allows")
        return TestReport(
            cases=tuple(verdict or unfinished for verdict in self.verdicts),
            sandbox_status=self.statuses[-1] if self.statuses else "ok",
            wall_time_s=self.wall_time_s,
            tamper=tamper,
        )


def _well_formed(record: dict[str, Any]) -> bool:
    """Fill the optional fields; False for a record the harness cannot have written."""
    if record.get("status") not in ("ok", "timeout", "output_limit", "not_run"):
        return False
    for name, default in (("results", []), ("stdout", ""), ("stderr", ""), ("exit_code", None), ("error", None)):
        record.setdefault(name, default)
    return (
        isinstance(record["results"], list)
        and all(isinstance(item, dict) for item in record["results"])
        and isinstance(record["stdout"], str)
        and isinstance(record["stderr"], str)
        and (record["error"] is None or isinstance(record["error"], dict))
    )


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars] + f"... [{len(text) - chars} more characters]"
