"""Credit assignment from the environment's exact state: progress shaping and step-level groups (GiGPO).

Environments with an exact solver report, after every reset and step, a canonical key of the position
(``info["state_key"]``) and the optimal number of moves left (``info["distance_to_goal"]``, ``None``
when unsolvable or unknown); the episode loop records them per turn (:class:`agents.trajectory.Trajectory`'s
``turn_state_keys``, ``turn_distances_before``, ``turn_distances_after``). Two ways to turn them into
credit, both pure functions over per-turn values:

* **Progress shaping** (Ng, Harada & Russell 1999, "Policy invariance under reward transformations",
  Theorem 1): a turn from ``s`` to ``s'`` earns ``F = coef * (gamma * Phi(s') - Phi(s))`` on top of the
  environment's reward, with the potential ``Phi(s) = -distance_to_goal(s)``. An unsolvable (or unknown)
  position gets the potential ``-unsolvable_distance``, a constant, so ``Phi`` stays a function of the state.
  The theorem leaves the optimal policy unchanged only where every episode ends in a state of potential 0 (an
  absorbing state). ``end="zero"`` (``algo=ppo``'s default) gives the position after the last turn potential 0, the
  theorem's form: every episode of a level then gets the same total, ``-coef * Phi(start)`` (which a group baseline
  removes whole: GRPO, RLOO and REINFORCE++ with a group baseline refuse it at start-up), and with ``gamma = 1``
  the return from a turn onwards gains ``-coef * Phi(s)`` of the position the turn starts from, a function of the
  state alone: for a given critic a baseline that changes no expected policy gradient (with GAE's ``lam < 1`` it
  also moves credit between turns). It still reaches the policy through the critic's targets, which a value head on
  the actor's adapters learns through those adapters.
  ``end="keep"`` lets the position an episode ends in keep its own potential, so with ``gamma = 1`` an episode's
  shaping sums to ``coef * (Phi(end) - Phi(start))``: on top of a term that depends on the level alone, a bonus for
  ending close to the goal and a penalty of ``coef * unsolvable_distance`` for ending in an unsolvable position (a
  hole, a deadlock). That part is not invariant: where an attempt at the goal risks an unsolvable end (slippery
  ice), ending safely short of the goal can pay more than trying (docs/learning.md, "FrozenLake slippery", measures
  both forms).
* **Step-level groups** (Feng et al. 2025, "Group-in-Group Policy Optimization for LLM Agent
  Training", arXiv 2505.10978, sec. 4): the turns of a step's episodes that start from the same
  position (equal ``state_key``: GiGPO's *anchor state*) form a step group. Each turn's discounted
  return ``R_t = sum_{k >= t} gamma^(k - t) r_k`` over the turns is compared within its step group,
  ``A^S_t = (R_t - mean) / F_norm`` (``F_norm`` the group's std, or 1), and the turn's tokens get
  ``A = A^E + omega * A^S``, ``A^E`` the episode-level advantage (GRPO's in GiGPO; any estimator's here).
  Deviation: GiGPO forms step groups inside each episode group; here the key names the whole position
  (room included), so equal keys are equal states wherever they occur, and a step group may take turns
  from episodes of other seeds that reached the same position. A coarser key, the distance to the goal a turn
  starts from (``algo.step_groups.key=distance``), groups turns that rarely share a position; the training step
  then compares them on rewards shaped in the progress form (``end="keep"``), so a turn is judged by where it led.
* **Move-level optimal advantage** (``algo.move_credit``): where the environment reports the distance after
  each move of a turn and where each move was written (``info["move_distances"]``, ``info["move_spans"]``), every
  move's own tokens get the advantage of that move under the optimal policy of the shortest-path problem the
  distance solves (each move costs 1): ``A*(s, a) = Q*(s, a) - V*(s) = d(s) - d(s') - 1`` with ``V*(s) = -d(s)``.
  It is 0 for an optimal move, -1 for a wasted one (into a wall), -2 for a step away, and
  ``d(s) - unsolvable_distance - 1`` (at most -2) for a move that loses the level (a box pushed where it can no
  longer reach a target); every move from a lost position gets 0 (all are equally lost). No group or critic
  estimates it: the exact solver gives it, with no variance, to each move of every episode, failed ones
  included, and it blames the one move of a turn that lost the level instead of the turn's every move. It is
  never positive, and it is maximal exactly for the optimal policy, so ascending it moves the policy toward the
  optimal moves from the positions the policy itself reaches. Tokens of a turn outside its moves (a stop token,
  tags) get none of it, unless the stop is charged (``algo.move_credit.stop``): a turn that ends after ``k`` of its
  ``m`` allowed moves, at a solvable position ``d > 0`` moves from the goal, gave up ``min(m - k, d)`` moves the
  optimal policy would have made, so its tokens after its last move (where it chose to stop) get
  ``-min(m - k, d)`` (:func:`stop_advantage`): the progress the rest of an optimal turn would have made. For a turn
  of optimal moves that is exactly its shortfall against the optimal turn, ``min(m, d_start) - (d_start - d_end)``,
  which the moves' own advantages (all 0) leave uncharged: without it, stopping early is never worse than moving.

Shapes: ``B`` trajectories, ``T`` token columns, ``N`` turns of the whole batch.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch
from torch import Tensor

from trainer.algos.advantages import group_advantages
from trainer.algos.masked import as_float_mask

__all__ = [
    "move_advantages",
    "move_values_to_tokens",
    "progress_potential",
    "progress_shaping",
    "step_group_advantages",
    "turn_returns",
    "turn_values_to_tokens",
]


def progress_potential(distance: int | None, unsolvable_distance: float) -> float:
    """``Phi(s) = -distance_to_goal(s)``; ``-unsolvable_distance`` for an unsolvable or unknown position."""
    return -float(unsolvable_distance) if distance is None else -float(distance)


def progress_shaping(
    distances_before: Sequence[int | None],
    distances_after: Sequence[int | None],
    *,
    coef: float,
    gamma: float = 1.0,
    unsolvable_distance: float,
    zero_end: bool = False,
) -> list[float]:
    """One trajectory's shaping term per turn: ``coef * (gamma * Phi(after) - Phi(before))``.

    With ``gamma = 1`` the terms telescope: an episode's shaping sums to ``coef * (Phi(last) - Phi(first))``,
    and a solved episode (distance 0 at the end) gets exactly ``coef * distance(first)``.
    ``zero_end``: the position after the last turn is Ng et al.'s absorbing state, of potential 0, whatever
    it is (the goal, a lost position, or wherever the turns ran out); the episode's shaping then sums to
    ``-coef * Phi(first)`` (``gamma = 1``), the same for every episode of a level: policy-invariant.
    """
    if len(distances_before) != len(distances_after):
        raise ValueError(f"{len(distances_before)} distances before the turns but {len(distances_after)} after")
    phi = [
        (progress_potential(before, unsolvable_distance), progress_potential(after, unsolvable_distance))
        for before, after in zip(distances_before, distances_after, strict=True)
    ]
    if zero_end and phi:
        phi[-1] = (phi[-1][0], 0.0)
    return [coef * (gamma * phi_after - phi_before) for phi_before, phi_after in phi]


def turn_returns(turn_rewards: Sequence[float], gamma: float) -> list[float]:
    """Discounted return from each turn on: ``R_t = r_t + gamma * R_{t+1}``, ``R`` after the last turn 0."""
    returns = [0.0] * len(turn_rewards)
    running = 0.0
    for k in reversed(range(len(turn_rewards))):
        running = float(turn_rewards[k]) + gamma * running
        returns[k] = running
    return returns


def step_group_advantages(
    returns: Tensor, state_keys: Sequence[Hashable | None], *, normalize_std: bool = True, eps: float = 1e-6
) -> Tensor:
    """GiGPO's step-level relative advantage ``[N]``: each turn's return against its anchor-state group.

    ``returns`` ``[N]``: every turn's discounted return (:func:`turn_returns`). ``state_keys``: the key of
    the position each turn started from; turns with equal keys form a step group, and a ``None`` key is
    a group of its own. ``normalize_std``: divide by the group's unbiased std (GiGPO's ``F_norm = std``),
    else by 1. A group of one turn, or whose returns are all equal, gives 0 (as
    :func:`trainer.algos.advantages.group_advantages`, which computes it).
    """
    if returns.dim() != 1 or returns.shape[0] != len(state_keys):
        raise ValueError(f"expected returns [N] and N state keys, got {tuple(returns.shape)} and {len(state_keys)}")
    ids: dict[Hashable, int] = {}
    index = []
    for n, key in enumerate(state_keys):
        index.append(ids.setdefault(("key", key) if key is not None else ("alone", n), len(ids)))
    group_index = torch.tensor(index, dtype=torch.long)
    return group_advantages(returns, group_index, normalize_std=normalize_std, eps=eps)


def turn_values_to_tokens(
    values: Sequence[Sequence[float]], turn_end_columns: Sequence[Sequence[int]], mask: Tensor
) -> Tensor:
    """Per-turn values on each turn's sampled tokens ``[B, T]``.

    Turn ``k`` of row ``b`` owns the sampled tokens in columns ``(turn_end_columns[b][k - 1],
    turn_end_columns[b][k]]`` (from the row's start for ``k = 0``): its action, stop token included.
    Sampled tokens after a row's last turn end (none in a well-formed trajectory) and every mask-0
    column get 0.
    """
    if mask.dim() != 2 or len(values) != mask.shape[0] or len(turn_end_columns) != mask.shape[0]:
        raise ValueError(f"expected one value list and one column list per row of mask {tuple(mask.shape)}")
    out = torch.zeros(mask.shape, dtype=torch.float32)
    for b, (row_values, ends) in enumerate(zip(values, turn_end_columns, strict=True)):
        if len(row_values) != len(ends):
            raise ValueError(f"row {b}: {len(row_values)} turn values but {len(ends)} turn ends")
        start = 0
        for value, end in zip(row_values, ends, strict=True):
            out[b, start : int(end) + 1] = float(value)
            start = int(end) + 1
    return out * as_float_mask(mask, out)


def move_advantages(
    distance_before: int | None, distances_after: Sequence[int | None], *, unsolvable_distance: float
) -> list[float]:
    """One turn's optimal advantage per move, ``A* = d(s) - d(s') - 1`` (module docstring).

    ``distance_before``: the distance the turn started from; ``distances_after``: the distance after each of its
    moves. An unsolvable (or unknown) position counts as ``unsolvable_distance`` moves from the goal, or as one move
    further than the position it was lost from where that is further (so losing never pays more than a step
    away, whatever ``unsolvable_distance``); a move made from such a position gets 0.
    """
    advantages = []
    before = distance_before
    for after in distances_after:
        if before is None:
            advantages.append(0.0)
        else:
            reached = max(float(unsolvable_distance), before + 1.0) if after is None else float(after)
            advantages.append(float(before) - reached - 1.0)
        before = after
    return advantages


def stop_advantage(moves_made: int, distance_after: int | None, moves_per_turn: int) -> float:
    """The optimal advantage of a turn's stop (module docstring): ``-min(moves_per_turn - moves_made, d)`` when the
    turn ended short of its move limit at a solvable position ``d > 0`` moves from the goal, else 0 (a full turn, a
    solved level, a lost or unknown position)."""
    if distance_after is None or distance_after <= 0 or moves_made >= moves_per_turn:
        return 0.0
    return -float(min(moves_per_turn - moves_made, distance_after))


def move_values_to_tokens(
    values: Sequence[Sequence[Sequence[float]]],
    move_end_columns: Sequence[Sequence[Sequence[int]]],
    turn_start_columns: Sequence[Sequence[int]],
    mask: Tensor,
    stops: Sequence[Sequence[tuple[float, int]]] | None = None,
) -> Tensor:
    """Per-move values on each move's sampled tokens ``[B, T]``.

    Indexed ``[row][turn][move]``: turn ``k`` of row ``b`` starts at column ``turn_start_columns[b][k]`` (its
    first sampled token), and its move ``m`` owns the columns ``(end_{m-1}, end_m]``, ``end_m =
    move_end_columns[b][k][m]`` (``end_{-1}`` the column before the turn's start). Columns after a turn's last
    move get 0, or with ``stops`` (``[row][turn]`` pairs of a value and the turn's last column) that value up to
    that column; every mask-0 column gets 0.
    """
    if mask.dim() != 2 or not (len(values) == len(move_end_columns) == len(turn_start_columns) == mask.shape[0]):
        raise ValueError(f"expected one list of turns per row of mask {tuple(mask.shape)}")
    out = torch.zeros(mask.shape, dtype=torch.float32)
    for b, (row_values, row_ends, row_starts) in enumerate(
        zip(values, move_end_columns, turn_start_columns, strict=True)
    ):
        if not (len(row_values) == len(row_ends) == len(row_starts)):
            raise ValueError(
                f"row {b}: {len(row_values)} turns of values, {len(row_ends)} of ends, {len(row_starts)} starts"
            )
        row_stops = stops[b] if stops is not None else [None] * len(row_values)
        if len(row_stops) != len(row_values):
            raise ValueError(f"row {b}: {len(row_values)} turns of values but {len(row_stops)} stops")
        for turn_values, ends, start, stop in zip(row_values, row_ends, row_starts, row_stops, strict=True):
            if len(turn_values) != len(ends):
                raise ValueError(f"row {b}: {len(turn_values)} move values but {len(ends)} move ends")
            for value, end in zip(turn_values, ends, strict=True):
                out[b, int(start) : int(end) + 1] = float(value)
                start = int(end) + 1
            if stop is not None:  # the columns after the turn's last move, up to its last one
                value, last = stop
                out[b, int(start) : int(last) + 1] = float(value)
    return out * as_float_mask(mask, out)
