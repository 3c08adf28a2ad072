"""How a bundled problem family is described: a reference function, typed arguments, variants.

A :class:`Family` is one task ("rotate a list left by $k") with a list of parameter sets (its
variants, each a different problem: a different ``k`` changes every answer). ``source`` and ``doc``
are :class:`string.Template` texts over the parameters. ``make_args(rng, params)`` draws the
arguments of one test case. Argument and result types decide how the problem reads in each kind:

* arguments: ``int``, ``float``, ``ints`` (list of int), ``str`` (one line of text), ``words``
  (list of str without spaces);
* results: the same plus ``bool`` and ``lines`` (list of str, printed one per line).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ARG_TYPES", "RESULT_TYPES", "Family", "ints", "lowercase", "word_list"]

ARG_TYPES = ("int", "float", "ints", "str", "words")
RESULT_TYPES = (*ARG_TYPES, "bool", "lines")


@dataclass(frozen=True)
class Family:
    """A parametrised task; each entry of ``variants`` is one bundled problem.

    ``args``: (name, type) per argument of ``function``. ``doc``: what the function returns, in terms
    of the argument names (a Template over the variant's parameters). ``edge_cases``: argument tuples
    always tested (per variant, a callable of the parameters), before ``num_random`` drawn ones.
    """

    name: str
    topic: str
    function: str
    args: tuple[tuple[str, str], ...]
    result: str
    doc: str
    source: str
    variants: Sequence[Mapping[str, Any]]
    make_args: Callable[[random.Random, Mapping[str, Any]], tuple]
    edge_cases: Callable[[Mapping[str, Any]], Sequence[tuple]] = lambda params: ()
    num_random: int = 7

    def __post_init__(self) -> None:
        bad = [t for _, t in self.args if t not in ARG_TYPES] + (
            [self.result] if self.result not in RESULT_TYPES else []
        )
        if bad:
            raise ValueError(f"family {self.name}: unknown types {bad}")


def ints(rng: random.Random, min_len: int, max_len: int, low: int, high: int) -> list[int]:
    """A list of ``min_len..max_len`` integers in ``[low, high]``."""
    return [rng.randint(low, high) for _ in range(rng.randint(min_len, max_len))]


def lowercase(rng: random.Random, min_len: int, max_len: int, alphabet: str = "abcdefghijklmnopqrstuvwxyz") -> str:
    """A string of ``min_len..max_len`` characters from ``alphabet``."""
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(min_len, max_len)))


def word_list(rng: random.Random, min_len: int, max_len: int, alphabet: str = "abcdefghij") -> list[str]:
    """``min_len..max_len`` words of 1 to 7 letters from ``alphabet``."""
    return [lowercase(rng, 1, 7, alphabet) for _ in range(rng.randint(min_len, max_len))]
