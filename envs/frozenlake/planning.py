"""Planning on slippery ice: the most likely way to reach the goal within a number of turns.

An agent sends a turn of up to ``k`` moves (``max_actions_per_turn``), sees where it ended, and sends the
next. Within a turn it cannot react (the moves are made blind, in order); between turns it can. The
highest probability of reaching the goal within ``t`` turns is a finite-horizon dynamic programme over
turns whose actions are the move sequences of length 1 to ``k`` (value iteration, e.g. Sutton and Barto,
ch. 4): ``V_0`` is 1 on the goal and 0 elsewhere, and for ``t >= 1``

    V_t(s) = 1 on the goal, 0 in a hole, else max over sequences m of Q_m(s), with
    Q_()(s) = V_{t-1}(s) and Q_(a, rest)(s) = mean over the three outcomes d of a of Q_rest(s + d)

(the goal and the holes keep their value inside a sequence: the moves after them are not made). With
``k = 1`` this is the classic one-move-per-step programme over a horizon of ``t`` moves. With ``k > 1``
it is higher: three turns of up to five moves reach the goal of a random 4x4 map about three times as
often as three single moves. The horizon makes this the objective of an episode with a turn limit, and
keeps the policy from stalling: with an unbounded horizon every move is optimal on a hole-free map,
bumping into the border forever included. Ties go to the shortest sequence (more chances to react),
then to moves aimed at tiles nearer the goal.
"""

from __future__ import annotations

import numpy as np

from envs.frozenlake.maps import DIRECTIONS, SLIP_OUTCOMES, LakeMap, Position, distances_to_goal

__all__ = ["SlipperyPlanner"]

# Values closer than this are ties (see the module docstring for how ties are broken).
_TIE_TOLERANCE = 1e-9
# Iterations stop early once no value changes by more than this (later horizons reuse the last values).
_CONVERGENCE_TOLERANCE = 1e-12


class SlipperyPlanner:
    """Success probabilities ``V_t`` and optimal turns for one map under slippery dynamics.

    ``moves_per_turn`` is the most moves one turn may send. Values are computed lazily up to the largest
    number of turns asked for and cached, so an agent that asks every turn pays for the value iteration once
    per map.
    """

    def __init__(self, lake: LakeMap, moves_per_turn: int = 1) -> None:
        if moves_per_turn < 1:
            raise ValueError(f"moves_per_turn must be a positive integer, got {moves_per_turn!r}")
        self.lake = lake
        self.moves_per_turn = int(moves_per_turn)
        n_rows, n_cols = lake.shape
        self._directions = list(DIRECTIONS)
        cells = [(r, c) for r in range(n_rows) for c in range(n_cols)]
        # next_cell[s, a]: the flat index reached from s by a deterministic move a.        # [S, 4]
        self._next_cell = np.array([[self._index(lake.move(p, d)) for d in self._directions] for p in cells])
        # slip_cell[s, a, k]: where the k-th outcome of a slippery move a from s lands.    # [S, 4, 3]
        outcomes = np.array([[self._directions.index(o) for o in SLIP_OUTCOMES[d]] for d in self._directions])
        self._slip_cell = self._next_cell[:, outcomes]
        goal = np.zeros(len(cells))
        goal[self._index(lake.goal)] = 1.0
        self._terminal = np.array([lake.is_hole(p) for p in cells]) | (goal == 1.0)
        self._values = [goal]  # self._values[t] = V_t, shape [S]
        self._converged = False
        distance = distances_to_goal(lake).ravel().astype(float)
        self._distance = np.where(distance < 0, np.inf, distance)

    def success_probability(self, position: Position, turns: int) -> float:
        """``V_turns(position)``: the highest probability of reaching the goal within ``turns`` turns."""
        return float(self._values_at(turns)[self._index(position)])

    def best_turn(self, position: Position, turns: int) -> tuple[str, ...]:
        """The moves of a turn that maximises the probability of reaching the goal within ``turns >= 1`` turns."""
        if turns < 1:
            raise ValueError(f"the planning horizon must be at least one turn, got {turns}")
        cell = self._index(position)
        values = [q[:, cell] for q in self._sequence_values(self._values_at(turns - 1))]  # [4**m] per length m
        best = max(float(v.max()) for v in values)
        for length, value in enumerate(values, start=1):  # the shortest sequence among the best
            candidates = [self._moves(int(i), length) for i in np.flatnonzero(value >= best - _TIE_TOLERANCE)]
            if candidates:
                return min(candidates, key=lambda moves: self._aim(cell, moves))
        raise AssertionError("unreachable: some sequence attains the maximum")

    def best_action(self, position: Position, horizon: int) -> str:
        """The first move of :meth:`best_turn` (with one move per turn, the best single move for ``horizon`` moves)."""
        return self.best_turn(position, horizon)[0]

    def _values_at(self, turns: int) -> np.ndarray:
        while len(self._values) <= turns and not self._converged:
            previous = self._values[-1]
            best = np.max([q.max(axis=0) for q in self._sequence_values(previous)], axis=0)
            values = np.where(self._terminal, self._values[0], best)
            self._converged = bool(np.abs(values - previous).max() <= _CONVERGENCE_TOLERANCE)
            self._values.append(values)
        return self._values[min(turns, len(self._values) - 1)]

    def _sequence_values(self, after: np.ndarray) -> list[np.ndarray]:
        """``Q_m`` for every sequence ``m`` of 1 to ``moves_per_turn`` moves, then ``after``: one array per length,
        shape ``[4**length, S]``, row ``i`` the sequence whose moves are the base-4 digits of ``i``, first move
        most significant."""
        by_length = []
        rest = after[None, :]  # [sequences of the length so far, S]; the empty sequence first
        for _ in range(self.moves_per_turn):
            # prepend each move a: the mean of the rest's values over a's three outcomes, from every cell
            moved = rest[:, self._slip_cell].mean(axis=-1)  # [R, S, 4]
            moved = np.where(self._terminal[None, :, None], self._values[0][None, :, None], moved)
            rest = moved.transpose(2, 0, 1).reshape(-1, moved.shape[1])  # [4 * R, S], the new move first
            by_length.append(rest)
        return by_length

    def _moves(self, index: int, length: int) -> tuple[str, ...]:
        digits = []
        for _ in range(length):
            index, digit = divmod(index, 4)
            digits.append(self._directions[digit])
        return tuple(reversed(digits))

    def _aim(self, cell: int, moves: tuple[str, ...]) -> tuple[float, ...]:
        """The distances to the goal of the tiles the moves aim at, walked without slipping: the tie-break key."""
        key = []
        for move in moves:
            cell = int(self._next_cell[cell, self._directions.index(move)])
            key.append(float(self._distance[cell]))
        return tuple(key)

    def _index(self, position: Position) -> int:
        return position[0] * self.lake.shape[1] + position[1]
