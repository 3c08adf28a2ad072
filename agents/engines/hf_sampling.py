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

Counter streams (:class:`CounterStream`, ``HfEngine(sampling_noise="counter")``): a torch generator per row
means one ``exponential_`` launch per sampled row per step. A counter stream is a request's seed and its number
of draws; the noise of every sampled row is one batched computation, ``q = -log(u)`` with ``u`` from splitmix64
(Steele, Lea and Flood, 2014) of ``key(seed, draw) + v * 0x9E3779B97F4A7C15`` for vocabulary entry ``v``, in
wrapping int64 arithmetic. A seed
still draws the same tokens whatever else is in the batch; the integer hash is the same on every device, so CPU
and CUDA draws agree except where float rounding of ``probs / q`` breaks a near-tie differently. The tokens differ
from a torch generator's for the same seed. Measured on an H100 (docs/gpu.md), the one computation over
``[rows, vocabulary]`` int64 costs more device time than the generators' launches cost host time once those
overlap the decode step, so the generators stay the engine's default.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch

from agents.engines.base import SamplingParams

__all__ = [
    "CounterStream",
    "counter_noise",
    "filter_rows",
    "filter_top_k_top_p",
    "generator_noise",
    "sample_next_tokens",
]

_MASK64 = 2**64 - 1
_GOLDEN = 0x9E3779B97F4A7C15  # splitmix64's increment
_MIX1, _MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _signed(value: int) -> int:
    """A 64-bit pattern as the int64 torch stores."""
    return value - 2**64 if value >= 2**63 else value


def splitmix64(value: int) -> int:
    """splitmix64's output function of the state ``value`` (Python ints, modulo 2**64)."""
    z = (value + _GOLDEN) & _MASK64
    z = ((z ^ (z >> 30)) * _MIX1) & _MASK64
    z = ((z ^ (z >> 27)) * _MIX2) & _MASK64
    return z ^ (z >> 31)


def _small_tensor(values: list, device: torch.device | str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``values`` on ``device``: on CUDA through pinned memory without waiting for the device (a plain copy waits for
    the decode step still running there, so the sampling ops could not be queued behind it)."""
    host = torch.tensor(values, dtype=dtype)
    if torch.device(device).type != "cuda":
        return host
    return host.pin_memory().to(device, non_blocking=True)


def _shift_right(x: torch.Tensor, bits: int) -> torch.Tensor:
    """A logical right shift of int64 bit patterns (torch's ``>>`` is arithmetic)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def counter_noise(keys: Sequence[int], vocab_size: int, device: torch.device | str) -> torch.Tensor:
    """``[len(keys), vocab_size]`` float32 draws of Exp(1), one batched computation: entry ``[r, v]`` is ``-log(u)``,
    ``u`` in (0, 1) the top 53 bits of splitmix64 of the state ``keys[r] + (v + 1) * golden``, plus a half."""
    key = _small_tensor([_signed(k & _MASK64) for k in keys], device, torch.int64)[:, None]
    x = key + torch.arange(1, vocab_size + 1, dtype=torch.int64, device=device)[None, :] * _signed(_GOLDEN)
    x = (x ^ _shift_right(x, 30)) * _signed(_MIX1)  # int64 products wrap: arithmetic modulo 2**64
    x = (x ^ _shift_right(x, 27)) * _signed(_MIX2)
    x = x ^ _shift_right(x, 31)
    uniform = (_shift_right(x, 11).double() + 0.5) * 2.0**-53
    return (-torch.log(uniform)).float()


@functools.cache
def _noise_pool(pid: int, threads: int) -> ThreadPoolExecutor:
    """The noise threads of process ``pid`` (a forked child has none of its parent's threads: it makes its own)."""
    return ThreadPoolExecutor(threads, thread_name_prefix="turngym-noise")


def generator_noise(generators: Sequence[torch.Generator], vocab_size: int, device: torch.device) -> torch.Tensor:
    """``[len(generators), vocab_size]`` draws of Exp(1), row ``i`` from ``generators[i]``.

    A generator draws serially, so on CPU the rows are split over as many threads as torch computes with (the
    draws release the interpreter lock): each row's values are the same whichever thread draws them.
    """
    noise = torch.empty((len(generators), vocab_size), device=device)
    threads = min(torch.get_num_threads(), len(generators))

    def draw(first: int, stride: int) -> None:
        for row in range(first, len(generators), stride):
            noise[row].exponential_(generator=generators[row])

    if torch.device(device).type != "cpu" or threads < 2:
        draw(0, 1)
        return noise
    pool = _noise_pool(os.getpid(), threads)
    for done in [pool.submit(draw, first, threads) for first in range(threads)]:
        done.result()
    return noise


@dataclass
class CounterStream:
    """A request's noise source: its seed and how many tokens it has drawn (:func:`counter_noise`)."""

    seed: int
    draws: int = 0

    def next_key(self) -> int:
        """The key of the next draw (the stream advances)."""
        key = splitmix64(splitmix64(self.seed & _MASK64) ^ self.draws)
        self.draws += 1
        return key


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
    logits: torch.Tensor,
    params: Sequence[SamplingParams],
    generators: Sequence[torch.Generator] | Sequence[CounterStream],
) -> tuple[list[int], list[float]]:
    """Draw one token per row of ``logits`` (``[B, V]``) and return the tokens and their sampling logprobs.

    Row ``i`` uses ``params[i]`` and draws with ``generators[i]``: every row a torch generator on ``logits.device``,
    or every row a :class:`CounterStream` (one batched noise computation). Either way a seeded request's draws do
    not depend on what else is in the batch.
    """
    logits = logits.float()  # [B, V]
    device = logits.device
    temperatures = _small_tensor([p.temperature if p.temperature > 0 else 1.0 for p in params], device)
    scaled = logits / temperatures[:, None]  # [B, V]
    logprobs = torch.log_softmax(scaled, dim=-1)  # [B, V]
    sampled = [row for row, param in enumerate(params) if param.temperature > 0]
    every_row = len(sampled) == len(params)  # the common case: no index ops
    tokens = None if every_row else logits.argmax(-1)  # [B]: the greedy rows' tokens
    if sampled:
        rows = None if every_row else _small_tensor(sampled, device)
        chosen_scaled = scaled if every_row else scaled[rows]
        filtered = filter_rows(chosen_scaled, [params[r].top_k for r in sampled], [params[r].top_p for r in sampled])
        probs = torch.softmax(filtered, dim=-1)  # [S, V]
        vocab_size = logits.shape[1]
        if isinstance(generators[sampled[0]], CounterStream):
            noise = counter_noise([generators[r].next_key() for r in sampled], vocab_size, device)
        else:
            noise = generator_noise([generators[r] for r in sampled], vocab_size, device)
        drawn = (probs / noise).argmax(-1)
        if every_row:
            tokens = drawn
        else:
            tokens[rows] = drawn
    chosen = logprobs.gather(1, tokens[:, None])[:, 0]  # [B]
    tokens_and_logprobs = torch.stack([tokens.double(), chosen.double()]).cpu()  # one host transfer
    return [int(t) for t in tokens_and_logprobs[0].tolist()], tokens_and_logprobs[1].tolist()
