"""Optimal solutions by position within one level: the oracle's plans and the distance to the goal.

A solution that is optimal from a position is optimal from every position along it (each suffix is:
a shorter way from a later position would shorten the whole), so one solve indexes a whole path of
positions. A position off every known path is solved when it is first asked for, within a fixed
budget of expansions, and the outcome is kept too: a plan, or ``None`` (unsolvable, or beyond the
budget). Every position an episode reaches is asked for once (the environment reports its distance
after every step), so what is known depends only on the positions reached, never on who asked first:
the same seed and actions give the same answers.
"""

from __future__ import annotations

from functools import cache

from envs.sokoban.room import PUSHED, Board, Level
from envs.sokoban.solver import solve

__all__ = ["PlanCache", "phase_turns"]

# A position within one room: the boxes and the player's cell.
_Position = tuple[frozenset[int], int]


class PlanCache:
    """Optimal move sequences from the positions of one room (clear it when the room changes).

    Args:
        max_expansions: the solver's budget for a position off every known path; beyond it the
            position counts as unknown (``None``), as an unsolvable one does.
    """

    def __init__(self, max_expansions: int) -> None:
        self.max_expansions = max_expansions
        self._plans: dict[_Position, tuple[str, ...] | None] = {}

    def clear(self) -> None:
        self._plans.clear()

    def remember(self, position: Level, moves: tuple[str, ...] | None) -> None:
        """Record an optimal solution from ``position`` (``None``: none is known), and its suffixes along the way."""
        if moves is None:
            self._plans[(position.boxes, position.player)] = None
            return
        board = Board(position)
        for i, action in enumerate(moves):
            self._plans[(frozenset(board.boxes), board.player)] = moves[i:]
            board.move(action)

    def plan(self, board: Board) -> tuple[str, ...] | None:
        """An optimal solution from the board's position (``()`` once solved); ``None``: unsolvable or unknown."""
        if board.solved:
            return ()
        key = (frozenset(board.boxes), board.player)
        if key in self._plans:
            return self._plans[key]
        position = board.snapshot()
        solution = solve(position, max_expansions=self.max_expansions).solution
        self.remember(position, None if solution is None else solution.moves)
        return self._plans[key]


def phase_turns(board: Board, moves: tuple[str, ...], cap: int, turns: int | None) -> list[tuple[str, ...]] | None:
    """``moves`` (a plan from ``board``'s position) cut into turns that end where the plan changes phase.

    A phase is a run of walking moves or a run of pushes in one direction. Each turn then holds one
    step a reader of the board can take in one go: walk to the cell behind the box, push it so far.
    With at most ``cap`` moves a turn and ``turns`` turns left (``None``: no limit) not every phase can
    have its own turn; the cut keeps the phases apart where it can, the start of a push run first, and
    falls back to turns of ``cap`` moves (the first turns full) where the limits leave no choice.
    ``None`` for an empty plan or one longer than ``cap * turns``: no cut finishes it (pack it as usual).
    """
    n = len(moves)
    limit = n if turns is None else turns
    if n == 0 or n > cap * limit:
        return None
    probe = Board(board.snapshot())
    kinds = [(word, True) if probe.move(word) == PUSHED else ("", False) for word in moves]
    # The price of the turn boundaries: a boundary where no phase changes costs 1, a phase change left
    # inside a turn costs 1, and 2 before a push run (a turn that walks then pushes is the harder read).
    changes = {i: 2 if kinds[i][1] else 1 for i in range(1, n) if kinds[i] != kinds[i - 1]}

    @cache
    def best(start: int, left: int) -> tuple[int, tuple[int, ...]]:
        """The cheapest cut of ``moves[start:]`` into at most ``left`` turns: (price, turn lengths)."""
        if start == n:
            return 0, ()
        if left == 0 or n - start > cap * left:
            return n * 3 + 1, ()  # infeasible: dearer than any feasible cut
        options = []
        for size in range(min(cap, n - start), 0, -1):
            end = start + size
            inside = sum(changes.get(i, 0) for i in range(start + 1, end))
            boundary = 0 if end == n or end in changes else 1
            price, rest = best(end, left - 1)
            options.append((inside + boundary + price, (size, *rest)))
        return min(options, key=lambda option: option[0])

    cuts, start = best(0, limit)[1], 0
    out = []
    for size in cuts:
        out.append(moves[start : start + size])
        start += size
    return out
