"""Loaders for user files (APPS, TACO, CodeContests, LiveCodeBench, MBPP, HumanEval, turngym), on tiny files."""

from __future__ import annotations

import base64
import gzip
import json
import pickle
import zlib

import pytest

from envs.code.loaders import load_file
from envs.code.problems import CallCase, StdioCase, dump_jsonl, load_jsonl
from envs.code.runners import run_batch
from sandbox import make_sandbox


@pytest.fixture(scope="module")
def sandbox():
    box = make_sandbox("process")
    yield box
    box.close()


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def references_pass(sandbox, problems):
    return [r.all_passed for r in run_batch(sandbox, [(p, p.reference) for p in problems])]


def test_apps_stdin_and_fn_name(tmp_path, sandbox):
    records = [
        {"problem_id": 7, "question": "Add.", "solutions": json.dumps(["print(sum(map(int, input().split())))"]),
         "input_output": json.dumps({"inputs": ["1 2\n", ["3 4"]], "outputs": ["3\n", ["7"]]}), "starter_code": ""},
        {"problem_id": 8, "question": "Square.", "solutions": json.dumps(["def sq(x):\n    return x * x\n"]),
         "input_output": json.dumps({"fn_name": "sq", "inputs": [[3], [4]], "outputs": [[9], 16]}), "starter_code": "def sq(x):"},  # noqa: E501
        {"problem_id": 9, "question": "No tests.", "solutions": "[]", "input_output": ""},
    ]  # fmt: skip
    problems = load_file(write_jsonl(tmp_path / "apps.jsonl", records), "apps")
    assert [p.id for p in problems] == ["apps/7", "apps/8"]  # the record without tests is skipped
    assert problems[0].tests[1] == StdioCase("3 4", "7")  # lists of lines are joined
    assert (
        problems[1].kind == "call"
        and problems[1].tests[0] == CallCase((3,), [9])
        and problems[1].accept_singleton_list
    )
    assert references_pass(sandbox, problems) == [True, True]


def test_taco_json_array(tmp_path, sandbox):
    records = [
        {
            "question": "Echo.",
            "solutions": ["print(input())"],
            "input_output": {"inputs": ["hi\n"], "outputs": ["hi\n"]},
        }
    ]
    (tmp_path / "taco.json").write_text(json.dumps(records))
    problems = load_file(tmp_path / "taco.json", "taco")
    assert [p.id for p in problems] == ["taco/0"] and references_pass(sandbox, problems) == [True]


def test_codecontests_python3_reference(tmp_path, sandbox):
    record = {
        "name": "1_A. Double", "description": "Print 2n.",
        "public_tests": {"input": ["2\n"], "output": ["4\n"]}, "private_tests": {"input": ["5\n"], "output": ["10\n"]},
        "generated_tests": {"input": ["0\n"], "output": ["0\n"]},
        "solutions": {"language": [2, 1, 3], "solution": ["int main(){}", "print 2*input()", "print(2 * int(input()))"]},  # noqa: E501
    }  # fmt: skip
    problems = load_file(write_jsonl(tmp_path / "cc.jsonl", [record]), "codecontests")
    assert len(problems[0].tests) == 3 and problems[0].reference == "print(2 * int(input()))"  # language 3 is Python 3
    assert references_pass(sandbox, problems) == [True]


def test_livecodebench_functional_and_compressed_private(tmp_path, sandbox):
    private = [{"input": "[1, 2, 3]\n2", "output": "5", "testtype": "functional"}]
    compressed = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(private)))).decode()
    records = [
        {"question_id": "abc1", "question_title": "Sum tail", "question_content": "Sum of the last k numbers.",
         "starter_code": "class Solution:\n    def tail(self, nums, k):", "metadata": json.dumps({"func_name": "tail"}),  # noqa: E501
         "public_test_cases": json.dumps([{"input": "[4, 5]\n1", "output": "5", "testtype": "functional"}]),
         "private_test_cases": compressed},
        {"question_id": "abc2", "question_content": "Echo.", "metadata": "{}", "private_test_cases": "[]",
         "public_test_cases": json.dumps([{"input": "x\n", "output": "x\n", "testtype": "stdin"}])},
    ]  # fmt: skip
    problems = load_file(write_jsonl(tmp_path / "lcb.jsonl", records), "livecodebench")
    assert problems[0].tests == (CallCase(([4, 5], 1), 5), CallCase(([1, 2, 3], 2), 5))
    solution = "class Solution:\n    def tail(self, nums, k):\n        return sum(nums[-k:])\n"
    reports = run_batch(sandbox, [(problems[0], solution), (problems[1], "print(input())")])
    assert [r.all_passed for r in reports] == [True, True]


def test_livecodebench_refuses_pickles_that_name_code(tmp_path):
    evil = base64.b64encode(zlib.compress(pickle.dumps(print))).decode()
    record = {"question_id": "x", "question_content": "", "public_test_cases": "[]", "private_test_cases": evil}
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        load_file(write_jsonl(tmp_path / "evil.jsonl", [record]), "livecodebench")


def test_mbpp_both_layouts(tmp_path, sandbox):
    plain = {
        "task_id": 2,
        "text": "Write a function to square.",
        "code": "def sq(x):\n    return x * x",
        "test_list": ["assert sq(2) == 4", "assert sq(3) == 9"],
        "test_setup_code": "",
        "challenge_test_list": [],
    }
    sanitized = {"task_id": 3, "prompt": "Write a function to root.", "code": "def root(x):\n    return math.sqrt(x)",
                 "test_imports": ["import math"], "test_list": ["assert math.isclose(root(4), 2)"]}  # fmt: skip
    problems = load_file(write_jsonl(tmp_path / "mbpp.jsonl", [plain]), "mbpp")
    (tmp_path / "sanitized.json").write_text(json.dumps([sanitized]))
    problems += load_file(tmp_path / "sanitized.json", "mbpp")
    assert [p.entry_point for p in problems] == ["sq", "root"] and problems[1].setup == "import math\n"
    assert "Your code should pass these tests:" in problems[0].prompt
    # The sanitized code relies on the test imports (run before the asserts, in the same namespace), as in MBPP.
    assert references_pass(sandbox, problems) == [True, True]
    assert not run_batch(sandbox, [(problems[0], "def sq(x):\n    return x + x")])[0].all_passed  # sq(3) != 9


def test_humaneval_format_and_turngym_round_trip(tmp_path, sandbox):
    record = {"task_id": "T/0", "prompt": "def inc(x):\n    \"\"\"x + 1\"\"\"\n", "canonical_solution": "    return x + 1\n",  # noqa: E501
              "test": "def check(candidate):\n    assert candidate(1) == 2\n", "entry_point": "inc"}  # fmt: skip
    (tmp_path / "he.jsonl.gz").write_bytes(gzip.compress((json.dumps(record) + "\n").encode()))
    problems = load_file(tmp_path / "he.jsonl.gz", "humaneval")
    assert problems[0].tests[0].statement == "check(inc)" and references_pass(sandbox, problems) == [True]
    dump_jsonl(problems, tmp_path / "own.jsonl")
    assert load_jsonl(tmp_path / "own.jsonl") == problems == load_file(tmp_path / "own.jsonl", "turngym")
    with pytest.raises(ValueError, match="dataset_format"):
        load_file(tmp_path / "own.jsonl", "kaggle")
