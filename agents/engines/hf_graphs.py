"""Static-shape decode for :class:`agents.engines.hf.HfEngine`, replayed from CUDA graphs on CUDA.

The dynamic decode step (:class:`~agents.engines.hf_kv.RunningBatch`) runs a batch whose shapes change every
step (rows come and go, the cache grows a column), so on a GPU each step is dozens of small kernel launches and
host round trips. :class:`StaticDecoder` gives every step the same shapes:

* one key/value buffer of fixed ``capacity`` columns, ``[max_rows, layers, 2, heads, capacity, head_dim]`` (the
  layout of :mod:`~agents.engines.hf_kv`); row ``r`` holds its sequence left-aligned in columns ``[0, lengths[r])``
  (its position ``p`` is column ``p``), so a row comes in, goes out or moves in one copy;
* static inputs: the token ids ``[max_rows, 1]`` and their positions ``[max_rows, 1]``, which are also the column
  each row writes;
* a cache layer (:class:`ColumnWriteLayer`) whose ``update`` writes the new key/value into each row's column (a
  device tensor) and returns the buffers' first ``width`` columns, and a 4D additive attention mask over them
  computed on the device from those positions (0 on columns ``<= position``, the dtype's minimum elsewhere);
* row-count buckets (:func:`decode_buckets`: 1, 2, 4, ... and ``max_rows``): ``n`` running rows run the smallest
  bucket ``>= n``; the extra rows read token 0 at position 0, write column 0 of unused rows, and are ignored;
* column buckets (64, 128, ... and ``capacity``): a step attends over the first ``width`` columns only, the smallest
  bucket holding every row's new column, so a step's attention does not grow with the capacity but with the
  longest row (a graph per row and column bucket pair).

Why no ``StaticCache`` or ``torch.compile(mode="reduce-overhead")``: transformers' ``StaticLayer`` keeps one
``cumulative_length`` for the whole batch, so every row would write the same column, and continuous batching needs
each row at its own length; compiling adds a dependency on Inductor and its recompilations for what a captured graph
already removes (the launches and host syncs).

Mask creation (transformers 5.x, ``masking_utils.create_causal_mask``): an attention mask that is already 4D is
returned as is (``_preprocess_mask_arguments``' early exit), so no mask code runs that could read tensor values on
the host (``.item()``, the ``torch.all(mask)`` short cut to ``is_causal``); positions are passed explicitly, so
``get_seq_length`` is never used for them. The forward is therefore capture-safe for full-attention models (the
only ones ``HfEngine`` serves).

On CUDA (``graphs=True``) the forward of each bucket pair is captured once into a ``torch.cuda.CUDAGraph`` on the first
step that needs it (after two warm-up runs on a side stream; all graphs share one private memory pool) and replayed
afterwards: a step copies the token ids and positions in, replays, and reads the logits out. Capturing writes the
same keys/values at the same columns as the step itself would (they depend only on the inputs and the weights), so
capturing during a real step changes nothing. Capture uses ``capture_error_mode="thread_local"``: the engine's thread
captures while other threads of the process (a colocated learner) may use the device. A graph reads the weights
where they were at capture: ``load_state_dict`` copies into the same tensors, so graphs stay valid across weight
updates; :meth:`StaticDecoder.check_weights` compares the parameters' addresses after every update and drops the
graphs (re-captured on next use) if any tensor moved. On CPU (``graphs=False``) the same forward runs eagerly.

Grouped-query attention (SmolLM2: 9 query heads over 3 key/value heads): with an attention mask, which this step
always passes, transformers' ``sdpa`` (5.17, say) repeats each key/value head for its query heads (``repeat_kv``),
a copy of ``[rows, heads, width, dim]`` for the keys and again for the values in every layer. The step runs under
:func:`packed_decode_attention` instead: the single query token of each row is reshaped onto the key/value heads
(query head ``h`` reads key/value head ``h // groups``, as ``repeat_kv`` pairs them) and attends over the buffers
as they are. The arithmetic is the same dot products and softmax; newer transformers (5.24) do this themselves
(``pack_gqa``). The model's attention implementation is switched for the step only (:func:`decode_attention`), so
prefill keeps its own; a forward of another thread that overlaps the step (a colocated learner's) gets ``sdpa``'s
masks and, for its many query tokens, ``sdpa`` itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.cache_utils import Cache, DynamicLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from agents.engines.hf_kv import SequenceKV, batch_buffer_like

__all__ = [
    "DEFAULT_DECODE_CAPACITY",
    "ColumnWriteLayer",
    "StaticDecoder",
    "bucket_for",
    "decode_attention",
    "decode_buckets",
    "decode_mode",
    "packed_decode_attention",
]


DEFAULT_DECODE_CAPACITY = 4096  # tokens per row of the static decode buffers (prompt included): eval.yaml's budget
PACKED_DECODE_ATTENTION = "turngym_packed_decode"  # the attention implementation name the decode step runs under


def packed_decode_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """``sdpa`` attention that, for one query token per row, attends over grouped key/value heads without repeating
    them (module docstring); anything else (several query tokens, no groups) goes to transformers' ``sdpa``.

    ``query`` is ``[rows, heads, 1, dim]``, ``key``/``value`` ``[rows, kv_heads, width, dim]`` (views of the decode
    buffers), the mask broadcasts over heads; returns ``[rows, 1, heads, dim]`` as ``sdpa_attention_forward`` does.
    """
    groups = getattr(module, "num_key_value_groups", 1)
    if groups == 1 or query.shape[2] != 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    rows, heads, _, dim = query.shape
    packed = query.reshape(rows, heads // groups, groups, dim)  # head h = kv_head * groups + g
    output = F.scaled_dot_product_attention(
        packed, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling
    )
    return output.reshape(rows, heads, 1, value.shape[-1]).transpose(1, 2).contiguous(), None


AttentionInterface.register(PACKED_DECODE_ATTENTION, packed_decode_attention)
AttentionMaskInterface.register(PACKED_DECODE_ATTENTION, sdpa_mask)  # masks are built as for sdpa


@contextlib.contextmanager
def decode_attention(model: Any) -> Iterator[None]:
    """Inside the block, ``model`` attends with :func:`packed_decode_attention` where it used ``sdpa``; outside,
    as it was (other implementations are left alone)."""
    config = model.config
    if config._attn_implementation != "sdpa":
        yield
        return
    config._attn_implementation = PACKED_DECODE_ATTENTION
    try:
        yield
    finally:
        config._attn_implementation = "sdpa"


def decode_mode(device: torch.device, cuda_graphs: bool | None, static_decode: bool | None) -> tuple[bool, bool]:
    """``(cuda_graphs, static_decode)`` resolved: graphs default to on for CUDA and off elsewhere (on an H100 the
    graphed step gave the dynamic step's tokens and 5-8x its speed: docs/gpu.md), static decode to the graphs."""
    if cuda_graphs and device.type != "cuda":
        raise ValueError(
            f"cuda_graphs=True needs a CUDA device, not {device}: use static_decode=True for the static path without "
            "graphs, or leave cuda_graphs unset"
        )
    # unset: on for CUDA, unless the static step itself is refused
    graphs = bool(cuda_graphs) if cuda_graphs is not None else device.type == "cuda" and static_decode is not False
    if graphs and static_decode is False:
        raise ValueError("cuda_graphs=True replays the static decode step: leave static_decode unset or set it True")
    return graphs, graphs if static_decode is None else static_decode


def decode_buckets(limit: int, smallest: int = 1) -> tuple[int, ...]:
    """Sizes a step can run with: powers of two from ``smallest`` below ``limit``, then ``limit`` (rows: ``6`` -> 1,
    2, 4, 6; columns: ``decode_buckets(300, 64)`` -> 64, 128, 256, 300)."""
    buckets, size = [], smallest
    while size < limit:
        buckets.append(size)
        size *= 2
    return (*buckets, limit)


def bucket_for(rows: int, buckets: tuple[int, ...]) -> int:
    """The smallest bucket holding ``rows`` rows."""
    return next(bucket for bucket in buckets if bucket >= rows)


class ColumnWriteLayer(DynamicLayer):
    """A cache layer over whole ``[rows, heads, capacity, dim]`` buffers: row ``r``'s new key/value goes to column
    ``columns[r]`` (a device tensor, so no shape depends on a host value) and ``update`` returns the buffers.

    The write is an ``index_put_`` at (``rows[r]``, ``columns[r]``), which writes the buffers' views in place:
    ``scatter_`` into a non-contiguous view (every row bucket and column width below the whole buffer is one) copies
    the whole view out and back, four copies of the layer's keys/values a step, which on an H100 were 39% of the
    graphed step's device time."""

    def __init__(
        self, keys_buffer: torch.Tensor, values_buffer: torch.Tensor, rows: torch.Tensor, columns: torch.Tensor
    ):
        super().__init__()
        self.keys, self.values, self.rows, self.columns = keys_buffer, values_buffer, rows, columns
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        # [rows, heads, 1, dim] -> [rows, heads, dim] at (rows[r], :, columns[r]) (advanced indices' dimension first)
        self.keys[self.rows, :, self.columns] = key_states[:, :, 0]
        self.values[self.rows, :, self.columns] = value_states[:, :, 0]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.keys.shape[-2]

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.keys.shape[-2], 0


class StaticDecoder:
    """The running rows' keys/values in fixed-capacity buffers, decoded one token per step with static shapes.

    Rows are compact (``0..rows-1``, as :class:`~agents.engines.hf_kv.RunningBatch`'s): removing one moves the last
    row into its place. ``lengths[r]`` columns of row ``r`` are filled; a step writes column ``lengths[r]``, so a
    row may take ``capacity - lengths[r]`` more steps (the engine caps its context at ``capacity``).
    """

    def __init__(
        self, model: Any, cache_keyword: str, device: torch.device, max_rows: int, capacity: int, *, graphs: bool
    ):
        if graphs and device.type != "cuda":
            raise ValueError(f"CUDA graphs need a CUDA device, not {device}")
        self.model, self.cache_keyword = model, cache_keyword
        self.max_rows, self.capacity, self.graphs = max_rows, capacity, graphs
        self.buckets = decode_buckets(max_rows)
        self.widths = decode_buckets(capacity, smallest=64)
        self.lengths: list[int] = []
        self.kv: torch.Tensor | None = None  # [max_rows, layers, 2, heads, capacity, dim]
        self._input_ids = torch.zeros((max_rows, 1), dtype=torch.long, device=device)
        self._positions = torch.zeros((max_rows, 1), dtype=torch.long, device=device)  # also the written column
        self._column_index = torch.arange(capacity, device=device)
        self._row_index = torch.arange(max_rows, device=device)
        # (rows, width) bucket pair -> its graph and the logits tensor it writes
        self._captured: dict[tuple[int, int], tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self._pool = torch.cuda.graph_pool_handle() if graphs else None
        self._weight_addresses = self._addresses()

    @property
    def rows(self) -> int:
        return len(self.lengths)

    @property
    def captured(self) -> tuple[tuple[int, int], ...]:
        """The ``(rows, width)`` bucket pairs captured so far."""
        return tuple(sorted(self._captured))

    # ----------------------------------------------------------------- rows
    def add(self, kv: SequenceKV) -> int:
        """Copy a sequence's keys/values (``n < capacity`` tokens) into the next free row; returns its index."""
        if self.rows == self.max_rows:
            raise RuntimeError(f"the static decode batch is full ({self.max_rows} rows)")
        n = kv.shape[-2]
        if n >= self.capacity:
            raise ValueError(f"a sequence of {n} tokens leaves no column of the decode capacity ({self.capacity})")
        if self.kv is None:
            self.kv = batch_buffer_like(kv, self.max_rows, self.capacity)
        row = self.rows
        self.kv[row, ..., :n, :] = kv
        self.lengths.append(n)
        return row

    def remove(self, row: int) -> None:
        """Drop ``row``; the last row moves into its place (callers mirror this in their own row list)."""
        last = self.rows - 1
        if row != last:
            n = self.lengths[last]
            self.kv[row, ..., :n, :] = self.kv[last, ..., :n, :]
            self.lengths[row] = n
        self.lengths.pop()

    def extract(self, row: int) -> SequenceKV:
        """A copy of ``row``'s keys/values (``[layers, 2, heads, lengths[row], dim]``): the buffer is reused."""
        return self.kv[row, ..., : self.lengths[row], :].clone()

    # ----------------------------------------------------------------- the step
    @torch.no_grad()
    def step(self, input_ids: list[int]) -> torch.Tensor:
        """Run one token per row (``input_ids[r]`` at position ``lengths[r]``); returns ``[rows, vocab]`` logits."""
        rows = self.rows
        if len(input_ids) != rows:
            raise ValueError(f"{len(input_ids)} token ids for {rows} rows")
        if max(self.lengths) >= self.capacity:
            raise RuntimeError(f"a row reached the decode capacity ({self.capacity} columns)")
        bucket, width = bucket_for(rows, self.buckets), bucket_for(max(self.lengths) + 1, self.widths)
        padding = [0] * (bucket - rows)  # extra rows: token 0 at position 0, written to column 0 of an unused row
        host = torch.tensor([input_ids + padding, self.lengths + padding], dtype=torch.long)
        if self._input_ids.is_cuda:
            host = host.pin_memory()
        self._input_ids[:bucket, 0].copy_(host[0], non_blocking=True)
        self._positions[:bucket, 0].copy_(host[1], non_blocking=True)
        logits = self._replay(bucket, width) if self.graphs else self._forward(bucket, width)
        self.lengths = [n + 1 for n in self.lengths]
        return logits[:rows].clone()  # the graph's output is overwritten by the next replay

    def _forward(self, bucket: int, width: int) -> torch.Tensor:
        """The model over the first ``bucket`` rows and ``width`` columns of the static tensors: ``[bucket, vocab]``
        logits (every row's new column is below ``width``)."""
        positions = self._positions[:bucket]
        dtype = self.kv.dtype
        visible = self._column_index[None, :width] <= positions  # [bucket, width]
        mask = (~visible).to(dtype) * torch.finfo(dtype).min  # additive: 0 where visible
        columns = positions[:, 0]
        kv = self.kv[:bucket, ..., :width, :]  # [bucket, layers, 2, heads, width, dim]
        rows = self._row_index[:bucket]
        layers = [ColumnWriteLayer(kv[:, layer, 0], kv[:, layer, 1], rows, columns) for layer in range(kv.shape[1])]
        cache = Cache(layers=layers)
        with decode_attention(self.model):
            return self.model(
                input_ids=self._input_ids[:bucket],
                position_ids=positions,
                attention_mask=mask[:, None, None, :],  # [bucket, 1, 1, width]: 4D, taken as is
                use_cache=True,
                logits_to_keep=1,
                **{self.cache_keyword: cache},
            ).logits[:, -1]

    def _replay(self, bucket: int, width: int) -> torch.Tensor:
        if (bucket, width) not in self._captured:
            self._captured[bucket, width] = self._capture(bucket, width)
        graph, logits = self._captured[bucket, width]
        graph.replay()
        return logits

    def _capture(self, bucket: int, width: int) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
        with torch.cuda.device(self._input_ids.device):  # the engine's device, whatever the thread's current one
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up: lazy initialisations and allocator state before capture
                for _ in range(2):
                    self._forward(bucket, width)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
                logits = self._forward(bucket, width)
        return graph, logits

    # ----------------------------------------------------------------- weights
    def check_weights(self) -> bool:
        """After a weight update: drop the captured graphs if any parameter or buffer moved (True if dropped)."""
        addresses = self._addresses()
        if addresses == self._weight_addresses:
            return False
        self._captured.clear()
        self._weight_addresses = addresses
        return True

    def _addresses(self) -> tuple[int, ...]:
        tensors = [*self.model.parameters(), *self.model.buffers()]
        return tuple(tensor.data_ptr() for tensor in tensors)
