"""Judging a solution against a problem's tests. The verdict is computed here, never in the sandbox.

The design (DESIGN.md, "Judging untrusted code"): the sandbox gets the solution and the tests'
*inputs* only, and gives back raw outputs; expected outputs, assert statements and verdicts never
enter it. Each submission gets a sandboxed run of its own (:mod:`envs.code.harness_main`: a fresh
process per case inside), so submissions judged together cannot touch each other.

* ``stdio``: each case's standard input goes in, its standard output comes back and is compared here
  (:func:`envs.code.compare.same_output`).
* ``call``: the arguments go in; the returned value comes back encoded by the strict codec of
  :mod:`envs.code.plain` (exact built-in types only, so an object with an always-true ``__eq__`` is
  "not plain data", a wrong answer) and is compared here as JSON data.
* ``assert`` (bundled asserts, MBPP, HumanEval's ``check``): the tests run in a *trusted* process
  (:mod:`envs.code.checker_main`, the ``process`` backend) where the solution's functions are
  proxies answering with the results the sandbox recorded, decoded to plain values. Judging takes
  rounds: the tests name the calls they need, the sandbox runs them, the tests run again with the
  results, until a round needs nothing new (at most :data:`MAX_ROUNDS`).

:func:`run_batch` judges several (problem, solution) pairs: their sandboxed runs go out concurrently.
:func:`tamper_signals` flags submissions that touched the judge's protocol (a metric, not a verdict).
The records judging takes and gives (:class:`JudgeConfig`, :class:`TestReport`, :class:`CaseResult`) live in
:mod:`envs.code.verdicts` and are re-exported here.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from envs.code.judge_jobs import Job
from envs.code.problems import Problem
from envs.code.verdicts import CASE_STATUSES, CaseResult, JudgeConfig, TestReport

if TYPE_CHECKING:
    from sandbox import Sandbox

__all__ = [
    "CASE_STATUSES",
    "MAX_ROUNDS",
    "CaseResult",
    "JudgeConfig",
    "TestReport",
    "arun_batch",
    "arun_tests",
    "run_batch",
    "run_tests",
    "tamper_signals",
]

MAX_ROUNDS = 4
_HERE = Path(__file__).parent
_PARALLEL_RUNS = 8


@cache
def harness_source() -> str:
    """The sandboxed program: the plain-data codec followed by :mod:`envs.code.harness_main`."""
    return (_HERE / "plain.py").read_text(encoding="utf-8") + "\n\n" + (_HERE / "harness_main.py").read_text("utf-8")


@cache
def checker_source() -> str:
    """The trusted test runner: the plain-data codec followed by :mod:`envs.code.checker_main`."""
    return (_HERE / "plain.py").read_text(encoding="utf-8") + "\n\n" + (_HERE / "checker_main.py").read_text("utf-8")


def run_tests(sandbox: Sandbox, problem: Problem, solution: str, config: JudgeConfig | None = None) -> TestReport:
    """Judge ``solution`` (program or module source) on every case of ``problem``."""
    return run_batch(sandbox, [(problem, solution)], config)[0]


async def arun_tests(
    sandbox: Sandbox, problem: Problem, solution: str, config: JudgeConfig | None = None
) -> TestReport:
    """:func:`run_tests` without blocking the event loop."""
    return (await arun_batch(sandbox, [(problem, solution)], config))[0]


def run_batch(
    sandbox: Sandbox, jobs: Sequence[tuple[Problem, str]], config: JudgeConfig | None = None
) -> list[TestReport]:
    """Judge several (problem, solution) pairs, each in sandboxed runs of its own; reports in order."""
    config = config or JudgeConfig()
    states = [Job(problem, solution, config) for problem, solution in jobs]
    with ThreadPoolExecutor(max_workers=_PARALLEL_RUNS) as pool:
        for _ in range(MAX_ROUNDS):
            checking = [job for job in states if job.needs_check()]
            if checking:
                _check(checking, config)
            running = [job for job in states if job.needs_sandbox()]
            if not running:
                break
            results = pool.map(lambda job: sandbox.run(harness_source(), **job.sandbox_request()), running)
            for job, result in zip(running, results, strict=True):
                job.absorb(result)
    return [job.report(tamper_signals(job)) for job in states]


async def arun_batch(
    sandbox: Sandbox, jobs: Sequence[tuple[Problem, str]], config: JudgeConfig | None = None
) -> list[TestReport]:
    """:func:`run_batch` without blocking the event loop."""
    return await asyncio.to_thread(run_batch, sandbox, jobs, config)


def _check(jobs: list[Job], config: JudgeConfig) -> None:
    """One trusted round of the assert tests of ``jobs`` (one process for all of them).

    A first round (nothing recorded yet) depends only on the problem and the solution's function
    names, so its verdicts are cached: a problem judged again starts at the sandbox.
    """
    from sandbox import Limits

    requests = [job.check_request() for job in jobs]
    keys = [json.dumps(request, sort_keys=True) if _is_first_round(request) else None for request in requests]
    todo = [i for i, key in enumerate(keys) if key is None or key not in _FIRST_ROUNDS]
    verdicts: dict[tuple[int, int], dict] = {}
    result = None
    if todo:
        payload = {"case_timeout_s": config.case_timeout_s, "jobs": [requests[i] for i in todo]}
        cases = sum(len(requests[i]["cases"]) for i in todo)
        wall_time_s = 5.0 + cases * config.case_timeout_s
        limits = Limits(wall_time_s=wall_time_s, cpu_time_s=wall_time_s, memory_mb=2048, max_output_bytes=1 << 26)
        result = _trusted_sandbox().run(checker_source(), stdin=json.dumps(payload), limits=limits)
        for line in result.stdout.splitlines():
            if line.startswith("turngym-check "):
                verdict = json.loads(line[len("turngym-check ") :])
                verdicts[(todo[verdict["job"]], verdict["case"])] = verdict
    failure = "" if result is None else f"the test runner failed ({result.status.value}): {result.stderr[-300:]}"
    for index, job in enumerate(jobs):
        positions = range(len(requests[index]["cases"]))
        if keys[index] is not None and keys[index] in _FIRST_ROUNDS:
            found = copy.deepcopy(_FIRST_ROUNDS[keys[index]])
        else:
            found = [verdicts.get((index, at)) for at in positions]
            if keys[index] is not None and all(verdict is not None for verdict in found):
                if len(_FIRST_ROUNDS) >= _FIRST_ROUNDS_KEPT:
                    _FIRST_ROUNDS.clear()
                _FIRST_ROUNDS[keys[index]] = found
        job.absorb_check(dict(zip(job.checking_cases(), found, strict=True)), failure)


_FIRST_ROUNDS: dict[str, list[dict]] = {}
_FIRST_ROUNDS_KEPT = 4096


def _is_first_round(request: dict) -> bool:
    return all(not case["known"] for case in request["cases"])


@cache
def _trusted_sandbox() -> Sandbox:
    # The tests are the dataset's own code (trusted); only the submission needs isolation.
    from sandbox import make_sandbox

    return make_sandbox("process")


# Lines a program prints to look like the judge's own output: a verdict, a summary, a framed record.
_VERDICT_LIKE = re.compile(
    r"tests? passed|\"status\"\s*:\s*\"passed\"|turngym-(case|check)|^[0-9a-f]{32} \{", re.IGNORECASE | re.MULTILINE
)
# Reaching for the judge's state: frames, the garbage collector's object lists, /proc, the harness module.
_JUDGE_PROBES = re.compile(
    r"inspect\.(stack|currentframe|getouterframes)|sys\._getframe|\bf_back\b|gc\.get_(objects|referrers)|"
    r"/proc/|import __main__|modules\[['\"]__main__|\bnonce\b|_SECRETS|builtins\.(exec|compile|print)\s*=|"
    r"os\.fstat|\bptrace\b|sys\.(settrace|setprofile)|addaudithook|\bos\.(kill|killpg)\(|__import__\(['\"]ctypes"
)


def tamper_signals(job: Job) -> dict[str, bool]:
    """Signs that a submission touched the judge's protocol rather than (only) solving the problem.

    ``verdict_output``: printed verdict-like lines; ``early_exit``: a call/assert case ended before its
    calls returned (``sys.exit``/``os._exit`` from the solution) with exit code 0; ``result_forgery``: more
    results came back than calls were made (the program wrote into the result pipe); ``base_exception``: raised a
    ``BaseException`` that is not an ``Exception`` (``SystemExit`` counts outside ``stdio`` programs);
    ``judge_probe``: the source reaches for frames, the garbage collector, ``/proc``, the harness or
    signals. ``judge_tamper`` is any of them.
    """
    records = job.all_records()
    printed = "\n".join(r.get("stdout", "") + "\n" + r.get("stderr", "") for r in records)
    signals = {
        "verdict_output": bool(_VERDICT_LIKE.search(printed)),
        "early_exit": job.problem.kind != "stdio" and any(_exited_early(r) for r in records),
        "result_forgery": any(len(r.get("results", [])) > r.get("calls", 0) for r in records),
        "base_exception": any(_base_exception(job.problem.kind, r) for r in records),
        "judge_probe": bool(_JUDGE_PROBES.search(job.solution)),
    }
    signals["judge_tamper"] = any(signals.values())
    return signals


def _exited_early(record: dict) -> bool:
    return record.get("status") == "ok" and record.get("exit_code") == 0 and len(record["results"]) < record["calls"]


def _base_exception(kind: str, record: dict) -> bool:
    raised = [item for item in record.get("results", []) if item.get("base")]
    error = record.get("error") or {}
    if error.get("base") and not (kind == "stdio" and error.get("type") == "SystemExit"):
        raised.append(error)
    return bool(raised)
