"""Key/value storage for :class:`agents.engines.hf.HfEngine`: the running batch and the prefix cache.

* :class:`BufferLayer` is a transformers cache layer over one layer of a preallocated batch buffer
  (``[rows, layers, 2, heads, capacity, head_dim]``, held by a :class:`KVBuffer`): ``update`` writes the new
  keys/values in place and returns views, so a decode step copies one column instead of concatenating the whole
  cache as ``DynamicLayer`` does.
* :class:`RunningBatch` holds the sequences being decoded together. Every row ends at the same column
  ``width``; a row that joined with fewer tokens has masked columns on its left (its own positions are
  passed explicitly as ``position_ids``, so the holes change nothing but the mask). A decode step reads the
  columns from ``start``, the first one a running row uses, so the columns a retired long row leaves on the left
  cost nothing. A fresh layout keeps ``margin`` free columns left of the rows, so a longer row (an episode's next
  turn, joining rows still on their last) takes them instead of a copy of the whole buffer; ``margin`` is the most
  a joining row has outgrown the running rows so far. Rows are compact (``0..rows-1``): removing one moves the
  last row into its place.
* :class:`PrefillLayout` places the requests prefilled together in one forward: each row's cached prefix is
  right-aligned in the past columns ``[0, past)`` (``past``: the longest cached prefix of the group, rows with a
  shorter one have masked zero columns on its left) and its new tokens are right-aligned in the query columns
  ``[past, past + queries)`` (shorter rows have masked pad queries on their left). So rows with different cached
  prefix lengths share one forward, every row's last token sits in the last column (``logits_to_keep=1``), and
  the per-row ``position_ids`` make the holes change nothing but the mask.
* :class:`PrefixCache` keeps the keys/values of finished sequences (and of freshly prefilled prompts),
  keyed by their token ids. A request reuses the longest common prefix with any entry: a causal model's
  keys/values for the first ``k`` tokens do not depend on what follows, so any prefix of an entry is valid.
  An entry whose tokens are a prefix of a newer entry's tokens is dropped (the newer one covers it);
  beyond ``max_tokens`` stored tokens the least recently used entries go, and ``forget`` drops the entries a
  finished conversation covers (its own: no later request extends it).

Sequence keys/values travel as ``SequenceKV``: one tensor ``[layers, 2, heads, n, head_dim]`` (keys at index 0 of
its second dimension, values at 1), and every batch buffer is one tensor ``[rows, layers, 2, heads, capacity,
head_dim]``. So moving a sequence into a batch, out of it or between its rows is one copy, not one per layer and
kind (on a GPU those small copies, 60 a sequence for SmolLM2, were a fifth to a third of a decode run's time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from transformers.cache_utils import Cache, DynamicLayer

__all__ = [
    "BufferLayer",
    "KVBuffer",
    "PrefillLayout",
    "PrefixCache",
    "RunningBatch",
    "SequenceKV",
    "batch_buffer_like",
    "common_prefix_len",
    "sequence_kv",
]

SequenceKV = torch.Tensor  # [layers, 2, heads, n, head_dim]: keys (index 0) and values (1) of every layer


def batch_buffer_like(kv: SequenceKV, rows: int, capacity: int) -> torch.Tensor:
    """A zeroed batch buffer ``[rows, layers, 2, heads, capacity, head_dim]`` with ``kv``'s layer shapes and dtype
    (zeros, not empty: masked columns still enter the attention product, and 0 * NaN is NaN)."""
    return kv.new_zeros((rows, *kv.shape[:3], capacity, kv.shape[4]))


def sequence_kv(layers: list[tuple[torch.Tensor, torch.Tensor]]) -> SequenceKV:
    """Pack per-layer ``(keys, values)`` pairs (``[heads, n, head_dim]`` each) into one :data:`SequenceKV`."""
    return torch.stack([torch.stack(pair) for pair in layers])


@dataclass
class KVBuffer:
    """The keys/values of a batch, ``[rows, layers, 2, heads, capacity, head_dim]``: ``tensor``, or allocated (zeros)
    with the heads, head size and dtype of the first keys a layer writes (``ensure``)."""

    rows: int
    layers: int
    capacity: int
    tensor: torch.Tensor | None = None

    def ensure(self, like: torch.Tensor) -> torch.Tensor:
        """The buffer, allocated like ``like`` (``[rows, heads, tokens, head_dim]``) if there is none yet.

        Allocated uninitialised: whoever leaves a column unwritten that a forward reads (a masked hole) zeroes it,
        since masked columns still enter the attention product and 0 * NaN is NaN.
        """
        if self.tensor is None:
            _, heads, _, dim = like.shape
            self.tensor = like.new_empty((self.rows, self.layers, 2, heads, self.capacity, dim))
        return self.tensor


class BufferLayer(DynamicLayer):
    """A full-attention cache layer writing into layer ``layer`` of ``buffer`` (module docstring).

    Columns ``[start, length)`` are filled and read; a forward over ``q`` new tokens writes columns
    ``[length, length + q)`` and attends over ``[start, length + q)`` (the columns left of ``start`` hold nothing
    it reads: transformers sees a cache of ``length - start`` tokens).
    """

    def __init__(self, buffer: KVBuffer, layer: int, length: int, start: int = 0):
        super().__init__()
        self.buffer, self.layer, self.length, self.start = buffer, layer, length, start
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        end = self.length + key_states.shape[-2]
        # [rows, 2, heads, end - start, dim]
        kv = self.buffer.ensure(key_states)[:, self.layer, :, :, self.start : end]
        kv[:, 0, :, self.length - self.start :] = key_states
        kv[:, 1, :, self.length - self.start :] = value_states
        self.length = end
        self.keys, self.values = kv[:, 0], kv[:, 1]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length - self.start

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length - self.start + query_length, 0


@dataclass(frozen=True)
class PrefillLayout:
    """Columns of a batched prefill (module docstring): row ``i`` has ``cached[i]`` tokens from the prefix cache
    and ``lengths[i] - cached[i] >= 1`` tokens to run."""

    cached: tuple[int, ...]
    lengths: tuple[int, ...]

    @property
    def past(self) -> int:
        return max(self.cached)

    @property
    def queries(self) -> int:
        return max(n - c for n, c in zip(self.lengths, self.cached, strict=True))

    @property
    def padded(self) -> bool:
        """Whether any column is a hole (then the forward needs an attention mask)."""
        return len(set(self.cached)) > 1 or len({n - c for n, c in zip(self.lengths, self.cached, strict=True)}) > 1

    def columns(self, row: int) -> torch.Tensor:
        """Row ``row``'s real columns, in token order (``[lengths[row]]``)."""
        c, n = self.cached[row], self.lengths[row]
        end = self.past + self.queries
        return torch.cat([torch.arange(self.past - c, self.past), torch.arange(end - (n - c), end)])

    def attention_mask(self) -> torch.Tensor:
        """``[rows, past + queries]``: 1 on real columns."""
        mask = torch.zeros((len(self.lengths), self.past + self.queries), dtype=torch.long)
        for row in range(len(self.lengths)):
            mask[row, self.columns(row)] = 1
        return mask

    def inputs(self, input_ids: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        """Left-padded new token ids and their positions (``[rows, queries]`` each; pads are token 0 at 0)."""
        ids = torch.zeros((len(input_ids), self.queries), dtype=torch.long)
        positions = torch.zeros_like(ids)
        for row, (tokens, c) in enumerate(zip(input_ids, self.cached, strict=True)):
            new = len(tokens) - c
            ids[row, self.queries - new :] = torch.as_tensor(tokens[c:])
            positions[row, self.queries - new :] = torch.arange(c, len(tokens))
        return ids, positions

    def cache(self, prefixes: list[SequenceKV | None], num_layers: int) -> Cache:
        """A cache of ``past + queries`` columns whose past columns hold each row's cached prefix, zeros on its left
        (masked columns still enter the attention product, and 0 * NaN is NaN). The forward writes every query
        column, so only those holes are written twice."""
        buffer = KVBuffer(len(self.lengths), num_layers, self.past + self.queries)
        template = next((p for p, c in zip(prefixes, self.cached, strict=True) if p is not None and c > 0), None)
        if template is not None:
            tensor = buffer.ensure(template[0, 0][None])  # [1, heads, n, dim]: the layout of a layer's keys
            for row, (prefix, c) in enumerate(zip(prefixes, self.cached, strict=True)):
                tensor[row, ..., : self.past - c, :] = 0
                if c > 0:
                    tensor[row, ..., self.past - c : self.past, :] = prefix[..., :c, :]
        return Cache(layers=[BufferLayer(buffer, layer, self.past) for layer in range(num_layers)])

    def row_kv(self, cache: Cache, row: int) -> SequenceKV:
        """Row ``row``'s keys/values after the forward (its real columns in token order, one copy; a view when the
        group is one row, whose buffer holds nothing else)."""
        tensor = cache.layers[0].buffer.tensor
        if len(self.lengths) == 1:
            return tensor[0]
        c, n, end = self.cached[row], self.lengths[row], self.past + self.queries
        # its prefix right-aligned in [0, past), its new tokens in [past, end): one run, or two with a hole between
        prefix, new = tensor[row, ..., self.past - c : self.past, :], tensor[row, ..., end - (n - c) : end, :]
        return torch.cat([prefix, new], dim=-2)


class RunningBatch:
    """Right-aligned keys/values of up to ``max_rows`` sequences decoded together (see the module docstring).

    Row ``i`` holds its tokens in columns ``[row_starts[i], width)``; a decode step reads ``[start, width]``,
    ``start`` the smallest row start, and every column it reads is written (a token, or a zeroed hole). A fresh
    layout puts ``margin`` free columns left of the rows and ``slack`` times the kept width (at least
    ``min_free`` columns) right of them, for the decode steps to come: more slack, fewer copies of the buffer; less,
    a smaller buffer. While it copies, the old buffer and the new one both exist. The free columns are never
    written until a row takes them, so their pages are not resident.
    """

    slack = 0.125
    min_free = 64

    def __init__(self, max_rows: int):
        self.max_rows = max_rows
        self.rows = 0
        self.width = 0  # used columns; every row's newest token is in column width - 1
        self.start = 0  # the first column any running row uses
        self.row_starts: list[int] = []
        self.margin = self.min_free  # free columns left of a fresh layout: the most a joining row outgrew the batch
        self.kv: torch.Tensor | None = None  # [max_rows, layers, 2, heads, capacity, dim]
        self.mask = torch.zeros((max_rows, 0), dtype=torch.bool)  # [max_rows, capacity]: column holds a real token

    @property
    def capacity(self) -> int:
        return self.mask.shape[1]

    def _right_free(self, columns: int) -> int:
        return max(self.min_free, int(columns * self.slack))

    def add(self, kv: SequenceKV) -> int:
        """Append a sequence (``n`` tokens) as the last row, right-aligned at ``width``; returns its row index."""
        if self.rows == self.max_rows:
            raise RuntimeError(f"the running batch is full ({self.max_rows} rows)")
        n = kv.shape[-2]
        if self.kv is None:
            self.allocate_like(kv)
        if self.rows == 0:
            left = min(self.margin, self.capacity - n - self._right_free(n))
            if left >= 0:  # an empty batch reuses its buffer
                self.width = self.start = left + n
            else:
                self.width = self.start = 0
                self._reallocate(min_width=n, extra_columns=0)
        elif n > self.width:
            self.margin = max(self.margin, n - (self.width - self.start))
            self._reallocate(min_width=n, extra_columns=0)
        row, start = self.rows, self.width - n
        if start < self.start:  # the running rows' columns from here on are read now: holes, zeroed
            self.kv[:row, ..., start : self.start, :] = 0
            self.start = start
        self.kv[row, ..., self.start : start, :] = 0  # the row's own holes
        self.kv[row, ..., start : self.width, :] = kv
        self.mask[row] = False
        self.mask[row, start : self.width] = True
        self.row_starts.append(start)
        self.rows += 1
        return row

    def remove(self, row: int) -> None:
        """Drop ``row``; the last row moves into its place (callers mirror this in their own row list)."""
        last = self.rows - 1
        if row != last:
            self.kv[row, ..., self.start : self.width, :] = self.kv[last, ..., self.start : self.width, :]
            self.mask[row] = self.mask[last]
            self.row_starts[row] = self.row_starts[last]
        self.mask[last] = False
        self.row_starts.pop()
        self.rows -= 1
        self.start = min(self.row_starts, default=self.width)

    def extract(self, row: int) -> SequenceKV:
        """A copy of ``row``'s keys/values (its real columns, in order)."""
        return self.kv[row, ..., self.row_starts[row] : self.width, :].clone(memory_format=torch.contiguous_format)

    def step_inputs(self) -> tuple[Cache, torch.Tensor]:
        """The cache and the ``[rows, width + 1 - start]`` attention mask for one decode step of every row."""
        if self.width + 1 > self.capacity:
            self._reallocate(min_width=0, extra_columns=1)
        self.mask[: self.rows, self.width] = True
        layers = self.kv.shape[1]
        buffer = KVBuffer(self.rows, layers, self.capacity, self.kv[: self.rows])
        cache = Cache(layers=[BufferLayer(buffer, layer, self.width, self.start) for layer in range(layers)])
        return cache, self.mask[: self.rows, self.start : self.width + 1].long()

    def advance(self) -> None:
        """Record that the decode step wrote column ``width``."""
        self.width += 1

    def _reallocate(self, min_width: int, extra_columns: int) -> None:
        """Copy into a fresh buffer: the running rows' columns ``[start, width)`` (``kept``), ``margin`` free columns
        on their left plus whatever a joining row of ``min_width`` tokens needs beyond ``kept``, room on the right."""
        kept = self.width - self.start
        need = max(kept, min_width)
        new_width = self.margin + need
        capacity = new_width + extra_columns + self._right_free(need)
        new_start = new_width - kept  # old column start lands here
        new_mask = torch.zeros((self.max_rows, capacity), dtype=torch.bool)
        new_mask[: self.rows, new_start:new_width] = self.mask[: self.rows, self.start : self.width]
        # Uninitialised: the kept columns are copied, and a joining row zeroes the holes its start opens to reading
        # (masked columns still enter the attention product, and 0 * NaN is NaN). A decode step writes its column
        # before reading it.
        fresh = self.kv.new_empty((*self.kv.shape[:4], capacity, self.kv.shape[5]))
        fresh[: self.rows, ..., new_start:new_width, :] = self.kv[: self.rows, ..., self.start : self.width, :]
        self.row_starts = [s - self.start + new_start for s in self.row_starts]
        self.kv, self.mask, self.width, self.start = fresh, new_mask, new_width, new_start

    def release(self) -> None:
        """Drop the (empty) batch's buffer; the next ``add`` allocates it again. Raises if a row is running."""
        if self.rows:
            raise RuntimeError(f"cannot release the running batch's buffers: {self.rows} rows are running")
        self.kv = None
        self.mask = torch.zeros((self.max_rows, 0), dtype=torch.bool)
        self.width = self.start = 0

    def allocate_like(self, kv: SequenceKV) -> None:
        """Create the (empty) buffer with the shape and dtype of ``kv``'s layers; called before the first ``add``."""
        self.kv = batch_buffer_like(kv, self.max_rows, 0)


@dataclass(eq=False)  # identity: entries are removed from a list by identity
class _Entry:
    tokens: np.ndarray
    kv: SequenceKV
    last_used: int


class PrefixCache:
    """Keys/values of earlier sequences by token ids, ``max_tokens`` tokens at most (see the module docstring)."""

    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self.entries: list[_Entry] = []
        self._clock = 0

    @property
    def stored_tokens(self) -> int:
        return sum(len(entry.tokens) for entry in self.entries)

    def match(self, input_ids: np.ndarray, limit: int) -> tuple[SequenceKV | None, int]:
        """The entry sharing the longest prefix with ``input_ids`` and that prefix's length (at most ``limit``)."""
        best, best_len = None, 0
        for entry in self.entries:
            common = common_prefix_len(entry.tokens, input_ids)
            if common > best_len:
                best, best_len = entry, common
        if best is None:
            return None, 0
        self._clock += 1
        best.last_used = self._clock
        return best.kv, min(best_len, limit)

    def insert(self, tokens: np.ndarray, kv: SequenceKV) -> None:
        """Store ``kv`` for ``tokens``; entries it covers go, and nothing is stored if an entry covers it."""
        self._clock += 1
        for entry in self.entries:
            if len(entry.tokens) >= len(tokens) and common_prefix_len(entry.tokens, tokens) == len(tokens):
                entry.last_used = self._clock
                return
        self.entries = [e for e in self.entries if common_prefix_len(e.tokens, tokens) < len(e.tokens)]
        self.entries.append(_Entry(tokens, kv, self._clock))
        while self.stored_tokens > self.max_tokens and self.entries:
            self.entries.remove(min(self.entries, key=lambda e: e.last_used))

    def forget(self, tokens: np.ndarray) -> None:
        """Drop the entries ``tokens`` covers (each entry's tokens a prefix of ``tokens``)."""
        self.entries = [e for e in self.entries if common_prefix_len(e.tokens, tokens) < len(e.tokens)]

    def clear(self) -> None:
        self.entries = []


def common_prefix_len(a: np.ndarray, b: np.ndarray) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    if n == 0 or a[0] != b[0]:  # most pairs of unrelated prompts: no array operation
        return 0
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n
