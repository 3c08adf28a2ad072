"""Writing a trained policy in Hugging Face format: ``from_pretrained`` (and SGLang, vLLM) load it as is.

The directory gets ``model.safetensors`` (the full weights; the head is left out when the config ties
it to the embeddings, as ``save_pretrained`` does), ``config.json``, ``generation_config.json`` and
the tokenizer and chat template files copied from the source model's directory.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

from torch import Tensor

__all__ = ["save_hf_checkpoint"]

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "generation_config.json",
)


def save_hf_checkpoint(state: Mapping[str, Tensor], out: Path, source: Path) -> Path:
    """Save ``state`` (a full causal-LM state dict) as a model directory at ``out``.

    ``source`` is the directory the config and the tokenizer come from.
    """
    from safetensors.torch import save_file
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(source))
    tensors = {name: tensor.detach().contiguous().cpu() for name, tensor in state.items()}
    if getattr(config, "tie_word_embeddings", False):
        tensors.pop("lm_head.weight", None)
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(str(out))
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copy2(source / name, out / name)
    return out
