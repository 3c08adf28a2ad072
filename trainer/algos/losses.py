"""Losses for policy-gradient training as pure tensor functions: PPO clip, value loss, KL, entropy.

Shapes: ``B`` trajectories, ``T`` token positions, ``V`` vocabulary. Per-token inputs are ``[B, T]``;
``mask`` ``[B, T]`` (float or bool) is 1 exactly on sampled tokens. Conventions follow
``/work/shared/specs/algorithms.md`` (verl's ``core_algos.py`` and TRL); deviations are stated where
they occur.

Every loss is reduced with :func:`aggregate` and an :class:`Aggregation` whose normalisers are
*global*: counted over the whole mini-batch across micro-batches and data-parallel ranks. Summing the
losses of the micro-batches (and the gradients over ranks) then gives exactly the loss of the
mini-batch, whatever the micro-batch size or number of ranks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from trainer.algos.masked import as_float_mask, masked_mean, masked_sum, masked_var

__all__ = [
    "KL_ESTIMATORS",
    "LOSS_AGG_MODES",
    "Aggregation",
    "aggregate",
    "apply_kl_penalty",
    "entropy_from_logits",
    "explained_variance",
    "kl_estimate",
    "ppo_policy_loss",
    "sft_loss",
    "token_logprobs",
    "value_loss",
]

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
KL_ESTIMATORS = ("k1", "abs", "k2", "k3")


@dataclass(frozen=True)
class Aggregation:
    """How per-token losses ``[B, T]`` become one scalar (``loss_agg_mode``), and over what.

    ``mode``: one of :data:`LOSS_AGG_MODES` (see :func:`aggregate`). ``num_tokens``: sampled tokens in
    the whole mini-batch; ``num_sequences``: trajectories in the whole mini-batch; ``norm_length``:
    the constant length of ``seq-mean-token-sum-norm`` (e.g. the response-token budget). Each counts
    over all micro-batches and all data-parallel ranks; ``None`` means "the tensor's own"
    (``mask.sum()``, ``B``, ``T``), right only when the tensor is the whole mini-batch; the padded
    ``T`` varies with each micro-batch's padding, so ``seq-mean-token-sum-norm`` wants a constant
    ``norm_length``. A normaliser of 0 is allowed only for a batch without sampled tokens (the loss is
    then 0).
    """

    mode: str = "token-mean"
    num_tokens: float | None = None
    num_sequences: float | None = None
    norm_length: float | None = None

    def __post_init__(self) -> None:
        if self.mode not in LOSS_AGG_MODES:
            raise ValueError(f"unknown loss aggregation mode {self.mode!r}; choose one of {', '.join(LOSS_AGG_MODES)}")
        for name in ("num_tokens", "num_sequences"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ValueError(f"Aggregation.{name} must be >= 0 (a count over the whole mini-batch), got {value}")
        if self.norm_length is not None and not self.norm_length > 0:
            raise ValueError(f"Aggregation.norm_length must be > 0 (e.g. the token budget), got {self.norm_length}")


def _normalise(total: Tensor, normaliser: float, mask: Tensor, name: str) -> Tensor:
    """``total / normaliser``; a normaliser of 0 is only consistent with an empty mask, and then gives 0."""
    if normaliser > 0:
        return total / normaliser
    if bool(mask.any()):
        raise ValueError(f"{name} is 0 but the mask selects tokens: pass the count over the whole mini-batch")
    return total * 0.0


def aggregate(values: Tensor, mask: Tensor, agg: Aggregation) -> Tensor:
    """Reduce per-token ``values`` ``[B, T]`` over the sampled tokens (``mask`` ``[B, T]``) to a scalar.

    With ``N`` = ``agg.num_tokens``, ``S`` = ``agg.num_sequences``, ``L`` = ``agg.norm_length`` and
    ``n_b`` the sampled tokens of row ``b``:

    * ``token-mean``: ``sum_{b,t} m v / N`` (every token weighs the same).
    * ``seq-mean-token-sum``: ``sum_b (sum_t m v) / S``.
    * ``seq-mean-token-mean``: ``sum_b (sum_t m v / max(n_b, 1)) / S``; a row without sampled tokens
      contributes 0 (and still counts in ``S``).
    * ``seq-mean-token-sum-norm``: ``sum_{b,t} m v / (S * L)`` (Dr.GRPO, Liu et al. 2025: a constant
      length instead of each response's own, ``1/G sum_i 1/L sum_t``). Deviation from verl, which
      divides by ``L`` only: dividing by ``S`` too keeps the loss scale independent of the batch size.

    Each formula is a sum over rows divided by a global constant, so the results of any split of the
    rows into micro-batches, aggregated with the same global normalisers, add up to the result for the
    whole batch.
    """
    if values.dim() != 2:
        raise ValueError(f"expected per-token values [B, T], got shape {tuple(values.shape)}")
    m = as_float_mask(mask, values)
    batch, length = values.shape
    num_sequences = float(batch) if agg.num_sequences is None else float(agg.num_sequences)
    if agg.mode == "token-mean":
        num_tokens = float(m.sum()) if agg.num_tokens is None else float(agg.num_tokens)
        return _normalise(masked_sum(values, m), num_tokens, m, "num_tokens")
    if agg.mode == "seq-mean-token-sum":
        return _normalise(masked_sum(values, m), num_sequences, m, "num_sequences")
    if agg.mode == "seq-mean-token-mean":
        return _normalise(masked_mean(values, m, dim=-1).sum(), num_sequences, m, "num_sequences")
    norm_length = float(length) if agg.norm_length is None else float(agg.norm_length)
    return _normalise(masked_sum(values, m), num_sequences * norm_length, m, "num_sequences")


def token_logprobs(logits: Tensor, token_ids: Tensor) -> Tensor:
    """``log softmax(logits)[token_ids]`` ``[B, T]`` from ``logits`` ``[B, T, V]`` and ``token_ids`` ``[B, T]``.

    The caller has already divided ``logits`` by the sampling temperature, and aligned them so that
    position ``t``'s logits score ``token_ids[:, t]``. Computed as ``gather(z, id) - logsumexp(z)``, so
    no ``[B, T, V]`` log-softmax is materialised; half-precision logits are upcast to float32 a chunk
    of rows at a time (a bf16 logsumexp would put errors of ~0.03 nats into every ratio). The result
    is float32 (float64 for float64 logits). Any leading shape ``[...]`` works.
    """
    if logits.shape[:-1] != token_ids.shape:
        shapes = f"{tuple(logits.shape)} and {tuple(token_ids.shape)}"
        raise ValueError(f"expected logits [..., V] and token_ids [...], got {shapes}")
    if token_ids.numel() and not (int(token_ids.min()) >= 0 and int(token_ids.max()) < logits.shape[-1]):
        raise ValueError(f"token ids must lie in [0, {logits.shape[-1]}), the vocabulary of the logits")
    return _by_rows(_gathered_logprobs, logits, token_ids.long())


def _gathered_logprobs(z: Tensor, ids: Tensor) -> Tensor:  # [N, V], [N] -> [N]
    return z.gather(-1, ids.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(z, dim=-1)


def _entropy(z: Tensor) -> Tensor:  # [N, V] -> [N]
    probs = torch.softmax(z, dim=-1)
    weighted = torch.where(probs > 0, probs * z, torch.zeros((), dtype=z.dtype, device=z.device))
    return torch.logsumexp(z, dim=-1) - weighted.sum(dim=-1)


_CHUNK_ROWS = 1024  # positions upcast at once from half precision: 1024 x 150k vocab x 4 B = 600 MB


def _by_rows(fn: Callable[..., Tensor], logits: Tensor, *per_position: Tensor) -> Tensor:
    """``fn`` over the logits flattened to rows ``[N, V]`` (extras ``[N]``), reshaped back to ``[...]``."""
    flat = logits.reshape(-1, logits.shape[-1])
    extras = [x.reshape(-1) for x in per_position]
    if logits.dtype in (torch.float32, torch.float64):
        return fn(flat, *extras).reshape(logits.shape[:-1])
    chunks = [
        fn(flat[i : i + _CHUNK_ROWS].float(), *(x[i : i + _CHUNK_ROWS] for x in extras))
        for i in range(0, flat.shape[0], _CHUNK_ROWS)
    ]
    if not chunks:
        return logits.new_zeros(logits.shape[:-1], dtype=torch.float32)
    return torch.cat(chunks).reshape(logits.shape[:-1])


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Entropy of ``softmax(logits)`` over the last axis: ``[..., V] -> [...]``.

    ``H = logsumexp(z) - sum_v softmax(z)_v z_v`` on temperature-scaled logits, in float32 at least
    (half precision upcast a chunk of rows at a time). ``-inf`` logits (tokens banned from sampling)
    contribute 0 rather than ``0 * -inf = NaN``.
    """
    return _by_rows(_entropy, logits)


def ppo_policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    agg: Aggregation,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = 3.0,
    is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO clipped surrogate (Schulman et al. 2017, eq. 7) with dual clip (Ye et al. 2020): ``(loss, stats)``.

    All inputs ``[B, T]``; only ``logprobs`` carries gradient (the others are detached)::

        ratio = exp(clamp(logp - old_logp, -20, 20))
        l1 = -A * ratio;  l2 = -A * clamp(ratio, 1 - clip_low, 1 + clip_high);  l = max(l1, l2)
        l = min(l, -A * dual_clip)  where A < 0  (bounds the loss of a very large ratio on a bad token)
        loss = aggregate(l * is_weights, mask, agg)

    ``clip_high > clip_low`` is DAPO's clip-higher; ``dual_clip=None`` disables the dual clip.
    ``is_weights`` ``[B, T]``: off-policy correction weights (:mod:`trainer.algos.off_policy`).
    ``stats`` (detached 0-dim tensors, masked means over this call's sampled tokens): ``clipfrac``
    (tokens where ``l2 > l1``), ``clipfrac_lower`` (tokens where the dual clip binds), ``approx_kl``
    (``mean(old_logp - logp)``, the k1 estimate of KL(old || new)), ``ratio_mean``, ``ratio_max``
    (0 without sampled tokens).
    """
    if not 0 <= clip_low < 1 or clip_high < 0:
        raise ValueError(f"need 0 <= clip_low < 1 and clip_high >= 0, got clip_low={clip_low}, clip_high={clip_high}")
    if dual_clip is not None and not dual_clip > 1:
        raise ValueError(f"dual_clip must be > 1 (it bounds -A * ratio from above) or None, got {dual_clip}")
    for name, x in (("old_logprobs", old_logprobs), ("advantages", advantages), ("mask", mask)):
        if x.shape != logprobs.shape:
            raise ValueError(f"{name} has shape {tuple(x.shape)} but logprobs has {tuple(logprobs.shape)}")
    old_logprobs, advantages = old_logprobs.detach(), advantages.detach()
    log_ratio = torch.clamp(logprobs - old_logprobs, -20.0, 20.0)
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    losses = torch.maximum(unclipped, clipped)
    dual_active = torch.zeros_like(losses, dtype=torch.bool)
    if dual_clip is not None:
        bound = -advantages * dual_clip
        dual_active = (advantages < 0) & (losses > bound)
        losses = torch.where(advantages < 0, torch.minimum(losses, bound), losses)
    if is_weights is not None:
        losses = losses * is_weights.detach()
    m = as_float_mask(mask, losses)
    with torch.no_grad():
        stats = {
            "clipfrac": masked_mean((clipped > unclipped).to(m.dtype), m),
            "clipfrac_lower": masked_mean(dual_active.to(m.dtype), m),
            "approx_kl": masked_mean(-log_ratio, m),  # k1, see joschu.net/blog/kl-approx.html
            "ratio_mean": masked_mean(ratio, m),
            "ratio_max": torch.where(m != 0, ratio, 0.0).max() if ratio.numel() else ratio.new_zeros(()),
        }
    return aggregate(losses, m, agg), stats


def sft_loss(logprobs: Tensor, mask: Tensor, agg: Aggregation) -> tuple[Tensor, dict[str, Tensor]]:
    """Supervised fine-tuning: the negative log-likelihood of the target tokens, aggregated like the policy loss.

    Args:
        logprobs: ``[B, T]`` log-probabilities of the target tokens under the model being trained.
        mask: ``[B, T]`` 1 on the tokens to learn (a teacher's turns), 0 on prompts and observations.
        agg: normalisers of the whole mini-batch (:class:`Aggregation`); ``token-mean`` gives the usual
            mean NLL per target token.

    Returns the loss and, for logging, ``nll``: the mean NLL per target token of this tensor.
    """
    nll = -logprobs
    return aggregate(nll, mask, agg), {"nll": masked_mean(nll.detach(), mask)}


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    agg: Aggregation,
    *,
    clip_range: float | None = 0.5,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Clipped value loss (as in verl, TRL and OpenAI baselines' PPO2): ``(loss, stats)``; all inputs ``[B, T]``.

    ``vclip = old_V + clamp(V - old_V, -clip_range, clip_range)``;
    ``loss = 0.5 * aggregate(max((V - R)^2, (vclip - R)^2))``; ``clip_range=None``: plain
    ``0.5 * aggregate((V - R)^2)``. Only ``values`` carries gradient. ``stats`` (detached, over this
    call's sampled tokens): ``vf_clipfrac`` (tokens where the clipped error is the larger) and
    ``value_mean``, both token means that a caller may average over micro-batches weighted by their
    sampled tokens. :func:`explained_variance` is not such a mean: compute it once on a whole batch.
    """
    for name, x in (("old_values", old_values), ("returns", returns), ("mask", mask)):
        if x.shape != values.shape:
            raise ValueError(f"{name} has shape {tuple(x.shape)} but values has {tuple(values.shape)}")
    if clip_range is not None and not clip_range > 0:
        raise ValueError(f"clip_range must be > 0, or None for no clipping; got {clip_range}")
    old_values, returns = old_values.detach(), returns.detach()
    errors = (values - returns) ** 2
    clipped_errors = errors
    if clip_range is not None:
        clipped = old_values + torch.clamp(values - old_values, -clip_range, clip_range)
        clipped_errors = (clipped - returns) ** 2
    m = as_float_mask(mask, errors)
    with torch.no_grad():
        stats = {
            "vf_clipfrac": masked_mean((clipped_errors > errors).to(m.dtype), m),
            "value_mean": masked_mean(values, m),
        }
    return 0.5 * aggregate(torch.maximum(errors, clipped_errors), m, agg), stats


def explained_variance(values: Tensor, returns: Tensor, mask: Tensor) -> Tensor:
    """``1 - var(R - V) / var(R)`` over the sampled tokens (0-dim, detached); all inputs ``[B, T]``.

    1: the values predict the returns exactly; 0: no better than their mean; negative: worse. ``NaN``
    when the returns have no variance (undefined; as in CleanRL and Stable-Baselines3), which happens
    within one trajectory of an outcome-only reward with ``gamma = 1``: compute it over a whole batch.
    """
    if not values.shape == returns.shape == mask.shape:
        shapes = f"{tuple(values.shape)}, {tuple(returns.shape)} and {tuple(mask.shape)}"
        raise ValueError(f"values, returns and mask must share one shape, got {shapes}")
    values, returns = values.detach(), returns.detach()
    returns_var = masked_var(returns, mask)
    residual_var = masked_var(returns - values, mask)
    return torch.where(returns_var > 0, 1 - residual_var / returns_var, torch.nan)


def kl_estimate(logprobs: Tensor, ref_logprobs: Tensor, kind: str) -> Tensor:
    """Per-token estimate ``[B, T]`` of KL(policy || reference) from sampled tokens; ``Δ = logp - ref_logp``.

    Schulman, "Approximating KL Divergence" (joschu.net/blog/kl-approx.html); names as in verl:
    ``k1 = Δ`` (unbiased, high variance, can be negative); ``abs = |Δ|``; ``k2 = 0.5 Δ²`` (verl's
    ``mse``); ``k3 = exp(-Δ) + Δ - 1`` (verl's ``low_var_kl``: unbiased, never negative), with ``Δ``
    clamped to [-20, 20] before the exponent and the result to [-10, 10]. Gradient flows to both inputs
    as given; detach ``ref_logprobs`` (or both) as the use requires.
    """
    if kind not in KL_ESTIMATORS:
        raise ValueError(f"unknown KL estimator {kind!r}; choose one of {', '.join(KL_ESTIMATORS)}")
    if logprobs.shape != ref_logprobs.shape:
        raise ValueError(f"logprobs {tuple(logprobs.shape)} and ref_logprobs {tuple(ref_logprobs.shape)} must match")
    delta = logprobs - ref_logprobs
    if kind == "k1":
        return delta
    if kind == "abs":
        return delta.abs()
    if kind == "k2":
        return 0.5 * delta**2
    delta = torch.clamp(delta, -20.0, 20.0)
    return torch.clamp(torch.exp(-delta) + delta - 1.0, -10.0, 10.0)


def apply_kl_penalty(token_rewards: Tensor, kl: Tensor, mask: Tensor, beta: float) -> Tensor:
    """Rewards ``[B, T]`` with a per-token KL penalty: ``r_t - beta * kl_t`` on sampled tokens, ``r_t`` elsewhere.

    ``kl`` ``[B, T]`` (e.g. :func:`kl_estimate`) is detached: the penalty shapes the reward, it does
    not backpropagate (Ziegler et al. 2019, "Fine-Tuning Language Models from Human Preferences").
    """
    if not token_rewards.shape == kl.shape == mask.shape:
        raise ValueError(
            f"token_rewards, kl and mask must share one shape [B, T], got {tuple(token_rewards.shape)}, "
            f"{tuple(kl.shape)} and {tuple(mask.shape)}"
        )
    m = as_float_mask(mask, kl)
    return token_rewards - beta * torch.where(m != 0, kl.detach() * m, 0.0)
