"""Advantage estimators for multi-turn trajectories, as pure tensor functions.

Conventions (``/work/shared/specs/algorithms.md``; they follow verl's ``trainer/ppo/core_algos.py``
unless a docstring says otherwise):

* ``B`` trajectories, ``T`` token positions. ``mask`` ``[B, T]`` (float or bool) is 1 exactly on
  sampled, trainable tokens. Prompts, padding and the *observation gaps* between the turns of a
  multi-turn trajectory (the environment's replies rendered by the chat template) are 0.
* Rewards are per token, ``[B, T]``: :func:`place_turn_rewards` puts the reward of each turn on the
  turn's last sampled token. Outcome-only estimators (GRPO, RLOO, REINFORCE++ with baseline) take a
  score per trajectory ``[B]`` and a group index ``[B]`` (trajectories from one seed share a group).
* Token-level recursions (discounted returns, GAE) walk the *sampled* tokens backwards and step over
  the gaps: an observation position neither resets the running quantity nor counts as a time step.
* All inputs are treated as constants (detached); the results carry no gradient.

The batch statistics (``masked_mean``, ``masked_var``, ``masked_whiten``, ``masked_sum``) live in
:mod:`trainer.algos.masked` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from trainer.algos.masked import as_float_mask, masked_mean, masked_sum, masked_var, masked_whiten
from trainer.algos.multiturn import discounted_returns, gae_advantages

__all__ = [
    "broadcast_to_tokens",
    "discounted_returns",
    "gae_advantages",
    "group_advantages",
    "group_statistics",
    "masked_mean",
    "masked_sum",
    "masked_var",
    "masked_whiten",
    "place_turn_rewards",
    "reinforce_pp_advantages",
    "reinforce_pp_baseline_advantages",
    "rloo_advantages",
    "sign_weighted",
    "success_signal",
]


def sign_weighted(advantages: Tensor, positive: float, negative: float) -> Tensor:
    """``advantages`` with each value scaled by its sign's weight: ``positive * A`` where ``A > 0``,
    ``negative * A`` where ``A < 0`` (0 stays 0).

    ``negative=0`` keeps only the tokens that did better than expected (positive sample reinforcement: their
    likelihood rises and nothing is pushed down); ``positive=0`` only those that did worse; a small weight on one side
    (0.1, say) is the weighted form that Zhu et al. (2025, "The Surprising Effectiveness of Negative Reinforcement in
    LLM Reasoning") study.
    """
    return torch.where(advantages > 0, advantages * positive, advantages * negative)


def place_turn_rewards(
    turn_rewards: Sequence[Sequence[float]], positions: Sequence[Sequence[int]], shape: tuple[int, int]
) -> Tensor:
    """Token-level rewards ``[B, T]``: reward ``k`` of trajectory ``b`` at column ``positions[b][k]``, 0 elsewhere.

    ``positions[b][k]`` is the column of turn ``k``'s last sampled token in the ``[B, T]`` layout the
    caller trains on (offset by the prompt length if prompts are part of the tensor). Rewards that
    share a position add up. Raises ``ValueError`` when the lists do not match ``shape`` or a
    position lies outside ``[0, T)``.
    """
    batch, length = shape
    if len(turn_rewards) != batch or len(positions) != batch:
        raise ValueError(
            f"expected {batch} trajectories (shape {shape}), got {len(turn_rewards)} reward lists "
            f"and {len(positions)} position lists"
        )
    rewards = torch.zeros(batch, length, dtype=torch.float32)
    for b, (values, columns) in enumerate(zip(turn_rewards, positions, strict=True)):
        if len(values) != len(columns):
            raise ValueError(f"trajectory {b}: {len(values)} turn rewards but {len(columns)} positions; give one each")
        for reward, column in zip(values, columns, strict=True):
            if not 0 <= int(column) < length:
                raise ValueError(f"trajectory {b}: reward position {column} is outside [0, {length})")
            rewards[b, int(column)] += float(reward)
    return rewards


def broadcast_to_tokens(per_sequence: Tensor, mask: Tensor) -> Tensor:
    """``per_sequence[b] * mask[b, t]``: one value per trajectory ``[B]`` on each of its sampled tokens ``[B, T]``."""
    if per_sequence.dim() != 1 or mask.dim() != 2 or per_sequence.shape[0] != mask.shape[0]:
        raise ValueError(
            f"expected per_sequence [B] and mask [B, T], got {tuple(per_sequence.shape)} and {tuple(mask.shape)}"
        )
    values = per_sequence.detach()[:, None].expand(mask.shape)
    return values * as_float_mask(mask, values)


# ---------------------------------------------------------------------------------------------
# Group baselines (GRPO, Dr.GRPO, RLOO): one score per trajectory, groups of trajectories per seed.


def _group_moments(scores: Tensor, group_index: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """``(inverse, moments)``: each trajectory's group number ``[B]`` and per-group statistics ``[G]``.

    ``moments``: ``count``, ``total``, ``mean``, ``std`` (unbiased; 0 for a group of one) and
    ``all_equal`` (exact: max == min, not a tolerance), computed in float64.
    """
    if scores.dim() != 1 or group_index.shape != scores.shape:
        shapes = f"{tuple(scores.shape)} and {tuple(group_index.shape)}"
        raise ValueError(f"expected scores [B] and group_index [B], got {shapes}")
    if group_index.is_floating_point() or group_index.dtype == torch.bool:
        raise ValueError(f"group_index must hold integer group ids, got dtype {group_index.dtype}")
    values = scores.detach().to(torch.float64)
    _, inverse = torch.unique(group_index, return_inverse=True)
    zeros = values.new_zeros(int(inverse.max()) + 1 if inverse.numel() else 0)
    count = zeros.index_add(0, inverse, torch.ones_like(values))
    total = zeros.index_add(0, inverse, values)
    mean = total / count
    squares = zeros.index_add(0, inverse, (values - mean[inverse]) ** 2)
    high = zeros.scatter_reduce(0, inverse, values, reduce="amax", include_self=False)
    low = zeros.scatter_reduce(0, inverse, values, reduce="amin", include_self=False)
    all_equal = high == low
    std = torch.where(all_equal, 0.0, torch.sqrt(squares / (count - 1).clamp(min=1)))
    return inverse, {"count": count, "total": total, "mean": mean, "std": std, "all_equal": all_equal}


def _result_dtype(scores: Tensor) -> torch.dtype:
    return scores.dtype if scores.is_floating_point() else torch.get_default_dtype()


def group_advantages(scores: Tensor, group_index: Tensor, *, normalize_std: bool = True, eps: float = 1e-6) -> Tensor:
    """GRPO and Dr.GRPO advantages, one per trajectory ``[B]``.

    GRPO (Shao et al. 2024, DeepSeekMath, sec. 4.1.2, outcome supervision):
    ``A_i = (S_i - mean_g) / (std_g + eps)`` with the unbiased std over the trajectories of ``i``'s
    group. Dr.GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training"), ``normalize_std=False``:
    ``A_i = S_i - mean_g``.

    ``scores`` ``[B]``: the return of each trajectory. ``group_index`` ``[B]`` (integer): trajectories
    with the same id form a group; ids need not be contiguous.

    Degenerate groups (a documented choice): a group of one gets advantage exactly 0, because it has
    no baseline (verl passes the raw score through, which rewards whatever a lone sample did); a group
    whose scores are all equal gets exactly 0 (what the formula gives, enforced so that rounding in
    the mean cannot leave ``1e-17 / eps``-sized residues). No ``NaN`` arises from either.
    """
    inverse, group = _group_moments(scores, group_index)
    advantages = scores.detach().to(torch.float64) - group["mean"][inverse]
    if normalize_std:
        advantages = advantages / (group["std"][inverse] + eps)
    no_signal = (group["count"] < 2) | group["all_equal"]
    advantages = torch.where(no_signal[inverse], torch.zeros_like(advantages), advantages)
    return advantages.to(_result_dtype(scores))


def rloo_advantages(scores: Tensor, group_index: Tensor) -> Tensor:
    """REINFORCE leave-one-out (Ahmadian et al. 2024, "Back to Basics"): ``A_i = S_i - mean_{j != i} S_j`` ``[B]``.

    Equivalently ``n / (n - 1) * (S_i - mean_g)``. A group of one has no other member to form a
    baseline and gets 0; a group whose scores are all equal gets exactly 0.
    """
    inverse, group = _group_moments(scores, group_index)
    values = scores.detach().to(torch.float64)
    count = group["count"][inverse]
    advantages = values - (group["total"][inverse] - values) / (count - 1).clamp(min=1)
    no_signal = (group["count"] < 2) | group["all_equal"]
    advantages = torch.where(no_signal[inverse], torch.zeros_like(advantages), advantages)
    return advantages.to(_result_dtype(scores))


def group_statistics(scores: Tensor, group_index: Tensor) -> dict[str, float]:
    """Diagnostics of the groups, for logging.

    ``num_groups``; ``mean_group_size``; ``singleton_group_fraction`` (groups of one);
    ``degenerate_group_fraction`` (groups of one or whose scores are all equal: they give every
    member advantage 0, so no learning signal); ``mean_group_std`` (mean over groups of two or more
    of the unbiased within-group std; 0 when there is none).
    """
    _, group = _group_moments(scores, group_index)
    count, std = group["count"], group["std"]
    num_groups = count.numel()
    if num_groups == 0:
        return {
            "num_groups": 0.0,
            "mean_group_size": 0.0,
            "singleton_group_fraction": 0.0,
            "degenerate_group_fraction": 0.0,
            "mean_group_std": 0.0,
        }
    multi = count >= 2
    return {
        "num_groups": float(num_groups),
        "mean_group_size": float(count.mean()),
        "singleton_group_fraction": float((~multi).double().mean()),
        "degenerate_group_fraction": float(((~multi) | group["all_equal"]).double().mean()),
        "mean_group_std": float(std[multi].mean()) if bool(multi.any()) else 0.0,
    }


def success_signal(success: Tensor, group_index: Tensor, advantage_mass: Tensor) -> dict[str, float]:
    """Where the learning signal comes from: success, or only the shaping rewards. For logging.

    ``success`` ``[B]`` (bool), ``group_index`` ``[B]``, ``advantage_mass`` ``[B]`` (each row's summed
    ``|advantage|`` over its sampled tokens). ``mixed_success_group_fraction``: among groups of two or
    more, the fraction where some members succeeded and some did not (only those groups say "succeed");
    ``no_success_group_fraction``: among all groups, the fraction where no member succeeded (an outcome reward
    alone gives them nothing to learn from); ``advantage_share_without_success``: the share of the batch's
    advantage mass in groups where no member
    succeeded, whose advantages come from shaping alone (a move cost, say). Under GRPO's std
    normalisation such a group's small reward differences become full-size advantages: a share near 1
    means the update teaches the shaping, not the task.
    """
    inverse, group = _group_moments(success.to(torch.float64), group_index)
    any_success, all_success = group["total"] > 0, group["total"] == group["count"]
    multi = group["count"] >= 2
    mixed = multi & any_success & ~all_success
    mass = advantage_mass.detach().to(torch.float64)
    total = float(mass.sum())
    without = float(mass[~any_success[inverse]].sum())
    return {
        "mixed_success_group_fraction": float(mixed[multi].double().mean()) if bool(multi.any()) else 0.0,
        "no_success_group_fraction": float((~any_success).double().mean()) if any_success.numel() else 0.0,
        "advantage_share_without_success": without / total if total > 0 else 0.0,
    }


# ---------------------------------------------------------------------------------------------
# REINFORCE++ (Hu 2025, "REINFORCE++: A Simple and Efficient Approach for Aligning LLMs").


def reinforce_pp_advantages(token_rewards: Tensor, mask: Tensor, gamma: float = 1.0) -> tuple[Tensor, Tensor]:
    """REINFORCE++: ``(advantages, returns)``, both ``[B, T]`` and 0 where ``mask`` is 0.

    ``returns = discounted_returns(token_rewards, mask, gamma)`` (``G_t = r_t + gamma G_{t+1}`` over
    sampled tokens, carried across observation gaps); ``advantages = masked_whiten(returns, mask)``
    over the whole batch. Deviation from verl: verl resets the return at every mask-0 token, which
    cuts each turn off from the rewards of later turns (with an outcome-only reward every turn but the
    last gets return 0); here the return flows back through the gaps to the earlier turns.
    """
    returns = discounted_returns(token_rewards, mask, gamma)
    return masked_whiten(returns, mask), returns


def reinforce_pp_baseline_advantages(scores: Tensor, group_index: Tensor, mask: Tensor) -> Tensor:
    """REINFORCE++ with a group baseline ``[B, T]``: ``S_i - mean_g`` on each sampled token, whitened over the batch.

    ``scores`` ``[B]``, ``group_index`` ``[B]``, ``mask`` ``[B, T]``. A group of one (and a group of
    equal scores) contributes 0 before whitening, as in :func:`group_advantages`. Whitening is over
    all sampled tokens of the batch, so longer trajectories weigh more in the mean and variance.
    """
    centred = group_advantages(scores, group_index, normalize_std=False)
    return masked_whiten(broadcast_to_tokens(centred, mask), mask)
