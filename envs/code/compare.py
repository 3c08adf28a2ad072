"""Comparing a program's raw outputs with the expected ones, outside the sandbox, on plain data only.

* Standard output (:func:`same_output`): lines stripped of surrounding whitespace, leading and trailing
  blank lines ignored; with ``tol``, whitespace-separated tokens that are both numbers compare within
  ``tol`` (absolute or relative).
* Returned values (:func:`same_value`): ``got`` is plain data decoded by :func:`envs.code.plain.decode_plain`
  and turned into its JSON form by :func:`as_json` (tuples become lists, dict keys strings), so that no
  code of the program runs; ``bool`` never equals a number; floats compare within ``tol``.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["NotJson", "as_json", "same_output", "same_value"]


class NotJson(ValueError):
    """A returned value has no JSON form (a set, bytes, a complex number, a non-string key ...)."""


def same_output(got: str, expected: str, tol: float | None) -> bool:
    got_lines, expected_lines = _lines(got), _lines(expected)
    if got_lines == expected_lines:
        return True
    if tol is None or len(got_lines) != len(expected_lines):
        return False
    for got_line, expected_line in zip(got_lines, expected_lines, strict=True):
        got_tokens, expected_tokens = got_line.split(), expected_line.split()
        if len(got_tokens) != len(expected_tokens):
            return False
        for a, b in zip(got_tokens, expected_tokens, strict=True):
            if a != b and not _close_numbers(a, b, tol):
                return False
    return True


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().splitlines()]


def _close_numbers(a: str, b: str, tol: float) -> bool:
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return math.isclose(x, y, rel_tol=tol, abs_tol=tol)


_JSON_KEYS = (str, int, float, bool, type(None))


def as_json(value: Any) -> Any:
    """The value ``json.loads(json.dumps(value))`` would give, for plain data; :class:`NotJson` otherwise."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind in (list, tuple):
        return [as_json(item) for item in value]
    if kind is dict:
        if not all(type(key) in _JSON_KEYS for key in value):
            raise NotJson("a dict key is not a string or a number")
        return {_json_key(key): as_json(item) for key, item in value.items()}
    raise NotJson(f"a {kind.__name__} has no JSON form")


def _json_key(key: Any) -> str:
    if key is None or type(key) is bool:
        return {None: "null", True: "true", False: "false"}[key]
    return key if type(key) is str else repr(key)


def same_value(got: Any, expected: Any, tol: float | None) -> bool:
    if isinstance(got, bool) or isinstance(expected, bool):
        return got is expected if isinstance(got, bool) and isinstance(expected, bool) else False
    if isinstance(got, (int, float)) and isinstance(expected, (int, float)):
        if tol is None or (isinstance(got, int) and isinstance(expected, int)):
            return got == expected
        return math.isclose(got, expected, rel_tol=tol, abs_tol=tol)
    if isinstance(got, list) and isinstance(expected, list):
        return len(got) == len(expected) and all(same_value(a, b, tol) for a, b in zip(got, expected, strict=True))
    if isinstance(got, dict) and isinstance(expected, dict):
        return got.keys() == expected.keys() and all(same_value(got[k], expected[k], tol) for k in got)
    return type(got) is type(expected) and got == expected
