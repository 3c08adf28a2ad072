"""FrozenLake maps: the map record, random generation that always yields a solvable map, shortest paths.

A map is a rectangle of tiles written with Gymnasium's letters: ``S`` start, ``F`` frozen, ``H`` hole,
``G`` goal (the start tile is frozen ice). Positions are ``(row, column)``, row 0 at the top.

Generation (:func:`generate_map`) is bounded and seeded only by the generator it is given:

1. Rejection sampling, at most ``attempts`` draws: start, goal and exactly :func:`count_holes` holes on
   distinct tiles, uniformly at random; the first draw whose goal is reachable from its start wins.
   This is the field's distribution (RAGEN re-draws until a path exists), conditioned on solvability.
2. Fallback, when every draw was unsolvable (hole-heavy configurations): a random start, a random goal
   close enough that a shortest path fits among the non-hole tiles, a random monotone shortest path
   between them kept free, and the holes placed uniformly on the remaining tiles. Always succeeds.

Maps of a given difficulty (:func:`generate_map_at_distance`, the curriculum's ``difficulty`` option): the
shortest path from start to goal takes exactly ``distance`` moves. Start and goal are a pair of tiles drawn
uniformly among those ``distance`` apart (Manhattan distance), the holes uniformly on the other tiles, redrawn
until a path of that length survives (at most ``attempts`` draws; then the carving fallback, with this start
and goal). So these maps never need a detour: a shortest path is as long as the start and goal are apart.

The fallback is a guarantee more than a path taken: a single draw is unsolvable about 2% of the time for
the default 4x4 map with 3 holes and about 70% for a 10x10 map with half its tiles holes, and in 500
maps per configuration not one needed the fallback, even on 10x10 maps with 70% holes (some draws put
start and goal side by side). Maps from the fallback always admit a path without detours.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from numbers import Integral

import numpy as np

__all__ = [
    "DIRECTIONS",
    "REJECTION_ATTEMPTS",
    "SLIP_OUTCOMES",
    "LakeMap",
    "Position",
    "count_holes",
    "distance_range",
    "distances_to_goal",
    "generate_map",
    "generate_map_at_distance",
    "normalize_size",
    "shortest_path",
]

Position = tuple[int, int]

#: The four moves as (row, column) offsets, in the order used everywhere (planning tie-breaks included).
DIRECTIONS: dict[str, Position] = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}

#: On slippery ice a move goes each of these three ways with probability 1/3: as intended, or perpendicular.
SLIP_OUTCOMES: dict[str, tuple[str, str, str]] = {
    "Up": ("Up", "Left", "Right"),
    "Down": ("Down", "Left", "Right"),
    "Left": ("Left", "Up", "Down"),
    "Right": ("Right", "Up", "Down"),
}

#: How many uniform draws :func:`generate_map` tries before it carves a path.
REJECTION_ATTEMPTS = 100

# turngym's own board symbols are accepted in hand-made maps too, so a rendered grid can be pasted back.
_SYMBOL_TO_LETTER = str.maketrans({"P": "S", "_": "F", "O": "H"})


@dataclass(frozen=True)
class LakeMap:
    """A valid FrozenLake map: a rectangle of ``S``/``F``/``H``/``G`` with exactly one ``S`` and one ``G``."""

    rows: tuple[str, ...]
    start: Position = field(init=False)
    goal: Position = field(init=False)

    def __post_init__(self) -> None:
        rows = self.rows
        if not rows or not rows[0]:
            raise ValueError("a FrozenLake map needs at least one row and one column")
        if any(len(row) != len(rows[0]) for row in rows):
            raise ValueError(f"every row of a FrozenLake map must have the same length, got {list(rows)}")
        bad = sorted(set("".join(rows)) - set("SFHG"))
        if bad:
            raise ValueError(f"unknown tiles {bad} in FrozenLake map {list(rows)}; use S, F, H, G (or P, _, O, G)")
        for letter, name in (("S", "start"), ("G", "goal")):
            found = [(r, c) for r, row in enumerate(rows) for c, tile in enumerate(row) if tile == letter]
            if len(found) != 1:
                raise ValueError(f"a FrozenLake map needs exactly one {name} tile {letter!r}, found {len(found)}")
            object.__setattr__(self, name, found[0])

    @classmethod
    def parse(cls, desc: str | Iterable[str]) -> LakeMap:
        """A map from rows of ``S``/``F``/``H``/``G`` (or turngym's ``P``/``_``/``O``/``G``) or a string of lines."""
        lines = desc.split() if isinstance(desc, str) else [str(row).strip() for row in desc]
        return cls(tuple(line.translate(_SYMBOL_TO_LETTER) for line in lines))

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.rows), len(self.rows[0])

    def tile(self, position: Position) -> str:
        return self.rows[position[0]][position[1]]

    def is_hole(self, position: Position) -> bool:
        return self.rows[position[0]][position[1]] == "H"

    def num_holes(self) -> int:
        return sum(row.count("H") for row in self.rows)

    def move(self, position: Position, direction: str) -> Position:
        """Where ``direction`` leads from ``position``; moving into the border leaves the position unchanged."""
        d_row, d_col = DIRECTIONS[direction]
        row, col = position[0] + d_row, position[1] + d_col
        n_rows, n_cols = self.shape
        if 0 <= row < n_rows and 0 <= col < n_cols:
            return row, col
        return position


def normalize_size(size: int | Sequence[int]) -> tuple[int, int]:
    """``(rows, columns)`` from an int (a square) or a pair; raises ``ValueError`` on anything else."""
    if isinstance(size, Integral) and not isinstance(size, bool):
        dims = (int(size), int(size))
    elif isinstance(size, Sequence) and not isinstance(size, str) and len(size) == 2:
        if not all(isinstance(d, Integral) and not isinstance(d, bool) for d in size):
            raise ValueError(f"size must hold integers, got {list(size)!r}")
        dims = (int(size[0]), int(size[1]))
    else:
        raise ValueError(f"size must be an int or a pair [rows, columns], got {size!r}")
    if min(dims) < 1 or dims[0] * dims[1] < 2:
        raise ValueError(f"a FrozenLake map needs at least 2 tiles (start and goal), got size {dims}")
    return dims


def count_holes(shape: tuple[int, int], frozen_ratio: float) -> int:
    """Number of holes for ``frozen_ratio``: ``round((1 - frozen_ratio) * tiles)``; start and goal count as frozen.

    Raises ``ValueError`` when ``frozen_ratio`` is outside ``(0, 1]`` or leaves fewer than 2 non-hole tiles.
    """
    if not 0.0 < frozen_ratio <= 1.0:
        raise ValueError(f"frozen_ratio must lie in (0, 1], got {frozen_ratio!r}")
    tiles = shape[0] * shape[1]
    holes = round((1.0 - frozen_ratio) * tiles)
    if tiles - holes < 2:
        raise ValueError(
            f"frozen_ratio={frozen_ratio} leaves {tiles - holes} non-hole tiles on a {shape[0]}x{shape[1]} map; "
            "start and goal need 2: raise frozen_ratio or the size"
        )
    return holes


def generate_map(
    rng: np.random.Generator, shape: tuple[int, int], num_holes: int, *, attempts: int = REJECTION_ATTEMPTS
) -> LakeMap:
    """A random solvable map with exactly ``num_holes`` holes (see the module docstring for the procedure)."""
    tiles = shape[0] * shape[1]
    if not 0 <= num_holes <= tiles - 2:
        raise ValueError(f"{num_holes} holes do not fit on a {shape[0]}x{shape[1]} map with a start and a goal")
    for _ in range(attempts):
        cells = rng.permutation(tiles)
        start, goal, holes = int(cells[0]), int(cells[1]), cells[2 : 2 + num_holes]
        blocked = np.zeros(tiles, dtype=bool)
        blocked[holes] = True
        if _connected(shape, blocked, start, goal):
            return _build(shape, start, goal, holes)
    return _carve(rng, shape, num_holes)


def distance_range(shape: tuple[int, int], num_holes: int) -> tuple[int, int]:
    """The distances :func:`generate_map_at_distance` takes: from 1 to the longest monotone path that fits.

    A path of ``d`` moves covers ``d + 1`` tiles, none of them a hole, and no two tiles are further apart
    than ``rows + columns - 2``.
    """
    tiles = shape[0] * shape[1]
    return 1, min(shape[0] + shape[1] - 2, tiles - num_holes - 1)


def generate_map_at_distance(
    rng: np.random.Generator,
    shape: tuple[int, int],
    num_holes: int,
    distance: int,
    *,
    attempts: int = REJECTION_ATTEMPTS,
) -> LakeMap:
    """A random map whose shortest path from start to goal takes exactly ``distance`` moves (module docstring)."""
    low, high = distance_range(shape, num_holes)
    if not low <= distance <= high:
        raise ValueError(f"a {shape[0]}x{shape[1]} map with {num_holes} holes has paths of {low} to {high} moves")
    tiles = shape[0] * shape[1]
    rows, cols = np.divmod(np.arange(tiles), shape[1])
    apart = np.abs(rows[:, None] - rows[None, :]) + np.abs(cols[:, None] - cols[None, :])  # [tiles, tiles]
    pairs = np.flatnonzero(apart.ravel() == distance)
    for attempt in range(attempts + 1):
        start, goal = divmod(int(pairs[rng.integers(len(pairs))]), tiles)
        if attempt == attempts:
            return _carve_path(rng, shape, num_holes, start, goal)
        others = np.delete(np.arange(tiles), sorted((start, goal)))
        lake = _build(shape, start, goal, rng.choice(others, size=num_holes, replace=False))
        if distances_to_goal(lake)[lake.start] == distance:
            return lake
    raise AssertionError("unreachable: the last attempt carves a path")


def _carve(rng: np.random.Generator, shape: tuple[int, int], num_holes: int) -> LakeMap:
    """The fallback: a random monotone shortest path kept free of holes, holes uniform elsewhere."""
    n_rows, n_cols = shape
    tiles = n_rows * n_cols
    start = int(rng.integers(tiles))
    s_row, s_col = divmod(start, n_cols)
    # A monotone path between start and goal covers distance + 1 tiles, which must all be non-holes.
    rows, cols = np.divmod(np.arange(tiles), n_cols)
    distance = np.abs(rows - s_row) + np.abs(cols - s_col)
    candidates = np.flatnonzero((distance >= 1) & (distance + 1 <= tiles - num_holes))
    goal = int(candidates[rng.integers(len(candidates))])
    return _carve_path(rng, shape, num_holes, start, goal)


def _carve_path(rng: np.random.Generator, shape: tuple[int, int], num_holes: int, start: int, goal: int) -> LakeMap:
    """A random monotone path from ``start`` to ``goal`` kept free of holes, the holes uniform on the other tiles."""
    n_rows, n_cols = shape
    tiles = n_rows * n_cols
    s_row, s_col = divmod(start, n_cols)
    g_row, g_col = divmod(goal, n_cols)
    d_row, d_col = g_row - s_row, g_col - s_col
    steps = [(int(np.sign(d_row)), 0)] * abs(d_row) + [(0, int(np.sign(d_col)))] * abs(d_col)
    on_path = {start}
    row, col = s_row, s_col
    for index in rng.permutation(len(steps)):
        row, col = row + steps[index][0], col + steps[index][1]
        on_path.add(row * n_cols + col)
    free = np.array([cell for cell in range(tiles) if cell not in on_path], dtype=np.int64)
    holes = rng.choice(free, size=num_holes, replace=False) if num_holes else free[:0]
    return _build(shape, start, goal, holes)


def _build(shape: tuple[int, int], start: int, goal: int, holes: Iterable[int]) -> LakeMap:
    letters = ["F"] * (shape[0] * shape[1])
    for cell in holes:
        letters[int(cell)] = "H"
    letters[start], letters[goal] = "S", "G"
    n_cols = shape[1]
    return LakeMap(tuple("".join(letters[r * n_cols : (r + 1) * n_cols]) for r in range(shape[0])))


def _connected(shape: tuple[int, int], blocked: np.ndarray, start: int, goal: int) -> bool:
    """Whether ``goal`` is reachable from ``start`` (depth-first search over flat indices avoiding ``blocked``)."""
    n_rows, n_cols = shape
    seen = blocked.copy()
    seen[start] = True
    queue = [start]
    while queue:
        cell = queue.pop()
        if cell == goal:
            return True
        row, col = divmod(cell, n_cols)
        for d_row, d_col in DIRECTIONS.values():
            r, c = row + d_row, col + d_col
            if 0 <= r < n_rows and 0 <= c < n_cols and not seen[r * n_cols + c]:
                seen[r * n_cols + c] = True
                queue.append(r * n_cols + c)
    return False


def distances_to_goal(lake: LakeMap) -> np.ndarray:
    """Fewest moves from each tile to the goal without entering a hole, shape ``[rows, cols]``; ``-1``: unreachable.

    Holes are terminal, so they get ``-1`` too (one cannot leave them).
    """
    distance = np.full(lake.shape, -1, dtype=np.int64)
    distance[lake.goal] = 0
    queue = deque([lake.goal])
    while queue:
        position = queue.popleft()
        for direction in DIRECTIONS:
            neighbour = lake.move(position, direction)
            if distance[neighbour] < 0 and not lake.is_hole(neighbour):
                distance[neighbour] = distance[position] + 1
                queue.append(neighbour)
    return distance


def shortest_path(lake: LakeMap, position: Position, distance: np.ndarray | None = None) -> list[str] | None:
    """The moves of a shortest hole-free path from ``position`` to the goal; ``None`` if there is none.

    Deterministic: at each tile the first direction of :data:`DIRECTIONS` that gets one move closer wins.
    """
    if distance is None:
        distance = distances_to_goal(lake)
    if distance[position] < 0:
        return None
    path: list[str] = []
    while distance[position] > 0:
        for direction in DIRECTIONS:
            neighbour = lake.move(position, direction)
            if distance[neighbour] == distance[position] - 1:
                path.append(direction)
                position = neighbour
                break
    return path
