"""The bundled problem set: size, variety, determinism, references pass and mutants fail in every backend."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from envs.code.bundled.generate import FAMILIES, build_problems
from envs.code.loaders import BUNDLED_PATH, load_dataset
from envs.code.runners import JudgeConfig, run_batch
from sandbox import make_sandbox
from sandbox.bubblewrap import bubblewrap_works
from sandbox.docker_backend import docker_daemon_answers

PROBLEMS = load_dataset("bundled")
MUTANT_CONFIG = JudgeConfig(case_timeout_s=0.5, total_timeout_s=2.0)


def judge_all(backend: str, attribute: str, problems, config=None, chunk: int = 64):
    box = make_sandbox(backend)
    try:
        reports = []
        for i in range(0, len(problems), chunk):
            part = problems[i : i + chunk]
            reports += run_batch(box, [(p, getattr(p, attribute)) for p in part], config)
        return reports
    finally:
        box.close()


def test_size_and_variety():
    kinds = Counter(p.kind for p in PROBLEMS)
    assert len(PROBLEMS) == 376 and len({p.id for p in PROBLEMS}) == 376
    assert kinds == {"stdio": 125, "call": 126, "assert": 125}
    topics = Counter(p.tags[0] for p in PROBLEMS)
    assert set(topics) == {"strings", "parsing", "lists", "greedy", "math", "dp", "simulation"}
    assert all(p.reference and p.mutant and p.mutant != p.reference for p in PROBLEMS)


def test_generation_is_deterministic():
    # Rebuilding the first five families reproduces the first lines of the shipped file byte for byte.
    lines = BUNDLED_PATH.read_text(encoding="utf-8").splitlines()
    rebuilt = build_problems(FAMILIES[:5])
    assert [json.dumps(p.to_dict(), ensure_ascii=False) for p in rebuilt] == lines[: len(rebuilt)]


def test_every_reference_passes_in_the_process_backend():
    reports = judge_all("process", "reference", PROBLEMS)
    failing = [p.id for p, r in zip(PROBLEMS, reports, strict=False) if r.reward("all") != 1.0]
    assert failing == []


def test_mutants_fail_in_the_process_backend_sample():
    sample = PROBLEMS[::8]
    reports = judge_all("process", "mutant", sample, MUTANT_CONFIG)
    assert [p.id for p, r in zip(sample, reports, strict=False) if r.reward("fraction") >= 1.0] == []


@pytest.mark.slow
def test_every_mutant_fails_in_the_process_backend():
    reports = judge_all("process", "mutant", PROBLEMS, MUTANT_CONFIG)
    assert [p.id for p, r in zip(PROBLEMS, reports, strict=False) if r.reward("fraction") >= 1.0] == []


@pytest.mark.slow
@pytest.mark.skipif(not bubblewrap_works(), reason="bwrap is not usable on this machine")
def test_every_reference_passes_and_mutant_fails_in_bubblewrap():
    references = judge_all("bubblewrap", "reference", PROBLEMS)
    assert [p.id for p, r in zip(PROBLEMS, references, strict=False) if not r.all_passed] == []
    mutants = judge_all("bubblewrap", "mutant", PROBLEMS, MUTANT_CONFIG)
    assert [p.id for p, r in zip(PROBLEMS, mutants, strict=False) if r.reward("fraction") >= 1.0] == []


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.skipif(not docker_daemon_answers(), reason="no Docker daemon")
def test_every_reference_passes_and_mutant_fails_in_docker():
    references = judge_all("docker", "reference", PROBLEMS)
    assert [p.id for p, r in zip(PROBLEMS, references, strict=False) if not r.all_passed] == []
    mutants = judge_all("docker", "mutant", PROBLEMS, MUTANT_CONFIG)
    assert [p.id for p, r in zip(PROBLEMS, mutants, strict=False) if r.reward("fraction") >= 1.0] == []
