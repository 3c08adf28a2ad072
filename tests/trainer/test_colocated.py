"""The colocated engine (trainer/colocated.py) on one FSDP2 rank in this process (gloo, world size 1).

* :func:`shared_weights_model` copies no weight: every parameter of the copy is a view of the learner's, so an
  optimizer step on the adapters changes what the copy computes, and the copy's logits are the learner's.
* The engine built on it samples from the learner's current policy: its greedy tokens and logprobs are those of
  a separate engine given the merged weights (the way a separate engine actor is synced), before and after an
  update, with its adapters merged into the shared weights for sampling or not; a sync only takes the version.
* With the adapters merged while sampling, the learner's frozen base weights are bit for bit the loaded ones after
  rollouts and updates alternate: every learner call unmerges them exactly first.
* With the value head on the actor, the engine's values and logprobs of a two-turn trajectory (the second turn
  served from the prefix cache) are the learner's scoring forward's, before and after the head and the adapters
  train: what lets an on-policy step skip that forward.
"""

from __future__ import annotations

import asyncio

import pytest
import torch

from agents.engines.base import SamplingParams
from agents.engines.hf import HfEngine
from agents.models import tiny_model_path
from agents.trajectory import Trajectory
from trainer.algos import Aggregation, PolicyLossSpec
from trainer.batch import TrainBatch, build_batch
from trainer.colocated import ColocatedWorker, EngineOptions, shared_weights_model
from trainer.learner_specs import LoraSpec, OptimizerSpec, WorkerSpec

INIT = "tcp://127.0.0.1:29877"  # the process group of tests/trainer/test_learner_worker.py, if it ran first
PROMPT = [5, 17, 42, 99, 7, 63, 120, 11]
GREEDY = SamplingParams(max_new_tokens=6, temperature=0.0)


def batch() -> TrainBatch:
    generator = torch.Generator().manual_seed(3)
    ids = torch.randint(5, 250, (2, 14), generator=generator)
    mask = torch.zeros(2, 14)
    mask[:, 6:12] = 1
    out = TrainBatch(ids, torch.ones(2, 14, dtype=torch.long), mask, torch.zeros(2, 14), torch.tensor([6, 6]))
    out.old_logprobs = torch.full((2, 14), -5.5) * mask
    out.advantages = torch.randn(2, 14, generator=generator) * mask
    return out


def colocated_worker(lora_rank: int = 4, value_head: bool = False, lora_layers: int | None = None) -> ColocatedWorker:
    optimizer = OptimizerSpec(lr=5e-2, warmup_steps=0, total_steps=10, schedule="constant")
    spec = WorkerSpec(
        "actor",
        str(tiny_model_path()),
        optimizer,
        lora=LoraSpec(rank=lora_rank, alpha=8.0, layers=lora_layers),
        value_head=optimizer if value_head else None,
    )
    worker = ColocatedWorker(spec, 0, 1, INIT)
    worker.setup()
    return worker


def update(worker: ColocatedWorker) -> None:
    b = batch()
    worker.update_policy(b, Aggregation("token-mean", float(b.response_mask.sum()), 2.0), PolicyLossSpec(), 2)


def local_pointers(model: torch.nn.Module) -> set[int]:
    return {(p.to_local() if hasattr(p, "to_local") else p).data_ptr() for p in model.parameters()}


@pytest.mark.parametrize("lora_rank", [4, 0], ids=["lora", "full-fine-tuning"])
def test_the_copy_shares_every_weight_and_follows_an_update(lora_rank):
    worker = colocated_worker(lora_rank)
    copy = shared_weights_model(worker.model)
    assert {p.data_ptr() for p in copy.parameters()} <= local_pointers(worker.model)  # views, no copies
    assert not any(p.requires_grad for p in copy.parameters()) and not copy.training
    ids = batch().input_ids
    with torch.no_grad():
        before = copy(ids).logits
        torch.testing.assert_close(before, worker.model(ids).logits, atol=1e-5, rtol=0)
    update(worker)
    with torch.no_grad():
        after = copy(ids).logits
        torch.testing.assert_close(after, worker.model(ids).logits, atol=1e-5, rtol=0)
    assert (after - before).abs().max() > 1e-4  # the step changed what the copy computes


def separate_engine(worker: ColocatedWorker) -> HfEngine:
    """An engine on its own copy of the merged weights, as the separate engine actor is given them."""
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_pretrained(tiny_model_path())
    plain.load_state_dict(worker.full_state_dict(), strict=False)
    return HfEngine(plain, seed=0)


async def generate(engine, prompt=PROMPT):
    return await engine.generate(prompt, GREEDY)


async def generate_as_merged(worker: ColocatedWorker, merged_from: ColocatedWorker):
    """``worker``'s engine's generation, checked against a separate engine given ``merged_from``'s merged weights."""
    reference = separate_engine(merged_from)
    try:
        ours, theirs = await asyncio.gather(generate(worker), generate(reference))
    finally:
        await reference.close()
    assert ours.output_ids == theirs.output_ids
    torch.testing.assert_close(torch.tensor(ours.logprobs), torch.tensor(theirs.logprobs), atol=1e-4, rtol=0)
    return ours


@pytest.mark.parametrize(
    ("merge_adapters", "lora_layers"),
    [(True, None), (False, None), (True, 1)],
    ids=["merged", "unmerged", "merged-last-layer-only"],
)
def test_the_colocated_engine_samples_the_learners_current_policy(merge_adapters, lora_layers):
    worker = colocated_worker(lora_layers=lora_layers)
    asyncio.run(worker.close())  # no engine yet (a run stopped during its start-up): nothing to close, no error
    options = EngineOptions(max_batch_size=4, max_context=None, seed=0, merge_adapters=merge_adapters)
    assert worker.start_engine(options) == ColocatedWorker.engine_name == "hf"  # the name the client is given
    assert (worker.engine.adapters is not None) == merge_adapters

    async def compare(version: int) -> None:
        await worker.update_weights(None, version)
        assert (await worker.stats()).policy_version == version
        await generate_as_merged(worker, worker)

    async def scenario() -> None:
        try:
            await compare(0)
            for _ in range(3):
                update(worker)
            await compare(1)
            stats = await worker.stats()
            assert stats.extra["prefix_cache_tokens"] <= len(PROMPT) + GREEDY.max_new_tokens  # the sync emptied it
        finally:
            await worker.close()

    asyncio.run(scenario())


def test_the_base_weights_stay_as_loaded_through_merged_rollouts_and_updates():
    worker = colocated_worker()
    loaded = {n: local(p).clone() for n, p in worker.model.named_parameters() if "lora_" not in n}
    worker.start_engine(EngineOptions(max_batch_size=4, max_context=None, seed=0))
    adapters = worker.engine.adapters

    async def scenario() -> None:
        try:
            for version in range(1, 4):
                await generate(worker)
                assert adapters.is_merged
                update(worker)  # a learner call: it takes the weights back, unmerged, before it computes
                assert not adapters.is_merged
                await worker.update_weights(None, version)
            await generate_as_merged(worker, worker)  # merged again: still the learner's current policy
        finally:
            await worker.close()

    asyncio.run(scenario())
    assert adapters.merges == 4 and not adapters.is_merged
    for name, param in worker.model.named_parameters():
        if name in loaded:
            assert torch.equal(local(param), loaded[name]), name  # bit for bit: the frozen base never drifts


def local(param: torch.Tensor) -> torch.Tensor:
    return (param.to_local() if hasattr(param, "to_local") else param).detach()


def test_a_sharded_parameter_is_refused_with_the_fix():
    from trainer.colocated import _whole

    class Shard(torch.Tensor):  # a DTensor whose local piece is half the parameter (two ranks)
        def to_local(self):
            return torch.zeros(2, 3)

    param = torch.zeros(4, 3).as_subclass(Shard)
    with pytest.raises(ValueError, match=r"sharded .*one learner rank .*engine.placement=separate"):
        _whole(param, "layers.0.weight")


def test_a_loaded_checkpoint_reaches_the_engine(tmp_path):
    """Resuming loads the checkpoint into the actor's tensors in place, so the engine built before it serves it."""
    trained = colocated_worker()
    for _ in range(3):
        update(trained)
    trained.save_checkpoint(str(tmp_path))
    resumed = colocated_worker()
    resumed.start_engine(EngineOptions(max_batch_size=4, max_context=None, seed=0))

    async def scenario() -> None:
        try:
            before = await generate(resumed)
            resumed.load_checkpoint(str(tmp_path))
            await resumed.update_weights(None, 3)
            ours = await generate_as_merged(resumed, trained)
            assert max(abs(a - b) for a, b in zip(ours.logprobs, before.logprobs, strict=False)) > 1e-4
        finally:
            await resumed.close()

    asyncio.run(scenario())


async def two_turn_trajectory(worker: ColocatedWorker, seed: int) -> Trajectory:
    """Two sampled turns with an observation between them, as the episode loop records them."""
    sampling = SamplingParams(max_new_tokens=6, temperature=1.0, seed=seed)
    first = await worker.generate(PROMPT, sampling)
    observation = [31, 32, 33, 34]
    second = await worker.generate(PROMPT + list(first.output_ids) + observation, sampling)
    assert second.cached_tokens == len(PROMPT) + len(first.output_ids) - 1  # the first turn served from the cache
    sampled = (len(first.output_ids), len(observation), len(second.output_ids))
    return Trajectory(
        env_id="x",
        seed=seed,
        group_id="g",
        prompt_ids=list(PROMPT),
        response_ids=[*first.output_ids, *observation, *second.output_ids],
        response_mask=[1] * sampled[0] + [0] * sampled[1] + [1] * sampled[2],
        rollout_logprobs=[*first.logprobs, *[0.0] * sampled[1], *second.logprobs],
        rollout_values=[*first.values, *[0.0] * sampled[1], *second.values],
    )


def test_the_colocated_engines_values_are_the_learners_scoring_values():
    worker = colocated_worker(value_head=True)
    with torch.no_grad():  # a trained head: the zero-initialised one would agree with anything at 0
        worker.value_head.weight.normal_(std=0.5, generator=torch.Generator().manual_seed(2))
        worker.value_head.bias.fill_(0.3)
    worker.start_engine(EngineOptions(max_batch_size=4, max_context=None, seed=0))

    async def agree(version: int) -> None:
        await worker.update_weights(None, version)
        b = build_batch([await two_turn_trajectory(worker, seed) for seed in (1, 2)], pad_id=0)
        assert b.rollout_values is not None and float(b.rollout_values.abs().sum()) > 0.1
        logprobs, values = worker.compute_logprobs_and_values(b, 1.0, 1)
        sampled = b.response_mask  # the learner also scores the observation's tokens; GAE reads sampled ones only
        torch.testing.assert_close(b.rollout_values, values * sampled, atol=2e-5, rtol=0)
        torch.testing.assert_close(b.rollout_logprobs, logprobs * sampled, atol=2e-5, rtol=0)

    async def scenario() -> None:
        try:
            await agree(0)
            for _ in range(2):
                b = batch()
                b.values, b.returns = torch.zeros_like(b.response_mask), b.response_mask * 2.0
                agg = Aggregation("token-mean", float(b.response_mask.sum()), 2.0)
                worker.update_policy(b, agg, PolicyLossSpec(), 2)
            await agree(1)
        finally:
            await worker.close()

    asyncio.run(scenario())
