"""The advantage estimators ``algo.advantage`` names, in one table: what each computes and what it needs.

Adding an estimator is one entry in :data:`ESTIMATORS` (and a ``configs/training/algo/<name>.yaml`` that
selects it): the config checks (:mod:`trainer.config`) read ``critic`` and ``groups`` from here, and the
training step (:func:`trainer.train_step.estimate_advantages`) calls ``compute``.

Two terms built on the environment's exact state combine with every row (:mod:`trainer.algos.credit`):
``algo.shaping`` adds progress shaping to the turn rewards before ``compute`` sees them, and
``algo.step_groups`` adds GiGPO's step-level group advantage to what ``compute`` returns. The ``gigpo`` row
is GRPO with the step-level term required: GiGPO as its paper defines it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from trainer.algos.advantages import (
    group_advantages,
    reinforce_pp_advantages,
    reinforce_pp_baseline_advantages,
    rloo_advantages,
)
from trainer.algos.multiturn import gae_advantages

__all__ = ["ESTIMATORS", "AdvantageInputs", "Estimator"]


@dataclass
class AdvantageInputs:
    """What an estimator may use: token rewards ``[B, L]``, sampled-token mask, episode scores ``[B]``,
    group ids ``[B]`` and the critic's values ``[B, L]`` (``None`` without a critic)."""

    token_rewards: Tensor
    mask: Tensor
    scores: Tensor
    group_index: Tensor
    values: Tensor | None


@dataclass(frozen=True)
class Estimator:
    """One advantage estimator. ``compute(inputs, algo)`` returns advantages ``[B, L]`` and the critic's
    returns ``[B, L]`` (``None`` for critic-free estimators). ``critic``: it needs values; ``groups``: it
    compares the episodes of one seed, so ``algo.group_size`` must be at least 2; ``step_groups``: it is
    defined with the step-level term, so ``algo.step_groups.weight`` must be positive."""

    name: str
    compute: Callable[[AdvantageInputs, Any], tuple[Tensor, Tensor | None]]
    critic: bool = False
    groups: bool = False
    step_groups: bool = False


def _gae(x: AdvantageInputs, algo: Any) -> tuple[Tensor, Tensor | None]:
    return gae_advantages(x.token_rewards, x.values, x.mask, gamma=algo.gamma, lam=algo.lam)


def _grpo(x: AdvantageInputs, algo: Any) -> tuple[Tensor, Tensor | None]:
    per_episode = group_advantages(x.scores, x.group_index, normalize_std=algo.normalize_std)
    return per_episode[:, None] * x.mask, None


def _rloo(x: AdvantageInputs, algo: Any) -> tuple[Tensor, Tensor | None]:
    return rloo_advantages(x.scores, x.group_index)[:, None] * x.mask, None


def _reinforce_pp(x: AdvantageInputs, algo: Any) -> tuple[Tensor, Tensor | None]:
    advantages, _ = reinforce_pp_advantages(x.token_rewards, x.mask, gamma=algo.gamma)
    return advantages, None


def _reinforce_pp_baseline(x: AdvantageInputs, algo: Any) -> tuple[Tensor, Tensor | None]:
    return reinforce_pp_baseline_advantages(x.scores, x.group_index, x.mask), None


#: ``algo.advantage`` -> its :class:`Estimator`.
ESTIMATORS: dict[str, Estimator] = {
    e.name: e
    for e in (
        Estimator("gae", _gae, critic=True),
        Estimator("grpo", _grpo, groups=True),
        # GiGPO (Feng et al. 2025): GRPO's episode-level advantage plus omega x the step-level one
        Estimator("gigpo", _grpo, groups=True, step_groups=True),
        Estimator("rloo", _rloo, groups=True),
        Estimator("reinforce_pp", _reinforce_pp),
        Estimator("reinforce_pp_baseline", _reinforce_pp_baseline, groups=True),
    )
}
