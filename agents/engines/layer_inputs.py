"""The inputs of one decoder layer that an engine computed, kept by the tokens they were computed for.

A LoRA learner whose adapters sit on the last layers only (``model.lora_layers``) trains nothing below them: the
hidden state entering its first adapted layer ``k`` at position ``p`` is a function of the tokens ``0..p`` and the
frozen weights alone. The colocated engine computes exactly those layers, with exactly those weights, for every
token it prefills or decodes; :class:`LayerInputs` keeps what it computed, so the update can start its forward at
layer ``k`` instead of running the frozen layers again (:mod:`trainer.learner_worker`, "Frozen layers from the
engine").

An entry is a sequence the engine ran (``tokens``: a request's prompt and its sampled tokens but the last, the
tokens whose keys/values it computed) with the layer's input at its positions ``start..len(tokens)-1`` (the
positions before ``start`` came from the prefix cache, computed for an earlier request). Position ``p`` of an
entry serves any sequence that shares the entry's first ``p + 1`` tokens, so a row is assembled from several
entries: the episode's own turns, and the system prompt from whichever episode ran it first
(:meth:`LayerInputs.lookup`).

The states are only valid while the frozen weights stay as they were: the owner empties the store whenever a
policy's weights are loaded (the engine does, at every weight update with a state dict).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import torch

from agents.engines.hf_kv import common_prefix_len

__all__ = ["LayerInputs"]


@dataclass(frozen=True)
class _Computed:
    tokens: np.ndarray  # [n] the sequence the engine ran
    start: int  # its first position computed by that request (before it: the prefix cache's)
    states: torch.Tensor  # [n - start, hidden] the layer's input at positions start..n-1


class LayerInputs:
    """Decoder layer ``layer``'s inputs by token prefix (module docstring); ``max_tokens`` states at most, the
    oldest entries dropped first. Thread-safe: the engine's loop adds while other threads may look up."""

    def __init__(self, layer: int, max_tokens: int = 65536) -> None:
        if layer < 1:
            raise ValueError(f"layer must be >= 1 (layer 0's input is the embedding itself), got {layer}")
        self.layer, self.max_tokens = layer, max_tokens
        self._entries: list[_Computed] = []
        self._stored = 0  # the entries' states, summed
        self._lock = threading.Lock()

    @property
    def stored_tokens(self) -> int:
        with self._lock:
            return self._stored

    def add(self, tokens: np.ndarray, start: int, states: torch.Tensor) -> None:
        """Keep ``states`` ``[len(tokens) - start, hidden]``: the layer's input at ``tokens``' positions from start."""
        if states.ndim != 2 or len(states) != len(tokens) - start:
            raise ValueError(
                f"expected {len(tokens) - start} states for positions {start}..{len(tokens) - 1}, "
                f"got a tensor of shape {tuple(states.shape)}"
            )
        if len(states) == 0:
            return
        with self._lock:
            self._entries.append(_Computed(np.asarray(tokens, dtype=np.int64), start, states))
            self._stored += len(states)
            while self._stored > self.max_tokens and self._entries:
                self._stored -= len(self._entries.pop(0).states)

    def lookup(self, tokens: np.ndarray, positions: int) -> torch.Tensor | None:
        """The layer's inputs ``[positions, hidden]`` at ``tokens``' first ``positions`` positions, each taken from
        an entry that shares the tokens up to it; ``None`` when any of them was never computed."""
        if positions <= 0:
            raise ValueError(f"positions must be >= 1, got {positions}")
        tokens = np.asarray(tokens, dtype=np.int64)
        with self._lock:
            entries = list(self._entries)
        out: torch.Tensor | None = None
        covered = np.zeros(positions, dtype=bool)
        for entry in entries:
            end = min(common_prefix_len(entry.tokens, tokens), positions)
            if end <= entry.start or covered[entry.start : end].all():
                continue
            if out is None:
                out = entry.states.new_empty(positions, entry.states.shape[1])
            out[entry.start : end] = entry.states[: end - entry.start]
            covered[entry.start : end] = True
            if covered.all():
                return out
        return None

    def clear(self) -> None:
        with self._lock:
            self._entries, self._stored = [], 0
