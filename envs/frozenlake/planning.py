"""Planning on slippery ice: the most likely way to reach the goal within a number of moves.

Finite-horizon value iteration over the map (the standard dynamic programme for maximal reachability
probability, e.g. Sutton and Barto, ch. 4): ``V_0`` is 1 on the goal and 0 elsewhere; for ``h >= 1``

    V_h(s) = 1 on the goal, 0 in a hole, else max over moves a of mean over the three outcomes d of a: V_{h-1}(s + d)

so ``V_h(s)`` is the highest probability of reaching the goal within ``h`` moves from ``s`` when the
agent may choose every move after seeing where the previous one went. The horizon makes this the
objective of an episode with a step or turn limit, and keeps the policy from stalling: with an unbounded
horizon every move is optimal on a hole-free map, bumping into the border forever included. Remaining
ties go to the move aimed at the tile nearest the goal.
"""

from __future__ import annotations

import numpy as np

from envs.frozenlake.maps import DIRECTIONS, SLIP_OUTCOMES, LakeMap, Position, distances_to_goal

__all__ = ["SlipperyPlanner"]

# Values closer than this are ties; a tie goes to the move whose intended tile is nearest the goal.
_TIE_TOLERANCE = 1e-9
# Iterations stop early once no value changes by more than this (later horizons reuse the last values).
_CONVERGENCE_TOLERANCE = 1e-12


class SlipperyPlanner:
    """Success probabilities ``V_h`` and optimal moves for one map under slippery dynamics.

    Values are computed lazily up to the largest horizon asked for and cached, so an agent that asks
    every turn pays for the value iteration once per map.
    """

    def __init__(self, lake: LakeMap) -> None:
        self.lake = lake
        n_rows, n_cols = lake.shape
        directions = list(DIRECTIONS)
        cells = [(r, c) for r in range(n_rows) for c in range(n_cols)]
        # next_cell[s, a]: the flat index reached from s by a deterministic move a.        # [S, 4]
        self._next_cell = np.array([[self._index(lake.move(p, d)) for d in directions] for p in cells])
        # slip_cell[s, a, k]: where the k-th outcome of a slippery move a from s lands.    # [S, 4, 3]
        outcomes = np.array([[directions.index(o) for o in SLIP_OUTCOMES[d]] for d in directions])  # [4, 3]
        self._slip_cell = self._next_cell[:, outcomes]
        goal = np.zeros(len(cells))
        goal[self._index(lake.goal)] = 1.0
        self._terminal = np.array([lake.is_hole(p) for p in cells]) | (goal == 1.0)
        self._values = [goal]  # self._values[h] = V_h, shape [S]
        self._converged = False
        distance = distances_to_goal(lake).ravel().astype(float)
        self._distance = np.where(distance < 0, np.inf, distance)

    def success_probability(self, position: Position, horizon: int) -> float:
        """``V_horizon(position)``: the highest probability of reaching the goal within ``horizon`` moves."""
        return float(self._values_at(horizon)[self._index(position)])

    def best_action(self, position: Position, horizon: int) -> str:
        """A move that maximises the probability of reaching the goal within ``horizon >= 1`` moves."""
        if horizon < 1:
            raise ValueError(f"the planning horizon must be at least one move, got {horizon}")
        cell = self._index(position)
        action_values = self._action_values(self._values_at(horizon - 1))[cell]  # [4]
        best = action_values.max()
        candidates = np.flatnonzero(action_values >= best - _TIE_TOLERANCE)
        choice = min(candidates, key=lambda a: self._distance[self._next_cell[cell, a]])
        return list(DIRECTIONS)[int(choice)]

    def _values_at(self, horizon: int) -> np.ndarray:
        while len(self._values) <= horizon and not self._converged:
            previous = self._values[-1]
            values = np.where(self._terminal, self._values[0], self._action_values(previous).max(axis=1))
            self._converged = bool(np.abs(values - previous).max() <= _CONVERGENCE_TOLERANCE)
            self._values.append(values)
        return self._values[min(horizon, len(self._values) - 1)]

    def _action_values(self, values: np.ndarray) -> np.ndarray:
        """Expected next-step values of the four moves from every cell, shape ``[S, 4]``."""
        return values[self._slip_cell].sum(axis=2) / 3.0  # [S, 4, 3] -> [S, 4]: each outcome has probability 1/3

    def _index(self, position: Position) -> int:
        return position[0] * self.lake.shape[1] + position[1]
