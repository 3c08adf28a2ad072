"""The inference-engine protocol: token ids in, sampled token ids and their logprobs out.

Every engine (``hf``, ``sglang``, ``openai``) is used the same way by the episode loop::

    generation = await engine.generate(input_ids, SamplingParams(max_new_tokens=128), affinity_key="traj-7")

Guarantees every token-level engine keeps (``openai`` is text-level: see its module):

* ``generation.output_ids`` are the sampled tokens exactly as sampled, never re-tokenised; a stop
  token that ended the generation is the last element (and ``finish_reason == "stop"``).
* ``generation.logprobs[i]`` is ``log p(output_ids[i])`` under the *sampling* distribution: the
  model's logits divided by the temperature, then softmax over the whole vocabulary (top-p/top-k
  filtering is applied when drawing but not renormalised into the reported logprob, as in SGLang and
  vLLM). With ``temperature == 0`` (greedy) it is the log-softmax of the unscaled logits. This is the
  quantity a learner recomputes, so the two can be compared token by token.
* Requests are independent and may run concurrently; ``affinity_key`` (one per trajectory) lets an
  engine route the turns of one trajectory to the replica that holds its prefix in cache.
* After ``update_weights`` returns, no cached state computed with the old weights is reused, and
  ``stats().policy_version`` is the new version.

What callers may rely on beyond ``generate`` (the trainer uses nothing an engine does not declare):

* ``weight_sync`` says how new weights reach the engine (:data:`WeightSync`); a trainer picks the
  transport from it and never from the engine's type.
* ``stats_async()`` is ``stats()`` without blocking an event loop (an engine behind an actor answers
  over the network); ``instance_async()`` names the process that holds the weights, and changes when
  that process was rebuilt (and so lost the weights it was given).

Which engines exist, and how each is built from a command's options, is the table in
:mod:`agents.engines.registry`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = [
    "WEIGHT_SYNCS",
    "DiskWeights",
    "DropsPrefixCache",
    "Engine",
    "EngineStats",
    "FinishReason",
    "ForgetsPrefixes",
    "Generation",
    "SamplingParams",
    "WeightSync",
]

FinishReason = Literal["stop", "length", "abort"]
#: ``stop``: a stop token was sampled (it is the last output id). ``length``: ``max_new_tokens`` was
#: reached. ``abort``: the engine gave up on the request (shutdown, weights changed mid-request).

WeightSync = Literal["state_dict", "object_ref", "disk", "shared", "none"]
#: How a trainer gives an engine new weights:
#:
#: * ``state_dict``: ``update_weights(state_dict, version)`` with the tensors in the caller's process.
#: * ``object_ref``: the same call, where ``state_dict`` may also be a Ray object reference to one; it
#:   is resolved where the engine runs, so the weights never pass through the caller.
#: * ``disk``: a Hugging Face model directory the engine's servers read,
#:   ``update_weights_from_disk(path, version)`` (:class:`DiskWeights`): trainer and servers may not
#:   share a process or a host.
#: * ``shared``: the engine computes with the trainer's own tensors (:mod:`trainer.colocated`), so they
#:   changed in place; ``update_weights(None, version)`` only drops the prefix cache and takes the version.
#: * ``none``: the engine cannot load weights (evaluation only); ``update_weights`` raises.
WEIGHT_SYNCS: tuple[WeightSync, ...] = ("state_dict", "object_ref", "disk", "shared", "none")


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one response. ``top_k = 0`` and ``top_p = 1.0`` disable those filters.

    ``stop_token_ids`` end the generation when sampled (the stop token is returned); engines add the
    model's own end-of-sequence ids. ``seed`` makes one request's sampling reproducible on engines
    that support it.
    """

    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 = off), got {self.top_k}")


@dataclass(frozen=True)
class Generation:
    """One response: the sampled ids, their logprobs (same length) and why the generation stopped.

    ``prompt_tokens`` is the length of the request's input; ``cached_tokens`` how many of those were
    served from the engine's prefix cache instead of being prefilled. ``values``: ``None``, or from an
    engine given the learner's value head (the colocated ``hf`` engine, :mod:`trainer.colocated`) the value of
    the state before each output id was sampled, from the same forward that gave its logits (same length).
    """

    output_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: FinishReason
    prompt_tokens: int = 0
    cached_tokens: int = 0
    text: str | None = None  # set by text-level engines (openai), which have no ids
    values: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if len(self.output_ids) != len(self.logprobs):
            raise ValueError(f"{len(self.output_ids)} output ids but {len(self.logprobs)} logprobs")
        if self.values is not None and len(self.values) != len(self.output_ids):
            raise ValueError(f"{len(self.output_ids)} output ids but {len(self.values)} values")


@dataclass
class EngineStats:
    """Counters since the engine started. ``prefix_hit_rate`` = cached prompt tokens / prompt tokens."""

    requests: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    generated_tokens: int = 0
    busy_seconds: float = 0.0  # wall time during which at least one request was in flight
    policy_version: int = 0
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def prefilled_tokens(self) -> int:
        return self.prompt_tokens - self.cached_prompt_tokens

    @property
    def prefix_hit_rate(self) -> float:
        return self.cached_prompt_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def generated_tokens_per_s(self) -> float:
        return self.generated_tokens / self.busy_seconds if self.busy_seconds > 0 else 0.0

    def as_metrics(self, prefix: str = "engine/") -> dict[str, float]:
        metrics = {
            "requests": float(self.requests),
            "prompt_tokens": float(self.prompt_tokens),
            "cached_prompt_tokens": float(self.cached_prompt_tokens),
            "prefilled_tokens": float(self.prefilled_tokens),
            "generated_tokens": float(self.generated_tokens),
            "prefix_hit_rate": self.prefix_hit_rate,
            "generated_tokens_per_s": self.generated_tokens_per_s,
            "policy_version": float(self.policy_version),
            **self.extra,
        }
        return {prefix + k: v for k, v in metrics.items()}


@runtime_checkable
class Engine(Protocol):
    """An asynchronous token-in, token-out inference engine (guarantees in the module docstring)."""

    name: str
    weight_sync: WeightSync

    async def generate(
        self, input_ids: Sequence[int], sampling: SamplingParams, affinity_key: str | None = None
    ) -> Generation:
        """Sample one response to ``input_ids``; raises only on engine failure, never for a long prompt
        that fits the model (a prompt that does not fit raises ``ValueError`` naming the limit)."""
        ...

    async def update_weights(self, state_dict: Mapping[str, Any], policy_version: int) -> None:
        """Load new weights (a full state dict of the served model), drop every cached prefix, set the version."""
        ...

    def stats(self) -> EngineStats:
        """A snapshot of the counters (may block on a remote engine: inside an event loop use ``stats_async``)."""
        ...

    async def stats_async(self) -> EngineStats:
        """The same snapshot, awaited."""
        ...

    async def instance_async(self) -> str:
        """An id of the process holding the weights; a new id means it was rebuilt with its initial weights."""
        ...

    async def close(self) -> None:
        """Release the engine's resources; later calls raise."""
        ...


@runtime_checkable
class DropsPrefixCache(Protocol):
    """What an engine whose prefix cache can be emptied on request adds to :class:`Engine`."""

    async def drop_prefix_cache(self) -> None:
        """Forget every cached prefix and give its memory back; the weights and the policy version stay."""
        ...


@runtime_checkable
class ForgetsPrefixes(Protocol):
    """What an engine that can drop one finished conversation's cached prefixes adds to :class:`Engine`."""

    async def forget_prefix(self, token_ids: Sequence[int]) -> None:
        """Drop the cached prefixes that ``token_ids`` covers (each a prefix of it): a finished episode's own,
        which no later turn extends. Only memory changes: a later request matching them prefills again."""
        ...


@runtime_checkable
class DiskWeights(Protocol):
    """What an engine with ``weight_sync == "disk"`` adds to :class:`Engine`."""

    async def update_weights_from_disk(self, model_path: str | Path, policy_version: int) -> None:
        """Load the Hugging Face model directory ``model_path`` (readable by the engine's servers), drop every
        cached prefix, set the version."""
        ...
