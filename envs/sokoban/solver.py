"""An exact Sokoban solver: the fewest moves, and among those the fewest pushes.

The search is A* over *push states*: a state is the set of boxes plus the player's exact cell (exact,
because the walking cost of the next push depends on it). An edge is one push; its cost is the
walking distance to the pushing cell plus the push itself. Costs are lexicographic, encoded in one
integer ``moves * _PUSH_SCALE + pushes``, so the first goal state taken from the queue has the fewest
moves and, among those, the fewest pushes.

The heuristic is a lower bound on the pushes still needed: a minimum-cost matching of boxes to
targets, where the cost of a box and a target is the number of pushes a lone box needs to get there.
One push changes one box's distances by at most one, so the bound is consistent (A* never reopens a
state). Pushes are a lower bound on moves, so the same number bounds both cost parts.

Pruning that keeps the solver exact: boxes are never pushed onto *dead* cells (no target reachable
from there, not even for a lone box), nor into a 2x2 square filled with walls and boxes of which one is
off target (no box of such a square can ever move again).

Everything is bit arithmetic on Python integers: bit ``i`` is cell ``i`` (see :mod:`envs.sokoban.room`);
a set of boxes is an ``int`` and the player's reachable region is a flood fill by shifts. This keeps
the solver pure Python and fast enough to check every generated level.
"""

from __future__ import annotations

import functools
import heapq
from dataclasses import dataclass
from typing import Literal

from envs.sokoban.bits import cells_of, mask_of
from envs.sokoban.room import ACTIONS, DIRECTIONS, Level

__all__ = ["RoomTables", "Solution", "SolveResult", "push_lower_bound", "room_tables", "solve"]

_PUSH_SCALE = 1 << 20  # cost = moves * _PUSH_SCALE + pushes; pushes never reach 2**20
_G_BITS = 48  # costs stay below 2**48 (moves below 2**28)
_INF = float("inf")
_UNREACHABLE = 1 << 40  # a lone-box distance meaning "never"; any sum containing it stays above it


@dataclass(frozen=True)
class Solution:
    """A solution: action words from the position it was computed for, and how many of them push a box."""

    moves: tuple[str, ...]
    pushes: int

    @property
    def num_moves(self) -> int:
        return len(self.moves)


@dataclass(frozen=True)
class SolveResult:
    """What :func:`solve` found.

    ``status``: ``"solved"`` (``solution`` is optimal: fewest moves, then fewest pushes), ``"no_solution"``
    (proven: no solution, or none within ``max_moves`` when it was given) or ``"limit"``
    (``max_expansions`` ran out first). ``expanded``: push states taken from the queue.
    """

    status: Literal["solved", "no_solution", "limit"]
    solution: Solution | None
    expanded: int


def solve(level: Level, *, max_moves: int | None = None, max_expansions: int = 1_000_000) -> SolveResult:
    """Solve ``level`` from its current player and boxes (see the module docstring for the method)."""
    tables = room_tables(level.rows, level.cols, level.walls, level.targets)
    boxes = mask_of(level.boxes)
    player = level.player
    if boxes == tables.targets:
        return SolveResult("solved", Solution((), 0), 0)
    bound = _INF if max_moves is None else max_moves
    found, parents, expanded, stopped = _search(tables, boxes, player, bound, max_expansions)
    if found is None:
        return SolveResult("limit" if stopped else "no_solution", None, expanded)
    pushes = _push_sequence(parents, found)
    return SolveResult("solved", _replay(tables, boxes, player, pushes), expanded)


def push_lower_bound(level: Level) -> float:
    """The matching lower bound on the pushes ``level`` needs (``inf`` when a box can reach no free target)."""
    tables = room_tables(level.rows, level.cols, level.walls, level.targets)
    return tables.lower_bound(mask_of(level.boxes))


class RoomTables:
    """Precomputed facts about one room (walls and targets), shared by every search in it."""

    def __init__(self, rows: int, cols: int, walls: frozenset[int], targets: frozenset[int]) -> None:
        self.rows, self.cols = rows, cols
        self.floor = mask_of(set(range(rows * cols)) - walls)
        self.walls = mask_of(walls)
        self.targets = mask_of(targets)
        self.shifts = tuple(dr * cols + dc for dr, dc in DIRECTIONS.values())  # in ACTIONS order
        # distances[cell][t]: pushes a lone box needs from cell to the t-th target (cells that reach one)
        per_target = [self._lone_box_distances(t) for t in sorted(targets)]
        reachable = set().union(*per_target)
        self.distances = {c: tuple(d.get(c, _UNREACHABLE) for d in per_target) for c in reachable}
        self.nearest = {c: min(row) for c, row in self.distances.items()}  # pushes to the nearest target
        self.live = mask_of(reachable)  # cells a box may stand on without making the level unsolvable
        self.matching = _MATCHINGS.get(len(targets), _min_matching_dp)
        self._freeze = {cell: self._freeze_masks(cell) for cell in cells_of(self.floor)}

    def _lone_box_distances(self, target: int) -> dict[int, int]:
        """Backward breadth-first search from ``target``: a box gets from ``y - s`` to ``y`` if ``y - 2s`` is floor."""
        floor = self.floor
        dist = {target: 0}
        frontier = [target]
        while frontier:
            nxt = []
            for y in frontier:
                for s in self.shifts:
                    x = y - s
                    if (floor >> x) & 1 and (floor >> (x - s)) & 1 and x not in dist:
                        dist[x] = dist[y] + 1
                        nxt.append(x)
            frontier = nxt
        return dist

    def _freeze_masks(self, cell: int) -> tuple[int, int, tuple[int, ...]]:
        """The horizontal and vertical neighbours of ``cell`` and the four 2x2 squares that contain it."""
        cols = self.cols
        corners = (cell, cell - 1, cell - cols, cell - cols - 1)
        squares = tuple((1 << c) | (1 << (c + 1)) | (1 << (c + cols)) | (1 << (c + cols + 1)) for c in corners)
        return (1 << (cell - 1)) | (1 << (cell + 1)), (1 << (cell - cols)) | (1 << (cell + cols)), squares

    def frozen(self, boxes: int, cell: int) -> bool:
        """True if the box on ``cell`` completes a 2x2 square of walls and boxes with a box off target."""
        blocked = self.walls | boxes
        horizontal, vertical, squares = self._freeze[cell]
        if not (blocked & horizontal and blocked & vertical):  # every such square holds one of each
            return False
        loose = boxes & ~self.targets
        return any(square & blocked == square and square & loose for square in squares)

    def lower_bound(self, boxes: int) -> float:
        """Minimum-cost matching of boxes to targets under lone-box push distances (``inf``: a box is stuck)."""
        distances = self.distances
        rows = []
        while boxes:
            low = boxes & -boxes
            row = distances.get(low.bit_length() - 1)
            if row is None:
                return _INF  # a box on a dead cell
            rows.append(row)
            boxes ^= low
        cost = self.matching(rows)
        return _INF if cost >= _UNREACHABLE else cost


@functools.lru_cache(maxsize=16)
def room_tables(rows: int, cols: int, walls: frozenset[int], targets: frozenset[int]) -> RoomTables:
    """The :class:`RoomTables` of a room, cached: an episode re-solves the same room many times."""
    return RoomTables(rows, cols, walls, targets)


# Minimum-cost assignment of boxes (rows) to targets (columns): closed forms for up to four boxes, which
# are most levels, and a dynamic programme over subsets of targets beyond.
def _min_matching_1(rows: list[tuple[int, ...]]) -> int:
    return rows[0][0]


def _min_matching_2(rows: list[tuple[int, ...]]) -> int:
    (a0, a1), (b0, b1) = rows
    return min(a0 + b1, a1 + b0)


def _min_matching_3(rows: list[tuple[int, ...]]) -> int:
    (a0, a1, a2), (b0, b1, b2), (c0, c1, c2) = rows
    return min(a0 + min(b1 + c2, b2 + c1), a1 + min(b0 + c2, b2 + c0), a2 + min(b0 + c1, b1 + c0))


def _min_matching_4(rows: list[tuple[int, ...]]) -> int:
    a, (b0, b1, b2, b3), (c0, c1, c2, c3), (d0, d1, d2, d3) = rows
    # the cheapest way to give the last two boxes each pair of targets
    p01, p02, p03 = min(c0 + d1, c1 + d0), min(c0 + d2, c2 + d0), min(c0 + d3, c3 + d0)
    p12, p13, p23 = min(c1 + d2, c2 + d1), min(c1 + d3, c3 + d1), min(c2 + d3, c3 + d2)
    return min(
        a[0] + min(b1 + p23, b2 + p13, b3 + p12),
        a[1] + min(b0 + p23, b2 + p03, b3 + p02),
        a[2] + min(b0 + p13, b1 + p03, b3 + p01),
        a[3] + min(b0 + p12, b1 + p02, b2 + p01),
    )


def _min_matching_dp(rows: list[tuple[int, ...]]) -> int:
    n = len(rows)
    best = [_UNREACHABLE * n] * (1 << n)  # best[used]: boxes 0..k-1 placed on the targets in `used`
    best[0] = 0
    for used in range(1 << n):
        k = used.bit_count()
        if k == n or best[used] >= _UNREACHABLE:
            continue
        for t, cost in enumerate(rows[k]):
            if not used >> t & 1 and best[used] + cost < best[used | 1 << t]:
                best[used | 1 << t] = best[used] + cost
    return best[-1]


_MATCHINGS = {1: _min_matching_1, 2: _min_matching_2, 3: _min_matching_3, 4: _min_matching_4}


def _search(
    tables: RoomTables, boxes0: int, player0: int, bound: float, max_expansions: int
) -> tuple[int | None, dict[int, tuple[int, int, int] | None], int, bool]:
    """A* from (boxes0, player0). Returns the goal state's key (or None), the parent links, the number of
    expansions and whether ``max_expansions`` stopped the search. A state's key is ``boxes << pbits | player``.
    """
    cols, floor, live, targets, shifts = tables.cols, tables.floor, tables.live, tables.targets, tables.shifts
    frozen, lower_bound = tables.frozen, tables.lower_bound
    # Lower bound per box set (inf for a deadlock), memoised: most box sets recur with other players.
    bounds: dict[int, float] = {}
    h_scale = _PUSH_SCALE + 1  # the bound counts both moves and pushes
    pbits = (tables.rows * cols).bit_length()
    pmask = (1 << pbits) - 1
    h0 = tables.lower_bound(boxes0)
    if h0 == _INF or h0 > bound:
        return None, {}, 0, False
    start = boxes0 << pbits | player0
    best = {start: 0}
    parents: dict[int, tuple[int, int, int] | None] = {start: None}
    # Heap items are single integers, (f, -g, key) packed from the most significant bits down, so that the
    # cheapest f comes first and, among equal f, the deeper state (the larger g).
    kbits = tables.rows * cols + pbits
    kmask, gmask = (1 << kbits) - 1, (1 << _G_BITS) - 1
    heap = [((h0 * h_scale) << _G_BITS | gmask) << kbits | start]
    expanded = 0
    while heap:
        item = heapq.heappop(heap)
        key = item & kmask
        g = gmask - (item >> kbits & gmask)
        if g > best[key]:
            continue  # a stale entry: the state was reached more cheaply since
        boxes = key >> pbits
        if boxes == targets:
            return key, parents, expanded, False
        if expanded >= max_expansions:
            return None, parents, expanded, True
        expanded += 1
        free, landing = floor & ~boxes, live & ~boxes
        # pushers[d]: cells from which a box can be pushed in direction d (Up, Down, Left, Right) onto a live cell
        pushers = (
            (boxes & landing << cols) << cols,
            (boxes & landing >> cols) >> cols,
            (boxes & landing << 1) << 1,
            (boxes & landing >> 1) >> 1,
        )
        remaining = pushers[0] | pushers[1] | pushers[2] | pushers[3]
        frontier = seen = 1 << (key & pmask)
        walked = 0
        while True:  # breadth-first flood fill; `frontier` holds the cells `walked` moves away
            hits = frontier & remaining
            remaining ^= hits
            while hits:
                low = hits & -hits
                hits ^= low
                cell = low.bit_length() - 1
                cost = g + (walked + 1) * _PUSH_SCALE + 1
                for d in range(4):
                    if not pushers[d] >> cell & 1:
                        continue
                    box = cell + shifts[d]
                    new_boxes = boxes ^ (1 << box) ^ (1 << (box + shifts[d]))
                    new_key = new_boxes << pbits | box
                    if cost >= best.get(new_key, _INF):
                        continue  # reached before at no greater cost (or known to be a deadlock: cost -1)
                    h = bounds.get(new_boxes)
                    if h is None:
                        h = bounds[new_boxes] = _INF if frozen(new_boxes, box + shifts[d]) else lower_bound(new_boxes)
                    if h == _INF:
                        best[new_key] = -1
                    elif cost // _PUSH_SCALE + h <= bound:
                        best[new_key] = cost
                        parents[new_key] = (key, cell, d)
                        heapq.heappush(heap, ((cost + h * h_scale) << _G_BITS | (gmask - cost)) << kbits | new_key)
            if not remaining:
                break
            frontier = ((frontier << 1) | (frontier >> 1) | (frontier << cols) | (frontier >> cols)) & free & ~seen
            if not frontier:
                break
            seen |= frontier
            walked += 1
    return None, parents, expanded, False


def _push_sequence(parents: dict[int, tuple[int, int, int] | None], key: int) -> list[tuple[int, int]]:
    """The (pushing cell, direction index) of every push on the way to ``key``, first push first."""
    pushes = []
    link = parents[key]
    while link is not None:
        key, cell, d = link
        pushes.append((cell, d))
        link = parents[key]
    pushes.reverse()
    return pushes


def _replay(tables: RoomTables, boxes: int, player: int, pushes: list[tuple[int, int]]) -> Solution:
    """Turn a push sequence into moves: a shortest walk to each pushing cell, then the push."""
    moves: list[str] = []
    for cell, d in pushes:
        moves += _walk(tables, tables.floor & ~boxes, player, cell)
        moves.append(ACTIONS[d])
        box = cell + tables.shifts[d]
        boxes ^= (1 << box) | (1 << (box + tables.shifts[d]))
        player = box
    return Solution(tuple(moves), len(pushes))


def _walk(tables: RoomTables, free: int, start: int, goal: int) -> list[str]:
    """Action words of a shortest walk over ``free`` cells (breadth first, ties in ACTIONS order)."""
    came_from = {start: (start, -1)}
    frontier = [start]
    while goal not in came_from:
        nxt = []
        for cell in frontier:
            for d, s in enumerate(tables.shifts):
                n = cell + s
                if free >> n & 1 and n not in came_from:
                    came_from[n] = (cell, d)
                    nxt.append(n)
        if not nxt:
            raise AssertionError(f"the search used a pushing cell {goal} the player cannot reach")
        frontier = nxt
    path = []
    cell = goal
    while cell != start:
        cell, d = came_from[cell]
        path.append(ACTIONS[d])
    path.reverse()
    return path
