"""What a learner rank is built from: the typed specs, and the model surgery a rank applies.

The specs are plain frozen dataclasses (they cross the process boundary to the Ray actors); the
helpers prepare a Hugging Face model for FSDP2 (which blocks to shard, dropout off), add LoRA
adapters, merge them back for the engine, and save and restore a rank's RNG state.
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

__all__ = [
    "ROLES",
    "LoraSpec",
    "OptimizerSpec",
    "StepStats",
    "WorkerSpec",
    "base_model_name",
    "combine_stats",
    "merge_lora_state_dict",
    "merged_lora_weight",
]

ROLES = ("actor", "critic", "reference")


@dataclass(frozen=True)
class OptimizerSpec:
    """AdamW with linear warm-up, then a constant or cosine schedule (``min_lr_ratio`` at ``total_steps``)."""

    lr: float = 1e-6
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.01
    eps: float = 1e-8
    grad_clip: float = 1.0
    warmup_steps: int = 0
    total_steps: int = 1
    schedule: str = "constant"
    min_lr_ratio: float = 0.0

    def lr_factor(self, step: int) -> float:
        """The learning-rate multiplier for optimizer step ``step`` (0-based)."""
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        if self.schedule == "constant":
            return 1.0
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps))
        return self.min_lr_ratio + (1 - self.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


@dataclass(frozen=True)
class LoraSpec:
    """LoRA adapters (peft) on every linear layer of the decoder; ``rank`` 0 trains every weight.

    ``layers``: only the last ``layers`` decoder layers carry adapters (``None``: every layer; as many as the model
    has or more: every layer too). The layers below then train nothing, so the backward stops above them.
    """

    rank: int = 0
    alpha: float = 16.0
    dropout: float = 0.0
    target_modules: str | tuple[str, ...] = "all-linear"
    layers: int | None = None


@dataclass(frozen=True)
class WorkerSpec:
    """What one rank builds. ``model`` is a directory ``from_pretrained`` reads."""

    role: str
    model: str
    optimizer: OptimizerSpec | None = None
    lora: LoraSpec = field(default_factory=LoraSpec)
    device: str = "cpu"
    mixed_precision: bool = False  # bf16 compute, fp32 master weights and gradient reduction
    gradient_checkpointing: bool = False
    checkpoint_layers: int | None = None  # with gradient_checkpointing: the first N decoder layers; None: all
    share_prefix: bool = True  # the rows' common leading tokens run once per call (learner_worker's docstring)
    # Positions whose [chunk, vocabulary] logits exist at once (trainer.algos.chunked_token_logprobs); 0: all at once.
    logits_chunk_size: int = 1024
    # An actor with a value head: a zero-initialised Linear(hidden, 1) on the actor's last hidden state, detached
    # (the value loss trains the head alone), with its own AdamW: the critic without a second model.
    value_head: OptimizerSpec | None = None
    num_threads: int | None = None
    # Allocations of this many MiB or more get their own mapping (agents.memory.map_large_allocations); 0: glibc's.
    mmap_threshold_mib: float = 0.0
    seed: int = 0


@dataclass
class StepStats:
    """One rank's statistics of one optimizer step, as they cross back to the driver.

    ``token_weighted``: per-micro-batch means (entropy, clip fraction, KL, ...) times the micro-batch's
    sampled tokens, summed; ``losses``: each micro-batch's loss, already a fraction of the mini-batch's
    (global normalisers), summed; ``grad_norm`` and ``lr`` of the step, and ``per_step`` other figures of the
    step (the same on every rank).
    """

    tokens: float = 0.0
    token_weighted: dict[str, float] = field(default_factory=dict)
    losses: dict[str, float] = field(default_factory=dict)
    grad_norm: float = 0.0
    lr: float = 0.0
    per_step: dict[str, float] = field(default_factory=dict)  # one value per step, the same on every rank

    def add(self, means: dict[str, Any], tokens: float, losses: dict[str, Any]) -> None:
        """Account one micro-batch: its per-token means over ``tokens`` sampled tokens, and its losses."""
        self.tokens += tokens
        for name, value in means.items():
            self.token_weighted[name] = self.token_weighted.get(name, 0.0) + float(value) * tokens
        for name, value in losses.items():
            self.losses[name] = self.losses.get(name, 0.0) + float(value)


def combine_stats(per_rank: list[StepStats]) -> dict[str, float]:
    """One step's metrics from every rank's :class:`StepStats`: token-weighted means, summed losses, the step's
    grad norm and lr, and ``tokens`` (the sampled tokens of the whole mini-batch)."""
    tokens = sum(stats.tokens for stats in per_rank)
    combined = {
        name: sum(s.token_weighted[name] for s in per_rank) / max(tokens, 1.0) for name in per_rank[0].token_weighted
    }
    combined.update({name: sum(s.losses[name] for s in per_rank) for name in per_rank[0].losses})
    combined.update(per_rank[0].per_step)
    combined.update(grad_norm=per_rank[0].grad_norm, lr=per_rank[0].lr, tokens=tokens)
    return combined


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The repeated blocks to shard one by one: the classes Hugging Face lists in ``_no_split_modules``.

    Matched along each module's class hierarchy, so a layer still counts after ``fully_shard`` (which gives it a
    subclass of its own, ``FSDPLlamaDecoderLayer``)."""
    names: set[str] = set()
    for module in model.modules():
        names.update(getattr(module, "_no_split_modules", None) or [])
    return [m for m in model.modules() if any(cls.__name__ in names for cls in type(m).__mro__)]


def first_trained_layer(model: nn.Module) -> int:
    """The index of ``model``'s first decoder layer with a trained parameter: every weight that computes its input
    (the embeddings, the layers below) is frozen. 0 when the embeddings or the first layer train; the number of
    layers when none trains."""
    if any(p.requires_grad for p in model.get_input_embeddings().parameters()):
        return 0
    layers = decoder_layers(model)
    return next((i for i, layer in enumerate(layers) if any(p.requires_grad for p in layer.parameters())), len(layers))


def disable_dropout(model: nn.Module) -> None:
    """PPO's ratio needs the same function at rollout and update: dropout off."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0


def enable_activation_checkpointing(model: nn.Module, layers: int | None = None) -> None:
    """Recompute ``model``'s activations in the backward, in its first ``layers`` decoder layers (``None``: all):
    transformers 5's ``activation_checkpointing_enable`` (or the ``gradient_checkpointing_enable`` it renamed, the
    only name before 5), then the flag each layer reads at its forward turned off again after the first ``layers``.
    """
    enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    enable()
    if layers is not None:
        for layer in decoder_layers(model)[layers:]:
            layer.gradient_checkpointing = False


#: What peft 0.21 makes transformers 5 warn about when it wraps a model: its own use of a renamed property.
PEFT_DEPRECATION_MESSAGE = r"`is_gradient_checkpointing` is deprecated"


def with_lora(model: nn.Module, spec: LoraSpec) -> nn.Module:
    """``model`` wrapped with peft's LoRA adapters as ``spec`` says.

    ``get_peft_model`` reads ``model.is_gradient_checkpointing``, which transformers 5 deprecates with a
    FutureWarning (raised in ``transformers.modeling_utils``): a note to peft's authors, nothing a user can act
    on. Only that message is filtered, only while the model is wrapped.
    """
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as exc:
        raise ImportError('LoRA needs peft: pip install "turngym[lora]"') from exc
    targets = spec.target_modules if isinstance(spec.target_modules, str) else list(spec.target_modules)
    if spec.layers is not None:
        targets = top_layer_targets(model, spec.layers, targets)
    config = LoraConfig(r=spec.rank, lora_alpha=spec.alpha, lora_dropout=spec.dropout, target_modules=targets)
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=PEFT_DEPRECATION_MESSAGE, category=FutureWarning, module=r"transformers\.modeling_utils"
        )
        return get_peft_model(model, config)


def top_layer_targets(model: nn.Module, count: int, targets: str | list[str]) -> list[str]:
    """The full names of the linear modules that ``targets`` (``"all-linear"`` or module names) picks in the last
    ``count`` decoder layers of ``model``: peft's ``layers_to_transform`` refuses ``"all-linear"``, and a list of
    full names says the same thing for any architecture whose layers :func:`decoder_layers` finds."""
    if count < 1:
        raise ValueError(f"LoRA on the last {count} decoder layers: the count must be at least 1")
    layers = decoder_layers(model)
    if not layers:
        name = type(model).__name__
        raise ValueError(f"{name} lists no decoder layers (_no_split_modules): cannot choose the last {count}")
    chosen = {id(layer) for layer in layers[-count:]}
    names: list[str] = []
    for layer_name, layer in model.named_modules():
        if id(layer) not in chosen:
            continue
        for name, module in layer.named_modules():
            if not isinstance(module, nn.Linear) or not name:
                continue
            if targets == "all-linear" or name.rsplit(".", 1)[-1] in targets:
                names.append(f"{layer_name}.{name}")
    if not names:
        raise ValueError(f"no linear module named {targets} in the last {count} decoder layers")
    return names


def merge_lora_state_dict(state: dict[str, Tensor], spec: LoraSpec) -> dict[str, Tensor]:
    """A peft model's full state dict as the base model's: ``W + (B @ A) * alpha / rank`` per adapted layer."""
    merged: dict[str, Tensor] = {}
    for name, tensor in state.items():
        base = base_model_name(name)
        if base is not None:
            merged[base] = merged_lora_weight(name, tensor, state.__getitem__, spec)
    return merged


def base_model_name(name: str) -> str | None:
    """The base model's name of a peft model's state-dict entry; ``None`` for an adapter's own weight."""
    if ".lora_" in name:
        return None
    prefix = "base_model.model."
    return (name[len(prefix) :] if name.startswith(prefix) else name).replace(".base_layer.", ".")


def merged_lora_weight(name: str, tensor: Tensor, lookup: Callable[[str], Tensor], spec: LoraSpec) -> Tensor:
    """``tensor``, the entry ``name`` of a peft model's state dict, with its layer's adapter merged in when it is an
    adapted layer's base weight (``lookup`` gives the adapter's ``A`` and ``B`` by name); else ``tensor`` itself."""
    suffix = ".base_layer.weight"
    if not name.endswith(suffix):
        return tensor
    layer = name[: -len(suffix)]
    lora_a, lora_b = lookup(f"{layer}.lora_A.default.weight"), lookup(f"{layer}.lora_B.default.weight")
    return tensor + (lora_b.float() @ lora_a.float()).to(tensor.dtype) * (spec.alpha / spec.rank)


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
