"""Judging a solution against a problem's tests: one sandboxed process runs every case.

:func:`run_tests` sends the harness (:mod:`envs.code.harness_main`) to a :class:`sandbox.Sandbox` as
the program, and the solution, the cases and a fresh random nonce as one JSON document on standard
input (so that no test data lies in the work directory). The harness forks a child per case (fresh
interpreter state, its own standard input, a per-case time limit, capped output) and prints one
verdict line per case prefixed with the nonce; lines without it are ignored, and a case without a
verdict line (the whole run was killed: wall time, memory) fails with the sandbox's status.

:func:`run_batch` judges several (problem, solution) pairs in one sandboxed run, which pays the
sandbox's start-up once (a container exec, an interpreter) for a whole group of samples.

The reward of a judged solution (:meth:`TestReport.reward`) is 1.0 when every case passes and 0.0
otherwise (``"all"``), or the fraction of cases passed (``"fraction"``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from envs.code.problems import AssertCase, CallCase, Problem, StdioCase, TestCase

if TYPE_CHECKING:
    from sandbox import ExecResult, Sandbox

__all__ = [
    "CASE_STATUSES",
    "CaseResult",
    "JudgeConfig",
    "TestReport",
    "arun_batch",
    "arun_tests",
    "run_batch",
    "run_tests",
]

RewardMode = Literal["all", "fraction"]
CASE_STATUSES = ("passed", "wrong_answer", "error", "timeout", "output_limit", "not_run", "sandbox")
_HARNESS_PATH = Path(__file__).with_name("harness_main.py")
_SANDBOX_SLACK_S = 5.0  # interpreter start-up and container exec on top of the harness's own budget


@dataclass(frozen=True)
class JudgeConfig:
    """Limits and comparison settings for one judging run.

    ``case_timeout_s``: wall time per case (the harness kills the case's process group).
    ``total_timeout_s``: wall time for all cases; cases that would start after it are ``not_run``.
    ``memory_mb``: address space per process in the sandbox. ``max_output_bytes``: captured bytes per
    case and stream. ``message_chars``: verdict messages (expected/got, traceback tails) are clipped to
    about this many characters per part.
    """

    case_timeout_s: float = 4.0
    total_timeout_s: float = 30.0
    memory_mb: int = 1024
    max_output_bytes: int = 1 << 20
    message_chars: int = 300

    def __post_init__(self) -> None:
        for name in ("case_timeout_s", "total_timeout_s", "memory_mb", "max_output_bytes", "message_chars"):
            if not getattr(self, name) > 0:
                raise ValueError(f"JudgeConfig.{name} must be positive, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class CaseResult:
    """The verdict on one case: ``status`` is one of :data:`CASE_STATUSES`; ``message`` explains a failure."""

    status: str
    message: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@dataclass(frozen=True)
class TestReport:
    """Verdicts on every case of a problem, in test order, and how the sandbox run ended."""

    cases: tuple[CaseResult, ...]
    sandbox_status: str
    wall_time_s: float

    @property
    def num_passed(self) -> int:
        return sum(case.passed for case in self.cases)

    @property
    def all_passed(self) -> bool:
        return bool(self.cases) and self.num_passed == len(self.cases)

    @property
    def pass_fraction(self) -> float:
        return self.num_passed / len(self.cases) if self.cases else 0.0

    def reward(self, mode: RewardMode = "all") -> float:
        """1.0 or 0.0 by whether every case passed (``"all"``), or the fraction passed (``"fraction"``)."""
        if mode == "all":
            return 1.0 if self.all_passed else 0.0
        if mode == "fraction":
            return self.pass_fraction
        raise ValueError(f"reward mode must be 'all' or 'fraction', got {mode!r}")


@cache
def harness_source() -> str:
    """The harness program (the text of :mod:`envs.code.harness_main`)."""
    return _HARNESS_PATH.read_text(encoding="utf-8")


def build_request(jobs: Sequence[tuple[Problem, str]], config: JudgeConfig, nonce: str) -> str:
    """The JSON payload the harness reads on standard input: one job per (problem, solution) pair."""
    return json.dumps(
        {
            "nonce": nonce,
            "case_timeout_s": config.case_timeout_s,
            "total_timeout_s": config.total_timeout_s,
            "max_output_bytes": config.max_output_bytes,
            "message_chars": config.message_chars,
            "jobs": [_job_payload(problem, solution) for problem, solution in jobs],
        }
    )


def _job_payload(problem: Problem, solution: str) -> dict:
    return {
        "kind": problem.kind,
        "solution": solution,
        "setup": problem.setup,
        "entry_point": problem.entry_point,
        "cases": [_case_payload(case) for case in problem.tests],
        "float_tol": problem.float_tol,
        "accept_singleton_list": problem.accept_singleton_list,
    }


def _case_payload(case: TestCase) -> dict:
    if isinstance(case, StdioCase):
        return {"input": case.input, "output": case.output}
    if isinstance(case, CallCase):
        return {"args": list(case.args), "expected": case.expected}
    assert isinstance(case, AssertCase)
    return {"statement": case.statement}


def sandbox_limits(problems: Sequence[Problem], config: JudgeConfig):
    """The sandbox's limits for judging ``problems`` in one run: the harness's budgets plus start-up slack."""
    from sandbox import Limits

    budget = sum(min(config.total_timeout_s, config.case_timeout_s * len(p.tests)) for p in problems)
    wall = budget + _SANDBOX_SLACK_S
    num_cases = sum(len(p.tests) for p in problems)
    return Limits(
        wall_time_s=wall,
        cpu_time_s=wall,
        memory_mb=config.memory_mb,
        # a verdict line: JSON with up to ~3 clipped parts, non-ASCII escaped as \uXXXX (6 bytes a character)
        max_output_bytes=(1 << 16) + num_cases * (1024 + 18 * config.message_chars),
    )


def parse_reports(result: ExecResult, nonce: str, problems: Sequence[Problem]) -> list[TestReport]:
    """Verdicts from the harness's output (lines ``<nonce> <json>``), one report per job.

    A case without a verdict line (the run was killed: wall time, memory) fails with status
    ``"sandbox"`` and the run's status in its message.
    """
    verdicts: dict[tuple[int, int], CaseResult] = {}
    prefix = nonce + " "
    for line in result.stdout.splitlines():
        if not line.startswith(prefix):
            continue
        try:
            verdict = json.loads(line[len(prefix) :])
            key, status = (int(verdict["job"]), int(verdict["case"])), str(verdict["status"])
        except (ValueError, KeyError, TypeError):
            continue
        if status in CASE_STATUSES and key not in verdicts:
            verdicts[key] = CaseResult(status, str(verdict.get("message", "")))
    status = getattr(result.status, "value", str(result.status))
    missing = CaseResult("sandbox", _sandbox_message(result))
    return [
        TestReport(
            cases=tuple(verdicts.get((j, i), missing) for i in range(len(problem.tests))),
            sandbox_status=status,
            wall_time_s=result.wall_time_s,
        )
        for j, problem in enumerate(problems)
    ]


def _sandbox_message(result: ExecResult) -> str:
    status = getattr(result.status, "value", str(result.status))
    tail = "\n".join(result.stderr.strip().splitlines()[-3:])
    return f"the test run ended without a verdict for this case (sandbox status: {status})" + (
        f"\n{tail}" if tail else ""
    )


def run_tests(sandbox: Sandbox, problem: Problem, solution: str, config: JudgeConfig | None = None) -> TestReport:
    """Judge ``solution`` (program or module source) on every case of ``problem`` in one sandboxed run."""
    return run_batch(sandbox, [(problem, solution)], config)[0]


async def arun_tests(
    sandbox: Sandbox, problem: Problem, solution: str, config: JudgeConfig | None = None
) -> TestReport:
    """:func:`run_tests` without blocking the event loop (the sandbox's ``arun``)."""
    return (await arun_batch(sandbox, [(problem, solution)], config))[0]


def run_batch(
    sandbox: Sandbox, jobs: Sequence[tuple[Problem, str]], config: JudgeConfig | None = None
) -> list[TestReport]:
    """Judge several (problem, solution) pairs in ONE sandboxed run (one start-up for all); reports in order.

    Cases stay isolated from each other (a forked child each); the wall-time limit of the run is the
    sum of the jobs' budgets, so one killed run fails the cases of every job without a verdict yet.
    """
    if not jobs:
        return []
    config = config or JudgeConfig()
    nonce = secrets.token_hex(16)
    problems = [problem for problem, _ in jobs]
    request = build_request(jobs, config, nonce)
    result = sandbox.run(harness_source(), stdin=request, limits=sandbox_limits(problems, config))
    return parse_reports(result, nonce, problems)


async def arun_batch(
    sandbox: Sandbox, jobs: Sequence[tuple[Problem, str]], config: JudgeConfig | None = None
) -> list[TestReport]:
    """:func:`run_batch` without blocking the event loop (the sandbox's ``arun``)."""
    if not jobs:
        return []
    config = config or JudgeConfig()
    nonce = secrets.token_hex(16)
    problems = [problem for problem, _ in jobs]
    request = build_request(jobs, config, nonce)
    result = await sandbox.arun(harness_source(), stdin=request, limits=sandbox_limits(problems, config))
    return parse_reports(result, nonce, problems)
