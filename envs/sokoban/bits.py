"""Sets of cells as Python integers: bit ``i`` is cell ``i`` (a flat index ``row * cols + col``).

Set operations become single integer operations, and moving every cell one step is a shift, which is
what makes the pure-Python solver and generator fast. Shifts may wrap from one row's end to the next
row's start; callers only shift cells of an enclosed room (never on the grid's edge), so no bit of
interest wraps.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["cells_of", "flood_layers", "mask_of", "nth_cell", "shift"]


def mask_of(cells: Iterable[int]) -> int:
    """The mask of some cell indices."""
    mask = 0
    for cell in cells:
        mask |= 1 << cell
    return mask


def cells_of(mask: int) -> list[int]:
    """The cell indices in ``mask``, in increasing order."""
    cells = []
    while mask:
        low = mask & -mask
        cells.append(low.bit_length() - 1)
        mask ^= low
    return cells


def nth_cell(mask: int, n: int) -> int:
    """The ``n``-th cell of ``mask`` in increasing order (counting from 0)."""
    for _ in range(n):
        mask &= mask - 1
    return (mask & -mask).bit_length() - 1


def shift(mask: int, offset: int) -> int:
    """Every cell of ``mask`` moved by ``offset`` (cell i becomes cell i + offset)."""
    return mask << offset if offset > 0 else mask >> -offset


def flood_layers(start: int, free: int, cols: int) -> list[int]:
    """Breadth-first layers of the ``free`` cells reachable from cell ``start``: ``layers[k]`` is k moves away."""
    layers = [1 << start]
    seen = frontier = 1 << start
    while True:
        frontier = ((frontier << 1) | (frontier >> 1) | (frontier << cols) | (frontier >> cols)) & free & ~seen
        if not frontier:
            return layers
        seen |= frontier
        layers.append(frontier)
