"""Drawing the next token of every running sequence, with the logprob the engine contract defines.

The reported logprob is ``log_softmax(logits / temperature)[token]`` over the whole vocabulary, or
``log_softmax(logits)[token]`` for greedy rows (``temperature == 0``). Top-k and top-p only restrict the
set the token is drawn from; they are not renormalised into the logprob (the same quantity SGLang and
vLLM report, and the one a learner recomputes from a full forward pass).

The whole batch is one set of tensor ops on the logits' device, and one transfer of tokens and logprobs to
the host. A sampled row draws ``token = argmax(probs / q)`` with ``q ~ Exp(1)`` (one value per vocabulary
entry) from the row's own generator: the exponential-race form of the Gumbel-max trick, and exactly what
``torch.multinomial(probs, 1, generator=g)`` computes, so on CPU a seed draws the same tokens as the
per-row ``multinomial`` this module used before. The generators live on the logits' device (a CUDA
generator per request on CUDA): a seed still draws the same tokens whatever else is in the batch, but on
CUDA they differ from the CPU draws for that seed (before, CUDA logits were sampled on the CPU).
Greedy rows draw nothing, so their generators do not advance.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from agents.engines.base import SamplingParams

__all__ = ["filter_rows", "filter_top_k_top_p", "sample_next_tokens"]


def filter_top_k_top_p(scaled_logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Set to ``-inf`` every logit outside the top-k set and outside the smallest top-p nucleus. ``[V] -> [V]``.

    The nucleus is the shortest run of tokens, most probable first, whose probability reaches ``top_p``;
    the most probable token always stays.
    """
    return filter_rows(scaled_logits[None], [top_k], [top_p])[0]


def filter_rows(scaled_logits: torch.Tensor, top_k: Sequence[int], top_p: Sequence[float]) -> torch.Tensor:
    """:func:`filter_top_k_top_p` for every row at once, with row ``i``'s ``top_k[i]`` and ``top_p[i]``. ``[B, V]``."""
    filtered = scaled_logits
    vocab_size = filtered.shape[-1]
    device = filtered.device
    restricted = [0 < k < vocab_size for k in top_k]
    if any(restricted):
        largest_k = max(k for k, r in zip(top_k, restricted, strict=True) if r)
        kth_index = torch.tensor([k - 1 if r else 0 for k, r in zip(top_k, restricted, strict=True)], device=device)
        kth_largest = torch.topk(filtered, largest_k).values.gather(1, kth_index[:, None])  # [B, 1]
        kth_largest = kth_largest.masked_fill(~torch.tensor(restricted, device=device)[:, None], float("-inf"))
        filtered = filtered.masked_fill(filtered < kth_largest, float("-inf"))
    if any(p < 1.0 for p in top_p):
        p = torch.tensor(list(top_p), dtype=filtered.dtype, device=device)[:, None]  # [B, 1]
        sorted_logits, sorted_ids = torch.sort(filtered, dim=-1, descending=True)
        sorted_probs = sorted_logits.softmax(-1)
        # drop a token when the tokens before it already reach top_p (rows with top_p == 1 drop nothing, even
        # where the cumulative sum rounds up to 1 before the end)
        drop_sorted = ((sorted_probs.cumsum(-1) - sorted_probs) >= p) & (p < 1.0)
        drop_sorted[:, 0] = False
        drop = torch.zeros_like(drop_sorted).scatter(1, sorted_ids, drop_sorted)
        filtered = filtered.masked_fill(drop, float("-inf"))
    return filtered


def sample_next_tokens(
    logits: torch.Tensor, params: Sequence[SamplingParams], generators: Sequence[torch.Generator]
) -> tuple[list[int], list[float]]:
    """Draw one token per row of ``logits`` (``[B, V]``) and return the tokens and their sampling logprobs.

    Row ``i`` uses ``params[i]`` and draws with ``generators[i]``, a generator on ``logits.device`` (so a seeded
    request's draws do not depend on what else is in the batch).
    """
    logits = logits.float()  # [B, V]
    device = logits.device
    temperatures = torch.tensor([p.temperature if p.temperature > 0 else 1.0 for p in params], device=device)
    scaled = logits / temperatures[:, None]  # [B, V]
    logprobs = torch.log_softmax(scaled, dim=-1)  # [B, V]
    tokens = logits.argmax(-1)  # [B]: the greedy rows' tokens
    sampled = [row for row, param in enumerate(params) if param.temperature > 0]
    if sampled:
        rows = torch.tensor(sampled, device=device)
        filtered = filter_rows(scaled[rows], [params[r].top_k for r in sampled], [params[r].top_p for r in sampled])
        probs = torch.softmax(filtered, dim=-1)  # [S, V]
        vocab_size = logits.shape[1]
        noise = torch.stack(
            [torch.empty(vocab_size, device=device).exponential_(generator=generators[r]) for r in sampled]
        )  # [S, V], q ~ Exp(1) from each row's generator
        tokens[rows] = (probs / noise).argmax(-1)
    chosen = logprobs.gather(1, tokens[:, None])[:, 0]  # [B]
    tokens_and_logprobs = torch.stack([tokens.double(), chosen.double()]).cpu()  # one host transfer
    return [int(t) for t in tokens_and_logprobs[0].tolist()], tokens_and_logprobs[1].tolist()
