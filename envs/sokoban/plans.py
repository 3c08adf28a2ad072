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

from envs.sokoban.room import Board, Level
from envs.sokoban.solver import solve

__all__ = ["PlanCache"]

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
