"""Off-policy correction between the rollout engine and the learner: truncated importance sampling.

The engine that sampled a trajectory (SGLang, the transformers engine) computes its token logprobs
(``rollout_logprobs``) with other kernels, precision and batching than the learner, which recomputes
them with the same weights (``old_logprobs``). The two differ, and PPO's ratio is taken against the
learner's. Truncated importance sampling reweights each token (or sequence) by
``w = exp(old_logp - rollout_logp)`` capped at ``C``, bounding the variance the correction adds
(Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy RL Training"; the
sequence-level and masking variants as in verl's rollout correction). Weights are detached: they
scale the gradient, they are not optimised.

Shapes: ``old_logprobs``, ``rollout_logprobs``, ``mask``: ``[B, T]``; ``mask`` 1 exactly on sampled
tokens. Weights are 0 where ``mask`` is 0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from trainer.algos.masked import as_float_mask, masked_mean

__all__ = ["IS_LEVELS", "IS_MODES", "TIS_LEVELS", "logprob_mismatch", "tis_level_for_step", "truncated_is_weights"]

IS_LEVELS = ("token", "sequence")
IS_MODES = ("clamp", "mask")
TIS_LEVELS = ("none", "auto", *IS_LEVELS)  # what a run configures; ``auto`` decides each step


def tis_level_for_step(level: str, mismatch: float, min_mismatch: float) -> str:
    """The level truncated importance sampling runs at in one step: ``none``, ``token`` or ``sequence``.

    ``auto`` is ``token`` when the step's measured mismatch (``mean |old_logp - rollout_logp|`` over its
    sampled tokens, :func:`logprob_mismatch`) exceeds ``min_mismatch``, else ``none``: an engine that
    computes as the learner does (the CPU engine in float32: about 3e-5 nats) trains as if on-policy,
    while one that does not (bf16 kernels on a GPU: about 0.035 nats) has its samples reweighted. Any
    other level is returned as given.
    """
    if level not in TIS_LEVELS:
        raise ValueError(f"unknown importance-sampling level {level!r}; choose one of {', '.join(TIS_LEVELS)}")
    if level != "auto":
        return level
    return "token" if mismatch > min_mismatch else "none"


def logprob_mismatch(a: Tensor, b: Tensor, mask: Tensor) -> Tensor:
    """``mean |a - b|`` over the sampled tokens (0-dim, detached); 0 without sampled tokens. Shapes ``[B, T]``."""
    if a.shape != b.shape:
        raise ValueError(f"logprob tensors of shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be compared")
    return masked_mean((a.detach() - b.detach()).abs(), mask)


def _check_arguments(old: Tensor, rollout: Tensor, mask: Tensor, level: str, mode: str, cap: float) -> None:
    if level not in IS_LEVELS:
        raise ValueError(f"unknown importance-sampling level {level!r}; choose one of {', '.join(IS_LEVELS)}")
    if mode not in IS_MODES:
        raise ValueError(f"unknown importance-sampling mode {mode!r}; choose one of {', '.join(IS_MODES)}")
    if not cap >= 1:
        raise ValueError(f"cap must be >= 1 (weights are kept within [1/cap, cap]), got {cap}")
    if not old.shape == rollout.shape == mask.shape or old.dim() != 2:
        shapes = f"{tuple(old.shape)}, {tuple(rollout.shape)} and {tuple(mask.shape)}"
        raise ValueError(f"old_logprobs, rollout_logprobs and mask must share one shape [B, T], got {shapes}")


def truncated_is_weights(
    old_logprobs: Tensor,
    rollout_logprobs: Tensor,
    mask: Tensor,
    *,
    level: str = "token",
    mode: str = "clamp",
    cap: float = 2.0,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Importance weights ``[B, T]`` of the learner's policy against the engine's, truncated: ``(weights, stats)``.

    ``w_t = exp(clamp(old_logp_t - rollout_logp_t, -20, 20))``, ``C = cap``:

    * ``level="token"``: ``mode="clamp"`` gives ``min(w_t, C)``; ``mode="mask"`` gives ``w_t`` where
      ``1/C <= w_t <= C`` and 0 elsewhere (the token is dropped from the loss).
    * ``level="sequence"``: ``w_seq = exp(clamp(sum_t m_t log w_t, -20, 20))`` (the likelihood ratio of
      the whole sampled part of the row), then ``min(w_seq, C)`` (clamp) or ``w_seq`` / 0 outside
      ``[1/C, C]`` (mask), placed on each sampled token of the row.

    ``stats`` (detached 0-dim tensors): ``is_weight_mean`` (mean weight over sampled tokens),
    ``is_clipped_fraction`` (clamp) or ``is_masked_fraction`` (mask): the fraction of sampled tokens
    (token level) or of rows with a sampled token (sequence level) whose weight was capped or
    dropped; ``logprob_mismatch``: ``mean |old_logp - rollout_logp|`` over sampled tokens.
    """
    _check_arguments(old_logprobs, rollout_logprobs, mask, level, mode, cap)
    old_logprobs, rollout_logprobs = old_logprobs.detach(), rollout_logprobs.detach()
    m = as_float_mask(mask, old_logprobs)
    sampled = m != 0
    zero = torch.zeros((), dtype=m.dtype, device=m.device)
    log_w = torch.where(sampled, torch.clamp(old_logprobs - rollout_logprobs, -20.0, 20.0), zero)  # [B, T]
    if level == "sequence":
        log_w = torch.clamp((log_w * m).sum(dim=-1, keepdim=True), -20.0, 20.0).expand_as(log_w)  # [B, 1] -> [B, T]
    raw = torch.exp(log_w)
    if mode == "clamp":
        outside = raw > cap
        weights = torch.clamp(raw, max=cap)
    else:
        outside = (raw < 1.0 / cap) | (raw > cap)
        weights = torch.where(outside, zero, raw)
    weights = torch.where(sampled, weights, zero)
    outside = outside & sampled
    if level == "token":
        fraction = masked_mean(outside.to(m.dtype), m)
    else:
        rows = sampled.any(dim=-1)
        fraction = masked_mean(outside.any(dim=-1).to(m.dtype), rows)
    stats = {
        "is_weight_mean": masked_mean(weights, m),
        "is_clipped_fraction" if mode == "clamp" else "is_masked_fraction": fraction,
        "logprob_mismatch": logprob_mismatch(old_logprobs, rollout_logprobs, m),
    }
    return weights, stats
