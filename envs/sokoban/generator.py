"""Random Sokoban levels that are solvable, with a known optimal solution and a bounded difficulty.

One attempt:

1. Carve a room: a random walk with a small brush over the interior of the grid (the border stays
   wall) until a random share of the interior is floor.
2. Put the boxes on random targets and the player on a random free cell, then play backwards: a fixed
   number of random *pulls* (the player steps away from an adjacent box and drags it along), each
   drawn among the pulls the player can walk to, mostly among those that take a box further from the
   targets. Every position reached this way is
   solvable: replaying the pulls backwards as pushes solves it, which also gives an upper bound on
   its optimal number of moves (pushes plus the walks between them).
3. Keep the hardest position of the walk: the one with the largest lower bound on pushes (see
   :func:`envs.sokoban.solver.push_lower_bound`) among those with every box off its target, a lower
   bound of at least ``min_pushes`` and a start cell for the player within ``max_moves`` by the upper
   bound. The start cell is drawn among the cells of the player's region that touch no box, so the
   player never starts "glued" to a box (positions where every reachable cell touches a box are skipped).
4. Solve it exactly (:func:`envs.sokoban.solver.solve`, bounded by the upper bound and
   ``max_expansions``) to record the optimal solution.

So every level returned satisfies, by construction and by the solver's check: no box on a target, no
box next to the player, optimal pushes >= ``min_pushes``, optimal moves <= ``max_moves``.

A lower bound on moves (``min_moves``; ``min_moves == max_moves`` asks for an exact number, the curriculum's
``difficulty``) narrows step 3 to start cells whose upper bound reaches ``min_moves``, and step 4 rejects the
attempt when the optimum falls short of it (the reversed walk may take detours the solver does not). Without
``min_moves`` the generator draws exactly the random numbers it always drew, so seeds keep their levels.

Attempts are bounded (``max_attempts``); running out raises :class:`GenerationError`. Randomness comes only from the
``numpy.random.Generator`` passed in, so a seed fixes the level. There is deliberately no wall-clock
limit: a level must not depend on the speed of the machine.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass

import numpy as np

from envs.sokoban.bits import cells_of, flood_layers, nth_cell, shift
from envs.sokoban.room import Level
from envs.sokoban.solver import RoomTables, Solution, room_tables, solve

__all__ = ["GeneratedLevel", "GenerationError", "difficulty_range", "generate_level", "min_floor_cells"]

_TURN_PROBABILITY = 0.35  # chance that the carving walk changes direction at a step
# Share of the interior that becomes floor, drawn uniformly from a range that narrows with the room (as in
# gym-sokoban's rooms): small rooms need space to move boxes at all, large open rooms make levels costly to solve.
_FLOOR_SHARE_SMALL, _FLOOR_SHARE_LARGE = (0.55, 0.8), (0.4, 0.65)  # at 16 and from 64 interior cells
_DEFAULT_EXPANSIONS = 20_000  # solver budget per attempt; levels that need more are skipped
_STEPS = ((-1, 0), (1, 0), (0, -1), (0, 1))
_AWAY_PROBABILITY = 0.8  # share of pulls drawn among those that take a box away from the targets
# difficulty_range: a move count is advertised when a probe generates a level of exactly that many moves
# within this many attempts (about 75 ms in a 6x6 room; measured in benchmarks/state_info.py)
_PROBE_ATTEMPTS = 100


class GenerationError(RuntimeError):
    """No level satisfying the constraints was found within the attempt budget."""


@dataclass(frozen=True)
class GeneratedLevel:
    """A generated level, its optimal solution from the start, and how many attempts it took."""

    level: Level
    solution: Solution
    attempts: int


@dataclass
class _Candidate:
    boxes: int
    player: int  # where the reverse walk left the player
    starts: int  # bit mask of the start cells allowed for this position
    pushes_bound: float  # lower bound on pushes
    moves_bound: int  # moves of the reversed walk from `player` (walking to `player` excluded)
    layers: list[int]  # breadth-first layers of the player's region around `player`


def min_floor_cells(num_boxes: int) -> int:
    """Floor cells a level with ``num_boxes`` boxes needs: a box and a target each, a pushing cell, a start cell."""
    return 2 * num_boxes + 2


def generate_level(
    rows: int,
    cols: int,
    num_boxes: int,
    rng: np.random.Generator,
    *,
    min_pushes: int = 1,
    max_moves: int | None = None,
    min_moves: int | None = None,
    max_attempts: int = 200,
    max_expansions: int = _DEFAULT_EXPANSIONS,
) -> GeneratedLevel:
    """A random ``rows x cols`` level (outer walls included) with ``num_boxes`` boxes (see the module docstring)."""
    interior = (rows - 2) * (cols - 2)
    if rows < 3 or cols < 3 or interior < min_floor_cells(num_boxes):
        raise ValueError(
            f"a {rows}x{cols} room (walls included) has {max(interior, 0)} interior cells; {num_boxes} boxes need "
            f"at least {min_floor_cells(num_boxes)}"
        )
    if min_moves is not None and max_moves is not None and min_moves > max_moves:
        raise ValueError(f"min_moves={min_moves} exceeds max_moves={max_moves}: no level can satisfy both")
    bound = float("inf") if max_moves is None else max_moves
    low = 0 if min_moves is None else min_moves
    for attempt in range(1, max_attempts + 1):
        found = _attempt(rows, cols, num_boxes, rng, min_pushes, low, bound, max_expansions)
        if found is not None:
            level, solution = found
            return GeneratedLevel(level, solution, attempt)
    moves = f"at most {max_moves}" if min_moves is None else f"between {min_moves} and {max_moves}"
    raise GenerationError(
        f"no {rows}x{cols} level with {num_boxes} boxes, at least {min_pushes} pushes and {moves} moves was found "
        f"in {max_attempts} attempts; allow more moves (max_moves, max_steps, max_turns), fewer pushes or boxes, a "
        "larger room, or more attempts"
    )


@functools.lru_cache(maxsize=64)
def difficulty_range(rows: int, cols: int, num_boxes: int, *, min_pushes: int = 1, max_moves: int) -> tuple[int, int]:
    """The exact optimal move counts :func:`generate_level` reaches readily in this room: ``(lowest, highest)``.

    Every level needs at least ``max(min_pushes, num_boxes) + 1`` moves (the pushes, and a walk to the first
    box: the player never starts next to one) and at most ``max_moves``; within those bounds, how often a count
    occurs depends on the room. In a 6x6 room with one box, counts from 20 moves on take hundreds of attempts
    or fail, and in an 8x8 room with two boxes 3 moves takes about a hundred. So the range starts at the count
    of one typical level (the default generator's, seed 0) and grows one move at a time in each direction
    while a probe (``min_moves == max_moves``, seeded by the count) finds a level within ``_PROBE_ATTEMPTS``
    attempts; it stops at the first miss or at a bound. Deterministic, and cached per configuration (0.05 to
    1.5 s for the rooms measured, 6x6 to 10x10). Exact counts are rare with several boxes in large rooms, where
    the reversed walk's upper bound is loose: 10x10 rooms with four boxes get a narrow range.
    """
    typical = generate_level(
        rows, cols, num_boxes, np.random.default_rng(0), min_pushes=min_pushes, max_moves=max_moves
    ).solution.num_moves

    def reachable(moves: int) -> bool:
        rng = np.random.default_rng(moves)
        try:
            generate_level(
                rows,
                cols,
                num_boxes,
                rng,
                min_pushes=min_pushes,
                min_moves=moves,
                max_moves=moves,
                max_attempts=_PROBE_ATTEMPTS,
            )
        except GenerationError:
            return False
        return True

    lowest = highest = typical
    while lowest > max(min_pushes, num_boxes) + 1 and reachable(lowest - 1):
        lowest -= 1
    while highest < max_moves and reachable(highest + 1):
        highest += 1
    return lowest, highest


def _attempt(
    rows: int,
    cols: int,
    num_boxes: int,
    rng: np.random.Generator,
    min_pushes: int,
    low: int,
    bound: float,
    max_expansions: int,
) -> tuple[Level, Solution] | None:
    floor = _carve_room(rows, cols, rng, num_boxes)
    cells = sorted(floor)
    if len(cells) < min_floor_cells(num_boxes):
        return None
    picks = rng.choice(len(cells), size=num_boxes + 1, replace=False)
    targets = frozenset(cells[i] for i in picks[:num_boxes])
    walls = frozenset(range(rows * cols)) - floor
    candidate = _reverse_walk(rows, cols, walls, targets, cells[picks[-1]], rng, min_pushes, low, bound)
    if candidate is None:
        return None
    start = _pick_bit(candidate.starts, rng)
    walk_to_start = _distance(candidate.layers, start)
    level = Level(rows, cols, walls, targets, frozenset(cells_of(candidate.boxes)), start)
    # The reversed walk solves the level in at most this many moves, so the bound never cuts the optimum.
    upper_bound = candidate.moves_bound + walk_to_start
    result = solve(level, max_moves=upper_bound, max_expansions=max_expansions)
    if result.solution is None:
        return None  # the solver budget ran out
    if result.solution.pushes < min_pushes or result.solution.num_moves > bound:
        raise AssertionError(f"generated a level that breaks its bounds: {result.solution}")
    if result.solution.num_moves < low:
        return None  # the reversed walk took a detour: the level is easier than asked for
    return level, result.solution


def _carve_room(rows: int, cols: int, rng: np.random.Generator, num_boxes: int) -> frozenset[int]:
    """Interior floor cells carved by a random walk that changes direction now and then, with a 1-2 cell brush."""
    interior = (rows - 2) * (cols - 2)
    weight = min(max((interior - 16) / 48, 0.0), 1.0)  # 0 for 6x6 rooms, 1 from 10x10 on
    (small_low, small_high), (large_low, large_high) = _FLOOR_SHARE_SMALL, _FLOOR_SHARE_LARGE
    share = rng.uniform(small_low + weight * (large_low - small_low), small_high + weight * (large_high - small_high))
    wanted = min(interior, max(min_floor_cells(num_boxes) + 2, round(share * interior)))
    steps = 20 * interior  # a bound; the walk normally stops far earlier
    turns, directions = rng.random(steps), rng.integers(4, size=steps)
    brushes, brush_directions = rng.random(steps), rng.integers(4, size=steps)
    r, c = int(rng.integers(1, rows - 1)), int(rng.integers(1, cols - 1))
    direction = int(directions[0])
    floor = {r * cols + c}
    for i in range(steps):
        if len(floor) >= wanted:
            break
        if turns[i] < _TURN_PROBABILITY:
            direction = int(directions[i])
        dr, dc = _STEPS[direction]
        r, c = min(max(r + dr, 1), rows - 2), min(max(c + dc, 1), cols - 2)
        floor.add(r * cols + c)
        if brushes[i] < 0.5:  # widen the corridor: Sokoban needs room to get behind boxes
            br, bc = _STEPS[int(brush_directions[i])]
            if 1 <= r + br <= rows - 2 and 1 <= c + bc <= cols - 2:
                floor.add((r + br) * cols + c + bc)
    return frozenset(floor)


def _reverse_walk(
    rows: int,
    cols: int,
    walls: frozenset[int],
    targets: frozenset[int],
    player: int,
    rng: np.random.Generator,
    min_pushes: int,
    low: int,
    bound: float,
) -> _Candidate | None:
    """Random pulls from the solved position; the hardest acceptable position met on the way (step 3)."""
    tables = room_tables(rows, cols, walls, targets)
    floor, shifts = tables.floor, tables.shifts
    boxes = tables.targets
    moves = 0  # moves of the forward replay of the pulls so far
    best: _Candidate | None = None
    ties = 0
    for pull in range(_num_pulls(rows, cols, len(targets)) + 1):
        free = floor & ~boxes
        layers = flood_layers(player, free, cols)
        region = functools.reduce(operator.or_, layers)
        if pull:
            candidate = _evaluate(tables, boxes, player, layers, region, moves, min_pushes, low, bound)
            if candidate is not None:
                if best is None or candidate.pushes_bound > best.pushes_bound:
                    best, ties = candidate, 1
                elif candidate.pushes_bound == best.pushes_bound:
                    ties += 1  # reservoir sampling: each of the tied positions is kept with equal probability
                    if rng.random() * ties < 1:
                        best = candidate
        # pullers[d]: cells of the region with a box behind them (opposite to d) and free floor ahead in d
        pullers = [region & shift(boxes, s) & shift(free, -s) for s in shifts]
        chosen = _choose_pull(pullers, shifts, tables.nearest, rng)
        if chosen is None:
            break
        cell, s = chosen[0], shifts[chosen[1]]
        moves += 1 + (_distance(layers, cell) if pull else 0)  # the walk before the first pull is never replayed
        boxes ^= (1 << (cell - s)) | (1 << cell)
        player = cell + s
    return best


def _choose_pull(
    pullers: list[int], shifts: tuple[int, ...], nearest: dict[int, int], rng: np.random.Generator
) -> tuple[int, int] | None:
    """A random (cell, direction index) among the possible pulls, or None if there is none.

    With probability ``_AWAY_PROBABILITY`` the draw is among the pulls that take a box further from its
    nearest target (``nearest``: lone-box pushes to the nearest target), when there are any: an unbiased
    walk mostly shuffles boxes around their targets and makes easy levels.
    """
    options = [(cell, d) for d, mask in enumerate(pullers) for cell in cells_of(mask)]
    if not options:
        return None
    if rng.random() < _AWAY_PROBABILITY:
        away = [(cell, d) for cell, d in options if nearest[cell] > nearest[cell - shifts[d]]]
        options = away or options
    return options[int(rng.integers(len(options)))]


def _distance(layers: list[int], cell: int) -> int:
    """Moves from the flood fill's start to ``cell`` (which must be in one of the layers)."""
    return next(k for k, layer in enumerate(layers) if layer >> cell & 1)


def _evaluate(
    tables: RoomTables,
    boxes: int,
    player: int,
    layers: list[int],
    region: int,
    moves: int,
    min_pushes: int,
    low: int,
    bound: float,
) -> _Candidate | None:
    """The position as a candidate level, or None if it breaks a constraint."""
    if boxes & tables.targets:
        return None
    pushes_bound = tables.lower_bound(boxes)
    if pushes_bound < min_pushes or moves > bound:
        return None
    touching = functools.reduce(operator.or_, (shift(boxes, s) for s in tables.shifts))
    # start cells whose upper bound (moves + the walk to them) lies in [low, bound]
    window = layers[max(low - moves, 0) : int(min(bound - moves, len(layers) - 1)) + 1]
    if not window:
        return None
    reachable = functools.reduce(operator.or_, window)
    starts = region & reachable & ~touching
    if not starts:
        return None
    return _Candidate(boxes, player, starts, pushes_bound, moves, layers)


def _num_pulls(rows: int, cols: int, num_boxes: int) -> int:
    """Length of the reverse walk: long enough to spread the boxes over the room."""
    return 3 * (rows + cols) + 10 * num_boxes


def _pick_bit(mask: int, rng: np.random.Generator) -> int:
    """A uniformly chosen set bit of ``mask``."""
    return nth_cell(mask, int(rng.integers(mask.bit_count())))
