"""Checking a final answer against a task's gold answer.

* ``number``: the answer must contain exactly one number (thousands separators such as
  ``1,234,567`` are read as one number; a unit or words around it are fine: ``"about 12.5 km"``),
  and it must lie within the task's absolute ``tolerance`` of the gold value: 0 for exact integers
  (counts, populations, days), one unit of the last requested decimal for rounded values (``Round
  to 2 decimal places``: 0.01), which accepts either rounding of a value near a boundary and the
  unrounded value. Two or more numbers make the answer ambiguous, hence wrong.
* ``text``: equal to an accepted answer after case folding, collapsing whitespace and stripping
  quotes and end punctuation (``"tuesday."`` matches ``Tuesday``).
* ``date``: the answer must contain exactly one ``YYYY-MM-DD`` date, equal to the gold date.
* ``state``: the answer text is not scored; the environment compares the final tool state.
"""

from __future__ import annotations

import re

from envs.toolcall.tasks import Task

__all__ = ["answer_is_correct", "parse_number"]

_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_NUMBER = re.compile(r"(?<![\w.])[-−]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])|(?<![\w.])[-−]?\.\d+")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_STRIP = " \t\r\n\"'`.!?:;,*()[]"


def parse_number(answer: str) -> float | None:
    """The one number in ``answer``, or ``None`` if it holds none or several."""
    found = _NUMBER.findall(_THOUSANDS.sub("", answer))
    if len(found) != 1:
        return None
    return float(found[0].replace("−", "-"))


def _normalize(text: str) -> str:
    return " ".join(text.strip(_STRIP).casefold().split())


def answer_is_correct(task: Task, answer: str) -> bool:
    """Whether ``answer`` (the text inside ``<answer>``) answers ``task`` (rules in the module docstring)."""
    if task.kind == "number":
        value = parse_number(answer)
        return value is not None and abs(value - float(task.answer)) <= task.tolerance + 1e-9
    if task.kind == "text":
        return _normalize(answer) in {_normalize(a) for a in task.accepted or (task.answer,)}
    if task.kind == "date":
        found = _DATE.findall(answer)
        return len(found) == 1 and found[0] == task.answer
    if task.kind == "state":
        return True
    raise ValueError(f"task {task.id} has an unknown answer kind {task.kind!r}")
