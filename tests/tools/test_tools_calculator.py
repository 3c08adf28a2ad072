"""The safe calculator: precedence, exact integers, float formatting, and every error it promises."""

from __future__ import annotations

import asyncio
import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tools.calculator import CalculatorError, CalculatorTool, evaluate, format_number


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2 + 3 * 4", "14"),  # * before +
        ("(2 + 3) * 4", "20"),
        ("10 - 4 - 3", "3"),  # left-associative: (10 - 4) - 3
        ("2 ** 3 ** 2", "512"),  # right-associative: 2 ** 9
        ("-2 ** 2", "-4"),  # as in Python: -(2 ** 2)
        ("2 ** -1", "0.5"),
        ("2 ^ 10", "1024"),
        ("7 // 2", "3"),
        ("-7 // 2", "-4"),  # floor division
        ("7 % 3", "1"),
        ("10 / 4", "2.5"),
        ("0.1 + 0.2", "0.3"),  # 12 significant digits hide the binary noise
        ("2 ** 64", "18446744073709551616"),  # integers stay exact
        ("1_000 * 3", "3000"),
        (".5 + 1e3", "1000.5"),
        ("sqrt(16) + abs(-3)", "7"),
        ("round(2.71828, 2)", "2.72"),
        ("floor(-2.5) + ceil(2.1)", "0"),  # -3 + 3
        ("log(1000)", "3"),
        ("log(8, 2) + log2(8) + ln(e)", "7"),  # 3 + 3 + 1
        ("max(1, 5, 3) - min(4, 2)", "3"),
        ("sin(0) + cos(0)", "1"),
        ("2 * pi", "6.28318530718"),
        ("--3", "3"),
        ("(12.5 - 3) * 2 / sqrt(16)", "4.75"),  # 9.5 * 2 / 4
    ],
)
def test_values(expression, expected):
    assert format_number(evaluate(expression)) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("2 ** 100000", "exponent 100000 is too large"),
        ("9 ** 9999", "too large (over 4096 bits)"),  # 9999 * 3 bits at least
        ("10.0 ** 400", "too large for a float"),
        ("(-8) ** 0.5", "not a real number"),
        ("sqrt(-1)", "sqrt(-1) is undefined"),
        ("log(0)", "log(0) is undefined"),
        ("exp(1000)", "overflows"),
        ("(" * 60 + "1" + ")" * 60, "nested more than 50 levels"),
        ("-" * 60 + "1", "nested more than 50 levels"),
        ("1" * 1001, "longer than 1000 characters"),
        ("", "empty"),
        ("   ", "empty"),
        ("2 +", "ends too early"),
        ("(2 + 3", "ends too early; expected ')'"),
        ("1,000", "unexpected ','"),
        ("__import__('os')", "cannot read \"'os')\""),
        ("import os", "unknown name 'import'"),
        ("x + 1", "unknown name 'x'"),
        ("max()", "unexpected ')'"),
        ("round(1, 2, 3)", "round takes 1 to 2 arguments, got 3"),
        ("2 $ 3", "cannot read '$ 3'"),
    ],
)
def test_errors(expression, message):
    with pytest.raises(CalculatorError, match=message.replace("(", r"\(").replace(")", r"\)").replace("$", r"\$")):
        evaluate(expression)


def test_tool_returns_errors_as_results():
    tool = CalculatorTool()
    assert asyncio.run(tool.call({"expression": "6 * 7"}, None)).content == "42"
    result = asyncio.run(tool.call({"expression": "1/0"}, None))
    assert (result.ok, result.content) == (False, "Error: division by zero")


_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv, "%": operator.mod}


@settings(max_examples=200, deadline=None)
@given(a=st.integers(-(10**12), 10**12), b=st.integers(-(10**12), 10**12), op=st.sampled_from(sorted(_OPS)))
def test_integer_arithmetic_matches_python(a, b, op):
    expression = f"({a}) {op} ({b})"
    if op in ("//", "%") and b == 0:
        with pytest.raises(CalculatorError, match="division by zero"):
            evaluate(expression)
    else:
        assert evaluate(expression) == _OPS[op](a, b)


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet="0123456789+-*/%^().,e pisqrt", max_size=40))
def test_any_text_gives_a_number_or_a_calculator_error(text):
    try:
        value = evaluate(text)
    except CalculatorError:
        return
    assert isinstance(value, (int, float))
