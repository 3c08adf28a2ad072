"""Rows that start with the same tokens run packed behind them (``trainer.learner_worker.pack_rows``).

* By hand: the packed tokens, positions, block mask and the index that reads each row's columns back.
* Property (hypothesis): for random rows with a common start and uneven lengths, the common prefix is
  the longest one (capped before the shortest prompt's last token), every real column of every row is
  found again at its packed position with its own token and position, and each packed query sees
  exactly the prefix and the earlier tokens of its own row.
* On the tiny Llama with LoRA adapters (one FSDP2 rank, gloo): the packed actor's logprobs, the
  reference's (adapters off) and the critic's values equal the unpacked ones, and one update moves
  the trained weights the same way. ``tests/trainer/test_learner_equivalence.py`` covers two ranks.
* Scoring (no gradient, chunked logits): the prefix runs once per call and every micro-batch only its
  rows' remaining tokens (counted at the embedding), with the same logprobs and value-head values for
  micro-batches of 1 and 3 rows; :class:`PrefixLayer` by hand.
* Updates: the prefix runs once per optimizer step and its backward once after the micro-batches'; with
  activation checkpointing on a layer (recomputed with its cache), a value head and an entropy bonus, two
  steps move the adapters and the head as every row in full does, at micro-batches of 1 and 4; and two
  warm-up steps of every weight with every layer recomputed move them as the full rows do.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.models import tiny_model_path
from trainer.algos import Aggregation, PolicyLossSpec
from trainer.batch import TrainBatch
from trainer.learner_specs import LoraSpec, OptimizerSpec, WorkerSpec
from trainer.learner_worker import (
    MIN_SHARED_PREFIX,
    ModelWorker,
    PrefixLayer,
    pack_rows,
    shared_prefix_length,
)

INIT = "tcp://127.0.0.1:29881"
NEG = torch.finfo(torch.float32).min


def rows_batch(rows: list[list[int]], prompts: list[int]) -> TrainBatch:
    length = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), length, dtype=torch.long)
    attention = torch.zeros(len(rows), length, dtype=torch.long)
    for b, row in enumerate(rows):
        ids[b, : len(row)] = torch.tensor(row)
        attention[b, : len(row)] = 1
    mask = torch.zeros(len(rows), length)
    for b, prompt in enumerate(prompts):
        mask[b, prompt : len(rows[b])] = 1
    return TrainBatch(ids, attention, mask, torch.zeros(len(rows), length), torch.tensor(prompts))


def test_pack_rows_by_hand():
    mb = rows_batch([[1, 2, 3, 4], [1, 2, 5]], prompts=[3, 3])
    assert shared_prefix_length(mb) == 2  # [1, 2]; capped at the shortest prompt's last token (column 2)
    keep = 4 - 3 + 1  # the worker reads columns 2..3
    packed = pack_rows(mb, 2, keep)
    assert packed.input_ids.tolist() == [[1, 2, 3, 4, 5]]
    assert packed.positions.tolist() == [[0, 1, 2, 3, 2]]  # row 1's token 5 is at column 2 of its row
    visible = packed.mask[0, 0] == 0
    assert visible.tolist() == [
        [True, False, False, False, False],
        [True, True, False, False, False],
        [True, True, True, False, False],
        [True, True, True, True, False],
        [True, True, False, False, True],  # row 1 sees the prefix and itself, not row 0
    ]
    assert torch.all(packed.mask[0, 0][~visible] == NEG)
    # Columns 2, 3 of row 0 are packed 2, 3; row 1's column 2 is packed 4 and its column 3 (padding)
    # reads its last real position, packed 4, again.
    assert packed.wanted.tolist() == [2, 3, 4]
    assert packed.wanted[packed.gather].tolist() == [[2, 3], [4, 4]]


def test_no_prefix_is_shared_by_one_row_or_before_a_prompt_token():
    assert shared_prefix_length(rows_batch([[1, 2, 3, 4]], [2])) == 0
    assert shared_prefix_length(rows_batch([[1, 2, 3], [1, 2, 3]], [1, 1])) == 0
    assert shared_prefix_length(rows_batch([[7, 2, 3], [1, 2, 3]], [2, 2])) == 0


@st.composite
def shared_rows(draw):
    common = draw(st.lists(st.integers(1, 9), min_size=0, max_size=12))
    count = draw(st.integers(1, 5))
    rows, prompts = [], []
    for _ in range(count):
        tail = draw(st.lists(st.integers(1, 9), min_size=2, max_size=10))
        row = common + tail
        rows.append(row)
        prompts.append(draw(st.integers(1, len(row) - 1)))
    return rows, prompts


@settings(max_examples=150, deadline=None)
@given(shared_rows())
def test_packing_keeps_every_token_in_its_place_and_its_own_row(case):
    rows, prompts = case
    mb = rows_batch(rows, prompts)
    prefix = shared_prefix_length(mb)
    limit = min(prompts) - 1
    longest = 0
    while longest < min(len(r) for r in rows) and len({r[longest] for r in rows}) == 1:
        longest += 1
    assert prefix == (0 if len(rows) < 2 or limit <= 0 else min(longest, limit))

    keep = mb.input_ids.shape[1] - min(prompts) + 1
    packed = pack_rows(mb, prefix, keep)
    tokens, positions = packed.input_ids[0], packed.positions[0]
    visible = packed.mask[0, 0] == 0
    assert tokens[:prefix].tolist() == rows[0][:prefix]
    start = prefix
    for b, row in enumerate(rows):
        where = torch.arange(start, start + len(row) - prefix)
        assert tokens[where].tolist() == row[prefix:]
        assert positions[where].tolist() == list(range(prefix, len(row)))
        for offset, query in enumerate(where.tolist()):
            expected = set(range(prefix)) | set(range(start, start + offset + 1))
            assert set(visible[query].nonzero().flatten().tolist()) == expected
        # Each kept column reads its own packed position, or the row's last one past its end.
        first = mb.input_ids.shape[1] - keep
        read = packed.wanted[packed.gather[b]].tolist()
        assert read == [start + min(c, len(row) - 1) - prefix for c in range(first, mb.input_ids.shape[1])]
        start += len(row) - prefix
    assert start == tokens.numel()


# ---------------------------------------------------------------------------------------------- the models
def sokoban_like_batch() -> TrainBatch:
    """Four rows: the same 24 first tokens, then different boards and replies of uneven length."""
    generator = torch.Generator().manual_seed(0)
    shared = torch.randint(5, 250, (24,), generator=generator).tolist()
    rows, prompts = [], []
    for b in range(4):
        prompt = shared + torch.randint(5, 250, (4 + b,), generator=generator).tolist()
        rows.append(prompt + torch.randint(5, 250, (6 + 2 * b,), generator=generator).tolist())
        prompts.append(len(prompt))
    batch = rows_batch(rows, prompts)
    mask = batch.response_mask
    batch.old_logprobs = torch.full(mask.shape, -5.5) * mask
    batch.advantages = torch.randn(mask.shape, generator=generator) * mask
    batch.values = torch.zeros(mask.shape)
    batch.returns = torch.randn(mask.shape, generator=generator) * mask
    return batch


@pytest.fixture(scope="module")
def workers():
    path = str(tiny_model_path())
    built = {}
    for role in ("actor", "critic"):
        for share in (True, False):
            spec = WorkerSpec(role, path, OptimizerSpec(lr=1e-2), LoraSpec(rank=4, alpha=8.0), share_prefix=share)
            worker = ModelWorker(spec, 0, 1, INIT)
            worker.setup()
            built[role, share] = worker
    return built


def trained(worker: ModelWorker) -> dict[str, torch.Tensor]:
    # one rank in float32 holds plain tensors (trainer.learner_worker.one_rank_weights)
    return {n: p.detach().clone() for n, p in worker.model.named_parameters() if p.requires_grad}


def test_packed_outputs_and_updates_equal_the_unpacked_ones(workers):
    batch = sokoban_like_batch()
    assert shared_prefix_length(batch) == 24 >= MIN_SHARED_PREFIX
    agg = Aggregation("token-mean", float(batch.response_mask.sum()), float(len(batch)))
    actor, plain_actor = workers["actor", True], workers["actor", False]
    for base in (False, True):  # the policy, and the reference (adapters off)
        packed = actor.compute_logprobs(batch, 0.7, 4, base=base)
        torch.testing.assert_close(packed, plain_actor.compute_logprobs(batch, 0.7, 4, base=base), atol=1e-5, rtol=0)
        assert torch.all(packed[batch.response_mask > 0] < 0)
    before = trained(actor)
    stats = actor.update_policy(batch, agg, PolicyLossSpec(temperature=0.7), 4)
    plain_stats = plain_actor.update_policy(batch, agg, PolicyLossSpec(temperature=0.7), 4)
    assert stats.grad_norm == pytest.approx(plain_stats.grad_norm, rel=1e-4) and stats.grad_norm > 0
    after, plain_after = trained(actor), trained(plain_actor)
    assert max((after[n] - before[n]).abs().max().item() for n in after) > 1e-4  # the adapters moved
    for name, tensor in plain_after.items():
        torch.testing.assert_close(after[name], tensor, atol=1e-5, rtol=0, msg=name)

    critic, plain_critic = workers["critic", True], workers["critic", False]
    for _ in range(2):  # the zero-initialised head moves in the first step; the second compares real values
        critic.update_value(batch, agg, 0.5, 4)
        plain_critic.update_value(batch, agg, 0.5, 4)
    values = critic.compute_values(batch, 4)
    assert values.abs().max() > 1e-3 and not math.isnan(values.sum().item())
    torch.testing.assert_close(values, plain_critic.compute_values(batch, 4), atol=1e-5, rtol=0)


def twins(optimizer: OptimizerSpec, **options) -> dict[bool, ModelWorker]:
    """Two actors from the same weights, the shared prefix on (``True``) and off (every row in full)."""
    path, built = str(tiny_model_path()), {}
    for share in (True, False):
        built[share] = ModelWorker(WorkerSpec("actor", path, optimizer, share_prefix=share, **options), 0, 1, INIT)
        built[share].setup()
    return built


def decoder_inputs(worker: ModelWorker) -> list[int]:
    """The number of tokens each forward of ``worker``'s decoder is given from now on (counted at the embedding)."""
    seen: list[int] = []
    worker.model.get_input_embeddings().register_forward_hook(lambda _m, args, _out: seen.append(args[0].numel()))
    return seen


def test_a_prefix_layer_reads_the_prefix_before_every_forward_and_stores_nothing():
    keys, values = torch.arange(6.0).reshape(1, 1, 3, 2), -torch.arange(6.0).reshape(1, 1, 3, 2)
    layer = PrefixLayer(keys, values)
    new = torch.full((2, 1, 1, 2), 9.0)  # two rows, one head, one new token
    for _ in range(2):  # a second forward (or a recomputed one) sees the same prefix
        k, v = layer.update(new, -new)
        assert k.shape == (2, 1, 4, 2) and layer.get_seq_length() == 3
        assert k[1, 0].tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [9.0, 9.0]]
        assert v[0, 0, :, 0].tolist() == [0.0, -2.0, -4.0, -9.0]
    assert layer.get_mask_sizes(5) == (8, 0)


def test_scoring_runs_the_shared_prefix_once_with_the_same_outputs():
    batch = sokoban_like_batch()
    agg = Aggregation("token-mean", float(batch.response_mask.sum()), float(len(batch)))
    actors = twins(OptimizerSpec(lr=1e-2), lora=LoraSpec(rank=4, alpha=8.0), value_head=OptimizerSpec(lr=1e-1))
    for actor in actors.values():  # one update each (the same): the adapters and the zero-initialised head move
        actor.update_policy(batch, agg, PolicyLossSpec(temperature=0.7), 4)
    seen = decoder_inputs(actors[True])
    lengths, prefix = batch.attention_mask.sum(dim=1).tolist(), shared_prefix_length(batch)
    assert lengths == [34, 37, 40, 43] and prefix == 24
    for micro in (1, 3):
        seen.clear()
        logprobs, values = actors[True].compute_logprobs_and_values(batch, 0.7, micro)
        # the prefix once, then each micro-batch's rows from column 24 to their own ends, packed without padding
        assert seen == ([24, 10, 13, 16, 19] if micro == 1 else [24, 10 + 13 + 16, 19])
        plain_logprobs, plain_values = actors[False].compute_logprobs_and_values(batch, 0.7, micro)
        torch.testing.assert_close(logprobs, plain_logprobs, atol=1e-5, rtol=0)
        torch.testing.assert_close(values, plain_values, atol=1e-5, rtol=0)
        assert values.abs().max() > 1e-3 and torch.all(logprobs[batch.response_mask > 0] < 0)
        torch.testing.assert_close(actors[True].compute_values(batch, micro), plain_values, atol=1e-5, rtol=0)
    seen.clear()
    reference = actors[True].compute_logprobs(batch, 0.7, 1, base=True)  # adapters off: its own prefix
    assert seen == [24, 10, 13, 16, 19]
    torch.testing.assert_close(reference, actors[False].compute_logprobs(batch, 0.7, 1, base=True), atol=1e-5, rtol=0)
    assert (reference - logprobs).abs().max() > 1e-4  # the adapters off score differently


@pytest.mark.parametrize("micro", [1, 4])
def test_an_update_runs_the_shared_prefix_once_with_the_same_gradients(micro):
    batch = sokoban_like_batch()
    agg = Aggregation("seq-mean-token-mean", float(batch.response_mask.sum()), float(len(batch)))
    loss = PolicyLossSpec(temperature=0.7, entropy_coef=0.01, value_clip=0.5)
    workers = twins(
        OptimizerSpec(lr=1e-2),
        lora=LoraSpec(rank=4, alpha=8.0),
        gradient_checkpointing=True,
        checkpoint_layers=1,  # the first of the two layers recomputes, cache and all
        value_head=OptimizerSpec(lr=1e-1),
    )
    seen = decoder_inputs(workers[True])
    before = trained(workers[True])
    for _ in range(2):
        seen.clear()
        stats = {share: w.update_policy(batch, agg, loss, micro) for share, w in workers.items()}
        assert seen == ([24, 10, 13, 16, 19] if micro == 1 else [24, 10 + 13 + 16 + 19])  # the prefix, then the rest
        assert stats[True].grad_norm == pytest.approx(stats[False].grad_norm, rel=1e-4) and stats[True].grad_norm > 0
    after, full = trained(workers[True]), trained(workers[False])
    assert max((after[n] - before[n]).abs().max().item() for n in after) > 1e-4
    for name, tensor in full.items():
        torch.testing.assert_close(after[name], tensor, atol=1e-5, rtol=0, msg=name)
    torch.testing.assert_close(workers[True].value_head.weight, workers[False].value_head.weight, atol=1e-5, rtol=0)
    assert workers[True].value_head.weight.abs().max() > 1e-3


def test_a_warm_up_step_of_every_weight_runs_the_shared_prefix_once_with_the_same_gradients():
    batch = sokoban_like_batch()
    agg = Aggregation("token-mean", float(batch.response_mask.sum()), float(len(batch)))
    # AdamW with eps 1: a step linear in the gradient, so float rounding cannot flip a tiny entry to a full step
    workers = twins(OptimizerSpec(lr=1.0, eps=1.0, weight_decay=0.0, grad_clip=1e9), gradient_checkpointing=True)
    before = trained(workers[True])
    for _ in range(2):
        stats = {share: w.update_sft(batch, agg, 2) for share, w in workers.items()}
        assert stats[True].grad_norm == pytest.approx(stats[False].grad_norm, rel=1e-4) and stats[True].grad_norm > 0
    after, full = trained(workers[True]), trained(workers[False])
    assert max((after[n] - before[n]).abs().max().item() for n in after) > 1e-4
    for name, tensor in full.items():
        torch.testing.assert_close(after[name], tensor, atol=1e-5, rtol=0, msg=name)


def test_adapters_on_the_last_layer_only_update_as_the_full_rows_do_and_build_no_graph_below_it():
    """``model.lora_layers``: the first layer carries no adapter, so neither the shared prefix's keys/values nor any
    micro-batch's activations there need a gradient; the update is still the full rows' one."""
    from trainer.learner_specs import decoder_layers

    batch = sokoban_like_batch()
    agg = Aggregation("token-mean", float(batch.response_mask.sum()), float(len(batch)))
    lora = LoraSpec(rank=4, alpha=8.0, layers=1)
    actors = twins(OptimizerSpec(lr=1e-2), lora=lora, value_head=OptimizerSpec(lr=1e-1))
    needs_grad: list[bool] = []
    first, last = decoder_layers(actors[True].model)
    for layer in (first, last):
        layer.register_forward_hook(lambda _m, _args, out: needs_grad.append(out[0].requires_grad))
    before = trained(actors[True])
    stats = {
        share: actor.update_policy(batch, agg, PolicyLossSpec(temperature=0.7), 1) for share, actor in actors.items()
    }
    assert stats[True].grad_norm == pytest.approx(stats[False].grad_norm, rel=1e-4) and stats[True].grad_norm > 0
    # the prefix's forward, then one per row: the first layer's outputs never need a gradient, the last one's do
    assert needs_grad == [False, True] * 5
    after, plain_after = trained(actors[True]), trained(actors[False])
    assert all(".layers.1." in n or "value_head" in n for n in after)
    assert max((after[n] - before[n]).abs().max().item() for n in after) > 1e-4
    for name, tensor in plain_after.items():
        torch.testing.assert_close(after[name], tensor, atol=1e-5, rtol=0, msg=name)
