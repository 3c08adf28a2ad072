"""Rollout filtering by within-group reward variance (RAGEN, Wang et al. 2025, "RAGEN: Understanding
Self-Evolution in LLM Agents via Multi-Turn Reinforcement Learning", section 4: "StarPO-S" keeps the
prompts whose rollouts disagree most, since a group whose returns are all equal carries no signal for a
group baseline and a low-variance one little).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

__all__ = ["select_groups_by_std"]


def select_groups_by_std(group_returns: Sequence[Sequence[float]], fraction: float) -> list[int]:
    """Indices of the ``ceil(fraction * G)`` groups with the largest population std of their returns, in
    their original order; ties keep the earlier group. ``fraction`` 1 keeps every group.

    Args:
        group_returns: ``G`` groups, each the returns of its episodes.
        fraction: in ``(0, 1]``.
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    count = len(group_returns)
    keep = math.ceil(fraction * count)
    spread = [statistics.pstdev(returns) if len(returns) > 1 else 0.0 for returns in group_returns]
    ranked = sorted(range(count), key=lambda i: (-spread[i], i))
    return sorted(ranked[:keep])
