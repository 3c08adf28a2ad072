"""A placebo for RL's signal: each episode's reward swapped for another episode's.

What an RL phase does to a policy is its signal (which episodes did better) plus its noise (the particular episodes
of a step, the steps the optimizer takes on them). Where the phase gains nothing, a control tells the two apart: the
same run with the rewards carrying no information about the episodes they are attached to. Here every episode of a
step gets the return of another episode of the same step, a random permutation, placed on its last turn (its other
turns get 0), so the step's rewards have the same sizes, the same mean and spread, and the advantages the same
scale, but which episode earned which is lost. Random and spurious rewards are the field's standard control for
what a reward teaches (Shao et al. 2025, "Spurious Rewards: Rethinking Training Signals in RLVR", arXiv 2506.10947).
"""

from __future__ import annotations

import random
from collections.abc import Sequence


def placebo_rewards(turn_rewards: Sequence[Sequence[float]], *, seed: int) -> list[list[float]]:
    """Per-trajectory turn rewards where trajectory ``i``'s last turn gets the return (sum of turn rewards) of
    trajectory ``order[i]``, ``order`` a permutation drawn from ``random.Random(seed)``, and its other turns 0.

    A trajectory without turns stays without; the permutation runs over those with turns only.
    """
    returns = [float(sum(row)) for row in turn_rewards if len(row) > 0]
    order = list(range(len(returns)))
    random.Random(seed).shuffle(order)
    swapped = iter([returns[j] for j in order])
    return [[0.0] * (len(row) - 1) + [next(swapped)] if len(row) > 0 else [] for row in turn_rewards]
