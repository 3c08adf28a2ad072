"""The policy losses ``algo.policy_loss`` names, in one table, beside the estimator table.

A policy loss turns the sampled tokens' logprobs under the model being trained (with gradient), the
rollout's logprobs and the advantages into one scalar to minimise and its statistics. Adding one is a
function here, a row of :data:`POLICY_LOSSES` and a ``configs/training/algo/<name>.yaml`` that selects it:
the config check reads the names from the table, and the actor's objective
(:func:`trainer.algos.objective.actor_objective`) calls the row with the run's :class:`PolicyLossSpec`.

Every row takes the same inputs (:class:`PolicyInputs`, all ``[B, T]``, ``mask`` 1 exactly on sampled
tokens; only ``logprobs`` carries gradient) and returns ``(loss, stats)`` with the same statistics, so a
run's metrics read the same whatever the loss: ``clipfrac``, ``clipfrac_lower``, ``approx_kl``,
``ratio_mean``, ``ratio_max``.

- ``ppo``: PPO's token-level clipped surrogate with the dual clip (:func:`trainer.algos.ppo_policy_loss`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor

from trainer.algos.losses import Aggregation, ppo_policy_loss

__all__ = [
    "POLICY_LOSSES",
    "PolicyInputs",
    "PolicyLoss",
    "PolicyLossSpec",
]


@dataclass(frozen=True)
class PolicyLossSpec:
    """The actor's objective: which policy loss (a row of :data:`POLICY_LOSSES`) with its clip ranges, plus the
    entropy bonus, the KL-to-reference term and the shared value head's clip.

    ``clip_low``/``clip_high``: the ratio's clip range ``[1 - clip_low, 1 + clip_high]``; ``dual_clip``: PPO's
    dual clip. ``kl_coef > 0``: ``kl_coef * agg(kl)``
    joins the loss (needs reference logprobs). ``temperature``: the logits' divisor, the rollout's.
    """

    policy_loss: str = "ppo"
    clip_low: float = 0.2
    clip_high: float = 0.2
    dual_clip: float | None = 3.0
    entropy_coef: float = 0.0
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    temperature: float = 1.0
    value_clip: float | None = 0.5  # the shared value head's clipped value loss (``WorkerSpec.value_head``)


@dataclass(frozen=True)
class PolicyInputs:
    """What a policy loss reads, all ``[B, T]``: the sampled tokens' logprobs under the model being trained (the
    only tensor with gradient), the rollout's (old) logprobs, the advantages, the sampled-token mask and the
    off-policy correction weights (:mod:`trainer.algos.off_policy`; ``None``: none)."""

    logprobs: Tensor
    old_logprobs: Tensor
    advantages: Tensor
    mask: Tensor
    is_weights: Tensor | None = None

    def tensors(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        return self.logprobs, self.old_logprobs, self.advantages, self.mask


@dataclass(frozen=True)
class PolicyLoss:
    """One policy loss: ``compute(inputs, agg, spec) -> (loss, stats)`` and the paper it follows."""

    name: str
    compute: Callable[[PolicyInputs, Aggregation, PolicyLossSpec], tuple[Tensor, dict[str, Tensor]]]
    source: str


def _ppo(x: PolicyInputs, agg: Aggregation, spec: PolicyLossSpec) -> tuple[Tensor, dict[str, Tensor]]:
    clips = {"clip_low": spec.clip_low, "clip_high": spec.clip_high, "dual_clip": spec.dual_clip}
    return ppo_policy_loss(*x.tensors(), agg, **clips, is_weights=x.is_weights)


#: ``algo.policy_loss`` -> its :class:`PolicyLoss`.
POLICY_LOSSES: dict[str, PolicyLoss] = {
    row.name: row for row in (PolicyLoss("ppo", _ppo, "Schulman et al. 2017 (clip), Ye et al. 2020 (dual clip)"),)
}
