"""Writing a trained policy in Hugging Face format: ``from_pretrained`` (and SGLang, vLLM) load it as is.

The directory gets ``model.safetensors`` (the full weights; the head is left out when the config ties
it to the embeddings, as ``save_pretrained`` does), ``config.json``, ``generation_config.json`` and
the tokenizer and chat template files copied from the source model's directory.

:func:`save_hf_checkpoint` takes a state dict; :func:`save_hf_checkpoint_streamed` takes the weights' names and
shapes first, then the weights one at a time, and writes each as it comes: a learner exporting its policy never
holds a second copy of the model (:meth:`trainer.learner_worker.ModelWorker.save_pretrained`).
"""

from __future__ import annotations

import json
import math
import shutil
import struct
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import torch
from torch import Tensor

__all__ = ["save_hf_checkpoint", "save_hf_checkpoint_streamed", "write_safetensors"]

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
    _copy_model_files(config, out, source)
    return out


def save_hf_checkpoint_streamed(
    layout: Sequence[tuple[str, tuple[int, ...]]], tensors: Iterable[Tensor], out: Path, source: Path
) -> Path:
    """:func:`save_hf_checkpoint` of float32 weights that arrive one at a time: ``layout`` names each weight and
    gives its shape, in the order ``tensors`` yields them. The caller leaves out a tied head."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(source))
    out.mkdir(parents=True, exist_ok=True)
    write_safetensors(out / "model.safetensors", layout, tensors, metadata={"format": "pt"})
    _copy_model_files(config, out, source)
    return out


def write_safetensors(
    path: Path,
    layout: Sequence[tuple[str, tuple[int, ...]]],
    tensors: Iterable[Tensor],
    metadata: Mapping[str, str] | None = None,
) -> None:
    """A safetensors file of float32 tensors written one at a time: the header (every name, shape and byte range,
    in ``layout``'s order, packed end to end) first, then each tensor's bytes as ``tensors`` yields it. Raises
    ``ValueError`` when a tensor is not float32 or not of its layout's shape, or when the counts differ. The bytes
    are the machine's, so this is for little-endian machines (as is every machine torch runs on)."""
    header: dict[str, object] = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    for name, shape in layout:
        size = math.prod(shape) * 4
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data starts 8-byte aligned, as safetensors' own writer pads it
    with open(path, "wb") as file:
        file.write(struct.pack("<Q", len(encoded)))
        file.write(encoded)
        for (name, shape), tensor in zip(layout, tensors, strict=True):  # strict: a count that differs raises
            if tensor.dtype != torch.float32 or tuple(tensor.shape) != tuple(shape):
                raise ValueError(f"{name}: expected float32 {tuple(shape)}, got {tensor.dtype} {tuple(tensor.shape)}")
            file.write(memoryview(tensor.detach().cpu().contiguous().numpy()).cast("B"))


def _copy_model_files(config: object, out: Path, source: Path) -> None:
    config.save_pretrained(str(out))  # type: ignore[attr-defined]
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copy2(source / name, out / name)
