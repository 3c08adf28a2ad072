"""Token logprobs and entropy from the vocabulary head's input, a chunk of positions at a time.

The full logits ``[N, V]`` (V = 49,152 for SmolLM2) of a micro-batch, their float32 copy, the
temperature-scaled copy and the softmax autograd keeps for backward are the learner's largest
tensors. :func:`chunked_token_logprobs` takes the head's input instead (the last hidden state, after
the final norm) and the head's weight, and computes each chunk's logits, uses them and drops them,
forward and backward (the backward recomputes them), so at most one chunk's ``[chunk, V]`` logits
and their gradient exist at once. What autograd keeps is the hidden states, the weight (already
held by the model) and one float per position.

Math (``z = (h W^T + b) / T`` in float32, ``p = softmax(z)``, ``lse = logsumexp(z)``, ``y`` the
target id), the same as :func:`trainer.algos.token_logprobs` and
:func:`trainer.algos.entropy_from_logits` on the full logits::

    logprob = z_y - lse                        d logprob / dz = onehot(y) - p
    H = lse - sum_v p_v z_v                    dH / dz_v = -p_v (log p_v + H)     (log p = z - lse)

and with ``g = dL/dz / T`` (per chunk, ``[chunk, V]``): ``dL/dh = g W``, ``dL/dW = g^T h``,
``dL/db = sum_rows g`` (Bishop, PRML eq. 4.109 for the softmax Jacobian ``p_v (delta_vy - p_y)``).
The logits are made in the dtype of ``h`` and ``W`` (bf16 under mixed precision, like the model's own
head) and upcast to float32 before the temperature, as :func:`trainer.algos.token_logprobs` asks.

With the head frozen (LoRA: ``W`` and ``b`` need no gradient) and a gradient wanted for ``h``, the forward
computes each position's gradient vectors while its chunk's logits exist, so the backward needs no logits::

    d logprob / dh = (W_y - p W) / T            d H / dh = -(p * (log p + H)) W / T

and the backward is ``dL/dh = dL/dlogprob * d logprob/dh + dL/dH * dH/dh``, ``[N, H]`` products and sums: two
``[c, V] x [V, H]`` products a chunk in all (the logits, ``p W``) where recomputing the logits in the backward
takes three. The entropy's vector costs a third product, made only with ``entropy_grad``; a backward through
an entropy made without it recomputes the logits for that part (correct, only slower).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["chunked_token_logprobs"]


def chunked_token_logprobs(
    hidden: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    token_ids: Tensor,
    *,
    temperature: float = 1.0,
    chunk_size: int = 1024,
    entropy: bool = False,
    entropy_grad: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """``log softmax(z)[token_ids]`` ``[N]`` and, with ``entropy``, ``H(softmax(z))`` ``[N]`` (else ``None``),
    where ``z = (hidden @ weight.T + bias) / temperature`` ``[N, V]`` is never materialised whole.

    Args:
        hidden: ``[N, H]`` the vocabulary head's input at the N positions.
        weight: ``[V, H]`` the head's weight; ``bias`` ``[V]`` or ``None``.
        token_ids: ``[N]`` the id that each position's distribution scores.
        temperature: the sampling temperature (exact division, as at sampling).
        chunk_size: positions whose logits exist at once (>= 1).
        entropy: also return the entropy; its gradient flows back only where the caller uses it.
        entropy_grad: the caller will differentiate the entropy (an entropy bonus): with a frozen head its
            gradient vectors are made in the forward too (module docstring). Without it the entropy's
            gradient is still right, from recomputed logits.

    Gradients reach ``hidden``, ``weight`` and ``bias`` wherever they require grad. The results are float32
    (float64 for float64 inputs).
    """
    if hidden.dim() != 2 or weight.dim() != 2 or hidden.shape[1] != weight.shape[1]:
        raise ValueError(f"expected hidden [N, H] and weight [V, H], got {tuple(hidden.shape)}, {tuple(weight.shape)}")
    if token_ids.shape != hidden.shape[:1]:
        raise ValueError(f"expected token_ids [N] = [{hidden.shape[0]}], got {tuple(token_ids.shape)}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if token_ids.numel() and not (int(token_ids.min()) >= 0 and int(token_ids.max()) < weight.shape[0]):
        raise ValueError(f"token ids must lie in [0, {weight.shape[0]}), the vocabulary of the head")
    early = _gradients_in_forward(hidden, weight, bias)
    logprobs, entropies = _ChunkedLogprobs.apply(
        hidden,
        weight,
        bias,
        token_ids.long(),
        float(temperature),
        int(chunk_size),
        bool(entropy),
        (early, early and bool(entropy) and entropy_grad),
    )
    return logprobs, (entropies if entropy else None)


def _gradients_in_forward(hidden: Tensor, weight: Tensor, bias: Tensor | None) -> bool:
    """Whether the forward makes the hidden states' gradient vectors: a backward may follow, and it needs no
    gradient for the head (whose gradient would need each position's probabilities again)."""
    frozen_head = not weight.requires_grad and (bias is None or not bias.requires_grad)
    return torch.is_grad_enabled() and hidden.requires_grad and frozen_head


def _scaled_logits(hidden: Tensor, weight: Tensor, bias: Tensor | None, temperature: float) -> Tensor:
    """``[c, H] -> [c, V]`` float32 (at least) logits divided by the temperature."""
    logits = torch.nn.functional.linear(hidden, weight, bias)
    return logits.to(torch.promote_types(logits.dtype, torch.float32)) / temperature


class _ChunkedLogprobs(torch.autograd.Function):
    """Forward: per chunk, logits -> (logprob of the target, logsumexp, entropy); keeps ``lse`` and ``H`` ``[N]``,
    and with a frozen head the gradient vectors of the module docstring ``[N, H]``.
    Backward: those vectors scaled and summed; for what they do not cover, the logits again per chunk."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, token_ids, temperature, chunk_size, with_entropy, early):
        early_logprob, early_entropy = early
        n = hidden.shape[0]
        dtype = torch.promote_types(hidden.dtype, torch.float32)
        logprobs = hidden.new_empty(n, dtype=dtype)
        lse = hidden.new_empty(n, dtype=dtype)
        entropies = hidden.new_zeros(n, dtype=dtype)
        d_logprob = hidden.new_empty(n, hidden.shape[1], dtype=dtype) if early_logprob else None
        d_entropy = hidden.new_empty(n, hidden.shape[1], dtype=dtype) if early_entropy else None
        for start in range(0, n, chunk_size):
            rows = slice(start, min(start + chunk_size, n))
            z = _scaled_logits(hidden[rows], weight, bias, temperature)  # [c, V]
            lse[rows] = torch.logsumexp(z, dim=-1)
            logprobs[rows] = z.gather(-1, token_ids[rows, None]).squeeze(-1) - lse[rows]
            p = torch.softmax(z, dim=-1) if with_entropy or early_logprob else None
            if with_entropy:
                entropies[rows] = lse[rows] - (p * z).sum(dim=-1)
            if early_logprob:  # (W_y - p W) / T
                expected = p.to(weight.dtype) @ weight
                d_logprob[rows] = (weight[token_ids[rows]].to(dtype) - expected.to(dtype)) / temperature
            if early_entropy:  # -(p (log p + H)) W / T, with log p + H = z - (lse - H)
                q = z.sub_((lse[rows] - entropies[rows])[:, None]).mul_(p)
                d_entropy[rows] = (q.to(weight.dtype) @ weight).to(dtype) / -temperature
            del z, p
        ctx.save_for_backward(hidden, weight, bias, token_ids, lse, entropies, d_logprob, d_entropy)
        ctx.temperature, ctx.chunk_size = temperature, chunk_size
        ctx.set_materialize_grads(False)
        return logprobs, entropies

    @staticmethod
    def backward(ctx, grad_logprobs, grad_entropies):
        hidden, weight, bias, token_ids, lse, entropies, d_logprob, d_entropy = ctx.saved_tensors
        grad_hidden = None  # from the vectors the forward made
        for grad, vectors in ((grad_logprobs, d_logprob), (grad_entropies, d_entropy)):
            if grad is not None and vectors is not None:
                part = grad[:, None] * vectors
                grad_hidden = part if grad_hidden is None else grad_hidden.add_(part)
        grad_hidden = None if grad_hidden is None else grad_hidden.to(hidden.dtype)
        rest_logprobs = grad_logprobs if d_logprob is None else None  # what the vectors do not cover
        rest_entropies = grad_entropies if d_entropy is None else None
        if rest_logprobs is None and rest_entropies is None:
            return grad_hidden, None, None, None, None, None, None, None
        grads = _recomputed_grads(ctx, hidden, weight, bias, token_ids, lse, entropies, rest_logprobs, rest_entropies)
        if grad_hidden is not None:  # only made where hidden wants a gradient, so grads[0] exists
            grads[0].add_(grad_hidden)
        return (*grads, None, None, None, None, None)


def _recomputed_grads(ctx, hidden, weight, bias, token_ids, lse, entropies, grad_logprobs, grad_entropies):
    """The gradients of the module docstring from each chunk's logits made again: ``[hidden, weight, bias]``."""
    wants_hidden, wants_weight, wants_bias = ctx.needs_input_grad[:3]
    grad_hidden = torch.zeros_like(hidden) if wants_hidden else None
    grad_weight = torch.zeros_like(weight, dtype=lse.dtype) if wants_weight else None
    grad_bias = torch.zeros_like(bias, dtype=lse.dtype) if wants_bias else None
    for start in range(0, hidden.shape[0], ctx.chunk_size):
        rows = slice(start, min(start + ctx.chunk_size, hidden.shape[0]))
        z = _scaled_logits(hidden[rows], weight, bias, ctx.temperature)
        log_p = z.sub_(lse[rows, None])  # [c, V], in place: z is not needed again
        p = log_p.exp()
        grad_z = torch.zeros_like(p)
        if grad_logprobs is not None:  # onehot(y) - p, scaled by the incoming gradient
            grad_z.addcmul_(p, grad_logprobs[rows, None], value=-1.0)
            grad_z.scatter_add_(-1, token_ids[rows, None], grad_logprobs[rows, None].to(grad_z.dtype))
        if grad_entropies is not None:  # -p (log p + H)
            grad_z.sub_(p * (log_p + entropies[rows, None]) * grad_entropies[rows, None])
        del p, log_p
        grad_logits = grad_z.div_(ctx.temperature).to(weight.dtype)  # [c, V]
        if wants_hidden:
            grad_hidden[rows] = grad_logits @ weight
        if wants_weight:
            grad_weight.addmm_(grad_logits.t().to(lse.dtype), hidden[rows].to(lse.dtype))
        if wants_bias:
            grad_bias.add_(grad_logits.sum(dim=0).to(lse.dtype))
    grad_weight = None if grad_weight is None else grad_weight.to(weight.dtype)
    grad_bias = None if grad_bias is None else grad_bias.to(bias.dtype)
    return [grad_hidden, grad_weight, grad_bias]
