"""Trajectories as padded tensors: the record the learner's workers receive.

Layout. Row ``b`` is trajectory ``b``'s whole token sequence, ``prompt_ids + response_ids``, right
padded to the batch's longest sequence ``L``. Every per-token tensor is ``[B, L]`` and column ``i``
describes token ``i`` of the row: ``response_mask[b, i]`` is 1 exactly where token ``i`` was sampled
by the engine, ``rollout_logprobs[b, i]`` is the engine's logprob of that token (0 elsewhere; and
``rollout_values[b, i]`` its value, when every row's engine gave values: ``Trajectory.rollout_values``), and
the learner's logprobs and values at column ``i`` come from the model's output at position ``i - 1``
(the state before the token was chosen). Column 0 is never a sampled token.

A turn's reward sits at the column of that turn's last sampled token, ``len(prompt_ids) +
turn_end_indices[k]`` (:func:`reward_positions`).

:class:`TrainBatch` crosses the process boundary to the learner workers. ``select`` and ``pad_rows``
keep every optional field aligned; ``trim`` drops padding columns that no row in it uses, so a
micro-batch is as short as its longest row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import torch
from torch import Tensor

from agents.trajectory import Trajectory

__all__ = ["TrainBatch", "build_batch", "reward_positions"]


@dataclass
class TrainBatch:
    """Padded token tensors of B trajectories (layout: module docstring). Optional fields are filled by the loop."""

    input_ids: Tensor  # [B, L] long, right padded with pad_id
    attention_mask: Tensor  # [B, L] long, 1 on real tokens
    response_mask: Tensor  # [B, L] float, 1 on sampled tokens
    rollout_logprobs: Tensor  # [B, L] float, the engine's logprobs on sampled tokens
    prompt_lengths: Tensor  # [B] long
    rollout_values: Tensor | None = None  # [B, L] the engine's values on sampled tokens, when every row has them
    old_logprobs: Tensor | None = None  # [B, L] learner logprobs before the update (policy that collected)
    ref_logprobs: Tensor | None = None  # [B, L] reference policy
    values: Tensor | None = None  # [B, L] critic before the update
    advantages: Tensor | None = None  # [B, L]
    returns: Tensor | None = None  # [B, L] critic targets
    is_weights: Tensor | None = None  # [B, L] truncated importance weights (rollout -> learner), detached

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def num_sampled_tokens(self) -> int:
        return int(self.response_mask.sum().item())

    def _map(self, fn) -> TrainBatch:
        changes = {}
        for f in fields(self):
            value = getattr(self, f.name)
            changes[f.name] = None if value is None else fn(f.name, value)
        return replace(self, **changes)

    def select(self, indices: Sequence[int] | Tensor) -> TrainBatch:
        """The rows ``indices``, in that order (padding trimmed)."""
        index = torch.as_tensor(indices, dtype=torch.long)
        return self._map(lambda _, t: t.index_select(0, index)).trim()

    def trim(self) -> TrainBatch:
        """Drop trailing padding columns that no row uses."""
        length = int(self.attention_mask.sum(dim=1).max().item()) if len(self) else 0
        length = max(length, 1)
        return self._map(lambda name, t: t if name == "prompt_lengths" else t[:, :length])

    def pad_rows(self, count: int) -> TrainBatch:
        """Add ``count`` rows that contribute nothing: a copy of row 0 with every mask at 0.

        Data-parallel ranks must run the same number of forward and backward passes (FSDP's
        collectives), so a shard short of rows is padded with these.
        """
        if count <= 0:
            return self

        def pad(name: str, t: Tensor) -> Tensor:
            filler = t[:1].expand(count, *t.shape[1:]).clone()
            if name == "response_mask":
                filler.zero_()
            return torch.cat([t, filler])

        return self._map(pad)

    def to_dict(self) -> dict[str, Tensor]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


def reward_positions(trajectory: Trajectory) -> list[int]:
    """The columns of a trajectory's turn rewards: each turn's last sampled token in the full sequence."""
    offset = len(trajectory.prompt_ids)
    return [offset + index for index in trajectory.turn_end_indices]


def build_batch(trajectories: Sequence[Trajectory], pad_id: int) -> TrainBatch:
    """Pad ``trajectories`` into a :class:`TrainBatch`; raises ``ValueError`` for untrainable ones.

    Every trajectory must pass ``validate()`` and must not have ended in ``error`` (those are never
    trained on; the loop filters them first).
    """
    if not trajectories:
        raise ValueError("build_batch needs at least one trajectory")
    for trajectory in trajectories:
        trajectory.validate()
        if trajectory.termination == "error":
            raise ValueError(f"trajectory {trajectory.group_id!r} ended in error and cannot be trained on")
    length = max(len(t.prompt_ids) + len(t.response_ids) for t in trajectories)
    size = len(trajectories)
    input_ids = torch.full((size, length), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((size, length), dtype=torch.long)
    response_mask = torch.zeros((size, length), dtype=torch.float32)
    rollout_logprobs = torch.zeros((size, length), dtype=torch.float32)
    for row, t in enumerate(trajectories):
        prompt, total = len(t.prompt_ids), len(t.prompt_ids) + len(t.response_ids)
        input_ids[row, :total] = torch.tensor(t.prompt_ids + t.response_ids, dtype=torch.long)
        attention_mask[row, :total] = 1
        response_mask[row, prompt:total] = torch.tensor(t.response_mask, dtype=torch.float32)
        rollout_logprobs[row, prompt:total] = torch.tensor(t.rollout_logprobs, dtype=torch.float32)
    prompt_lengths = torch.tensor([len(t.prompt_ids) for t in trajectories], dtype=torch.long)
    rollout_values = None
    if all(t.rollout_values for t in trajectories):  # validate() made each as long as its response
        rollout_values = torch.zeros((size, length), dtype=torch.float32)
        for row, t in enumerate(trajectories):
            prompt = len(t.prompt_ids)
            rollout_values[row, prompt : prompt + len(t.response_ids)] = torch.tensor(t.rollout_values)
    return TrainBatch(input_ids, attention_mask, response_mask, rollout_logprobs, prompt_lengths, rollout_values)
