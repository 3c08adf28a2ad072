"""Rendering a family variant as a problem of one kind: statement, reference program, test cases.

The function of a family is the core of all three kinds. ``call`` and ``assert`` problems ask for the
function itself; ``stdio`` problems ask for a program whose input lines are the arguments (one per
line) and whose output is the result, in the formats :data:`ARG_LINE` and :data:`RESULT_FORMAT` name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from envs.code.problems import AssertCase, CallCase, StdioCase, TestCase

__all__ = ["format_output", "prompt_for", "reference_program", "stdin_for", "substitute_args", "tests_for"]

ARG_NOUN = {
    "int": "an integer",
    "float": "a number",
    "ints": "a list of integers",
    "str": "a string",
    "words": "a list of words (lowercase strings without spaces)",
}
ARG_LINE = {
    "int": "an integer",
    "float": "a number",
    "ints": "integers separated by single spaces (an empty line for an empty list)",
    "str": "the string (it has no leading or trailing spaces)",
    "words": "words separated by single spaces (an empty line for an empty list)",
}
ARG_READ = {
    "int": "int(lines[{i}])",
    "float": "float(lines[{i}])",
    "ints": "[int(x) for x in lines[{i}].split()]",
    "str": "lines[{i}].strip()",
    "words": "lines[{i}].split()",
}
RESULT_FORMAT = {
    "int": "one line with the integer",
    "float": "one line with the number, with 6 digits after the decimal point (answers within 1e-6 are accepted)",
    "str": "one line with the string",
    "ints": "one line with the integers separated by single spaces (an empty line for an empty list)",
    "words": "one line with the words separated by single spaces (an empty line for an empty list)",
    "bool": "YES if the result is true and NO otherwise",
    "lines": "each string of the result on its own line",
}
RESULT_PRINT = {
    "int": "print(result)",
    "float": 'print(f"{result:.6f}")',
    "str": "print(result)",
    "ints": 'print(" ".join(str(x) for x in result))',
    "words": 'print(" ".join(result))',
    "bool": 'print("YES" if result else "NO")',
    "lines": 'print("\\n".join(result))',
}
FLOAT_TOL = 1e-6
_EXAMPLES = 2


def reference_program(kind: str, function: str, source: str, args: Sequence[tuple[str, str]], result: str) -> str:
    """The reference solution: the function alone, or for ``stdio`` the function and a ``main``."""
    source = source.strip("\n") + "\n"
    if kind != "stdio":
        return source
    reads = [f"    {name} = {ARG_READ[kind_].format(i=i)}" for i, (name, kind_) in enumerate(args)]
    call = f"    result = {function}({', '.join(name for name, _ in args)})"
    body = ["def main():", '    lines = sys.stdin.read().split("\\n")', *reads, call, "    " + RESULT_PRINT[result]]
    return "import sys\n\n\n" + source + "\n\n" + "\n".join(body) + "\n\n\nmain()\n"


def stdin_for(values: Sequence[Any], args: Sequence[tuple[str, str]]) -> str:
    """The standard input that holds ``values``, one argument per line."""
    lines = []
    for value, (_, kind) in zip(values, args, strict=False):
        lines.append(" ".join(str(v) for v in value) if kind in ("ints", "words") else str(value))
    return "\n".join(lines) + "\n"


def format_output(value: Any, result: str) -> str:
    """What the reference ``stdio`` program prints for the function's return ``value``."""
    if result == "float":
        return f"{value:.6f}\n"
    if result in ("ints", "words"):
        return " ".join(str(v) for v in value) + "\n"
    if result == "bool":
        return ("YES" if value else "NO") + "\n"
    if result == "lines":
        return "\n".join(value) + "\n"
    return f"{value}\n"


def tests_for(
    kind: str, function: str, cases: Sequence[tuple[tuple, Any]], args: Sequence[tuple[str, str]], result: str
) -> tuple[TestCase, ...]:
    """The test cases of a problem from (arguments, expected return value) pairs."""
    if kind == "stdio":
        return tuple(StdioCase(stdin_for(values, args), format_output(expected, result)) for values, expected in cases)
    if kind == "call":
        return tuple(CallCase(tuple(values), expected) for values, expected in cases)
    return tuple(AssertCase(_assert_statement(function, values, expected)) for values, expected in cases)


def _assert_statement(function: str, values: tuple, expected: Any) -> str:
    call = f"{function}({', '.join(repr(v) for v in values)})"
    if isinstance(expected, float):
        assert math.isfinite(expected)
        return f"assert math.isclose({call}, {expected!r}, rel_tol={FLOAT_TOL}, abs_tol={FLOAT_TOL})"
    return f"assert {call} == {expected!r}"


def prompt_for(
    kind: str,
    function: str,
    args: Sequence[tuple[str, str]],
    result: str,
    doc: str,
    tests: Sequence[TestCase],
) -> str:
    """The statement shown to the model, with the first test cases as examples."""
    signature = f"{function}({', '.join(name for name, _ in args)})"
    spec = doc[0].upper() + doc[1:] + ("" if doc.endswith(".") else ".")
    if kind == "stdio":
        lines = [
            "Write a Python program that reads the input from standard input and prints the answer to standard output.",  # noqa: E501
            f"The answer is the value of `{signature}`, specified as follows. {spec}",
            "",
            "Input format:",
            *(f"- line {i + 1}: `{name}`, {ARG_LINE[t]}" for i, (name, t) in enumerate(args)),
            f"Output format: {RESULT_FORMAT[result]}.",
        ]
        for case in tests[:_EXAMPLES]:
            assert isinstance(case, StdioCase)
            lines += ["", "Example input:", "```", case.input.rstrip("\n"), "```", "Example output:", "```"]
            lines += [case.output.rstrip("\n"), "```"]
        return "\n".join(lines)
    arguments = "; ".join(f"`{name}` is {ARG_NOUN[t]}" for name, t in args)
    lines = [f"Write a Python function `{signature}`. {spec}", f"Arguments: {arguments}."]
    if kind == "call":
        lines += ["", "Examples:"]
        for case in tests[:_EXAMPLES]:
            assert isinstance(case, CallCase)
            lines.append(f"{function}({', '.join(repr(a) for a in case.args)}) returns {case.expected!r}")
    else:
        lines += ["", "Your function must pass tests such as:", "```python"]
        lines += [case.statement for case in tests[:_EXAMPLES] if isinstance(case, AssertCase)]
        lines.append("```")
    return "\n".join(lines)


def substitute_args(values: tuple, args: Sequence[tuple[str, str]]) -> tuple:
    """Normalised arguments: strings stripped (a ``str`` argument is one line without surrounding spaces)."""
    return tuple(v.strip() if t == "str" else v for v, (_, t) in zip(values, args, strict=False))
