"""The pieces under HfEngine: top-k/top-p filtering, the running batch's layout, the prefix cache's bookkeeping."""

from __future__ import annotations

import math
import os
import signal
import time
from unittest import mock

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.engines.base import SamplingParams
from agents.engines.hf_kv import PrefillLayout, PrefixCache, RunningBatch, sequence_kv
from agents.engines.hf_sampling import filter_top_k_top_p, generator_noise, sample_next_tokens


def kept(filtered: torch.Tensor) -> list[int]:
    return torch.isfinite(filtered).nonzero()[:, 0].tolist()


def test_top_p_keeps_the_shortest_nucleus_reaching_p():
    logits = torch.tensor([0.15, 0.5, 0.05, 0.3]).log()
    # most probable first: 0.5 (id 1), 0.3 (id 3), 0.15 (id 0), 0.05 (id 2); cumulative 0.5, 0.8, 0.95, 1.0
    assert kept(filter_top_k_top_p(logits, 0, 0.7)) == [1, 3]  # 0.5 < 0.7, 0.8 >= 0.7
    assert kept(filter_top_k_top_p(logits, 0, 0.8)) == [1, 3]  # 0.8 already reaches 0.8
    assert kept(filter_top_k_top_p(logits, 0, 0.81)) == [0, 1, 3]
    assert kept(filter_top_k_top_p(logits, 0, 0.3)) == [1]  # the top token always stays
    assert kept(filter_top_k_top_p(logits, 3, 1.0)) == [0, 1, 3]
    assert kept(filter_top_k_top_p(logits, 1, 1.0)) == [1]
    assert kept(filter_top_k_top_p(logits, 0, 1.0)) == [0, 1, 2, 3]


def test_sampled_logprob_is_over_the_whole_vocabulary_at_temperature():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    # top_k=1 forces token 0; its logprob at T=0.5 is 4 - log(e^4 + e^2 + e^0 + e^-2), not 0 (no renormalisation)
    tokens, logprobs = sample_next_tokens(
        logits, [SamplingParams(temperature=0.5, top_k=1)], [torch.Generator().manual_seed(0)]
    )
    expected = 4 - math.log(math.exp(4) + math.exp(2) + 1 + math.exp(-2))
    assert tokens == [0] and math.isclose(logprobs[0], expected, rel_tol=1e-5)
    # greedy: argmax, logprob of the unscaled distribution
    tokens, logprobs = sample_next_tokens(logits, [SamplingParams(temperature=0)], [torch.Generator()])
    expected = 2 - math.log(math.exp(2) + math.exp(1) + 1 + math.exp(-1))
    assert tokens == [0] and math.isclose(logprobs[0], expected, rel_tol=1e-5)


def test_the_rows_noise_is_the_same_whichever_thread_draws_it():
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        parallel = generator_noise([torch.Generator().manual_seed(s) for s in range(5)], 1000, torch.device("cpu"))
    finally:
        torch.set_num_threads(threads)
    for seed, row in enumerate(parallel):
        assert torch.equal(row, torch.empty(1000).exponential_(generator=torch.Generator().manual_seed(seed)))


def test_a_forked_child_draws_its_noise_on_threads_of_its_own():
    generators = [torch.Generator().manual_seed(s) for s in range(4)]
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        generator_noise(generators, 10, torch.device("cpu"))  # the parent's pool exists
        pid = os.fork()
        if pid == 0:  # the child: a draw through the parent's pool would wait forever on threads it does not have
            code = 1
            try:
                states = [g.get_state() for g in generators]
                noise = generator_noise(generators, 10, torch.device("cpu"))
                expected = [torch.empty(10).exponential_(generator=torch.Generator().set_state(s)) for s in states]
                code = 0 if torch.equal(noise, torch.stack(expected)) else 1
            finally:
                os._exit(code)
        deadline = time.monotonic() + 60
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        if done[0] == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    finally:
        torch.set_num_threads(threads)
    assert done[0] == pid, "the child's draw never finished"
    assert os.waitstatus_to_exitcode(done[1]) == 0


def sequence(n: int, value: float, layers: int = 2, heads: int = 1, dim: int = 2):
    """n tokens whose keys are value + column index and whose values are the negated keys."""
    keys = value + torch.arange(n, dtype=torch.float32)[None, :, None].expand(heads, n, dim)
    return sequence_kv([(keys.clone(), -keys.clone()) for _ in range(layers)])


def used(batch: RunningBatch) -> list[list[int]]:
    """The running rows' mask over the columns a decode step reads, ``[start, width)``."""
    return batch.mask[: batch.rows, batch.start : batch.width].int().tolist()


def test_running_batch_right_aligns_rows_and_extracts_them_back():
    batch = RunningBatch(max_rows=3)
    batch.add(sequence(3, 10.0))
    batch.add(sequence(2, 20.0))
    assert batch.width - batch.start == 3
    assert used(batch) == [[1, 1, 1], [0, 1, 1]]  # row 1 (2 tokens) sits in the last two columns
    buffer = batch.kv
    batch.add(sequence(5, 30.0))  # longer than the batch: it takes 2 of the free columns on the left, no copy
    assert batch.kv is buffer and batch.width - batch.start == 5
    assert used(batch) == [[0, 0, 1, 1, 1], [0, 0, 0, 1, 1], [1, 1, 1, 1, 1]]
    for row, (n, value) in enumerate([(3, 10.0), (2, 20.0), (5, 30.0)]):
        assert torch.equal(batch.extract(row), sequence(n, value))


def test_running_batch_step_and_remove():
    batch = RunningBatch(max_rows=3)
    batch.add(sequence(4, 10.0))
    batch.add(sequence(2, 20.0))
    cache, mask = batch.step_inputs()
    assert mask.tolist() == [[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]]  # the new column is open for both rows
    new_keys = torch.full((2, 1, 1, 2), 7.0)
    keys, _ = cache.layers[0].update(new_keys, -new_keys)
    assert keys.shape == (2, 1, 5, 2) and cache.layers[0].get_seq_length() == 5
    batch.advance()
    batch.remove(0)  # the last row moves into row 0; the columns only the removed row used are no longer read
    assert batch.rows == 1 and batch.width - batch.start == 3
    assert batch.step_inputs()[1].tolist() == [[1, 1, 1, 1]]
    kv = batch.extract(0)  # [layers, 2, heads, tokens, dim]
    assert kv[0, 0, 0, :, 0].tolist() == [20.0, 21.0, 7.0] and kv[0, 1, 0, :, 0].tolist() == [-20.0, -21.0, -7.0]


def test_a_fresh_layout_leaves_free_columns_on_both_sides():
    batch = RunningBatch(max_rows=2)
    batch.add(sequence(600, 0.0))
    # 64 free columns on the left, an eighth of the width on the right
    assert (batch.start, batch.width, batch.capacity) == (64, 664, 664 + 75)
    for _ in range(75):  # decode steps fill the free columns on the right without a copy
        batch.step_inputs()
        batch.advance()
    assert batch.capacity == 739
    batch.step_inputs()  # the 76th needs a column more: 675 kept columns, 675 // 8 free after the new one
    assert (batch.start, batch.capacity - batch.width) == (64, 1 + 84)
    small = RunningBatch(max_rows=2)
    small.add(sequence(10, 0.0))
    assert small.capacity == 64 + 10 + 64
    assert torch.equal(batch.extract(0)[..., :600, :], sequence(600, 0.0))


def test_the_left_margin_grows_to_what_joining_rows_outgrew_the_batch_by():
    batch = RunningBatch(max_rows=3)
    batch.add(sequence(10, 0.0))
    batch.add(sequence(110, 1.0))  # 100 longer than the running row: past the 64 free columns, one copy
    assert batch.margin == 100 and batch.start == 100 and batch.width - batch.start == 110
    assert batch.extract(0)[0, 0, 0, :, 0].tolist() == list(range(10))
    batch.remove(1)
    batch.remove(0)
    batch.add(sequence(50, 2.0))  # an empty batch: the same buffer, the learned margin on the left
    buffer = batch.kv
    assert batch.start == 100
    batch.add(sequence(150, 3.0))  # 100 longer again: the margin takes it
    assert batch.kv is buffer and batch.start == 0
    assert torch.equal(batch.extract(1), sequence(150, 3.0)) and torch.equal(batch.extract(0), sequence(50, 2.0))


def poison_new_buffers(monkeypatch) -> None:
    """Make every uninitialised buffer the key/value code allocates NaN, as fresh memory may be."""
    monkeypatch.setattr(
        torch.Tensor, "new_empty", lambda self, size, **_: torch.full(tuple(size), math.nan, dtype=self.dtype)
    )


def assert_readable(batch: RunningBatch) -> None:
    """Every column a decode step reads holds a number (a token's keys/values, or a zeroed hole)."""
    assert torch.isfinite(batch.kv[: batch.rows, ..., batch.start : batch.width, :]).all()


def decode_step(batch: RunningBatch, value: float) -> None:
    cache, mask = batch.step_inputs()
    assert mask.shape == (batch.rows, batch.width + 1 - batch.start)
    new = torch.full((batch.rows, 1, 1, 2), value)
    for layer in cache.layers:
        keys, values = layer.update(new, -new)
        assert keys.shape[2] == mask.shape[1]
    batch.advance()


def test_every_column_a_decode_step_reads_is_written_or_zeroed(monkeypatch):
    poison_new_buffers(monkeypatch)
    batch = RunningBatch(max_rows=3)
    batch.add(sequence(3, 10.0))
    batch.add(sequence(2, 20.0))  # joins with a hole on its left
    assert_readable(batch)
    batch.add(sequence(70, 30.0))  # longer than the batch: it takes free columns on the left
    assert_readable(batch)
    for _ in range(40):  # past the free columns: reallocations while every row runs
        decode_step(batch, 7.0)
        assert_readable(batch)
    batch.remove(2)  # the longest row goes: the reads start later
    batch.add(sequence(200, 40.0))  # past the margin: a copy, with the running rows' new holes zeroed
    assert_readable(batch)
    decode_step(batch, 8.0)
    assert_readable(batch)
    assert torch.equal(batch.extract(2)[..., :200, :], sequence(200, 40.0))


@st.composite
def batch_operations(draw):
    """A run of joins (a length), departures (a row, by rank) and decode steps (``None``)."""
    operation = st.one_of(
        st.tuples(st.just("add"), st.integers(1, 160)),
        st.tuples(st.just("remove"), st.integers(0, 7)),
        st.tuples(st.just("step"), st.integers(1, 30)),
    )
    return draw(st.lists(operation, min_size=1, max_size=25))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch_operations())
def test_a_running_batch_keeps_every_rows_tokens_in_order_whatever_joins_and_leaves(operations):
    with mock.patch.object(
        torch.Tensor, "new_empty", lambda self, size, **_: torch.full(tuple(size), math.nan, dtype=self.dtype)
    ):
        batch, rows, token = RunningBatch(max_rows=4), [], 0.0  # rows: each running row's key values, in order
        for kind, argument in operations:
            if kind == "add" and batch.rows < batch.max_rows:
                batch.add(sequence(argument, token))
                rows.append([token + i for i in range(argument)])
                token += 1000.0
            elif kind == "remove" and batch.rows:
                row = argument % batch.rows
                batch.remove(row)
                rows[row] = rows[-1]
                rows.pop()
            elif kind == "step" and batch.rows:
                for _ in range(argument):
                    decode_step(batch, token)
                    for values in rows:
                        values.append(token)
                    token += 1.0
            if not batch.rows:
                continue
            assert_readable(batch)
            assert batch.start == min(batch.width - len(values) for values in rows)
            for row, values in enumerate(rows):
                assert batch.extract(row)[0, 0, 0, :, 0].tolist() == values
                assert batch.mask[row].nonzero()[:, 0].tolist() == list(range(batch.width - len(values), batch.width))


def test_a_batched_prefill_zeroes_the_holes_left_of_shorter_prefixes(monkeypatch):
    poison_new_buffers(monkeypatch)
    layout = PrefillLayout(cached=(4, 0, 2), lengths=(6, 3, 5))
    cache = layout.cache([sequence(4, 10.0), None, sequence(2, 20.0)], num_layers=2)
    past = cache.layers[0].buffer.tensor[..., : layout.past, :]  # [rows, layers, 2, heads, past, dim]
    assert past[1].eq(0).all() and past[2, ..., :2, :].eq(0).all()
    assert torch.equal(past[0], sequence(4, 10.0)) and torch.equal(past[2, ..., 2:, :], sequence(2, 20.0))


def test_prefix_cache_matches_longest_prefix_and_drops_covered_entries():
    cache = PrefixCache(max_tokens=100)
    a = np.array([1, 2, 3, 4, 5])
    cache.insert(a, sequence(5, 0.0))
    kv, n = cache.match(np.array([1, 2, 3, 9]), limit=3)
    assert n == 3 and kv is not None
    _, n = cache.match(np.array([1, 2, 3, 4, 5, 6]), limit=5)
    assert n == 5
    _, n = cache.match(np.array([1, 2, 3, 4, 5]), limit=4)  # the last input token is always run
    assert n == 4
    assert cache.match(np.array([7, 8]), limit=1) == (None, 0)
    cache.insert(np.array([1, 2, 3]), sequence(3, 0.0))  # covered by a: not stored
    assert cache.stored_tokens == 5
    cache.insert(np.array([1, 2, 3, 4, 5, 6, 7]), sequence(7, 0.0))  # covers a: a goes
    assert cache.stored_tokens == 7


def test_prefix_cache_evicts_least_recently_used():
    cache = PrefixCache(max_tokens=10)
    cache.insert(np.array([1, 1, 1, 1]), sequence(4, 0.0))
    cache.insert(np.array([2, 2, 2, 2]), sequence(4, 0.0))
    cache.match(np.array([1, 1, 9]), limit=2)  # touch the first
    cache.insert(np.array([3, 3, 3, 3]), sequence(4, 0.0))  # 12 > 10 tokens: the second (least recent) goes
    assert sorted(int(e.tokens[0]) for e in cache.entries) == [1, 3]


def test_prefix_cache_forgets_the_entries_a_sequence_covers_and_keeps_the_rest():
    cache = PrefixCache(max_tokens=100)
    cache.insert(np.array([1, 2, 3, 4]), sequence(4, 0.0))  # a finished episode's last turn
    cache.insert(np.array([1, 2, 7]), sequence(3, 0.0))  # another episode with the same first tokens
    cache.insert(np.array([9, 9]), sequence(2, 0.0))
    cache.forget(np.array([1, 2, 3, 4, 5, 6]))  # the first episode's whole token stream
    assert sorted(e.tokens.tolist() for e in cache.entries) == [[1, 2, 7], [9, 9]]
    cache.forget(np.array([1, 2]))  # covers no entry: a shared start alone drops nothing
    assert cache.stored_tokens == 5
    cache.forget(np.array([9, 9]))  # exactly an entry's tokens
    assert [e.tokens.tolist() for e in cache.entries] == [[1, 2, 7]]
