"""A safe calculator: its own tokenizer, parser and evaluator (no ``eval``), with bounded work.

Grammar (usual precedence; ``**`` is right-associative and binds tighter than unary minus, so
``-2**2 == -4`` as in Python; ``^`` is read as ``**``)::

    expr    := term (("+" | "-") term)*
    term    := unary (("*" | "/" | "//" | "%") unary)*
    unary   := ("-" | "+") unary | power
    power   := atom (("**" | "^") unary)?
    atom    := number | constant | function "(" expr ("," expr)* ")" | "(" expr ")"

Numbers: ``12``, ``1.5``, ``.5``, ``2e3``, ``1_000``, ``1,000`` is *not* a number (the comma
separates function arguments). Constants: ``pi``, ``e``. Functions: ``sqrt``, ``abs``, ``round``
(with optional digits), ``floor``, ``ceil``, ``exp``, ``ln``, ``log`` (base 10, or ``log(x, base)``),
``log2``, ``sin``, ``cos``, ``tan`` (radians), ``min``, ``max``.

Integers stay exact (``2**64`` is 18446744073709551616); ``/`` gives a float. Every problem is an
error result, never an exception: division by zero, an exponent over 10,000 or an integer result
over 4,096 bits, float overflow, a math domain error, an expression over 1,000 characters or
nested over 50 levels. Floats print with 12 significant digits (``0.1 + 0.2`` gives ``0.3``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from tools.base import Stateless, ToolResult

__all__ = ["CalculatorError", "CalculatorTool", "evaluate", "format_number"]

MAX_EXPRESSION_CHARS = 1000
MAX_DEPTH = 50
MAX_EXPONENT = 10_000
MAX_INT_BITS = 4096

_NUMBER = r"\d[\d_]*\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?"
_TOKEN = re.compile(rf"\s*(?:({_NUMBER})|(\*\*|//|[-+*/%^(),])|([A-Za-z_]\w*))")
_CONSTANTS = {"pi": math.pi, "e": math.e}
_FUNCTIONS: dict[str, tuple[Callable[..., Any], int, int]] = {
    # name: (function, min args, max args)
    "sqrt": (math.sqrt, 1, 1),
    "abs": (abs, 1, 1),
    "round": (lambda x, digits=0: round(x, int(digits)) if digits else round(x), 1, 2),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
    "exp": (math.exp, 1, 1),
    "ln": (math.log, 1, 1),
    "log": (lambda x, base=10: math.log(x, base), 1, 2),
    "log2": (math.log2, 1, 1),
    "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1),
    "tan": (math.tan, 1, 1),
    "min": (min, 1, 16),
    "max": (max, 1, 16),
}

Number = int | float


class CalculatorError(ValueError):
    """The expression cannot be evaluated; the message says why."""


def evaluate(expression: str) -> Number:
    """The value of ``expression`` (grammar in the module docstring); raises :class:`CalculatorError`."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    parser = _Parser(_tokenize(expression))
    value = parser.expr(0)
    if parser.peek() is not None:
        raise CalculatorError(f"unexpected {parser.peek()!r} after a complete expression")
    return value


def format_number(value: Number) -> str:
    """Integers in full, floats with 12 significant digits and no trailing zeros (``-0`` prints as ``0``)."""
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return format(value, ".12g")


def _tokenize(expression: str) -> list[str]:
    tokens, pos = [], 0
    while pos < len(expression):
        if expression[pos:].strip() == "":
            break
        match = _TOKEN.match(expression, pos)
        if match is None:
            bad = expression[pos:].strip()[:10]
            raise CalculatorError(f"cannot read {bad!r}; use numbers, + - * / // % ** ( ) and functions")
        tokens.append(match.group(match.lastindex))
        pos = match.end()
    if not tokens:
        raise CalculatorError("the expression is empty")
    return tokens


class _Parser:
    """Recursive descent over the tokens, evaluating as it goes (depth-limited)."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None:
            raise CalculatorError("the expression ends too early" + (f"; expected {expected!r}" if expected else ""))
        if expected is not None and token != expected:
            raise CalculatorError(f"expected {expected!r}, found {token!r}")
        self.pos += 1
        return token

    def expr(self, depth: int) -> Number:
        if depth > MAX_DEPTH:
            raise CalculatorError(f"the expression is nested more than {MAX_DEPTH} levels deep")
        value = self.term(depth)
        while self.peek() in ("+", "-"):
            op = self.take()
            value = _check(value + self.term(depth) if op == "+" else value - self.term(depth))
        return value

    def term(self, depth: int) -> Number:
        value = self.unary(depth)
        while self.peek() in ("*", "/", "//", "%"):
            op = self.take()
            value = _binary(op, value, self.unary(depth))
        return value

    def unary(self, depth: int) -> Number:
        if self.peek() in ("-", "+"):
            if depth > MAX_DEPTH:
                raise CalculatorError(f"the expression is nested more than {MAX_DEPTH} levels deep")
            sign = self.take()
            value = self.unary(depth + 1)
            return -value if sign == "-" else value
        return self.power(depth)

    def power(self, depth: int) -> Number:
        base = self.atom(depth)
        if self.peek() in ("**", "^"):
            self.take()
            return _power(base, self.unary(depth + 1))
        return base

    def atom(self, depth: int) -> Number:
        token = self.take()
        if token == "(":
            value = self.expr(depth + 1)
            self.take(")")
            return value
        if token[0].isdigit() or token[0] == ".":
            return _number(token)
        if token in _CONSTANTS:
            return _CONSTANTS[token]
        if token in _FUNCTIONS:
            return self.function(token, depth)
        if token[0].isalpha() or token[0] == "_":
            names = ", ".join(sorted(_FUNCTIONS) + sorted(_CONSTANTS))
            raise CalculatorError(f"unknown name {token!r}; known functions and constants: {names}")
        raise CalculatorError(f"unexpected {token!r}")

    def function(self, name: str, depth: int) -> Number:
        function, least, most = _FUNCTIONS[name]
        self.take("(")
        args = [self.expr(depth + 1)]
        while self.peek() == ",":
            self.take()
            args.append(self.expr(depth + 1))
        self.take(")")
        if not least <= len(args) <= most:
            raise CalculatorError(f"{name} takes {least} to {most} arguments, got {len(args)}")
        try:
            return _check(function(*args))
        except (ValueError, ZeroDivisionError):
            raise CalculatorError(f"{name}({', '.join(format_number(a) for a in args)}) is undefined") from None
        except OverflowError:
            raise CalculatorError(f"{name}(...) overflows") from None


def _number(token: str) -> Number:
    text = token.replace("_", "")
    try:
        return int(text) if text.isdigit() else _check(float(text))
    except ValueError:
        raise CalculatorError(f"{token!r} is not a number") from None


def _binary(op: str, left: Number, right: Number) -> Number:
    if op in ("/", "//", "%") and right == 0:
        raise CalculatorError("division by zero")
    if op == "*":
        return _check(left * right)
    if op == "/":
        return _check(left / right)
    if op == "//":
        return _check(left // right)
    return _check(left % right)


def _power(base: Number, exponent: Number) -> Number:
    if abs(exponent) > MAX_EXPONENT:
        raise CalculatorError(f"the exponent {format_number(exponent)} is too large (at most {MAX_EXPONENT})")
    if base == 0 and exponent < 0:
        raise CalculatorError("division by zero (0 to a negative power)")
    exact = isinstance(base, int) and isinstance(exponent, int) and exponent > 0
    if exact and (abs(base).bit_length() - 1) * exponent > MAX_INT_BITS:
        raise CalculatorError(f"the result is too large (over {MAX_INT_BITS} bits)")
    try:
        result = base**exponent
    except OverflowError:
        raise CalculatorError("the result is too large for a float") from None
    if isinstance(result, complex):
        raise CalculatorError("a negative number to a fractional power is not a real number")
    return _check(result)


def _check(value: Number) -> Number:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalculatorError(f"the result is too large (over {MAX_INT_BITS} bits)")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError("the result is too large for a float")
    return value


class CalculatorTool(Stateless):
    """Evaluates an arithmetic expression (see the module docstring); errors come back as results."""

    name = "calculator"
    description = (
        "Evaluate an arithmetic expression exactly. Supports + - * / // % ** (or ^), parentheses, pi, e and "
        "the functions sqrt, abs, round(x, digits), floor, ceil, exp, ln, log(x, base=10), log2, sin, cos, tan, "
        "min, max. Example: (12.5 - 3) * 2 / sqrt(16)"
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "The expression, e.g. '2 * (3 + 4)'"}},
        "required": ["expression"],
        "additionalProperties": False,
    }

    async def call(self, arguments: Mapping[str, Any], state: None) -> ToolResult:
        try:
            return ToolResult(format_number(evaluate(arguments["expression"])))
        except CalculatorError as exc:
            return ToolResult.error(str(exc))
