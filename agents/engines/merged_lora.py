"""LoRA adapters merged into their base weights while an engine samples, then taken out again bit for bit.

A LoRA layer computes ``W x + s B (A x)``: beside each of a decoder's adapted layers (210 in SmolLM2) two small
products and an addition, at every decode step. Merged, ``(W + s B A) x`` is one product: on the 2-core CPU a
default step's rollout ran 1.19x faster (benchmarks/step_cost.py, docs/performance.md). The colocated engine
(:mod:`trainer.colocated`) shares ``W`` with the learner, which trains ``A`` and ``B`` on top of the frozen ``W``,
so the merge is in place and must be undone exactly before the learner computes again.

Float addition does not undo itself: ``(W + D) - D`` differs from ``W`` in the last bit of a few elements (where
``W + D`` rounds into the next binade, and at ties). :meth:`MergedLora.merge` therefore computes, per layer,
``D = s B A`` (peft's ``get_delta_weight``), the merged weight ``M = W + D`` and the round trip ``M - D``, and keeps
the positions where the round trip misses ``W`` with ``W``'s values there (a small fraction of the elements); it
also keeps a checksum of ``W``'s bits. :meth:`MergedLora.unmerge` subtracts ``D`` computed again from the same
``A`` and ``B`` (the same product on the same inputs: the same bits), writes the kept values back, and checks the
checksum: a mismatch raises rather than letting the learner train on a base that drifted.

Exclusion: ``lock`` (re-entrant) is held by the engine's loop around every iteration, which merges before a forward
(:meth:`merge`), and by whoever else reads or writes the weights (:meth:`unmerged`), so a forward never sees
half-merged weights and an optimizer step never changes ``A`` or ``B`` while they are merged (which would make the
unmerge wrong).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["MergedLora", "lora_layers"]

_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def lora_layers(model: nn.Module) -> list[nn.Module]:
    """``model``'s peft LoRA layers (empty when it has none or peft is not installed)."""
    try:
        from peft.tuners.lora import LoraLayer
    except ImportError:
        return []
    return [module for module in model.modules() if isinstance(module, LoraLayer)]


@dataclass
class _Kept:
    """What one layer's unmerge needs besides ``D``: ``W`` where ``(W + D) - D`` misses it, and ``W``'s checksum."""

    positions: torch.Tensor  # [k] flat indices into the weight
    values: torch.Tensor  # [k] W's values there
    checksum: int


class MergedLora:
    """The LoRA layers of ``model`` (peft, one plain adapter each, no bias or variant such as DoRA), merged on demand.

    ``merge`` and ``unmerge`` are idempotent; call them holding ``lock`` (or use the context managers).
    """

    def __init__(self, model: nn.Module) -> None:
        self.layers = lora_layers(model)
        if not self.layers:
            raise ValueError("MergedLora needs a model with peft LoRA layers; this one has none")
        for layer in self.layers:
            adapters = list(layer.lora_A.keys())
            if len(adapters) != 1:
                raise ValueError(f"MergedLora merges one adapter per layer; a layer has {adapters}")
            if layer.lora_variant or any(layer.lora_bias.values()):
                raise ValueError("MergedLora merges plain LoRA adapters only (no DoRA or other variant, no lora_bias)")
            if layer.merged:
                raise ValueError("MergedLora needs the adapters unmerged to start with")
        self.lock = threading.RLock()
        self._kept: list[_Kept] = []
        self.merges = 0  # merges done so far (each followed by an unmerge before the learner computes)
        self.restored_elements = 0  # elements written back by the last unmerge (the round trip missed them)

    @property
    def is_merged(self) -> bool:
        return bool(self._kept)

    @contextmanager
    def merged(self) -> Iterator[None]:
        """Hold the weights for forwards with the adapters merged (merging them unless they are)."""
        with self.lock:
            self.merge()
            yield

    @contextmanager
    def unmerged(self) -> Iterator[None]:
        """Hold the weights as the learner has them: base weights as loaded, adapters applied on the side."""
        with self.lock:
            self.unmerge()
            yield

    def merge(self) -> None:
        with self.lock, torch.no_grad():
            if self.is_merged:
                return
            kept = []
            for layer in self.layers:
                (adapter,) = layer.lora_A.keys()
                weight = layer.get_base_layer().weight.data
                delta = layer.get_delta_weight(adapter).to(weight.dtype)
                merged = weight + delta
                missed = torch.flatten((merged - delta) != weight).nonzero().squeeze(1)
                kept.append(_Kept(missed, weight.reshape(-1)[missed], _checksum(weight)))  # indexing copies
                weight.copy_(merged)
                layer.merged_adapters.append(adapter)  # peft's forward now runs the base layer alone
            self._kept = kept
            self.merges += 1

    def unmerge(self) -> None:
        with self.lock, torch.no_grad():
            if not self.is_merged:
                return
            restored = 0
            for layer, kept in zip(self.layers, self._kept, strict=True):
                adapter = layer.merged_adapters.pop()
                weight = layer.get_base_layer().weight.data
                weight.sub_(layer.get_delta_weight(adapter).to(weight.dtype))
                weight.view(-1)[kept.positions] = kept.values
                restored += kept.positions.numel()
                if _checksum(weight) != kept.checksum:
                    raise RuntimeError(
                        "MergedLora could not restore a base weight bit for bit (the adapter's product came out "
                        "different the second time): run with engine.merge_adapters=false"
                    )
            self._kept = []
            self.restored_elements = restored


def _checksum(weight: torch.Tensor) -> int:
    """The sum of the tensor's bit patterns read as integers: equal for equal tensors, exact (integer arithmetic)."""
    return int(weight.contiguous().view(_BITS[weight.element_size()]).sum(dtype=torch.int64))
