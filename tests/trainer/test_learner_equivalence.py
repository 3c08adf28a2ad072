"""The update of a mini-batch does not depend on the micro-batch size nor on the number of FSDP2 ranks.

Real FSDP2 (``fully_shard``) over gloo in Ray actors, on the tiny Llama. One update of the same
mini-batch from the same weights is run with (ranks, micro-batch size) = (1, all), (1, 1), (2, all),
(2, 1) for every loss aggregation mode; the weights afterwards must agree to 1e-5.

Why the optimizer is set up as it is: AdamW's first step is ``lr * g / (|g| + eps)``, which with the
usual tiny ``eps`` is ``lr * sign(g)`` and would hide a gradient off by a constant factor (the classic
normalisation bug). With ``eps = 1`` and small gradients the step is ``~ lr * g``: linear in the
gradient, so a wrong normaliser shows up as wrong weights. The reported gradient norm and loss are
compared too.

The batch has five rows (two ranks get 3 + 3 with one padding row), multi-turn masks with observation
gaps, different prompt and total lengths, old logprobs perturbed so some ratios are clipped, importance
weights, a reference policy with a KL term, and an entropy bonus: every term of the loss is live.
Every row starts with the same 20 tokens (a system prompt), so each rank runs them once for all its
micro-batches and backpropagates into them once (``ModelWorker._shared_prefix``); one more rank with
``share_prefix=False`` runs every row in full: the agreement covers the shared prefix's forward and its
gradients, over one rank and two.

Also here, on the same cluster: a learner's ranks start at once and load in the background
(``Learner(..., wait=False)`` returns while they set up; ``ready()`` waits for every role and raises a rank's error).
"""

from __future__ import annotations

import asyncio

import pytest
import ray
import torch

from agents.models import tiny_model_path
from trainer.algos import LOSS_AGG_MODES, Aggregation, PolicyLossSpec
from trainer.batch import TrainBatch
from trainer.learner import Learner, LearnerSpec, WorkerGroup
from trainer.learner_specs import LoraSpec, OptimizerSpec, WorkerSpec
from trainer.learner_worker import shared_prefix_length
from trainer.ray_cluster import import_ray, init_ray

pytestmark = pytest.mark.ray

OPTIMIZER = OptimizerSpec(lr=1.0, eps=1.0, weight_decay=0.0, grad_clip=1e9)
LOSS = PolicyLossSpec(clip_low=0.2, clip_high=0.28, dual_clip=3.0, entropy_coef=0.01, kl_coef=0.1, kl_estimator="k3")


SHARED = 20  # leading tokens every row has in common


def make_batch() -> TrainBatch:
    """Five trajectories: the same first 20 tokens, prompt lengths 26-29, two or three turns, right padding
    up to 46 columns."""
    generator = torch.Generator().manual_seed(0)
    rows = [  # (prompt length, [(sampled, gap), ...])
        (SHARED + 6, [(4, 3), (5, 0)]),
        (SHARED + 8, [(3, 2), (2, 2), (4, 0)]),
        (SHARED + 7, [(6, 0)]),
        (SHARED + 9, [(2, 4), (3, 0)]),
        (SHARED + 6, [(5, 3), (4, 3), (3, 0)]),
    ]
    length = max(p + sum(s + g for s, g in turns) for p, turns in rows)
    input_ids = torch.randint(5, 250, (len(rows), length), generator=generator)
    input_ids[:, :SHARED] = input_ids[0, :SHARED]
    attention = torch.zeros(len(rows), length, dtype=torch.long)
    mask = torch.zeros(len(rows), length)
    for b, (prompt, turns) in enumerate(rows):
        column = prompt
        for sampled, gap in turns:
            mask[b, column : column + sampled] = 1
            column += sampled + gap
        attention[b, :column] = 1
    prompts = torch.tensor([p for p, _ in rows])
    advantages = torch.randn(len(rows), length, generator=generator) * mask
    return TrainBatch(input_ids, attention, mask, torch.zeros_like(mask), prompts, advantages=advantages)


@pytest.fixture(scope="module")
def groups():
    init_ray(num_cpus=12, object_store_memory=200 * 1024**2)  # the groups hold 10, two tests start 2 more
    path = str(tiny_model_path())
    options = {"num_cpus": 1, "wait": False}  # the seven ranks load at once
    one = WorkerGroup(WorkerSpec("actor", path, OPTIMIZER, num_threads=1), world_size=1, **options)
    two = WorkerGroup(WorkerSpec("actor", path, OPTIMIZER, num_threads=1), world_size=2, **options)
    critic_one = WorkerGroup(WorkerSpec("critic", path, OPTIMIZER, num_threads=1), world_size=1, **options)
    critic_two = WorkerGroup(WorkerSpec("critic", path, OPTIMIZER, num_threads=1), world_size=2, **options)
    full = WorkerSpec("actor", path, OPTIMIZER, num_threads=1, share_prefix=False)
    one_full = WorkerGroup(full, world_size=1, **options)
    # LoRA on the last of the tiny model's 2 layers: the first one, frozen and sharded on two ranks, runs no backward
    last = WorkerSpec("actor", path, OPTIMIZER, LoraSpec(rank=4, alpha=8.0, layers=1), num_threads=1)
    last_one, last_two = (WorkerGroup(last, world_size=n, **options) for n in (1, 2))
    built = {"one": one, "two": two, "critic_one": critic_one, "critic_two": critic_two, "one_full": one_full}
    built.update(last_one=last_one, last_two=last_two)
    for group in built.values():
        group.wait_ready()
    yield built
    import_ray().shutdown()


@pytest.fixture(scope="module")
def initial(groups, tmp_path_factory):
    """Each group's starting point on disk, reloaded before every update; and the scored batch."""
    directory = tmp_path_factory.mktemp("initial")
    for name in ("one", "two", "critic_one", "critic_two", "one_full", "last_one", "last_two"):
        asyncio.run(groups[name].save_checkpoint(directory / name))
    batch = make_batch()
    old = asyncio.run(groups["one"].compute_logprobs(batch, 1.0, 5))
    noise = torch.randn(old.shape, generator=torch.Generator().manual_seed(1)) * 0.3
    batch.old_logprobs = (old + noise) * batch.response_mask  # ratios away from 1: some clipped, some dual-clipped
    batch.ref_logprobs = (old - 0.1 * noise) * batch.response_mask
    batch.is_weights = (
        1.0 + 0.5 * torch.rand(old.shape, generator=torch.Generator().manual_seed(2))
    ) * batch.response_mask
    batch.values = torch.randn(old.shape, generator=torch.Generator().manual_seed(3)) * batch.response_mask
    batch.returns = torch.randn(old.shape, generator=torch.Generator().manual_seed(4)) * batch.response_mask
    return directory, batch


def test_sharded_logprobs_match_one_rank(groups, initial):
    _, batch = initial
    assert shared_prefix_length(batch) == SHARED  # each rank runs it once
    one = asyncio.run(groups["one"].compute_logprobs(batch, 0.7, 2))
    two = asyncio.run(groups["two"].compute_logprobs(batch, 0.7, 1))
    full = asyncio.run(groups["one_full"].compute_logprobs(batch, 0.7, 1))
    assert one.shape == batch.input_ids.shape
    torch.testing.assert_close(one, two, atol=1e-5, rtol=0)
    torch.testing.assert_close(one, full, atol=1e-5, rtol=0)
    # Only sampled tokens and observation tokens after the prompt carry logprobs; the prompt's are 0.
    assert torch.all(one[0, : SHARED + 6] == 0) and torch.all(one[0, SHARED + 6 : SHARED + 18] < 0)


def test_ranks_agree_on_running_a_prefix_their_shards_do_not_all_share(groups, initial):
    _, batch = initial
    mixed = batch.select(range(len(batch)))
    mixed.input_ids = mixed.input_ids.clone()
    mixed.input_ids[3:, 0] = torch.tensor([251, 252])  # rows 3 and 4 (the second rank's) start apart from all
    assert shared_prefix_length(mixed.select([0, 1, 2])) == SHARED and shared_prefix_length(mixed.select([3, 4])) == 0
    two = asyncio.run(groups["two"].compute_logprobs(mixed, 0.7, 1))  # one rank alone would wait for the other
    full = asyncio.run(groups["one_full"].compute_logprobs(mixed, 0.7, 1))
    torch.testing.assert_close(two, full, atol=1e-5, rtol=0)


def run_policy_update(group: WorkerGroup, directory, batch: TrainBatch, mode: str, micro: int):
    asyncio.run(group.load_checkpoint(directory))
    agg = Aggregation(mode, float(batch.response_mask.sum()), float(len(batch)), 40.0)
    stats = asyncio.run(group.update_policy(batch, agg, LOSS, micro))
    return stats, asyncio.run(group.full_state_dict())


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_policy_update_is_independent_of_micro_batch_and_ranks(groups, initial, mode):
    directory, batch = initial
    reference_stats, reference_weights = run_policy_update(groups["one"], directory / "one", batch, mode, len(batch))
    assert reference_stats["clipfrac"] > 0  # the clipped branch is live
    for name, micro in (("one", 1), ("two", len(batch)), ("two", 1), ("one_full", 1)):
        stats, weights = run_policy_update(groups[name], directory / name, batch, mode, micro)
        for key in ("loss", "policy_loss", "grad_norm", "clipfrac", "entropy", "kl_ref"):
            assert stats[key] == pytest.approx(reference_stats[key], rel=1e-4, abs=1e-7), (name, micro, key)
        for key, tensor in reference_weights.items():
            torch.testing.assert_close(weights[key], tensor, atol=1e-5, rtol=0, msg=f"{name} micro={micro} {key}")
    # The weights did move (else the comparison would prove nothing).
    asyncio.run(groups["one"].load_checkpoint(directory / "one"))
    start = asyncio.run(groups["one"].full_state_dict())
    moved = max((reference_weights[k] - start[k]).abs().max().item() for k in start)
    assert moved > 1e-4


def test_adapters_on_the_last_layer_update_alike_on_one_rank_and_two(groups, initial):
    directory, batch = initial
    reference_stats, reference_weights = run_policy_update(
        groups["last_one"], directory / "last_one", batch, "token-mean", len(batch)
    )
    assert reference_stats["grad_norm"] > 0
    for name, micro in (("last_one", 1), ("last_two", len(batch)), ("last_two", 1)):
        stats, weights = run_policy_update(groups[name], directory / name, batch, "token-mean", micro)
        assert stats["grad_norm"] == pytest.approx(reference_stats["grad_norm"], rel=1e-4), (name, micro)
        for key, tensor in reference_weights.items():
            torch.testing.assert_close(weights[key], tensor, atol=1e-5, rtol=0, msg=f"{name} micro={micro} {key}")
    asyncio.run(groups["last_one"].load_checkpoint(directory / "last_one"))
    start = asyncio.run(groups["last_one"].full_state_dict())
    moved = {k for k in start if (reference_weights[k] - start[k]).abs().max() > 1e-4}
    assert moved and all(".layers.1." in k for k in moved)  # the merged weights moved in the last layer only


def test_the_policy_exported_by_two_ranks_is_one_ranks_bit_for_bit(groups, initial, tmp_path):
    """``save_pretrained`` unshards one weight at a time, a collective each: the two ranks walk the weights in the
    same order, the first writes, and the file equals the one rank's and the two ranks' whole state dict."""
    from safetensors.torch import load_file

    directory, _ = initial
    for name in ("one", "two"):
        asyncio.run(groups[name].load_checkpoint(directory / name))
        asyncio.run(groups[name].save_pretrained(tmp_path / name, str(tiny_model_path())))
    one, two = (load_file(tmp_path / name / "model.safetensors") for name in ("one", "two"))
    whole = asyncio.run(groups["two"].full_state_dict())
    assert one and set(one) == set(two) <= set(whole)
    for key, tensor in one.items():
        assert torch.equal(two[key], tensor) and torch.equal(whole[key], tensor), key


def test_value_update_is_independent_of_micro_batch_and_ranks(groups, initial):
    directory, batch = initial
    agg = Aggregation("token-mean", float(batch.response_mask.sum()), float(len(batch)), 40.0)
    results = []
    for name, micro in (("critic_one", len(batch)), ("critic_one", 1), ("critic_two", 1)):
        asyncio.run(groups[name].load_checkpoint(directory / name))
        stats = asyncio.run(groups[name].update_value(batch, agg, 0.5, micro))
        results.append((stats, asyncio.run(groups[name].full_state_dict())))
    (first_stats, first_weights), *others = results
    assert first_stats["vf_clipfrac"] > 0
    for stats, weights in others:
        assert stats["value_loss"] == pytest.approx(first_stats["value_loss"], rel=1e-5)
        assert stats["grad_norm"] == pytest.approx(first_stats["grad_norm"], rel=1e-5)
        for key, tensor in first_weights.items():
            torch.testing.assert_close(weights[key], tensor, atol=1e-5, rtol=0, msg=key)


def test_every_role_loads_while_the_caller_goes_on_and_ready_waits_for_all(groups):  # groups: Ray is up
    path = str(tiny_model_path())
    spec = LearnerSpec(
        actor=WorkerSpec("actor", path, OptimizerSpec(), num_threads=1),
        reference=WorkerSpec("reference", path, num_threads=1),
    )
    learner = Learner(spec, wait=False)
    try:
        assert len(learner._ready) == 2  # one set-up per rank of each role, both under way
        done, _ = ray.wait(learner._ready, num_returns=2, timeout=0)
        assert not done  # returned before a rank had loaded its model (it takes seconds)
        asyncio.run(learner.ready())
        done, _ = ray.wait(learner._ready, num_returns=2, timeout=0)
        assert len(done) == 2
    finally:
        learner.close()


def test_a_rank_that_cannot_load_its_model_fails_ready_not_the_start(groups, tmp_path):
    missing = str(tmp_path / "no-such-model")
    spec = LearnerSpec(actor=WorkerSpec("actor", missing, OptimizerSpec(), num_threads=1))
    learner = Learner(spec, wait=False)  # nothing has loaded yet, so nothing can fail yet
    try:
        with pytest.raises(ray.exceptions.RayTaskError, match="no-such-model"):
            asyncio.run(learner.ready())
    finally:
        learner.close()
