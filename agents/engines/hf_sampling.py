"""Drawing the next token of every running sequence, with the logprob the engine contract defines.

The reported logprob is ``log_softmax(logits / temperature)[token]`` over the whole vocabulary, or
``log_softmax(logits)[token]`` for greedy rows (``temperature == 0``). Top-k and top-p only restrict the
set the token is drawn from; they are not renormalised into the logprob (the same quantity SGLang and
vLLM report, and the one a learner recomputes from a full forward pass).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from agents.engines.base import SamplingParams

__all__ = ["filter_top_k_top_p", "sample_next_tokens"]


def filter_top_k_top_p(scaled_logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Set to ``-inf`` every logit outside the top-k set and outside the smallest top-p nucleus. ``[V] -> [V]``.

    The nucleus is the shortest run of tokens, most probable first, whose probability reaches ``top_p``;
    the most probable token always stays.
    """
    filtered = scaled_logits
    vocab_size = filtered.shape[-1]
    if 0 < top_k < vocab_size:
        kth_largest = torch.topk(filtered, top_k).values[-1]
        filtered = filtered.masked_fill(filtered < kth_largest, float("-inf"))
    if top_p < 1.0:
        sorted_logits, sorted_ids = torch.sort(filtered, descending=True)
        cumulative = sorted_logits.softmax(-1).cumsum(-1)
        # drop a token when the tokens before it already reach top_p
        drop_sorted = (cumulative - sorted_logits.softmax(-1)) >= top_p
        drop_sorted[0] = False
        drop = torch.zeros_like(drop_sorted).scatter(0, sorted_ids, drop_sorted)
        filtered = filtered.masked_fill(drop, float("-inf"))
    return filtered


def sample_next_tokens(
    logits: torch.Tensor, params: Sequence[SamplingParams], generators: Sequence[torch.Generator]
) -> tuple[list[int], list[float]]:
    """Draw one token per row of ``logits`` (``[B, V]``) and return the tokens and their sampling logprobs.

    Row ``i`` uses ``params[i]`` and draws with ``generators[i]`` (so a seeded request's draws do not depend
    on what else is in the batch).
    """
    logits = logits.float().cpu()  # [B, V]; the per-request generators are CPU generators
    temperatures = torch.tensor([p.temperature if p.temperature > 0 else 1.0 for p in params])
    scaled = logits / temperatures[:, None]  # [B, V]
    logprobs = torch.log_softmax(scaled, dim=-1)  # [B, V]
    tokens: list[int] = []
    for row, (param, generator) in enumerate(zip(params, generators, strict=True)):
        if param.temperature == 0:
            tokens.append(int(torch.argmax(logits[row])))
            continue
        filtered = filter_top_k_top_p(scaled[row], param.top_k, param.top_p)
        probs = torch.softmax(filtered, dim=-1)
        tokens.append(int(torch.multinomial(probs, 1, generator=generator)))
    token_index = torch.tensor(tokens)[:, None]
    chosen = logprobs.gather(1, token_index)[:, 0]
    return tokens, chosen.tolist()
