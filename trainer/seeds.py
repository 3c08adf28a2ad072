"""Every seed a training run derives from ``trainer.seed``, named by what it seeds.

Levels. Training step ``k`` (from 1) plays ``trainer.groups_per_step`` levels, seeds
``base + (k - 1) * groups_per_step + i``: consecutive steps play consecutive, disjoint seeds, and a run of
``total_steps`` steps plays exactly :func:`training_seed_range` (checked against the warm-up's and the held-out
evaluation's seeds at start-up, :func:`trainer.config_phases.check_phases`).

Random streams. Step ``k``'s rollout sampling, curriculum draw and update shuffle are seeded with
``base * 1_000_003 + k``: the prime multiplier keeps two runs with different bases on different numbers for
the first million steps. The three share that number; they seed unrelated generators (the engine's sampler,
NumPy's, torch's), so they do not draw the same stream. Held-out evaluation samples from ``base * 1_000_003 +
999_983`` (the largest prime below a million, past any step a run reaches), the same at every evaluation, so
two evaluations differ only by the policy.
"""

from __future__ import annotations

__all__ = [
    "curriculum_draw_seed",
    "evaluation_sampling_seed",
    "rollout_sampling_seed",
    "sft_shuffle_seed",
    "training_level_seed",
    "training_level_seeds",
    "training_seed_range",
    "update_shuffle_seed",
]

_STREAM_STRIDE = 1_000_003  # a prime: runs with different bases get different per-step seeds
_EVALUATION_OFFSET = 999_983  # the largest prime below 10**6: no training step reaches it
_SFT_OFFSET = 17  # the warm-up's shuffle: the stream of step 17 (the warm-up runs before step 1)


def training_level_seed(base: int, step: int, index: int, groups_per_step: int) -> int:
    """The level seed of group ``index`` (from 0) of training step ``step`` (from 1)."""
    return base + (step - 1) * groups_per_step + index


def training_level_seeds(base: int, step: int, groups_per_step: int) -> range:
    """The level seeds of training step ``step``'s groups, in group order."""
    first = training_level_seed(base, step, 0, groups_per_step)
    return range(first, first + groups_per_step)


def training_seed_range(base: int, total_steps: int, groups_per_step: int) -> range:
    """Every level seed a run of ``total_steps`` steps plays."""
    return range(base, training_level_seed(base, total_steps + 1, 0, groups_per_step))


def rollout_sampling_seed(base: int, step: int) -> int:
    """The sampling seed of step ``step``'s rollout (``SamplingParams.seed``)."""
    return base * _STREAM_STRIDE + step


def curriculum_draw_seed(base: int, step: int) -> int:
    """The seed of step ``step``'s curriculum draw of difficulties."""
    return base * _STREAM_STRIDE + step


def update_shuffle_seed(base: int, step: int) -> int:
    """The seed of the generator that shuffles step ``step``'s mini-batches."""
    return base * _STREAM_STRIDE + step


def evaluation_sampling_seed(base: int) -> int:
    """The sampling seed of every held-out evaluation (``SamplingParams.seed``)."""
    return base * _STREAM_STRIDE + _EVALUATION_OFFSET


def sft_shuffle_seed(base: int) -> int:
    """The seed of the generator that shuffles the warm-up's (supervised fine-tuning's) batches."""
    return base * _STREAM_STRIDE + _SFT_OFFSET
