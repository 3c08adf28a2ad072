"""Coding problems and their test cases, as typed records with a JSON form.

A :class:`Problem` has one of three test kinds, each with its own case record:

* ``"stdio"``: the solution is a program that reads standard input and writes standard output;
  a :class:`StdioCase` passes when the output's lines, each stripped of surrounding whitespace, equal
  the expected lines (leading and trailing blank lines ignored), with an optional float tolerance per
  whitespace-separated token (:attr:`Problem.float_tol`).
* ``"call"``: the solution defines a function (:attr:`Problem.entry_point`, or a method of a class
  ``Solution``, LeetCode style); a :class:`CallCase` calls it with JSON arguments and compares the
  returned value with the expected JSON value (tuples compare as lists; floats with ``float_tol``).
* ``"assert"``: a :class:`AssertCase` is a Python statement (``assert f(2) == 4``, or HumanEval's
  ``check(candidate)``) run after the solution and :attr:`Problem.setup` in the same namespace; it
  passes when it raises nothing.

Problems are stored one per line in JSONL files (:func:`load_jsonl`, :func:`dump_jsonl`);
:meth:`Problem.to_dict` and :meth:`Problem.from_dict` define the format.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["KINDS", "AssertCase", "CallCase", "Problem", "StdioCase", "TestCase", "dump_jsonl", "load_jsonl"]

Kind = Literal["stdio", "call", "assert"]
KINDS: tuple[str, ...] = ("stdio", "call", "assert")


@dataclass(frozen=True)
class StdioCase:
    """Standard input for the program and the expected standard output."""

    input: str
    output: str

    def to_dict(self) -> dict[str, Any]:
        return {"input": self.input, "output": self.output}


@dataclass(frozen=True)
class CallCase:
    """Positional arguments (JSON values) for the entry point and the expected return value (JSON)."""

    args: tuple[Any, ...]
    expected: Any

    def to_dict(self) -> dict[str, Any]:
        return {"args": list(self.args), "expected": self.expected}


@dataclass(frozen=True)
class AssertCase:
    """A Python statement that raises (``AssertionError`` or other) when the solution is wrong."""

    statement: str

    def to_dict(self) -> dict[str, Any]:
        return {"statement": self.statement}


TestCase = StdioCase | CallCase | AssertCase
_CASE_TYPES: dict[str, type] = {"stdio": StdioCase, "call": CallCase, "assert": AssertCase}


@dataclass(frozen=True)
class Problem:
    """One coding problem: the statement shown to the model, the tests, and a reference solution.

    Args:
        id: unique within a dataset, e.g. ``"bundled/fizzbuzz_range/3"`` or ``"HumanEval/0"``.
        kind: ``"stdio"``, ``"call"`` or ``"assert"`` (see the module docstring).
        prompt: the task statement in natural language (with the signature to implement, if any).
        tests: the cases, all of the record type that ``kind`` names; at least one.
        reference: a reference solution (a complete program or module), or ``None`` if unknown.
        entry_point: the function called by ``"call"`` cases (required there); for ``"assert"``
            problems the name bound to ``candidate`` before the statements run, if given.
        setup: Python run after the solution and before each ``"assert"`` statement (imports,
            HumanEval's ``check`` definition, MBPP's ``test_setup_code``).
        float_tol: numbers compare within this absolute or relative tolerance (``None``: exactly).
        accept_singleton_list: a ``"call"`` case also passes when the expected value is a one-element
            list holding the returned value (APPS and TACO wrap outputs this way).
        starter_code: code to start from, shown to the model (a signature, a class skeleton).
        mutant: a deliberately broken variant of ``reference`` that fails at least one case.
        source: the dataset the problem came from.
        tags: free labels (the problem family, the topic).
    """

    id: str
    kind: Kind
    prompt: str
    tests: tuple[TestCase, ...]
    reference: str | None = None
    entry_point: str | None = None
    setup: str = ""
    float_tol: float | None = None
    accept_singleton_list: bool = False
    starter_code: str = ""
    mutant: str | None = None
    source: str = "user"
    tags: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"problem {self.id!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if not self.tests:
            raise ValueError(f"problem {self.id!r} has no test cases; every problem needs at least one")
        case_type = _CASE_TYPES[self.kind]
        wrong = [type(case).__name__ for case in self.tests if not isinstance(case, case_type)]
        if wrong:
            raise ValueError(
                f"problem {self.id!r} of kind {self.kind!r} needs {case_type.__name__} cases, got {wrong}"
            )
        if self.kind == "call" and not self.entry_point:
            raise ValueError(f"problem {self.id!r}: 'call' problems need the entry_point (the function to call)")
        if self.float_tol is not None and self.float_tol < 0:
            raise ValueError(f"problem {self.id!r}: float_tol must be >= 0 or None, got {self.float_tol!r}")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: plain dicts and lists, ``tests`` as a list of case dicts."""
        return {
            "id": self.id,
            "kind": self.kind,
            "prompt": self.prompt,
            "tests": [case.to_dict() for case in self.tests],
            "reference": self.reference,
            "entry_point": self.entry_point,
            "setup": self.setup,
            "float_tol": self.float_tol,
            "accept_singleton_list": self.accept_singleton_list,
            "starter_code": self.starter_code,
            "mutant": self.mutant,
            "source": self.source,
            "tags": list(self.tags),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Problem:
        """The inverse of :meth:`to_dict`; missing optional keys take their defaults."""
        kind = data.get("kind")
        if kind not in KINDS:
            raise ValueError(f"problem {data.get('id')!r}: kind must be one of {KINDS}, got {kind!r}")
        return cls(
            id=str(data["id"]),
            kind=kind,
            prompt=str(data["prompt"]),
            tests=tuple(_case_from_dict(kind, case) for case in data["tests"]),
            reference=data.get("reference"),
            entry_point=data.get("entry_point"),
            setup=data.get("setup") or "",
            float_tol=data.get("float_tol"),
            accept_singleton_list=bool(data.get("accept_singleton_list", False)),
            starter_code=data.get("starter_code") or "",
            mutant=data.get("mutant"),
            source=data.get("source", "user"),
            tags=tuple(data.get("tags", ())),
        )


def _case_from_dict(kind: str, case: Mapping[str, Any]) -> TestCase:
    if kind == "stdio":
        return StdioCase(input=str(case["input"]), output=str(case["output"]))
    if kind == "call":
        return CallCase(args=tuple(case["args"]), expected=case["expected"])
    return AssertCase(statement=str(case["statement"]))


def load_jsonl(path: str | Path) -> list[Problem]:
    """Problems from a JSONL file written by :func:`dump_jsonl` (blank lines are skipped)."""
    problems = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                problems.append(Problem.from_dict(json.loads(line)))
            except (KeyError, ValueError, TypeError) as error:
                raise ValueError(f"{path}:{number}: not a turngym problem record ({error})") from error
    return problems


def dump_jsonl(problems: Iterable[Problem], path: str | Path) -> None:
    """Write problems one JSON object per line, keys in a fixed order (stable diffs)."""
    with open(path, "w", encoding="utf-8") as f:
        for problem in problems:
            f.write(json.dumps(problem.to_dict(), ensure_ascii=False) + "\n")
