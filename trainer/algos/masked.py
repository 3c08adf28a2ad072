"""Statistics over the sampled tokens of a batch: masked sum, mean, variance and whitening.

Shapes: ``x`` and ``mask`` are ``[B, T]`` (any matching shapes work); ``mask`` is a float or bool
tensor with 1 exactly on the entries that count (sampled tokens) and 0 elsewhere (prompt,
observations, padding). Entries where ``mask`` is 0 never influence a result, even when they hold
``inf`` or ``NaN``.

Empty selections have a defined outcome instead of a division by zero: the mean of no entries is 0
and the variance of fewer than two entries is 0, so whitening a batch with one sampled token gives 0
(no spread, no signal) rather than ``NaN``. verl raises in these cases; a well-defined 0 lets a
degenerate batch pass through a training step without poisoning the optimizer state.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["as_float_mask", "masked_mean", "masked_sum", "masked_var", "masked_whiten"]


def as_float_mask(mask: Tensor, like: Tensor) -> Tensor:
    """``mask`` as 0/1 entries of ``like``'s floating dtype and device, checked to have ``like``'s shape."""
    if mask.shape != like.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} != values {tuple(like.shape)}; make them match")
    dtype = like.dtype if like.is_floating_point() else torch.get_default_dtype()
    return mask.to(device=like.device, dtype=dtype)


def masked_sum(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """``sum(x * mask)`` over ``dim`` (all entries when ``None``); masked-out ``inf``/``NaN`` are ignored."""
    m = as_float_mask(mask, x)
    selected = torch.where(m != 0, x * m, torch.zeros((), dtype=m.dtype, device=x.device))
    return selected.sum() if dim is None else selected.sum(dim=dim)


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """``sum(x * mask) / sum(mask)`` over ``dim`` (all entries when ``None``); 0 where ``mask`` selects nothing."""
    m = as_float_mask(mask, x)
    count = m.sum() if dim is None else m.sum(dim=dim)
    return masked_sum(x, m, dim) / torch.where(count > 0, count, torch.ones_like(count))


def masked_var(x: Tensor, mask: Tensor, unbiased: bool = True) -> Tensor:
    """Variance of the masked entries of ``x`` (a scalar over all of them).

    ``var = sum(mask * (x - mean)^2) / n`` with ``n = sum(mask)``, times ``n / (n - 1)`` (Bessel's
    correction) when ``unbiased``. Fewer than two entries (one for the biased variance) give 0.
    """
    m = as_float_mask(mask, x)
    mean = masked_mean(x, m)
    variance = masked_mean((x - mean) ** 2, m)
    if not unbiased:
        return variance
    n = m.sum()
    if n <= 1:
        return torch.zeros_like(variance)
    return variance * n / (n - 1)


def masked_whiten(x: Tensor, mask: Tensor, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """Normalise the masked entries of ``x`` to mean 0 and variance 1; 0 where ``mask`` is 0.

    ``(x - mean) * rsqrt(var + eps)`` with the masked mean and the unbiased masked variance over the
    whole tensor (verl's ``masked_whiten``, TRL's ``whiten``). With ``shift_mean=False`` the mean is
    added back afterwards (``... + mean``, the same convention as verl and TRL): the spread is
    rescaled, the location kept.
    """
    m = as_float_mask(mask, x)
    mean = masked_mean(x, m)
    whitened = (x - mean) * torch.rsqrt(masked_var(x, m, unbiased=True) + eps)
    if not shift_mean:
        whitened = whitened + mean
    return torch.where(m != 0, whitened, torch.zeros((), dtype=whitened.dtype, device=x.device))
