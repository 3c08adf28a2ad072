"""Code generation with sandboxed test rewards: problems, loaders, the judge and :class:`CodeEnv`."""

from envs.code.env import CodeEnv
from envs.code.extract import extract_code, fenced
from envs.code.loaders import load_dataset, load_file, load_humaneval
from envs.code.problems import AssertCase, CallCase, Problem, StdioCase, dump_jsonl, load_jsonl
from envs.code.runners import CaseResult, JudgeConfig, TestReport, arun_batch, arun_tests, run_batch, run_tests

__all__ = [
    "AssertCase",
    "CallCase",
    "CaseResult",
    "CodeEnv",
    "JudgeConfig",
    "Problem",
    "StdioCase",
    "TestReport",
    "arun_batch",
    "arun_tests",
    "dump_jsonl",
    "extract_code",
    "fenced",
    "load_dataset",
    "load_file",
    "load_humaneval",
    "load_jsonl",
    "run_batch",
    "run_tests",
]
