"""The critic: a causal LM's decoder with a scalar value head instead of the vocabulary head.

``ValueModel.from_pretrained(path)`` loads the decoder of any Hugging Face causal LM checkpoint
(``AutoModel``, so the vocabulary projection is not loaded nor computed) and adds
``value_head = Linear(hidden_size, 1)`` initialised to zero, so every value starts at 0, a neutral
baseline, and the first updates move the head before the decoder. ``forward`` returns one value per
position, ``[B, L]``; position ``i`` holds the value of the state after token ``i`` (the learner
reads it as the value before token ``i + 1`` is chosen, see ``trainer.batch``).

Saved as ``save_pretrained(dir)``: the decoder in Hugging Face format plus ``value_head.safetensors``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from trainer.learner_specs import enable_activation_checkpointing

__all__ = ["ValueModel"]

VALUE_HEAD_FILE = "value_head.safetensors"


class ValueModel(nn.Module):
    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone
        self.value_head = nn.Linear(backbone.config.hidden_size, 1)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    @property
    def config(self):
        return self.backbone.config

    @classmethod
    def from_pretrained(cls, path: str | Path, dtype: torch.dtype = torch.float32) -> ValueModel:
        from transformers import AutoModel

        from agents.models import quiet_progress_bars

        with quiet_progress_bars():
            backbone = AutoModel.from_pretrained(str(path), dtype=dtype)
        model = cls(backbone).to(dtype)
        head_file = Path(path) / VALUE_HEAD_FILE
        if head_file.is_file():  # a saved critic: restore its head too
            from safetensors.torch import load_file

            model.value_head.load_state_dict(load_file(str(head_file)))
        return model

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor, keep: int | Tensor | None = None, **backbone: Any
    ) -> Tensor:
        """Values ``[B, L]``; with ``keep`` an int, of the last ``keep`` positions (``[B, keep]``), a 1-D tensor,
        of those positions. ``backbone``: more keywords for the decoder (``position_ids``)."""
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask, **backbone).last_hidden_state
        if isinstance(keep, Tensor):
            hidden = hidden[:, keep]
        elif keep is not None:
            hidden = hidden[:, -keep:]
        return self.value_head(hidden).squeeze(-1).to(torch.float32, copy=True)

    def activation_checkpointing_enable(self) -> None:
        enable_activation_checkpointing(self.backbone)
