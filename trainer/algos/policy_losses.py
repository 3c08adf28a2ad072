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
- ``gspo``: GSPO's sequence-level ratio (:func:`gspo_policy_loss`).
- ``cispo``: CISPO's clipped, detached importance weight on a REINFORCE term (:func:`cispo_policy_loss`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from trainer.algos.losses import Aggregation, aggregate, ppo_policy_loss
from trainer.algos.masked import as_float_mask, masked_mean

__all__ = [
    "POLICY_LOSSES",
    "PolicyInputs",
    "PolicyLoss",
    "PolicyLossSpec",
    "cispo_policy_loss",
    "gspo_policy_loss",
]

_MAX_LOG_RATIO = 20.0  # exp(20) ~ 5e8: bounds a ratio whose old logprob was ~ -inf without changing real ones


@dataclass(frozen=True)
class PolicyLossSpec:
    """The actor's objective: which policy loss (a row of :data:`POLICY_LOSSES`) with its clip ranges, plus the
    entropy bonus, the KL-to-reference term and the shared value head's clip.

    ``clip_low``/``clip_high``: the ratio's clip range ``[1 - clip_low, 1 + clip_high]`` (PPO, GSPO) or the
    importance weight's (CISPO); ``dual_clip``: PPO's dual clip only. ``kl_coef > 0``: ``kl_coef * agg(kl)``
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
    """One policy loss: ``compute(inputs, agg, spec) -> (loss, stats)`` and the paper it follows.

    ``no_lower_clip``: whether it accepts ``algo.clip_low = 1``, a lower bound of 0 (no lower bound): it
    would cancel PPO's and GSPO's gradient wherever the ratio falls, but only removes the lower bound of
    CISPO's detached weight.
    """

    name: str
    compute: Callable[[PolicyInputs, Aggregation, PolicyLossSpec], tuple[Tensor, dict[str, Tensor]]]
    source: str
    no_lower_clip: bool = False


def _check_shapes(logprobs: Tensor, **others: Tensor) -> None:
    for name, x in others.items():
        if x.shape != logprobs.shape:
            raise ValueError(f"{name} has shape {tuple(x.shape)} but logprobs has {tuple(logprobs.shape)}")


def _ratio_stats(ratio: Tensor, log_ratio: Tensor, clipped: Tensor, lower: Tensor, m: Tensor) -> dict[str, Tensor]:
    """The statistics every row reports (detached, masked means over this call's sampled tokens)."""
    with torch.no_grad():
        return {
            "clipfrac": masked_mean(clipped.to(m.dtype), m),
            "clipfrac_lower": masked_mean(lower.to(m.dtype), m),
            "approx_kl": masked_mean(-log_ratio, m),  # k1 estimate of KL(old || new) per token
            "ratio_mean": masked_mean(ratio, m),
            "ratio_max": torch.where(m != 0, ratio, 0.0).max() if ratio.numel() else ratio.new_zeros(()),
        }


def gspo_policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    agg: Aggregation,
    *,
    clip_low: float = 3e-4,
    clip_high: float = 4e-4,
    is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """GSPO (Zheng et al. 2025, "Group Sequence Policy Optimization", arXiv 2507.18071), its token form:
    ``(loss, stats)``; all inputs ``[B, T]``.

    The importance ratio of a whole response is the geometric mean of its tokens' ratios (eq. 7),
    ``s_i = exp(mean_t (logp - old_logp))`` over the row's sampled tokens (a multi-turn row: every turn's).
    GSPO-token (eq. 13) gives each token the value ``s_i`` with the gradient of its own logprob::

        s_it = exp(sg(log s_i) + logp_t - sg(logp_t))          (= s_i in value)
        l_t = max(-A_t * s_it, -A_t * clamp(s_it, 1 - clip_low, 1 + clip_high))
        loss = aggregate(l * is_weights, mask, agg)

    With one advantage per response and ``seq-mean-token-mean`` aggregation (the paper's), the gradient is
    GSPO's: ``-A_i * s_i * mean_t grad logp_t`` when unclipped, 0 when clipped; per-token advantages
    (turn-level credit) weight each token's term. The paper's clip ranges are tiny, ``3e-4`` and ``4e-4``: a
    sequence ratio moves much less than a token's. A response is clipped as a whole, so ``clipfrac`` counts
    the tokens of clipped responses. ``clipfrac_lower`` is 0 (no dual clip).
    """
    if not 0 <= clip_low < 1 or clip_high < 0:
        raise ValueError(f"need 0 <= clip_low < 1 and clip_high >= 0, got clip_low={clip_low}, clip_high={clip_high}")
    _check_shapes(logprobs, old_logprobs=old_logprobs, advantages=advantages, mask=mask)
    old_logprobs, advantages = old_logprobs.detach(), advantages.detach()
    m = as_float_mask(mask, logprobs)
    tokens = m.sum(dim=-1).clamp(min=1.0)
    token_log_ratio = torch.clamp(logprobs - old_logprobs, -_MAX_LOG_RATIO, _MAX_LOG_RATIO) * m
    sequence_log_ratio = token_log_ratio.sum(dim=-1) / tokens  # [B]
    log_ratio = sequence_log_ratio.detach()[:, None] + logprobs - logprobs.detach()
    ratio = torch.exp(torch.clamp(log_ratio, max=_MAX_LOG_RATIO))
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    losses = torch.maximum(unclipped, clipped)
    if is_weights is not None:
        losses = losses * is_weights.detach()
    stats = _ratio_stats(ratio, token_log_ratio, clipped > unclipped, torch.zeros_like(m, dtype=torch.bool), m)
    return aggregate(losses, m, agg), stats


def cispo_policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    agg: Aggregation,
    *,
    clip_low: float = 1.0,
    clip_high: float = 0.28,
    is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """CISPO (MiniMax-M1, Chen et al. 2025, arXiv 2506.13585, eq. 4): ``(loss, stats)``; all inputs ``[B, T]``.

    A REINFORCE term whose importance weight is clipped and detached, so that no token's gradient is dropped
    (PPO's clip zeroes the gradient of tokens past the range; here they keep it, with a bounded weight)::

        r_t = exp(logp_t - old_logp_t);   w_t = sg(clamp(r_t, 1 - clip_low, 1 + clip_high))
        l_t = -w_t * A_t * logp_t
        loss = aggregate(l * is_weights, mask, agg)

    The paper sets no lower bound (``clip_low=1.0``: ``w >= 0``) and tunes the upper one. The loss's value is
    not a surrogate of the return (it holds ``logp``), only its gradient is: ``-w_t * A_t * grad logp_t``.
    ``clipfrac``: tokens whose weight was capped above; ``clipfrac_lower``: capped below.
    """
    if not 0 <= clip_low <= 1 or clip_high < 0:
        raise ValueError(f"need 0 <= clip_low <= 1 and clip_high >= 0, got clip_low={clip_low}, clip_high={clip_high}")
    _check_shapes(logprobs, old_logprobs=old_logprobs, advantages=advantages, mask=mask)
    old_logprobs, advantages = old_logprobs.detach(), advantages.detach()
    log_ratio = torch.clamp(logprobs.detach() - old_logprobs, -_MAX_LOG_RATIO, _MAX_LOG_RATIO)
    ratio = torch.exp(log_ratio)
    weight = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    losses = -weight * advantages * logprobs
    if is_weights is not None:
        losses = losses * is_weights.detach()
    m = as_float_mask(mask, losses)
    stats = _ratio_stats(ratio, log_ratio, ratio > 1.0 + clip_high, ratio < 1.0 - clip_low, m)
    return aggregate(losses, m, agg), stats


def _ppo(x: PolicyInputs, agg: Aggregation, spec: PolicyLossSpec) -> tuple[Tensor, dict[str, Tensor]]:
    clips = {"clip_low": spec.clip_low, "clip_high": spec.clip_high, "dual_clip": spec.dual_clip}
    return ppo_policy_loss(*x.tensors(), agg, **clips, is_weights=x.is_weights)


def _gspo(x: PolicyInputs, agg: Aggregation, spec: PolicyLossSpec) -> tuple[Tensor, dict[str, Tensor]]:
    clips = {"clip_low": spec.clip_low, "clip_high": spec.clip_high}
    return gspo_policy_loss(*x.tensors(), agg, **clips, is_weights=x.is_weights)


def _cispo(x: PolicyInputs, agg: Aggregation, spec: PolicyLossSpec) -> tuple[Tensor, dict[str, Tensor]]:
    clips = {"clip_low": spec.clip_low, "clip_high": spec.clip_high}
    return cispo_policy_loss(*x.tensors(), agg, **clips, is_weights=x.is_weights)


#: ``algo.policy_loss`` -> its :class:`PolicyLoss`.
POLICY_LOSSES: dict[str, PolicyLoss] = {
    row.name: row
    for row in (
        PolicyLoss("ppo", _ppo, "Schulman et al. 2017 (clip), Ye et al. 2020 (dual clip)"),
        PolicyLoss("gspo", _gspo, "Zheng et al. 2025, arXiv 2507.18071 (GSPO-token)"),
        PolicyLoss("cispo", _cispo, "Chen et al. 2025 (MiniMax-M1), arXiv 2506.13585", no_lower_clip=True),
    )
}
