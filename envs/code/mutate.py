"""Deliberately broken variants of a correct program: single-point AST mutations.

Each mutant changes one node of the program: a comparison operator (``<`` and ``<=``, ``>`` and
``>=``, ``==`` and ``!=``, ``in`` and ``not in``), an arithmetic operator (``+`` and ``-``, ``*`` to
``+``, ``//`` to ``/``, ``%`` to ``//``), a boolean operator (``and`` and ``or``), a ``not`` removed,
or an integer constant increased by one. Mutants are listed in source order, the same list every
time for the same program; many fail the tests of the program, some are equivalent to it (mutation
testing's usual caveat), which is why callers check which ones fail.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator

__all__ = ["mutants"]

_COMPARE_SWAPS: dict[type, type] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BINOP_SWAPS: dict[type, type] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv,
}


def mutants(source: str, *, within: str | None = None) -> Iterator[str]:
    """Every single-point mutant of ``source`` (Python), in source order, as unparsed source text.

    ``within``: mutate only inside the top-level function or class of that name (the rest of the
    program, input parsing say, stays intact). Yields nothing for source that does not parse.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    scope: ast.AST = tree
    if within is not None:
        scope = next((n for n in tree.body if getattr(n, "name", None) == within), None)
        if scope is None:
            return
    sites = [node for node in ast.walk(scope) if _mutations(node)]
    # ast.walk is breadth-first; sort by position so that the order reads like the source.
    sites.sort(key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
    positions = {id(node): index for index, node in enumerate(ast.walk(tree))}
    for site in sites:
        for apply in _mutations(site):
            mutated = copy.deepcopy(tree)
            target = next(n for i, n in enumerate(ast.walk(mutated)) if i == positions[id(site)])
            apply(target)
            yield ast.unparse(ast.fix_missing_locations(mutated)) + "\n"


def _mutations(node: ast.AST) -> list:
    """Functions that each mutate a node of the same shape as ``node`` in place."""
    if isinstance(node, ast.Compare):
        return [_swap_compare(i) for i, op in enumerate(node.ops) if type(op) in _COMPARE_SWAPS]
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _BINOP_SWAPS:
        return [_swap_binop]
    if isinstance(node, ast.BoolOp):
        return [_swap_boolop]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return [_drop_not]
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return [_increment]
    return []


def _swap_compare(index: int):
    def apply(node: ast.Compare) -> None:
        node.ops[index] = _COMPARE_SWAPS[type(node.ops[index])]()

    return apply


def _swap_binop(node: ast.BinOp | ast.AugAssign) -> None:
    node.op = _BINOP_SWAPS[type(node.op)]()


def _swap_boolop(node: ast.BoolOp) -> None:
    node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()


def _drop_not(node: ast.UnaryOp) -> None:
    # "not x" becomes "not (not x)", which is bool(x): the negation dropped, without a parent pointer.
    node.operand = ast.UnaryOp(op=ast.Not(), operand=node.operand)


def _increment(node: ast.Constant) -> None:
    node.value = node.value + 1
