"""A curriculum over difficulty: which levels a training step plays, moved by the training success.

An environment that can generate a level of a given difficulty (the exact solver's optimal number of
moves: Sokoban's moves, FrozenLake's shortest path) takes ``reset(options={"difficulty": d})`` and
advertises the values it can generate as ``difficulty_range`` (inclusive). The adaptive curriculum
keeps a *ceiling*: each step's groups draw their difficulty uniformly from ``[lowest, ceiling]``, so
the easy levels stay in the mix while harder ones join. After a step, a training success rate above
the band's top raises the ceiling by one, below its bottom lowers it by one (never below the easiest
level), inside the band leaves it. The draw is seeded by the run's seed and the step, and the ceiling
moves only with the success the run itself measured, so a run stays reproducible; the ceiling is
saved with each checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["DifficultyCurriculum", "difficulty_mix"]


class DifficultyCurriculum:
    """The adaptive curriculum of the module docstring.

    Args:
        lowest, highest: the environment's ``difficulty_range``.
        band: the training success rates ``(low, high)`` the curriculum aims to stay within.
        ceiling: the first ceiling (``None``: ``lowest``, the easiest levels only).
    """

    def __init__(self, lowest: int, highest: int, band: tuple[float, float], ceiling: int | None = None) -> None:
        if not 1 <= lowest <= highest:
            raise ValueError(f"a difficulty range needs 1 <= lowest <= highest, got [{lowest}, {highest}]")
        low, high = band
        if not 0 <= low < high <= 1:
            raise ValueError(f"the success band needs 0 <= low < high <= 1, got {band}")
        self.lowest, self.highest, self.band = int(lowest), int(highest), (float(low), float(high))
        self.ceiling = self.lowest if ceiling is None else min(max(int(ceiling), self.lowest), self.highest)

    def draw(self, count: int, seed: int) -> list[int]:
        """``count`` difficulties drawn uniformly from ``[lowest, ceiling]`` with a generator seeded by ``seed``."""
        rng = np.random.default_rng(seed)
        return [int(d) for d in rng.integers(self.lowest, self.ceiling + 1, size=count)]

    def update(self, success_rate: float) -> int:
        """Move the ceiling by the step's training success rate (module docstring); returns the new ceiling."""
        low, high = self.band
        if success_rate > high:
            self.ceiling = min(self.ceiling + 1, self.highest)
        elif success_rate < low:
            self.ceiling = max(self.ceiling - 1, self.lowest)
        return self.ceiling


def difficulty_mix(difficulties: Sequence[int]) -> dict[str, float]:
    """``curriculum/*`` metrics of one step's drawn difficulties: their mean, least and largest value."""
    if not difficulties:
        return {}
    return {
        "curriculum/difficulty_mean": float(np.mean(difficulties)),
        "curriculum/difficulty_min": float(min(difficulties)),
        "curriculum/difficulty_max": float(max(difficulties)),
    }
